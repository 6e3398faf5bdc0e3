//! The executor's plan, table-tested: what each action writes, where, and what is refused.

use serde_json::json;
use wasmloop_sandbox::{WriteGrant, WriteScope, WriteVerbs};

use super::*;

fn gvk(api_version: &str, kind: &str) -> Gvk {
    Gvk::from_api_version(api_version, kind).unwrap()
}

fn ns(text: &str) -> Namespace {
    text.parse().unwrap()
}

fn name(text: &str) -> Name {
    text.parse().unwrap()
}

/// Owns Deployments, and may write them in `elsewhere` too; may patch ConfigMaps in its
/// primary's namespace, write Secrets in `vault`, and patch Nodes.
fn manifest() -> Manifest {
    let grant = |kind, verbs, scope| WriteGrant { kind, verbs, scope };
    let (patch, all) = (
        WriteVerbs { apply: false, patch: true, delete: false },
        WriteVerbs { apply: true, patch: true, delete: true },
    );
    Manifest {
        owns: vec![gvk("apps/v1", "Deployment")],
        writes: vec![
            grant(gvk("v1", "ConfigMap"), patch, WriteScope::PrimaryNamespace),
            grant(gvk("v1", "Secret"), all, WriteScope::Namespaces(vec![ns("vault")])),
            grant(gvk("v1", "Node"), patch, WriteScope::Any),
            grant(gvk("apps/v1", "Deployment"), all, WriteScope::Namespaces(vec![ns("elsewhere")])),
        ],
        ..Manifest::declaring("p", gvk("example.com/v1", "Foo"))
    }
}

fn primary(namespace: Option<&str>) -> Object {
    Object {
        api_version: "example.com/v1".into(),
        kind: "Foo".into(),
        name: "a".into(),
        namespace: namespace.map(Into::into),
        uid: "u1".into(),
        json: "{}".into(),
    }
}

fn owner() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Foo", "name": "a", "uid": "u1", "controller": true, "blockOwnerDeletion": true})
}

fn target(api_version: &str, kind: &str, namespace: Option<&str>, uid: Option<&str>) -> ObjectRef {
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name("x"),
        namespace: namespace.map(ns),
        uid: uid.map(Into::into),
    }
}

fn merge(target: ObjectRef, patch: Value) -> Action {
    Action::Patch { target, kind: PatchKind::Merge, patch }
}

fn json_patch(target: ObjectRef, patch: Value) -> Action {
    Action::Patch { target, kind: PatchKind::Json, patch }
}

fn operations(value: Value) -> PatchBody {
    PatchBody::Json(serde_json::from_value(value).unwrap())
}

/// What a case expects: the write, or a refusal by its Event reason and a piece of its
/// message.
enum Expect {
    Writes(Write),
    Refused(&'static str, &'static str),
}
use Expect::{Refused, Writes};

fn check(case: &str, result: Result<Write, ExecError>, expected: Expect) {
    match (result, expected) {
        (Ok(write), Writes(expected)) => assert_eq!(write, expected, "{case}"),
        (Err(error), Refused(reason, fragment)) => {
            assert_eq!(error.event_reason(), reason, "{case}: {error}");
            assert!(error.to_string().contains(fragment), "{case}: {error:?} lacks {fragment:?}");
            assert!(error.to_string().starts_with("plugin p: "), "{case}: {error}");
        }
        (result, _) => panic!("{case}: unexpected {result:?}"),
    }
}

