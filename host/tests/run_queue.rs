//! Queue behaviour seen through the `wasmloop` binary on the real control plane.

mod common;

use std::time::Duration;

use common::{Host, component};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::Value;
use wasmloop_testenv::{TestNamespace, eventually, shared};

/// The host running the hostile test plugin in one mode, logging JSON lines. The config file
/// lives as long as the host.
fn hostile(mode: &str) -> (Host, tempfile::NamedTempFile) {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), format!("plugins:\n  hostile:\n    config: {{mode: {mode}}}\n")).unwrap();
    let plugin = component("hostile_plugin");
    let host = Host::start([
        "--log-format".as_ref(),
        "json".as_ref(),
        "run".as_ref(),
        "--plugin".as_ref(),
        plugin.as_os_str(),
        "--config".as_ref(),
        config.path().as_os_str(),
    ]);
    (host, config)
}

/// Log lines inside the reconcile span of `object` whose message contains `text`.
fn reconcile_lines(host: &(Host, tempfile::NamedTempFile), object: &str, text: &str) -> Vec<Value> {
    host.0
        .json_lines()
        .into_iter()
        .filter(|l| l["span"]["object"] == object)
        .filter(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains(text)))
        .collect()
}

async fn configmap(ns: &TestNamespace, name: &str) {
    let cm =
        ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, ..ConfigMap::default() };
    Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name).create(&PostParams::default(), &cm).await.unwrap();
}

fn millis(line: &Value) -> f64 {
    // RFC 3339 with nanoseconds: seconds of the day are enough within one test.
    let ts = line["timestamp"].as_str().unwrap();
    let time = &ts[11..ts.len() - 1];
    let mut parts = time.split(':');
    let (h, m, s): (f64, f64, f64) = (
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    );
    ((h * 60.0 + m) * 60.0 + s) * 1000.0
}

#[tokio::test]
async fn a_plugin_that_always_fails_backs_off_with_growing_intervals() {
    let ns = shared().namespace("queue-backoff").await.unwrap();
    let host = hostile("panic");
    configmap(&ns, "victim").await;
    let object = format!("{}/victim", ns.name);
    let failures = eventually(Duration::from_secs(60), "seven failed attempts", || {
        let lines = reconcile_lines(&host, &object, "the guest panicked");
        async move { if lines.len() >= 7 { Ok(lines) } else { Err(format!("{} so far", lines.len())) } }
    })
    .await;
    let attempts: Vec<u64> = failures.iter().map(|l| l["span"]["attempt"].as_u64().unwrap()).collect();
    assert_eq!(&attempts[..7], &[0, 1, 2, 3, 4, 5, 6], "attempts count up");
    let times: Vec<f64> = failures.iter().take(7).map(millis).collect();
    let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    // 5, 10, 20, 40, 80, 160 ms of backoff plus the time of each try (the first try also
    // warms the instance pool, so it is left out). Neighbours may swap on a slow API call;
    // two doublings apart they cannot: the gaps grow, and the backoff alone puts the last
    // above 160 ms.
    assert!(gaps[1] < gaps[3] && gaps[3] < gaps[5], "gaps {gaps:?}");
    assert!(gaps[5] >= 160.0 && gaps[5] > 3.0 * gaps[1], "gaps {gaps:?}");
}

#[tokio::test]
async fn requeue_after_fires_again_and_again() {
    let ns = shared().namespace("queue-requeue").await.unwrap();
    let host = hostile("requeue");
    configmap(&ns, "ticker").await;
    let object = format!("{}/ticker", ns.name);
    let ticks = eventually(Duration::from_secs(30), "four ticks", || {
        let lines = reconcile_lines(&host, &object, "tick ticker");
        async move { if lines.len() >= 4 { Ok(lines) } else { Err(format!("{} so far", lines.len())) } }
    })
    .await;
    let times: Vec<f64> = ticks.iter().take(4).map(millis).collect();
    for gap in times.windows(2).map(|w| w[1] - w[0]) {
        assert!(gap >= 450.0, "requeued after {gap} ms, asked for 500");
    }
}
