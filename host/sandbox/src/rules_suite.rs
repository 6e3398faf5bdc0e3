//! The contract's conformance suite (`guest-sdk/rules/conformance.json`) answered by the
//! sandbox's own loading and decoding: a component's manifest, with its kept fields, through
//! `Manifest::from_wit`, a response through `action::decode` and `decode_failure`. The SDKs' harnesses
//! answer the same file through the rules component, so a harness's sentence is the one the
//! host would log. A case the WIT cannot carry (JSON that is no record of the contract, a
//! setting past its integer type) is the harness's alone and skipped here.

use serde_json::Value;

use crate::action;
use crate::bindings::exports::wasmloop::plugin::plugin::{Event, Patch};
use crate::bindings::wasmloop::plugin::types::Settings;
use crate::bindings::{Object, Phase, wit};
use crate::error::CallFailure;
use crate::manifest::{Contract, Manifest};

fn suite() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest-sdk/rules/conformance.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("conformance.json reads")).expect("it parses")
}

fn text(v: &Value) -> String {
    v.as_str().expect("a string").to_owned()
}

fn optional(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

fn gvk(v: &Value) -> wit::Gvk {
    wit::Gvk { group: text(&v["group"]), version: text(&v["version"]), kind: text(&v["kind"]) }
}

fn gvks(v: &Value) -> Vec<wit::Gvk> {
    v.as_array().map(|list| list.iter().map(gvk).collect()).unwrap_or_default()
}

/// A selector in 0.3's shape, or 0.2's (one `namespace`), as the suite's cases give it.
fn selector(v: &Value) -> wit::KindSelector {
    let mut namespaces: Vec<String> =
        v["namespaces"].as_array().map(|l| l.iter().map(text).collect()).unwrap_or_default();
    namespaces.extend(optional(&v["namespace"]));
    let annotations = v["annotations"]
        .as_array()
        .map(|l| {
            l.iter().map(|a| wit::AnnotationMatch { key: text(&a["key"]), value: optional(&a["value"]) }).collect()
        })
        .unwrap_or_default();
    wit::KindSelector {
        kind: gvk(&v["kind"]),
        namespaces,
        label_selector: optional(&v["label-selector"]),
        field_selector: optional(&v["field-selector"]),
        annotations,
        generation_changed: v["generation-changed"].as_bool().unwrap_or(false),
    }
}

/// A read: a selector, or a kind alone (0.2's shape).
fn read(v: &Value) -> wit::KindSelector {
    if v["kind"].is_object() { selector(v) } else { selector(&serde_json::json!({ "kind": v })) }
}

fn index(v: &Value) -> wit::Index {
    let fields = v["fields"].as_array().map(|l| l.iter().map(text).collect()).unwrap_or_default();
    wit::Index { name: text(&v["name"]), kind: gvk(&v["kind"]), fields }
}

fn grant(v: &Value) -> wit::WriteGrant {
    let mut verbs = wit::WriteVerbs::empty();
    for verb in v["verbs"].as_array().expect("verbs") {
        verbs |= match verb.as_str() {
            Some("apply") => wit::WriteVerbs::APPLY,
            Some("patch") => wit::WriteVerbs::PATCH,
            _ => wit::WriteVerbs::DELETE,
        };
    }
    let scope = match &v["scope"] {
        Value::String(s) if s == "any" => wit::WriteScope::Any,
        Value::String(_) => wit::WriteScope::PrimaryNamespace,
        other => {
            wit::WriteScope::Namespaces(other["namespaces"].as_array().expect("a list").iter().map(text).collect())
        }
    };
    wit::WriteGrant { kind: gvk(&v["kind"]), verbs, scope }
}

/// A setting as the WIT's integer carries it; none when it cannot (the harness's case alone).
fn setting<T: TryFrom<u64>>(v: &Value) -> Result<Option<T>, ()> {
    match v {
        Value::Null => Ok(None),
        other => other.as_u64().and_then(|n| T::try_from(n).ok()).map(Some).ok_or(()),
    }
}

/// The manifest and its kept fields as a component would return them; none when the WIT cannot
/// carry the case.
fn wit_manifest(m: &Value) -> Option<(wit::PluginManifest, Vec<wit::Keep>)> {
    let s = &m["settings"];
    let settings = Settings {
        max_concurrent_reconciles: setting(&s["max-concurrent-reconciles"]).ok()?,
        deadline_ms: setting(&s["deadline-ms"]).ok()?,
        memory_limit_bytes: setting(&s["memory-limit-bytes"]).ok()?,
        response_limit_bytes: setting(&s["response-limit-bytes"]).ok()?,
        resync_seconds: setting(&s["resync-seconds"]).ok()?,
    };
    let manifest = wit::PluginManifest {
        name: m["name"].as_str()?.to_owned(),
        version: "0.1.0".into(),
        primary: m.get("primary").map(selector)?,
        owns: gvks(&m["owns"]),
        watches: m["watches"].as_array().map(|l| l.iter().map(selector).collect()).unwrap_or_default(),
        reads: m["reads"].as_array().map(|l| l.iter().map(read).collect()).unwrap_or_default(),
        metadata_only: gvks(&m["metadata-only"]),
        writes: m["writes"].as_array().map(|l| l.iter().map(grant).collect()).unwrap_or_default(),
        indexes: m["indexes"].as_array().map(|l| l.iter().map(index).collect()).unwrap_or_default(),
        finalizer: optional(&m["finalizer"]),
        prune: false,
        deliver_deleted: false,
        deliver_previous: false,
        settings,
    };
    let keeps = m["keep-fields"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|k| {
                    let mut fields = wit::KeptFields::empty();
                    if k["managed-fields"] == true {
                        fields |= wit::KeptFields::MANAGED_FIELDS;
                    }
                    if k["last-applied"] == true {
                        fields |= wit::KeptFields::LAST_APPLIED;
                    }
                    wit::Keep { kind: gvk(&k["kind"]), fields }
                })
                .collect()
        })
        .unwrap_or_default();
    Some((manifest, keeps))
}

