//! The action executor against the real control plane.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;
use wasmloop_runtime::discovery::Kinds;
use wasmloop_runtime::executor::ExecError;
use wasmloop_runtime::executor::{DryRunReport, Executor};
use wasmloop_sandbox::{
    Action, Apply, Contract, EventType, Gvk, Manifest, Object, ObjectRef, PatchKind, WriteGrant, WriteScope,
    WriteVerbs, object_from_value,
};
use wasmloop_testenv::{TestNamespace, shared, wait_for_event};

/// A plugin whose primary is a ConfigMap, granted every write of ConfigMaps in its namespace.
fn manifest(owns_configmaps: bool) -> Manifest {
    let configmap = Gvk::from_api_version("v1", "ConfigMap").unwrap();
    let all = WriteVerbs { apply: true, patch: true, delete: true };
    Manifest {
        owns: if owns_configmaps { vec![configmap.clone()] } else { Vec::new() },
        writes: vec![WriteGrant { kind: configmap.clone(), verbs: all, scope: WriteScope::PrimaryNamespace }],
        ..Manifest::declaring("exec-test", configmap.clone())
    }
}

async fn primary(ns: &TestNamespace, name: &str) -> (Object, ConfigMap) {
    let api: Api<ConfigMap> = ns.api();
    let cm =
        ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, ..ConfigMap::default() };
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let mut value = serde_json::to_value(&created).unwrap();
    value["apiVersion"] = "v1".into();
    value["kind"] = "ConfigMap".into();
    (object_from_value(&value).unwrap(), created)
}

/// A namespace named after `case`, its ConfigMap `target` as a primary, and an executor, the
/// manifest and the ConfigMaps' API to act on it: what each finalizer case starts from.
async fn finalizer_case(case: &str) -> (TestNamespace, Object, Executor, Manifest, Api<ConfigMap>) {
    let ns = shared().namespace(case).await.unwrap();
    let (target, _) = primary(&ns, "target").await;
    let (exec, api) = (executor(&ns), ns.api::<ConfigMap>());
    (ns, target, exec, manifest(false), api)
}

fn executor(ns: &TestNamespace) -> Executor {
    Executor::new(ns.client.clone(), Arc::new(Kinds::new(ns.client.clone())), Arc::default())
}

#[tokio::test]
async fn apply_puts_owned_children_in_the_primarys_namespace_with_a_controller_reference() {
    let ns = shared().namespace("exec-apply").await.unwrap();
    let (owner, _) = primary(&ns, "owner").await;
    let child = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "child"}, "data": {"a": "1"}});
    let applied = executor(&ns).execute(&manifest(true), &owner, &[Action::Apply(Apply::forced(child))]).await.unwrap();
    assert_eq!(applied[0].namespace.as_deref(), Some(ns.name.as_str()));

    let live = ns.api::<ConfigMap>().get("child").await.unwrap();
    let refs = live.metadata.owner_references.unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (refs[0].uid.as_str(), refs[0].controller, refs[0].block_owner_deletion),
        (owner.uid.as_str(), Some(true), Some(true))
    );
    let managers: Vec<String> = live.metadata.managed_fields.unwrap().into_iter().filter_map(|m| m.manager).collect();
    assert!(managers.contains(&"wasmloop/exec-test".to_owned()), "{managers:?}");
}

#[tokio::test]
async fn apply_of_a_kind_not_owned_sets_no_owner_reference() {
    let ns = shared().namespace("exec-notowned").await.unwrap();
    let (owner, _) = primary(&ns, "owner").await;
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}});
    executor(&ns).execute(&manifest(false), &owner, &[Action::Apply(Apply::forced(other))]).await.unwrap();
    assert!(ns.api::<ConfigMap>().get("other").await.unwrap().metadata.owner_references.is_none());
}

