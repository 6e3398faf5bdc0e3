//! Leader election (`--leader-elect`) between two `wasmloop run` processes on the real
//! control plane.

mod common;

use std::time::Duration;

use common::{Host, component, millis};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::Value;
use wasmloop_testenv::{TestNamespace, eventually, shared};

const LEASE_SECONDS: u64 = 4;

/// A host running hostile in requeue mode (a "tick" log line every 500 ms per ConfigMap),
/// campaigning for a Lease in `ns`.
fn candidate(ns: &TestNamespace, config: &tempfile::NamedTempFile) -> Host {
    let plugin = component("hostile_plugin");
    let lease = LEASE_SECONDS.to_string();
    Host::start([
        "--log-format".as_ref(),
        "json".as_ref(),
        "run".as_ref(),
        "--plugin".as_ref(),
        plugin.as_os_str(),
        "--config".as_ref(),
        config.path().as_os_str(),
        "--leader-elect".as_ref(),
        "--leader-election-namespace".as_ref(),
        ns.name.as_ref(),
        "--lease-duration-seconds".as_ref(),
        lease.as_ref(),
    ])
}

fn ticks(host: &Host, object: &str) -> Vec<f64> {
    host.json_lines()
        .iter()
        .filter(|l| l["span"]["object"] == object)
        .filter(|l| l["fields"]["message"].as_str().is_some_and(|m| m.starts_with("tick ")))
        .map(millis)
        .collect()
}

fn logged_at(host: &Host, text: &str) -> Option<f64> {
    host.json_lines()
        .iter()
        .find(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains(text)))
        .map(|l: &Value| millis(l))
}

#[tokio::test]
async fn only_the_leader_reconciles_and_a_standby_takes_over_within_the_lease_after_a_sigkill() {
    let ns = shared().namespace("leader").await.unwrap();
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "plugins:\n  hostile:\n    config: {mode: requeue}\n").unwrap();
    let cm = ConfigMap {
        metadata: ObjectMeta { name: Some("ticker".into()), ..ObjectMeta::default() },
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name).create(&PostParams::default(), &cm).await.unwrap();
    let object = format!("{}/ticker", ns.name);

    let mut first = candidate(&ns, &config);
    first.logged("acquired the leader Lease").await;
    let second = candidate(&ns, &config);
    second.logged("campaigning for the leader Lease").await;
    assert_eq!(second.get("/readyz").await.0, 200, "a standby is ready: its caches are synced");
    eventually(Duration::from_secs(30), "the leader ticking", || {
        let n = ticks(&first, &object).len();
        async move { if n >= 4 { Ok(()) } else { Err(format!("{n} ticks")) } }
    })
    .await;
    assert!(ticks(&second, &object).is_empty(), "the standby reconciled");
    assert_eq!(second.metric("wasmloop_leader").await, 0.0);
    assert_eq!(first.metric("wasmloop_leader").await, 1.0);

    first.kill();
    let killed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() * 1000.0;
    second.logged("acquired the leader Lease").await;
    let took_over = logged_at(&second, "acquired the leader Lease").unwrap() - killed % 86_400_000.0;
    // The Lease runs out LEASE_SECONDS after the last renewal, which came before the kill.
    assert!(took_over < (LEASE_SECONDS as f64 + 3.0) * 1000.0, "took over {took_over} ms after the SIGKILL");
    eventually(Duration::from_secs(30), "the new leader ticking", || {
        let n = ticks(&second, &object).len();
        async move { if n >= 2 { Ok(()) } else { Err(format!("{n} ticks")) } }
    })
    .await;
    let (last_of_first, first_of_second) = (*ticks(&first, &object).last().unwrap(), ticks(&second, &object)[0]);
    assert!(last_of_first < first_of_second, "the object was reconciled by both hosts at once");
}