fn object_ref(v: &Value) -> wit::ObjectRef {
    wit::ObjectRef {
        api_version: text(&v["api-version"]),
        kind: text(&v["kind"]),
        name: text(&v["name"]),
        namespace: optional(&v["namespace"]),
        uid: optional(&v["uid"]),
    }
}

/// An apply as 0.3 carries it: the object's text alone (forced, as 0.2's), or the record.
fn apply_object(v: &Value) -> wit::ApplyObject {
    match v {
        Value::String(object) => wit::ApplyObject { object: object.clone(), force: true, uid: None },
        record => wit::ApplyObject {
            object: text(&record["object"]),
            force: record["force"].as_bool().unwrap_or(true),
            uid: optional(&record["uid"]),
        },
    }
}

/// The action a component would return; none when the WIT cannot carry the case.
fn wit_action(v: &Value) -> Option<wit::Action> {
    if v == "prune" {
        return Some(wit::Action::Prune);
    }
    let (tag, body) = v.as_object()?.iter().next()?;
    Some(match tag.as_str() {
        "apply" => wit::Action::Apply(apply_object(body)),
        "status" => wit::Action::Status(text(body)),
        "delete" => wit::Action::Delete(object_ref(body)),
        "patch" => wit::Action::Patch(Patch {
            target: object_ref(&body["target"]),
            kind: match body["kind"].as_str() {
                Some("json") => wit::PatchKind::Json,
                Some("strategic") => wit::PatchKind::Strategic,
                _ => wit::PatchKind::Merge,
            },
            patch: text(&body["patch"]),
        }),
        "event" => wit::Action::Event(Event {
            event_type: if body["event-type"] == "warning" { wit::EventType::Warning } else { wit::EventType::Normal },
            reason: text(&body["reason"]),
            message: text(&body["message"]),
            action: optional(&body["action"]),
        }),
        _ => return None,
    })
}

/// A plugin that owns ConfigMaps and may write them anywhere: what the suite's actions name is
/// checked for its shape, and no grant refuses it.
fn granting(prune: bool) -> Manifest {
    let configmap = wit::Gvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() };
    let all = wit::WriteVerbs::APPLY | wit::WriteVerbs::PATCH | wit::WriteVerbs::DELETE;
    let (mut manifest, _) = wit_manifest(&serde_json::json!({"name": "suite", "primary": {"kind": {"group": "", "version": "v1", "kind": "ConfigMap"}}, "settings": {}})).expect("a manifest");
    manifest.owns = vec![configmap.clone()];
    manifest.writes = vec![wit::WriteGrant { kind: configmap, verbs: all, scope: wit::WriteScope::Any }];
    manifest.prune = prune;
    Manifest::from_wit(manifest, Vec::new(), Contract::V0_2).expect("the granting manifest loads")
}