#[tokio::test]
async fn a_write_outside_the_plugins_grants_is_refused_before_it_reaches_the_api_server() {
    let ns = shared().namespace("exec-grant").await.unwrap();
    let elsewhere = shared().namespace("exec-grant-other").await.unwrap();
    let (owner, _) = primary(&ns, "owner").await;
    let (victim, _) = primary(&elsewhere, "victim").await;
    let target = ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: victim.name.parse().unwrap(),
        namespace: victim.namespace.as_deref().map(|ns| ns.parse().unwrap()),
        uid: None,
    };
    let patch = Action::Patch { target, kind: PatchKind::Merge, patch: json!({"data": {"stolen": "yes"}}) };
    // The test's client may write anywhere: only the grant check stands in the way.
    let error = executor(&ns).execute(&manifest(false), &owner, &[patch]).await.unwrap_err();
    assert!(matches!(error, ExecError::NotGranted { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains(&format!("patch v1/ConfigMap in namespace {}", elsewhere.name)), "{message}");
    let live = elsewhere.api::<ConfigMap>().get("victim").await.unwrap();
    assert_eq!(live.data, None, "the victim was patched");
}

#[tokio::test]
async fn a_plugin_the_operator_confines_writes_nowhere_else_even_one_built_for_contract_0_1() {
    let ns = shared().namespace("exec-confined").await.unwrap();
    let elsewhere = shared().namespace("exec-confined-other").await.unwrap();
    let (owner, _) = primary(&ns, "owner").await;
    primary(&elsewhere, "victim").await;
    // A 0.1 plugin may write every kind it declares; the operator's confinement still holds.
    let legacy = Manifest { writes: Vec::new(), contract: Contract::V0_1, ..manifest(false) };
    let patch = Action::Patch {
        target: ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "victim".parse().unwrap(),
            namespace: Some(elsewhere.name.parse().unwrap()),
            uid: None,
        },
        kind: PatchKind::Merge,
        patch: json!({"data": {"stolen": "yes"}}),
    };
    let confined = executor(&ns).confined_to(Some(ns.name.parse().unwrap()));
    let error = confined.execute(&legacy, &owner, &[patch]).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains(&format!("the operator confines it to namespace {}", ns.name)), "{message}");
    assert_eq!(elsewhere.api::<ConfigMap>().get("victim").await.unwrap().data, None, "the victim was patched");
}

#[tokio::test]
async fn merge_and_json_patches_apply_with_the_uid_as_precondition() {
    let ns = shared().namespace("exec-patch").await.unwrap();
    let (target, _) = primary(&ns, "target").await;
    let target_ref = ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "target".parse().unwrap(),
        namespace: Some(ns.name.parse().unwrap()),
        uid: Some(target.uid.clone()),
    };
    let actions = [
        Action::Patch { target: target_ref.clone(), kind: PatchKind::Merge, patch: json!({"data": {"m": "1"}}) },
        Action::Patch {
            target: target_ref.clone(),
            kind: PatchKind::Json,
            patch: json!([{"op": "add", "path": "/data/j", "value": "2"}]),
        },
    ];
    executor(&ns).execute(&manifest(false), &target, &actions).await.unwrap();
    let data = ns.api::<ConfigMap>().get("target").await.unwrap().data.unwrap();
    assert_eq!((data["m"].as_str(), data["j"].as_str()), ("1", "2"));

    let stale = ObjectRef { uid: Some("not-the-uid".into()), ..target_ref };
    let err = executor(&ns)
        .execute(
            &manifest(false),
            &target,
            &[Action::Patch { target: stale, kind: PatchKind::Merge, patch: json!({"data": {"x": "1"}}) }],
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("plugin exec-test: patch ConfigMap"), "{err}");
}

#[tokio::test]
async fn delete_honours_the_uid_and_tolerates_a_missing_object() {
    let ns = shared().namespace("exec-delete").await.unwrap();
    let (victim, _) = primary(&ns, "victim").await;
    let reference = |uid: &str| ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "victim".parse().unwrap(),
        namespace: Some(ns.name.parse().unwrap()),
        uid: Some(uid.into()),
    };
    let exec = executor(&ns);
    exec.execute(&manifest(false), &victim, &[Action::Delete(reference("another-uid"))]).await.unwrap();
    assert!(ns.api::<ConfigMap>().get_opt("victim").await.unwrap().is_some(), "a stale UID must not delete");
    exec.execute(&manifest(false), &victim, &[Action::Delete(reference(&victim.uid))]).await.unwrap();
    assert!(ns.api::<ConfigMap>().get_opt("victim").await.unwrap().is_none());
    exec.execute(&manifest(false), &victim, &[Action::Delete(reference(&victim.uid))]).await.unwrap();
}

