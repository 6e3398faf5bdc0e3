//! `configmap-mirror`: copies a ConfigMap labelled `wasmloop.dev/mirror=true` into every
//! namespace named in its annotation `wasmloop.dev/mirror-to` (comma-separated).
//!
//! Owner references cannot cross namespaces, so the copies are tied to their source by a
//! label (`wasmloop.dev/mirror-of-uid`) and an annotation (`wasmloop.dev/mirror-of`), and a
//! finalizer on the source deletes them when the source goes. A namespace taken off the list
//! loses its copy; a copy edited or deleted by hand is restored, because the plugin watches
//! copies and maps them back to their source. Namespaces that do not exist yet are reported
//! and filled in when they appear.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wasmloop_sdk::prelude::*;

/// Label that selects sources.
pub const MIRROR_LABEL: &str = "wasmloop.dev/mirror";
/// Annotation on the source listing target namespaces.
pub const MIRROR_TO: &str = "wasmloop.dev/mirror-to";
/// Label on each copy: the source's UID.
pub const MIRROR_OF_UID: &str = "wasmloop.dev/mirror-of-uid";
/// Annotation on each copy: `namespace/name` of the source.
pub const MIRROR_OF: &str = "wasmloop.dev/mirror-of";
/// The finalizer held on sources until their copies are gone.
pub const FINALIZER: &str = "wasmloop.dev/mirror-cleanup";

/// The plugin.
pub struct ConfigMapMirror;

fn targets(source: &ConfigMap) -> BTreeSet<String> {
    let own = source.metadata.namespace.as_deref().unwrap_or_default();
    source
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MIRROR_TO))
        .map(|list| {
            list.split(',')
                .map(|ns| ns.trim_matches(|c: char| c.is_ascii_whitespace()))
                .filter(|ns| !ns.is_empty() && *ns != own)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn copies(source: &Object) -> Result<Vec<Object>, Error> {
    Ok(cache::list_objects(&ConfigMap::gvk(), None, Some(&format!("{MIRROR_OF_UID}={}", source.uid)))?)
}

fn copy_of(source: &ConfigMap, source_ref: &Object, namespace: &str) -> ConfigMap {
    let mut labels: BTreeMap<String, String> = source.metadata.labels.clone().unwrap_or_default();
    // No wasmloop label travels: a copy carrying the source label would itself be mirrored,
    // and one carrying `wasmloop.dev/plugin` into the host's namespace would be loaded as a
    // plugin, with the host's permissions.
    labels.retain(|key, _| !key.starts_with("wasmloop.dev/"));
    labels.insert(MIRROR_OF_UID.into(), source_ref.uid.clone());
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(source_ref.name.clone()),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(MIRROR_OF.into(), source_ref.display_name())])),
            ..ObjectMeta::default()
        },
        data: source.data.clone(),
        binary_data: source.binary_data.clone(),
        immutable: source.immutable,
    }
}

impl Reconciler for ConfigMapMirror {
    fn manifest() -> Manifest {
        Manifest::new("configmap-mirror", env!("CARGO_PKG_VERSION"))
            .primary_selector(KindSelector::of::<ConfigMap>().labels(format!("{MIRROR_LABEL}=true")))
            .watches(KindSelector::of::<ConfigMap>().labels(MIRROR_OF_UID))
            .watches(KindSelector::of::<Namespace>())
            // It only asks whether a Namespace exists.
            .metadata_only::<Namespace>()
            // Copies live in other namespaces, so they are not owned: a grant says where.
            .writes(Grant::of::<ConfigMap>().apply().delete().anywhere())
            .finalizer(FINALIZER)
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let existing = copies(&request.object)?;
        if request.phase != Phase::Apply {
            // Cleanup: every copy goes; the host then releases the finalizer.
            return Ok(existing.iter().map(|c| delete(c.to_ref())).collect());
        }
        let source: ConfigMap = request.object()?;
        let wanted = targets(&source);
        let mut actions = Vec::new();
        let (mut missing, mut taken) = (Vec::new(), Vec::new());
        // Counted from the copies applied, not by subtraction: a copy may outlive its
        // namespace in the cache, and be both missing and kept.
        let (mut mirrored, mut added) = (0usize, 0usize);
        for namespace in &wanted {
            if cache::get_object(&Namespace::gvk(), None, namespace)?.is_none() {
                missing.push(namespace.as_str());
                continue;
            }
            // Never take over a ConfigMap that is not our copy: a forced apply would replace
            // someone else's data (a plugin's component, say).
            if let Some(other) = cache::get_object(&ConfigMap::gvk(), Some(namespace), &request.object.name)? {
                if !existing.iter().any(|c| c.uid == other.uid) {
                    taken.push(format!("{namespace}/{}", request.object.name));
                    continue;
                }
            }
            mirrored += 1;
            if !existing.iter().any(|c| c.namespace.as_deref() == Some(namespace.as_str())) {
                added += 1;
            }
            actions.push(apply(&copy_of(&source, &request.object, namespace)));
        }
        if !taken.is_empty() {
            actions.push(event(
                EventType::Warning,
                "TargetExists",
                format!(
                    "ConfigMap(s) {} exist and are not copies of this one; they are left alone: rename the source or remove them",
                    taken.join(", ")
                ),
            ));
        }
        let stale: Vec<&Object> =
            existing.iter().filter(|c| !c.namespace.as_ref().is_some_and(|ns| wanted.contains(ns))).collect();
        for copy in &stale {
            actions.push(delete(copy.to_ref()));
        }
        if added > 0 || !stale.is_empty() {
            actions.push(event(
                EventType::Normal,
                "Mirrored",
                format!("mirrored to {mirrored} namespace(s), {added} copy(ies) added, {} removed", stale.len()),
            ));
        }
        if !missing.is_empty() {
            actions.push(event(
                EventType::Warning,
                "NamespaceNotFound",
                format!(
                    "{MIRROR_TO} names namespace(s) {} that do not exist; the copies follow when they are created",
                    missing.join(", ")
                ),
            ));
        }
        Ok(actions)
    }

