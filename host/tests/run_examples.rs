//! The example plugins that mirror controllers people run, on the real control plane:
//! `ttl-janitor` (kube-janitor's TTL and expiry annotations) and `namespace-defaults`
//! (Kyverno's synchronized generate rules).

mod common;

use std::time::Duration;

use common::{Host, component};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, eventually, shared, wait_for_event};

/// `wasmloop run` with `plugin` (a component name) as `name`, confined by `settings` (YAML
/// flow), logging JSON, once it is ready.
async fn host_of(plugin: &str, name: &str, settings: &str) -> (Host, tempfile::NamedTempFile) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("plugins:\n  {name}: {{{settings}}}\n")).unwrap();
    let host = start(plugin, &file).await;
    (host, file)
}

async fn start(plugin: &str, settings: &tempfile::NamedTempFile) -> Host {
    let component = component(plugin);
    let (component, settings) = (component.to_str().unwrap(), settings.path().to_str().unwrap());
    let host = Host::start(["--log-format", "json", "run", "--plugin", component, "--config", settings]);
    host.ready(Duration::from_secs(120), "the host ready").await;
    host
}

async fn janitor(ns: &TestNamespace) -> (Host, tempfile::NamedTempFile) {
    host_of("ttl_janitor", "ttl-janitor", &format!("namespace: {}", ns.name)).await
}

/// Waits until the janitor has scheduled Deployment `name` (its line saying when it is due).
async fn scheduled(host: &Host, ns: &TestNamespace, name: &str) {
    host.wait_reconcile_lines(&format!("{}/{name}", ns.name), "is due at", 1).await;
}

/// Deployment `name` with these annotations; returns its creation time.
async fn deployment(ns: &TestNamespace, name: &str, annotations: serde_json::Value) -> Timestamp {
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    });
    let api: Api<Deployment> = ns.api();
    let made = api.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(body)).await.unwrap();
    made.metadata.creation_timestamp.expect("the API server stamps it").0
}

async fn gone(ns: &TestNamespace, name: &str) {
    let api: Api<Deployment> = ns.api();
    eventually(Duration::from_secs(60), &format!("Deployment {name} deleted"), || {
        let api = api.clone();
        async move {
            match api.get_opt(name).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(d) if d.metadata.deletion_timestamp.is_some() => Ok(()),
                Some(_) => Err("still there".to_owned()),
            }
        }
    })
    .await;
}

async fn exists(ns: &TestNamespace, name: &str) -> bool {
    ns.api::<Deployment>().get_opt(name).await.unwrap().is_some_and(|d| d.metadata.deletion_timestamp.is_none())
}

async fn janitor_event(ns: &TestNamespace, reason: &'static str, object: &str) -> Event {
    let object = object.to_owned();
    wait_for_event(&ns.api(), Duration::from_secs(60), reason, move |e| {
        e.reason.as_deref() == Some(reason) && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(&object)
    })
    .await
}

#[tokio::test]
async fn a_deployment_is_deleted_when_its_ttl_passes_and_not_before() {
    let ns = shared().namespace("janitor-ttl").await.unwrap();
    let (host, _settings) = janitor(&ns).await;
    let ttl = SignedDuration::from_secs(30);
    deployment(&ns, "forever", json!({"janitor/ttl": "forever"})).await;
    deployment(&ns, "plain", json!({})).await;
    deployment(&ns, "later", json!({"janitor/expires": "2999-01-01"})).await;
    let created = deployment(&ns, "short", json!({"janitor/ttl": "30s"})).await;
    // Seen, and kept: scheduled, and each of the four has had its one reconcile (the
    // generation filter calls the janitor once each until one is due).
    scheduled(&host, &ns, "later").await;
    scheduled(&host, &ns, "short").await;
    host.metric_until(
        r#"wasmloop_reconciles_total{plugin="ttl-janitor",result="success"}"#,
        "the janitor's first reconciles",
        |n| n >= 4.0,
    )
    .await;
    let seen_at = Timestamp::now();
    assert!(seen_at < created + ttl, "the host took longer than the TTL to first reconcile; the test proves nothing");
    assert!(exists(&ns, "short").await, "deleted before its TTL passed");

    gone(&ns, "short").await;
    let event = janitor_event(&ns, "TimeToLiveExpired", "short").await;
    let decided = event.event_time.as_ref().expect("the host stamps its events").0;
    assert!(decided >= created + ttl, "deleted at {decided}, before its TTL passed at {}", created + ttl);
    assert!(event.note.as_deref().is_some_and(|n| n.contains("with 30s TTL has expired")), "{event:?}");
    // The others were created first, and reconciled: the janitor has passed them by.
    for kept in ["forever", "later", "plain"] {
        assert!(exists(&ns, kept).await, "{kept} was deleted");
    }
}