#[tokio::test]
async fn an_event_is_recorded_on_the_primary_by_the_plugin() {
    let ns = shared().namespace("exec-event").await.unwrap();
    let (owner, _) = primary(&ns, "owner").await;
    let action = Action::Event {
        event_type: EventType::Warning,
        reason: "Checked".into(),
        message: "all bad".into(),
        action: None,
    };
    executor(&ns).execute(&manifest(false), &owner, &[action]).await.unwrap();
    let events: Api<Event> = ns.api();
    let found =
        wait_for_event(&events, Duration::from_secs(10), "the Event", |e| e.reason.as_deref() == Some("Checked")).await;
    assert_eq!(found.type_.as_deref(), Some("Warning"));
    assert_eq!(found.note.as_deref(), Some("all bad"));
    assert_eq!(found.regarding.and_then(|r| r.uid), Some(owner.uid.clone()));
    assert_eq!(found.reporting_controller.as_deref(), Some("wasmloop/exec-test"));
}

#[tokio::test]
async fn status_is_written_to_the_status_subresource_of_the_primary() {
    use kube::api::DynamicObject;

    let ns = shared().namespace("exec-status").await.unwrap();
    let crd = concat!(env!("CARGO_MANIFEST_DIR"), "/../plugins/foo-deployment/deploy/crd.yaml");
    let foos = ns.install_crd(std::path::Path::new(crd)).await;
    let foo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": "f"}, "spec": {"deploymentName": "d", "replicas": 1}
    }))
    .unwrap();
    let created = foos.create(&PostParams::default(), &foo).await.unwrap();
    let mut value = serde_json::to_value(&created).unwrap();
    value["apiVersion"] = "samplecontroller.k8s.io/v1alpha1".into();
    value["kind"] = "Foo".into();
    let primary = object_from_value(&value).unwrap();
    let mut foo_manifest = manifest(false);
    foo_manifest.primary.kind = Gvk::from_api_version("samplecontroller.k8s.io/v1alpha1", "Foo").unwrap();
    executor(&ns).execute(&foo_manifest, &primary, &[Action::Status(json!({"availableReplicas": 3}))]).await.unwrap();
    let live = foos.get("f").await.unwrap();
    assert_eq!(live.data["status"]["availableReplicas"], 3);
    assert_eq!(live.data["spec"]["replicas"], 1, "the spec is untouched");
}

/// An executor in a dry run, and the reports it made.
fn dry_run(ns: &TestNamespace) -> (Executor, Arc<std::sync::Mutex<Vec<DryRunReport>>>) {
    let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = reports.clone();
    let exec = executor(ns).with_dry_run(Arc::new(move |r: DryRunReport| sink.lock().unwrap().push(r)));
    (exec, reports)
}

#[tokio::test]
async fn a_dry_run_patch_and_delete_are_reported_with_the_servers_answer_and_change_nothing() {
    let ns = shared().namespace("exec-dry").await.unwrap();
    let (target, created) = primary(&ns, "target").await;
    let (exec, reports) = dry_run(&ns);
    let to = ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "target".parse().unwrap(),
        namespace: None,
        uid: Some(target.uid.clone()),
    };
    let actions = [
        Action::Patch { target: to.clone(), kind: PatchKind::Merge, patch: json!({"data": {"dry": "yes"}}) },
        Action::Delete(to),
    ];
    exec.execute(&manifest(false), &target, &actions).await.unwrap();

    let reports = reports.lock().unwrap().clone();
    let verbs: Vec<&str> = reports.iter().map(|r| r.verb).collect();
    assert_eq!(verbs, ["patch", "delete"]);
    let patched = reports[0].after.as_ref().expect("the server's answer to the dry-run patch");
    assert_eq!(patched["data"]["dry"], "yes", "the report shows the server-computed object");
    assert!(reports[1].before.is_some() && reports[1].after.is_none(), "a delete shows what would go");
    let live = ns.api::<ConfigMap>().get("target").await.unwrap();
    assert_eq!(live.metadata.resource_version, created.metadata.resource_version, "a dry run wrote");
}