    fn map(related: &Object, _config: &Config) -> Vec<ObjectRef> {
        if related.is::<Namespace>() {
            // A namespace appeared or changed: sources that list it may now place a copy.
            let sources = cache::list::<ConfigMap>(None, Some(&format!("{MIRROR_LABEL}=true"))).unwrap_or_default();
            return sources
                .into_iter()
                .filter(|s| targets(s).contains(&related.name))
                .filter_map(|s| Some(ObjectRef::new::<ConfigMap>(s.metadata.name?).namespace(s.metadata.namespace?)))
                .collect();
        }
        let Ok(copy) = related.parse::<ConfigMap>() else { return Vec::new() };
        let source = copy.metadata.annotations.as_ref().and_then(|a| a.get(MIRROR_OF)).and_then(|s| s.split_once('/'));
        match source {
            Some((namespace, name)) => vec![ObjectRef::new::<ConfigMap>(name).namespace(namespace)],
            None => Vec::new(),
        }
    }
}

wasmloop_sdk::export_plugin!(ConfigMapMirror);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use wasmloop_sdk::testing::TestCase;

    fn source(to: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": "platform", "uid": "src-uid",
                            "labels": {MIRROR_LABEL: "true", "team": "core"},
                            "annotations": {MIRROR_TO: to}},
               "data": {"level": "debug"}})
    }

    fn namespace(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": name}})
    }

    fn copy(ns: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": ns, "uid": format!("copy-{ns}"),
                            "labels": {MIRROR_OF_UID: "src-uid", "team": "core"},
                            "annotations": {MIRROR_OF: "platform/settings"}},
               "data": {"level": "debug"}})
    }

    #[test]
    fn copies_are_applied_into_every_listed_namespace() {
        let outcome =
            TestCase::new(source("a, b")).cached(namespace("a")).cached(namespace("b")).run::<ConfigMapMirror>();
        let applied = outcome.applied::<ConfigMap>();
        let namespaces: Vec<_> = applied.iter().map(|c| c.metadata.namespace.clone().unwrap()).collect();
        assert_eq!(namespaces, ["a", "b"]);
        let labels = applied[0].metadata.labels.as_ref().unwrap();
        assert_eq!(labels[MIRROR_OF_UID], "src-uid");
        assert!(!labels.contains_key(MIRROR_LABEL), "a copy must not be a source");
        assert_eq!(applied[0].data.as_ref().unwrap()["level"], "debug");
        assert_eq!(outcome.events()[0].reason, "Mirrored");
    }

    #[test]
    fn no_wasmloop_label_travels_with_a_copy() {
        let mut src = source("a");
        src["metadata"]["labels"]["wasmloop.dev/plugin"] = json!("foo-deployment");
        let outcome = TestCase::new(src).cached(namespace("a")).run::<ConfigMapMirror>();
        let labels = outcome.applied::<ConfigMap>()[0].metadata.labels.clone().unwrap();
        assert_eq!(labels.keys().collect::<Vec<_>>(), ["team", MIRROR_OF_UID]);
    }

    #[test]
    fn a_configmap_that_is_not_a_copy_is_never_overwritten() {
        let foreign = json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": "a", "uid": "someone-elses"}});
        let outcome = TestCase::new(source("a, b"))
            .cached(namespace("a"))
            .cached(namespace("b"))
            .cached(foreign)
            .run::<ConfigMapMirror>();
        let namespaces: Vec<_> =
            outcome.applied::<ConfigMap>().iter().map(|c| c.metadata.namespace.clone().unwrap()).collect();
        assert_eq!(namespaces, ["b"]);
        let warning =
            outcome.events().into_iter().find(|e| e.reason == "TargetExists").expect("a TargetExists Warning");
        assert!(warning.message.contains("a/settings"), "{}", warning.message);
    }

    #[test]
    fn namespace_taken_off_the_list_loses_its_copy() {
        let outcome = TestCase::new(source("a"))
            .cached(namespace("a"))
            .cached(copy("a"))
            .cached(copy("b"))
            .run::<ConfigMapMirror>();
        let deletes = outcome.deletes();
        assert_eq!(deletes.len(), 1);
        assert_eq!(deletes[0].namespace.as_deref(), Some("b"));
        assert_eq!(deletes[0].uid.as_deref(), Some("copy-b"));
    }

    #[test]
    fn cleanup_deletes_every_copy() {
        let outcome = TestCase::new(source("a,b"))
            .cached(copy("a"))
            .cached(copy("b"))
            .phase(Phase::Cleanup)
            .run::<ConfigMapMirror>();
        assert_eq!(outcome.deletes().len(), 2);
        assert!(outcome.applied::<ConfigMap>().is_empty());
    }

    #[test]
    fn missing_namespace_is_reported_and_skipped() {
        let outcome = TestCase::new(source("a,ghost")).cached(namespace("a")).run::<ConfigMapMirror>();
        assert_eq!(outcome.applied::<ConfigMap>().len(), 1);
        let warning = outcome.events().into_iter().find(|e| e.event_type == EventType::Warning).unwrap();
        assert_eq!(warning.reason, "NamespaceNotFound");
        assert!(warning.message.contains("ghost"));
    }

    #[test]
    fn a_copy_that_outlives_its_namespace_is_neither_added_nor_counted_twice() {
        let outcome = TestCase::new(source("a,b"))
            .cached(namespace("a"))
            .cached(copy("a"))
            .cached(copy("b"))
            .run::<ConfigMapMirror>();
        let reasons: Vec<_> = outcome.events().into_iter().map(|e| e.reason.clone()).collect();
        assert_eq!(reasons, ["NamespaceNotFound"], "nothing was added, so nothing is announced as mirrored");
        let outcome = TestCase::new(source("a,b,c"))
            .cached(namespace("a"))
            .cached(namespace("c"))
            .cached(copy("a"))
            .cached(copy("b"))
            .run::<ConfigMapMirror>();
        let mirrored = outcome.events().into_iter().find(|e| e.reason == "Mirrored").expect("c is new");
        assert_eq!(mirrored.message, "mirrored to 2 namespace(s), 1 copy(ies) added, 0 removed");
    }

    #[test]
    fn own_namespace_is_never_a_target() {
        let outcome = TestCase::new(source("platform")).cached(namespace("platform")).run::<ConfigMapMirror>();
        assert!(outcome.actions().is_empty());
    }

    #[test]
    fn steady_state_reapplies_without_an_event() {
        let outcome = TestCase::new(source("a")).cached(namespace("a")).cached(copy("a")).run::<ConfigMapMirror>();
        assert_eq!(outcome.applied::<ConfigMap>().len(), 1);
        assert!(outcome.events().is_empty());
    }

    #[test]
    fn a_copy_maps_back_to_its_source() {
        let refs = TestCase::new(source("a")).map::<ConfigMapMirror>(copy("a"));
        assert_eq!(refs, vec![ObjectRef::new::<ConfigMap>("settings").namespace("platform")]);
    }

    #[test]
    fn a_new_namespace_maps_to_the_sources_that_list_it() {
        let refs = TestCase::new(source("a,b")).map::<ConfigMapMirror>(namespace("b"));
        assert_eq!(refs, vec![ObjectRef::new::<ConfigMap>("settings").namespace("platform")]);
        assert!(TestCase::new(source("a")).map::<ConfigMapMirror>(namespace("z")).is_empty());
    }
}