fn primary() -> Object {
    Object {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "primary".into(),
        namespace: Some("team-a".into()),
        uid: "0b7c6a52-5ad4-4a7e-9d0c-2f4f5f0c0d1e".into(),
        json: "{}".into(),
    }
}

fn refusal(result: Result<impl Sized, CallFailure>) -> Value {
    match result {
        Ok(_) => Value::Null,
        Err(CallFailure::InvalidAction(message)) => Value::String(message),
        Err(other) => Value::String(format!("not an invalid action: {other}")),
    }
}

fn phase(name: &str) -> Phase {
    match name {
        "cleanup" => Phase::Cleanup,
        "deleted" => Phase::Deleted,
        _ => Phase::Apply,
    }
}

#[test]
fn the_host_loads_each_manifest_as_the_suite_says() {
    let mut checked = 0;
    for case in suite()["manifests"].as_array().expect("manifests") {
        let Some((manifest, keeps)) = wit_manifest(&case["manifest"]) else { continue };
        let loaded = Manifest::from_wit(manifest, keeps, Contract::V0_2);
        let answer = loaded.err().map_or(Value::Null, Value::String);
        assert_eq!(answer, case["answer"], "{}", case["case"]);
        checked += 1;
    }
    assert!(checked >= 20, "the suite's manifests were checked: {checked}");
}

#[test]
fn the_host_decodes_each_action_as_the_suite_says() {
    let (manifest, primary) = (granting(false), primary());
    let mut checked = 0;
    for case in suite()["actions"].as_array().expect("actions") {
        // A prune alone is a question of the whole response (the responses' cases).
        let Some(action) = wit_action(&case["action"]).filter(|a| !matches!(a, wit::Action::Prune)) else { continue };
        let phase = if case["deleted"] == true { Phase::Deleted } else { Phase::Apply };
        let response = wit::Response { actions: vec![action], requeue_after_ms: None };
        let answer = match refusal(action::decode(&manifest, &primary, phase, response)) {
            Value::String(m) => Value::String(m.strip_prefix("actions[0]: ").map(str::to_owned).unwrap_or(m)),
            accepted => accepted,
        };
        assert_eq!(answer, case["answer"], "{}", case["case"]);
        checked += 1;
    }
    assert!(checked >= 25, "the suite's actions were checked: {checked}");
}

#[test]
fn the_host_takes_each_whole_response_as_the_suite_says() {
    let primary = primary();
    let valid = |kind: &str| {
        match kind {
        "apply" => wit::Action::Apply(apply_object(&Value::from(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#))),
        "delete" => wit::Action::Delete(object_ref(&serde_json::json!({"api-version": "v1", "kind": "ConfigMap", "name": "a"}))),
        "patch" => wit_action(&serde_json::json!({"patch": {"target": {"api-version": "v1", "kind": "ConfigMap", "name": "a"}, "kind": "merge", "patch": "{}"}})).expect("a patch"),
        "status" => wit::Action::Status("{}".into()),
        "event" => wit_action(&serde_json::json!({"event": {"event-type": "normal", "reason": "Synced", "message": ""}})).expect("an event"),
        _ => wit::Action::Prune,
    }
    };
    let cases = suite()["responses"].as_array().expect("responses").clone();
    for case in &cases {
        let manifest = granting(case["prune-allowed"] == true);
        let actions: Vec<wit::Action> =
            case["actions"].as_array().expect("kinds").iter().map(|k| valid(&text(k))).collect();
        let phase = phase(&text(&case["phase"]));
        let answer = if case["failed"] == true {
            let error = wit::ReconcileError {
                message: "m".into(),
                transient: true,
                reason: None,
                retry_after_ms: None,
                actions,
            };
            refusal(action::decode_failure(&manifest, &primary, phase == Phase::Deleted, error))
        } else {
            refusal(action::decode(&manifest, &primary, phase, wit::Response { actions, requeue_after_ms: None }))
        };
        assert_eq!(answer, case["answer"], "{}", case["case"]);
    }
    assert!(cases.len() >= 5);
}
