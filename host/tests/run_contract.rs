//! Contract 0.3's capabilities on the real control plane, through the `roller` test guest: the
//! trigger, an index, the generation and annotation predicates, a field-selected watch, and an
//! unforced apply's conflict. (Strategic merge patches and UID preconditions are the
//! executor's: `tests/runtime/executor.rs`.)

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Host, component};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, eventually, shared};

/// The roller alone, confined to `ns`, with `settings` (YAML flow) besides.
fn roller(ns: &TestNamespace, settings: &str) -> (Host, tempfile::NamedTempFile) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("plugins:\n  roller: {{namespace: {}{settings}}}\n", ns.name)).unwrap();
    let plugin = component("roller_plugin");
    let host = Host::start(["run", "--plugin", plugin.to_str().unwrap(), "--config", file.path().to_str().unwrap()]);
    (host, file)
}

/// Deployment `name`, annotated for the roller when `roll`, mounting ConfigMap `mounts`,
/// applied by field manager `manager` with `replicas`.
async fn deployment(ns: &TestNamespace, name: &str, roll: bool, mounts: &str, (manager, replicas): (&str, i32)) {
    let annotations = if roll { json!({"wasmloop.dev/roll": "yes"}) } else { json!({}) };
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"volumes": [{"name": "settings", "configMap": {"name": mounts}}],
                                       "containers": [{"name": "c", "image": "nginx"}]}}}
    });
    let api: Api<Deployment> = ns.api();
    api.patch(name, &PatchParams::apply(manager).force(), &Patch::Apply(body)).await.unwrap();
}

async fn configmap(ns: &TestNamespace, name: &str, value: &str) {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}});
    ns.api::<ConfigMap>().patch(name, &PatchParams::apply("test").force(), &Patch::Apply(body)).await.unwrap();
}

async fn secret(ns: &TestNamespace, name: &str) {
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"k": "v"}});
    ns.api::<Secret>().patch(name, &PatchParams::apply("test").force(), &Patch::Apply(body)).await.unwrap();
}

/// Waits until what the roller observed of Deployment `name` (its `roller-observed-NAME`
/// ConfigMap) passes `check`, and returns it.
async fn observed(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&BTreeMap<String, String>) -> bool,
) -> BTreeMap<String, String> {
    let api: Api<ConfigMap> = ns.api();
    let configmap = format!("roller-observed-{name}");
    eventually(Duration::from_secs(60), what, || {
        let (api, check, configmap) = (api.clone(), &check, configmap.clone());
        async move {
            let found = api.get_opt(&configmap).await.map_err(|e| e.to_string())?.ok_or("not yet")?;
            let data = found.data.unwrap_or_default();
            if check(&data) { Ok(data) } else { Err(format!("{data:?}")) }
        }
    })
    .await
}

fn any(_: &BTreeMap<String, String>) -> bool {
    true
}

fn rolled_for(d: &Deployment) -> Option<String> {
    d.spec.template.metadata.as_ref()?.annotations.as_ref()?.get("wasmloop.dev/rolled-for").cloned()
}

#[tokio::test]
async fn a_changed_configmap_reaches_the_deployments_that_mount_it_through_the_index_as_their_trigger() {
    let ns = shared().namespace("c03-index").await.unwrap();
    configmap(&ns, "settings", "1").await;
    configmap(&ns, "other", "1").await;
    deployment(&ns, "web", true, "settings", ("test", 1)).await;
    deployment(&ns, "api", true, "other", ("test", 1)).await;
    let (host, _file) = roller(&ns, "");
    for name in ["web", "api"] {
        observed(&ns, name, "the first reconcile", any).await;
    }
    configmap(&ns, "settings", "2").await;
    let api: Api<Deployment> = ns.api();
    eventually(Duration::from_secs(60), "web rolled for its ConfigMap", || {
        let api = api.clone();
        async move {
            let web = api.get("web").await.map_err(|e| e.to_string())?;
            if rolled_for(&web).as_deref() == Some("settings") {
                Ok(())
            } else {
                Err(format!("{:?}", rolled_for(&web)))
            }
        }
    })
    .await;
    // `map` read, through the index, the one Deployment that mounts it.
    host.logged("map of ConfigMap settings found 1").await;
    assert_eq!(rolled_for(&api.get("api").await.unwrap()), None, "api mounts another ConfigMap");
}

#[tokio::test]
async fn an_annotation_filter_keeps_unannotated_primaries_out_of_the_cache_and_a_field_selector_all_but_one_secret() {
    let ns = shared().namespace("c03-narrow").await.unwrap();
    deployment(&ns, "web", true, "none", ("test", 1)).await;
    deployment(&ns, "plain", false, "none", ("test", 1)).await;
    secret(&ns, "roll-secret").await;
    secret(&ns, "other-secret").await;
    let (_host, _file) = roller(&ns, "");
    let seen = observed(&ns, "web", "the first reconcile", any).await;
    assert_eq!(seen["deployments"], "web", "the unannotated Deployment is not cached");
    assert_eq!(seen["secrets"], "roll-secret", "only the field-selected Secret is cached");
    let api: Api<ConfigMap> = ns.api();
    assert!(api.get_opt("roller-observed-plain").await.unwrap().is_none(), "plain is no primary");
}

#[tokio::test]
async fn a_status_only_update_does_not_call_a_generation_filtered_plugin() {
    let ns = shared().namespace("c03-generation").await.unwrap();
    deployment(&ns, "web", true, "none", ("test", 1)).await;
    let (_host, _file) = roller(&ns, "");
    let api: Api<Deployment> = ns.api();
    let generation = api.get("web").await.unwrap().metadata.generation.unwrap_or_default();
    let seen =
        observed(&ns, "web", "the current generation seen", |d| d["triggers"].ends_with(&format!("->{generation}")))
            .await;
    let calls = seen["calls"].clone();
    // Its status only: no call.
    let status = json!({"status": {"observedGeneration": generation, "replicas": 0}});
    api.patch_status("web", &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    // A marker after it: once the marker is reconciled, the status update was seen (one
    // informer, in order), and a reconcile it queued would have run (the queue is in order).
    deployment(&ns, "marker", true, "none", ("test", 1)).await;
    observed(&ns, "marker", "the marker's reconcile", any).await;
    assert_eq!(api.get("web").await.unwrap().metadata.generation, Some(generation), "web's spec did not change");
    let after = observed(&ns, "web", "web observed", any).await;
    assert_eq!(after["calls"], calls, "web was not called again: {after:?}");
    // A spec change does call it, and says which generations.
    deployment(&ns, "web", true, "none", ("test", 2)).await;
    let next = format!("primary {generation}->{}", generation + 1);
    let spec = observed(&ns, "web", "the spec change's reconcile", |d| d["triggers"] == next).await;
    assert_ne!(spec["calls"], calls);
}

#[tokio::test]
async fn an_unforced_apply_of_a_field_another_manager_owns_is_reported_to_the_plugin() {
    let ns = shared().namespace("c03-conflict").await.unwrap();
    deployment(&ns, "web", true, "none", ("other-team", 3)).await;
    let (_host, _file) = roller(&ns, ", config: {replicas: 5}");
    let told = observed(&ns, "web", "the conflict reported", |d| !d["conflict"].is_empty()).await;
    assert_eq!(told["conflict"], "other-team .spec.replicas");
    let api: Api<Deployment> = ns.api();
    assert_eq!(api.get("web").await.unwrap().spec.replicas, Some(3), "the plugin did not take the field");
}