#[tokio::test]
async fn a_deployment_past_its_expiry_is_deleted_at_once() {
    let ns = shared().namespace("janitor-expired").await.unwrap();
    let (_host, _settings) = janitor(&ns).await;
    deployment(&ns, "stale", json!({"janitor/expires": "2001-02-03T04:05Z"})).await;
    gone(&ns, "stale").await;
    let event = janitor_event(&ns, "ExpiryTimeReached", "stale").await;
    assert!(
        event.note.as_deref().is_some_and(|n| n.contains("reached its expiry time 2001-02-03T04:05Z")),
        "{event:?}"
    );
}

#[tokio::test]
async fn a_ttl_that_passes_while_no_host_runs_is_honoured_by_the_next_host() {
    let ns = shared().namespace("janitor-restart").await.unwrap();
    let (mut first, settings) = janitor(&ns).await;
    let ttl = SignedDuration::from_secs(30);
    let created = deployment(&ns, "restart", json!({"janitor/ttl": "30s"})).await;
    scheduled(&first, &ns, "restart").await;
    first.kill();
    assert!(
        Timestamp::now() < created + ttl,
        "the first host took longer than the TTL to schedule; the test proves nothing"
    );
    let left = (created + ttl + SignedDuration::from_secs(1)).duration_since(Timestamp::now());
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
    assert!(exists(&ns, "restart").await, "deleted with no host running");
    let component = component("ttl_janitor");
    let _second =
        Host::start(["run", "--plugin", component.to_str().unwrap(), "--config", settings.path().to_str().unwrap()]);
    gone(&ns, "restart").await;
}

// ---- namespace-defaults --------------------------------------------------------------------

const LABEL: &str = "wasmloop.dev/defaults";

async fn label(ns: &TestNamespace, labels: serde_json::Value) {
    let namespaces: Api<Namespace> = Api::all(ns.client.clone());
    let patch = json!({"metadata": {"labels": labels}});
    namespaces.patch(&ns.name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// Waits until what `get` finds of `name` (perhaps nothing) passes `check`, and returns it.
async fn until<K>(api: &Api<K>, name: &str, what: &str, check: impl Fn(Option<&K>) -> bool) -> Option<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(Duration::from_secs(60), what, || {
        let (api, check) = (api.clone(), &check);
        async move {
            let found = api.get_opt(name).await.map_err(|e| e.to_string())?;
            if check(found.as_ref()) { Ok(found) } else { Err(format!("{found:?}")) }
        }
    })
    .await
}

fn quota_cpu(q: Option<&ResourceQuota>) -> Option<String> {
    q?.spec.as_ref()?.hard.as_ref()?.get("requests.cpu").map(|v| v.0.clone())
}

#[tokio::test]
async fn a_labelled_namespace_keeps_its_defaults_through_deletion_and_edits_and_loses_them_with_its_label() {
    let ns = shared().namespace("defaults").await.unwrap();
    let (_host, _settings) = host_of("namespace_defaults", "namespace-defaults", "config: {teams: [payments]}").await;
    label(&ns, json!({LABEL: "enabled", "wasmloop.dev/team": "payments"})).await;
    let (policies, quotas, bindings) = (ns.api::<NetworkPolicy>(), ns.api::<ResourceQuota>(), ns.api::<RoleBinding>());

    // Generated, each owned by the Namespace.
    let policy = until(&policies, "default-deny", "the NetworkPolicy", |p| p.is_some()).await.unwrap();
    let owner = &policy.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Namespace", ns.name.as_str(), Some(true))
    );
    until(&quotas, "default-resourcequota", "the ResourceQuota", |q| quota_cpu(q).as_deref() == Some("4")).await;
    let binding = until(&bindings, "default-team", "the RoleBinding", |b| b.is_some()).await.unwrap();
    assert_eq!(binding.subjects.unwrap()[0].name, "payments");

    // Deleted: put back, a new object.
    let first_uid = policy.metadata.uid.clone();
    policies.delete("default-deny", &DeleteParams::default()).await.unwrap();
    until(&policies, "default-deny", "the NetworkPolicy put back", |p| p.is_some_and(|p| p.metadata.uid != first_uid))
        .await;

    // Edited by another manager: set back.
    let edit = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "default-resourcequota"},
                      "spec": {"hard": {"requests.cpu": "100"}}});
    let edited = quotas
        .patch("default-resourcequota", &PatchParams::apply("kubectl-edit").force(), &Patch::Apply(edit))
        .await
        .unwrap();
    assert_eq!(quota_cpu(Some(&edited)).as_deref(), Some("100"), "the edit landed");
    until(&quotas, "default-resourcequota", "the quota set back", |q| quota_cpu(q).as_deref() == Some("4")).await;

    // The label goes: every default is pruned.
    label(&ns, json!({LABEL: null})).await;
    until(&policies, "default-deny", "the NetworkPolicy pruned", |o| o.is_none()).await;
    until(&quotas, "default-resourcequota", "the ResourceQuota pruned", |o| o.is_none()).await;
    until(&bindings, "default-team", "the RoleBinding pruned", |o| o.is_none()).await;
}