#[tokio::test]
async fn a_dry_run_reports_finalizers_and_leaves_them_untouched() {
    let ns = shared().namespace("exec-dry-fin").await.unwrap();
    let (target, _) = primary(&ns, "target").await;
    let (exec, reports) = dry_run(&ns);
    let manifest = manifest(false);
    exec.add_finalizer(&manifest, &target, &[], "example.com/cleanup").await.unwrap();
    let reports = reports.lock().unwrap().clone();
    assert_eq!(reports.len(), 1);
    assert_eq!((reports[0].verb, reports[0].note.as_deref()), ("add finalizer", Some("example.com/cleanup")));
    let live = ns.api::<ConfigMap>().get("target").await.unwrap();
    assert!(live.metadata.finalizers.unwrap_or_default().is_empty(), "a dry run added a finalizer");
}

#[tokio::test]
async fn a_finalizer_is_added_as_a_compare_and_swap_of_the_finalizers_alone() {
    let (_ns, target, exec, manifest, api) = finalizer_case("exec-fin").await;
    let (f, theirs) = ("example.com/cleanup", "other.example/hold");
    let patch = |body: serde_json::Value| {
        let api = api.clone();
        async move { api.patch("target", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&body)).await }
    };
    // Writers of other fields cannot starve the add: only the finalizers are compared.
    patch(json!({"data": {"moved": "1"}})).await.unwrap();
    // Another writer's finalizer, added since the list was read: the add must conflict, not
    // overwrite it.
    patch(json!({"metadata": {"finalizers": [theirs]}})).await.unwrap();
    let stale = exec.add_finalizer(&manifest, &target, &[], f).await;
    assert!(matches!(&stale, Err(e) if e.event_reason() == "Conflict"), "{stale:?}");
    exec.add_finalizer(&manifest, &target, &[theirs.to_owned()], f).await.unwrap();
    assert_eq!(api.get("target").await.unwrap().metadata.finalizers, Some(vec![theirs.to_owned(), f.to_owned()]));
    // Release reads the live object, so a change since the add is no conflict.
    patch(json!({"data": {"again": "1"}})).await.unwrap();
    exec.release_finalizer(&manifest, &target, f).await.unwrap();
    assert_eq!(api.get("target").await.unwrap().metadata.finalizers, Some(vec![theirs.to_owned()]));
    // Nobody would release theirs: the namespace must still go.
    patch(json!({"metadata": {"finalizers": null}})).await.unwrap();
}

#[tokio::test]
async fn a_finalizer_is_never_added_to_an_object_recreated_under_the_name() {
    let (ns, target, exec, manifest, api) = finalizer_case("exec-fin-uid").await;
    api.delete("target", &kube::api::DeleteParams::default()).await.unwrap();
    let (_, again) = primary(&ns, "target").await;
    let added = exec.add_finalizer(&manifest, &target, &[], "example.com/cleanup").await;
    assert!(matches!(&added, Err(e) if e.event_reason() == "Conflict"), "{added:?}");
    let live = api.get("target").await.unwrap();
    assert_eq!(live.metadata.uid, again.metadata.uid);
    assert!(live.metadata.finalizers.unwrap_or_default().is_empty(), "the new object got the old one's finalizer");
}

#[tokio::test]
async fn a_finalizer_added_to_an_object_being_deleted_is_a_conflict_not_a_failure() {
    let (_ns, target, exec, manifest, api) = finalizer_case("exec-fin-del").await;
    let theirs = "other.example/hold";
    let hold = json!({"metadata": {"finalizers": [theirs]}});
    api.patch("target", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&hold)).await.unwrap();
    // Held by theirs, the object stays, being deleted; a cache that has not seen that yet
    // offers the add with the list it last saw.
    api.delete("target", &kube::api::DeleteParams::default()).await.unwrap();
    let added = exec.add_finalizer(&manifest, &target, &[theirs.to_owned()], "example.com/cleanup").await;
    assert!(matches!(&added, Err(e) if e.event_reason() == "Conflict"), "{added:?}");
    let live = api.get("target").await.unwrap();
    assert_eq!(live.metadata.finalizers, Some(vec![theirs.to_owned()]));
    let release = json!({"metadata": {"finalizers": null}});
    api.patch("target", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&release)).await.unwrap();
}

/// A Deployment manifest a plugin whose primary is a ConfigMap may apply and patch.
fn deployment_writer() -> Manifest {
    let deployment = Gvk::from_api_version("apps/v1", "Deployment").unwrap();
    let all = WriteVerbs { apply: true, patch: true, delete: true };
    let mut m = manifest(false);
    m.writes.push(WriteGrant { kind: deployment, verbs: all, scope: WriteScope::PrimaryNamespace });
    m
}

