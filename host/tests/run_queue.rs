//! Queue behaviour seen through the `wasmloop` binary on the real control plane.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{FOO_CRD, Host, component, create_configmap, deployment_with, foo, hostile, millis, replicas};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmloop_testenv::{eventually, shared};

#[tokio::test]
async fn a_plugin_that_always_fails_backs_off_with_growing_intervals() {
    let ns = shared().namespace("queue-backoff").await.unwrap();
    let host = hostile("panic", &[]);
    create_configmap(&ns, "victim").await;
    let object = format!("{}/victim", ns.name);
    let failures = host.0.wait_reconcile_lines(&object, "the guest panicked", 10).await;
    let attempts: Vec<u64> = failures.iter().map(|l| l["span"]["attempt"].as_u64().unwrap()).collect();
    assert_eq!(&attempts[..10], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], "attempts count up");
    let times: Vec<f64> = failures.iter().take(10).map(millis).collect();
    // After failure n the key waits 5 ms * 2^n before its next try. Each try also costs time
    // (an API call for its Warning Event), so only the lower bound is certain; by the last
    // gaps (640 and 1280 ms) the backoff dwarfs that cost, so a backoff that did not double
    // could not meet them.
    for (n, gap) in times.windows(2).map(|w| w[1] - w[0]).enumerate() {
        let backoff = 5.0 * f64::from(1u32 << n);
        assert!(gap >= backoff - 1.0, "gap after failure {n} was {gap} ms, below its {backoff} ms backoff: {times:?}");
    }
}

#[tokio::test]
async fn requeue_after_fires_again_and_again() {
    let ns = shared().namespace("queue-requeue").await.unwrap();
    let host = hostile("requeue", &[]);
    create_configmap(&ns, "ticker").await;
    let object = format!("{}/ticker", ns.name);
    let ticks = host.0.wait_reconcile_lines(&object, "tick ticker", 4).await;
    let times: Vec<f64> = ticks.iter().take(4).map(millis).collect();
    for gap in times.windows(2).map(|w| w[1] - w[0]) {
        assert!(gap >= 450.0, "requeued after {gap} ms, asked for 500");
    }
}

#[tokio::test]
async fn a_burst_of_updates_to_one_object_is_a_few_reconciles_never_two_at_once_and_the_last_state_wins() {
    let ns = shared().namespace("queue-burst").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    // Eight workers, so a broken queue would have idle workers to run one key twice.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "maxConcurrentReconciles: 8\n").unwrap();
    let plugin = component("foo_deployment");
    let host = Host::start([
        "run".as_ref(),
        "--plugin".as_ref(),
        plugin.as_os_str(),
        "--config".as_ref(),
        config.path().as_os_str(),
    ]);
    foos.create(&PostParams::default(), &foo("burst", "burst", 1)).await.unwrap();
    let deployments: Api<Deployment> = ns.api();
    deployment_with(&deployments, "burst", "the first Deployment", |d| replicas(d) == Some(1)).await;
    let success = r#"wasmloop_reconciles_total{plugin="foo-deployment",result="success"}"#;
    let before = host.metric(success).await;

    // 100 updates, 10 in flight at a time; whichever the API server took last is the state.
    futures::stream::iter(2..=101)
        .for_each_concurrent(10, |n| {
            let foos = foos.clone();
            async move {
                let patch = json!({"spec": {"replicas": n}});
                foos.patch("burst", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
            }
        })
        .await;
    let last = foos.get("burst").await.unwrap().data["spec"]["replicas"].as_i64().unwrap() as i32;
    deployment_with(&deployments, "burst", "the Deployment at the last state", |d| replicas(d) == Some(last)).await;
    // Counted once a reconcile since the burst has ended and the host has nothing queued or
    // running, not at whatever moment a fixed wait would land on.
    let in_flight = r#"wasmloop_reconciles_in_flight{plugin="foo-deployment"}"#;
    let depth = r#"wasmloop_queue_depth{plugin="foo-deployment"}"#;
    let reconciles = eventually(Duration::from_secs(60), "the burst reconciled and the queue idle", || {
        let host = &host;
        async move {
            let (running, queued) = (host.metric(in_flight).await, host.metric(depth).await);
            let reconciles = host.metric(success).await - before;
            if running == 0.0 && queued == 0.0 && reconciles >= 1.0 {
                Ok(reconciles)
            } else {
                Err(format!("{reconciles} reconciles, {running} running, {queued} queued"))
            }
        }
    })
    .await;
    assert!(reconciles < 50.0, "100 updates took {reconciles} reconciles; events for a waiting key collapse");
    assert_eq!(host.metric(r#"wasmloop_reconcile_overlaps_total{plugin="foo-deployment"}"#).await, 0.0);
}