#[test]
fn an_apply_goes_to_the_primarys_namespace_owned_by_the_primary_where_its_grants_allow() {
    let deployment = |metadata: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata});
    let secret = |metadata: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": metadata});
    let applied = |kind: Gvk, namespace: Option<&str>, body: Value| Write::Apply {
        kind,
        namespace: namespace.map(ns),
        name: name("x"),
        body,
        force: true,
        uid: None,
    };
    let shop = Some("shop");
    let other_controller = json!({"apiVersion": "v1", "kind": "X", "name": "y", "uid": "u9", "controller": true});
    let plain_owner = json!({"apiVersion": "v1", "kind": "X", "name": "y", "uid": "u9"});
    #[rustfmt::skip]
    let cases = [
        ("owned, no namespace: the primary's, owned by it",
            deployment(json!({"name": "x"})), shop, true, None,
            Writes(applied(gvk("apps/v1", "Deployment"), shop, deployment(json!({"name": "x", "namespace": "shop", "ownerReferences": [owner()]}))))),
        ("owned: another controller reference is replaced, a plain one kept",
            deployment(json!({"name": "x", "ownerReferences": [other_controller, plain_owner.clone()]})), shop, true, None,
            Writes(applied(gvk("apps/v1", "Deployment"), shop, deployment(json!({"name": "x", "namespace": "shop", "ownerReferences": [plain_owner, owner()]}))))),
        ("owned, granted in another namespace: no owner reference across namespaces",
            deployment(json!({"name": "x", "namespace": "elsewhere"})), shop, true, None,
            Refused("InvalidAction", "owner references cannot cross namespaces (the primary is in shop)")),
        ("owned, cluster-scoped primary: the object needs a namespace",
            deployment(json!({"name": "x"})), None, true, None,
            Refused("InvalidAction", "a namespaced object needs a namespace, and the primary has none")),
        ("granted elsewhere: written there, not owned",
            secret(json!({"name": "x", "namespace": "vault"})), shop, true, None,
            Writes(applied(gvk("v1", "Secret"), Some("vault"), secret(json!({"name": "x", "namespace": "vault"}))))),
        ("granted elsewhere, not asked there: refused in the primary's",
            secret(json!({"name": "x"})), shop, true, None,
            Refused("NotGranted", "refused to apply Secret shop/x")),
        ("owned, the operator confines the plugin elsewhere",
            deployment(json!({"name": "x"})), shop, true, Some("team"),
            Refused("NotGranted", "confines it to namespace team")),
        ("a kind served cluster-scoped takes no namespace, and needs a grant for any",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}), shop, false, None,
            Refused("NotGranted", "apply Deployment x")),
        ("an apiVersion that does not parse",
            json!({"apiVersion": "a/b/c", "kind": "Deployment", "metadata": {"name": "x"}}), shop, true, None,
            Refused("InvalidAction", "cannot apply Deployment x")),
        ("a name that does not parse",
            deployment(json!({"name": "X Y"})), shop, true, None,
            Refused("InvalidAction", "cannot apply Deployment X Y")),
    ];
    for (case, object, namespace, namespaced, confined, expected) in cases {
        let confined = confined.map(ns);
        check(
            case,
            plan(
                &manifest(),
                &primary(namespace),
                &Action::Apply(Apply::forced(object)),
                namespaced,
                confined.as_ref(),
            ),
            expected,
        );
    }
}

#[test]
fn a_patch_or_delete_is_settled_in_a_namespace_checked_against_grants_and_conditioned_on_its_uid() {
    let configmap = |namespace, uid| target("v1", "ConfigMap", namespace, uid);
    let patched = |kind: Gvk, namespace: Option<&str>, patch| Write::Patch {
        kind,
        namespace: namespace.map(ns),
        name: name("x"),
        patch,
    };
    let cm = gvk("v1", "ConfigMap");
    #[rustfmt::skip]
    let cases = [
        ("merge, no namespace: the primary's; the UID a precondition",
            merge(configmap(None, Some("u2")), json!({"data": {"k": "v"}})), true,
            Writes(patched(cm.clone(), Some("shop"), PatchBody::Merge(json!({"data": {"k": "v"}, "metadata": {"uid": "u2"}}))))),
        ("merge without a UID: as the plugin wrote it",
            merge(configmap(None, None), json!({"metadata": {"labels": {"a": "b"}}})), true,
            Writes(patched(cm.clone(), Some("shop"), PatchBody::Merge(json!({"metadata": {"labels": {"a": "b"}}}))))),
        ("merge whose metadata is no object cannot carry the UID",
            merge(configmap(None, Some("u2")), json!({"metadata": 3})), true,
            Refused("InvalidAction", "a merge patch's metadata must be an object")),
        ("JSON patch: a test of the UID goes first",
            json_patch(configmap(None, Some("u2")), json!([{"op": "remove", "path": "/data/k"}])), true,
            Writes(patched(cm.clone(), Some("shop"), operations(json!([{"op": "test", "path": "/metadata/uid", "value": "u2"}, {"op": "remove", "path": "/data/k"}]))))),
        ("JSON patch that is none",
            json_patch(configmap(None, None), json!([{"op": "frobnicate"}])), true,
            Refused("InvalidAction", "not a JSON patch")),
        ("patch in a namespace the grant does not cover",
            merge(configmap(Some("kube-system"), None), json!({})), true,
            Refused("NotGranted", "refused to patch ConfigMap kube-system/x")),
        ("a cluster-scoped kind takes no namespace, whatever the plugin wrote",
            merge(target("v1", "Node", Some("shop"), None), json!({})), false,
            Writes(patched(gvk("v1", "Node"), None, PatchBody::Merge(json!({}))))),
        ("delete of an owned kind, with its UID",
            Action::Delete(target("apps/v1", "Deployment", None, Some("u3"))), true,
            Writes(Write::Delete { kind: gvk("apps/v1", "Deployment"), namespace: Some(ns("shop")), name: name("x"), uid: Some("u3".into()) })),
        ("delete the grants do not allow (patch only)",
            Action::Delete(configmap(None, None)), true,
            Refused("NotGranted", "refused to delete ConfigMap shop/x")),
    ];
    for (case, action, namespaced, expected) in cases {
        check(case, plan(&manifest(), &primary(Some("shop")), &action, namespaced, None), expected);
    }
}