/// Deployment `name` with two containers, applied by field manager `manager`.
async fn two_containers(ns: &TestNamespace, name: &str, manager: &str) {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}, {"name": "log", "image": "log:1"}]}}}
    });
    let params = kube::api::PatchParams::apply(manager).force();
    api.patch(name, &params, &kube::api::Patch::Apply(body)).await.unwrap();
}

#[tokio::test]
async fn an_unforced_apply_of_a_field_another_manager_owns_writes_nothing_and_names_the_manager() {
    let ns = shared().namespace("exec-conflict").await.unwrap();
    let (owner, _) = primary(&ns, "owner").await;
    two_containers(&ns, "web", "other-team").await;
    let replicas =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 5}});
    let unforced = Action::Apply(Apply { object: replicas.clone(), force: false, uid: None });
    let error = executor(&ns).execute(&deployment_writer(), &owner, &[unforced]).await.unwrap_err();
    let ExecError::Conflict { conflict, .. } = &error else { panic!("not a conflict: {error}") };
    assert_eq!(
        conflict.fields.iter().map(|f| (f.manager.as_str(), f.field.as_str())).collect::<Vec<_>>(),
        vec![("other-team", ".spec.replicas")]
    );
    assert_eq!(error.event_reason(), "ApplyConflict");
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    assert_eq!(api.get("web").await.unwrap().spec.replicas, Some(3), "nothing was written");
    // Forced, the same apply takes the field.
    let forced = Action::Apply(Apply::forced(replicas));
    executor(&ns).execute(&deployment_writer(), &owner, &[forced]).await.unwrap();
    assert_eq!(api.get("web").await.unwrap().spec.replicas, Some(5));
}

#[tokio::test]
async fn an_apply_with_a_uid_precondition_writes_only_to_the_object_of_that_uid() {
    let ns = shared().namespace("exec-uid").await.unwrap();
    let (owner, _) = primary(&ns, "owner").await;
    let (target, _) = primary(&ns, "target").await;
    let labelled = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target", "labels": {"v": value}}});
    let apply =
        |value: &str, uid: &str| Action::Apply(Apply { object: labelled(value), force: true, uid: Some(uid.into()) });
    let exec = executor(&ns);
    exec.execute(&manifest(false), &owner, &[apply("mine", &target.uid)]).await.unwrap();
    let api = ns.api::<ConfigMap>();
    assert_eq!(api.get("target").await.unwrap().metadata.labels.unwrap()["v"], "mine");
    // Another UID: the object is not the one meant, and is left alone.
    exec.execute(&manifest(false), &owner, &[apply("not-mine", "0f0e0d0c-0b0a-4999-8888-777766665555")]).await.unwrap();
    assert_eq!(api.get("target").await.unwrap().metadata.labels.unwrap()["v"], "mine");
    // Gone: not recreated.
    api.delete("target", &kube::api::DeleteParams::default()).await.unwrap();
    exec.execute(&manifest(false), &owner, &[apply("again", &target.uid)]).await.unwrap();
    assert!(api.get_opt("target").await.unwrap().is_none(), "a UID precondition never creates");
}

#[tokio::test]
async fn a_strategic_merge_patch_keeps_the_other_items_of_a_list_keyed_by_name() {
    let ns = shared().namespace("exec-smp").await.unwrap();
    let (owner, _) = primary(&ns, "owner").await;
    two_containers(&ns, "web", "other-team").await;
    let target = ObjectRef {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "web".parse().unwrap(),
        namespace: None,
        uid: None,
    };
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:2"}]}}}});
    let action = Action::Patch { target, kind: PatchKind::Strategic, patch };
    executor(&ns).execute(&deployment_writer(), &owner, &[action]).await.unwrap();
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    let containers = api.get("web").await.unwrap().spec.template.spec.unwrap().containers;
    let images: Vec<(String, Option<String>)> = containers.into_iter().map(|c| (c.name, c.image)).collect();
    assert_eq!(images, vec![("web".into(), Some("web:2".into())), ("log".into(), Some("log:1".into()))]);
}