#[test]
fn a_status_is_a_merge_patch_of_the_primary_conditioned_on_its_uid() {
    let status = json!({"availableReplicas": 1});
    let write = plan(&manifest(), &primary(Some("shop")), &Action::Status(status.clone()), true, None).unwrap();
    let body = json!({"metadata": {"uid": "u1"}, "status": status});
    let expected =
        Write::Status { kind: gvk("example.com/v1", "Foo"), namespace: Some(ns("shop")), name: "a".into(), body };
    assert_eq!(write, expected);
}

#[test]
fn the_kind_to_resolve_is_known_before_discovery_and_an_event_has_none() {
    let m = manifest();
    let p = primary(Some("shop"));
    let apply =
        Action::Apply(Apply::forced(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}})));
    assert_eq!(kind_of(&m, &p, &apply).unwrap(), gvk("apps/v1", "Deployment"));
    assert_eq!(kind_of(&m, &p, &Action::Status(json!({}))).unwrap(), gvk("example.com/v1", "Foo"));
    let delete = Action::Delete(target("v1", "Secret", Some("vault"), None));
    assert_eq!(kind_of(&m, &p, &delete).unwrap(), gvk("v1", "Secret"));
    let event = Action::Event {
        event_type: wasmloop_sandbox::EventType::Normal,
        reason: "R".into(),
        message: "m".into(),
        action: None,
    };
    assert_eq!(kind_of(&m, &p, &event).unwrap_err().event_reason(), "InvalidAction");
    let bad_primary = Object { namespace: Some("Not A Namespace".into()), ..p };
    assert_eq!(kind_of(&m, &bad_primary, &Action::Status(json!({}))).unwrap_err().event_reason(), "InvalidAction");
}

#[test]
fn an_apply_with_a_uid_carries_it_as_a_precondition_and_keeps_its_force() {
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}});
    let action = Action::Apply(Apply { object, force: false, uid: Some("u7".into()) });
    let Ok(Write::Apply { body, force, uid, .. }) = plan(&manifest(), &primary(Some("shop")), &action, true, None)
    else {
        panic!("planned as an apply")
    };
    assert_eq!((body["metadata"]["uid"].as_str(), force, uid.as_deref()), (Some("u7"), false, Some("u7")));
}

#[test]
fn a_strategic_merge_patch_carries_the_uid_as_a_merge_patch_does() {
    let target = ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: name("c"),
        namespace: None,
        uid: Some("u3".into()),
    };
    let action = Action::Patch { target, kind: PatchKind::Strategic, patch: json!({"data": {"a": "1"}}) };
    let Ok(Write::Patch { patch: PatchBody::Strategic(body), .. }) =
        plan(&manifest(), &primary(Some("shop")), &action, true, None)
    else {
        panic!("planned as a strategic merge patch")
    };
    assert_eq!(body, json!({"data": {"a": "1"}, "metadata": {"uid": "u3"}}));
}

#[test]
fn a_write_into_a_guarded_namespace_is_refused_and_one_elsewhere_passes() {
    let guarded = BTreeSet::from([ns("wasmloop-system"), ns("team-plugins")]);
    let into = |namespace: Option<&str>| Write::Delete {
        kind: gvk("v1", "ConfigMap"),
        namespace: namespace.map(ns),
        name: name("c"),
        uid: None,
    };
    let cases = [(Some("shop"), None), (None, None), (Some("team-plugins"), Some("team-plugins"))];
    for (namespace, refused) in cases {
        let got = outside(&into(namespace), &guarded).err().map(Namespace::as_str);
        assert_eq!(got, refused, "{namespace:?}");
    }
}

#[test]
fn the_primary_s_place_is_its_kind_and_namespace_parsed() {
    let (kind, namespace) = primary_place(&manifest(), &primary(Some("shop"))).unwrap();
    assert_eq!((kind, namespace), (gvk("example.com/v1", "Foo"), Some(ns("shop"))));
    let (_, cluster) = primary_place(&manifest(), &primary(None)).unwrap();
    assert_eq!(cluster, None);
}

#[test]
fn a_primary_whose_namespace_does_not_parse_is_acted_on_by_nothing() {
    let mut odd = primary(Some("shop"));
    odd.namespace = Some("Not A Namespace".into());
    let error = primary_place(&manifest(), &odd).unwrap_err();
    assert!(matches!(error, ExecError::Invalid { verb: "act on", .. }), "{error}");
}

#[test]
fn an_object_is_named_kind_namespace_and_name_or_kind_and_name() {
    assert_eq!(label("ConfigMap", Some("shop"), "c"), "ConfigMap shop/c");
    assert_eq!(label("Node", None, "n1"), "Node n1");
}
