//! The host-wide budgets, held by the kernel: `wasmloop run` inside a real cgroup with the
//! memory limit and CPU quota of `deploy/`'s pod, one tenant filling as much memory as its
//! settings allow, on the real control plane. The host is not OOM-killed, every call of that
//! tenant completes, and another tenant's plugin keeps its latency meanwhile.
//!
//! Shown failing with the budget switched off (`--guest-memory-budget 64Gi`): the kernel's OOM
//! killer killed the host (`docs/benchmarks.md`).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::cgroup::{PodCgroup, deploy_limits};
use common::wasmplugin::{WASMPLUGIN_CRD, apply, bundle, condition, is, status, wasmplugins_resource};
use common::{Host, create_configmap};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, shared};

const MIB: u64 = 1 << 20;

/// How long to create a Deployment and see the labeler's label on it, through a watch.
async fn label_latency(apps: &TestNamespace, name: &str) -> Duration {
    let deployments: Api<Deployment> = apps.api();
    let params = WatchParams::default().fields(&format!("metadata.name={name}")).timeout(60);
    let mut watch = deployments.watch(&params, "0").await.unwrap().boxed();
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap();
    let created = Instant::now();
    deployments.create(&PostParams::default(), &deployment).await.unwrap();
    loop {
        match watch.try_next().await.unwrap() {
            Some(WatchEvent::Added(d) | WatchEvent::Modified(d))
                if d.metadata.labels.as_ref().is_some_and(|l| l.contains_key("wasmloop.dev/labeled-by")) =>
            {
                return created.elapsed();
            }
            Some(_) => {}
            None => panic!("{name} was not labelled within 60 s"),
        }
    }
}

/// The 99th percentile of `samples` (with fewer than a hundred, the largest).
fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * 0.99).round() as usize]
}

#[tokio::test]
async fn a_tenant_filling_all_its_settings_allow_cannot_get_the_host_oom_killed() {
    let (memory_limit, _) = deploy_limits();
    let cgroup = PodCgroup::like_the_pod("budgets");
    let tenant_a = shared().namespace("budget-a").await.unwrap();
    let tenant_b = shared().namespace("budget-b").await.unwrap();
    let (apps_a, apps_b) =
        (shared().namespace("budget-a-apps").await.unwrap(), shared().namespace("budget-b-apps").await.unwrap());
    let a_plugins = tenant_a.install_crd(Path::new(WASMPLUGIN_CRD)).await;
    let b_plugins: Api<DynamicObject> =
        Api::namespaced_with(tenant_b.client.clone(), &tenant_b.name, &wasmplugins_resource());
    let settings = tempfile::NamedTempFile::new().unwrap();
    let confined = format!(
        "plugins:\n  {}/hostile: {{namespace: {}}}\n  {}/labeler: {{namespace: {}}}\n",
        tenant_a.name, apps_a.name, tenant_b.name, apps_b.name
    );
    std::fs::write(settings.path(), confined).unwrap();
    let host = Host::start_in(
        &cgroup,
        [
            "run",
            "--config",
            settings.path().to_str().unwrap(),
            "--plugin-namespace",
            &tenant_a.name,
            "--plugin-namespace",
            &tenant_b.name,
        ],
    );

    // Tenant B's plugin alone, for its latency solo.
    apply(&tenant_b, &b_plugins, bundle("labeler_plugin", "labeler", &tenant_b.name, &[])).await;
    status(&b_plugins, "labeler", "tenant B's plugin ready", |s| is(s, "Ready", "True", "Serving")).await;
    let mut solo = Vec::new();
    for i in 0..20 {
        solo.push(label_latency(&apps_b, &format!("solo-{i}")).await);
    }

    // Tenant A: within the settings a WasmPlugin may give, each call fills 230 MiB, holds it
    // 8 s on a WASI clock and succeeds: never a failure, never quarantined.
    let (configmap, mut plugin) = bundle("hostile_plugin", "hostile", &tenant_a.name, &[]);
    plugin.data["spec"]["settings"] =
        json!({"memoryLimitBytes": 256 * MIB, "maxConcurrentReconciles": 4, "deadlineMs": 10_000});
    plugin.data["spec"]["config"] = json!({"mode": "hold", "bytes": 230 * MIB, "ms": 8_000});
    apply(&tenant_a, &a_plugins, (configmap, plugin)).await;
    let serving = status(&a_plugins, "hostile", "tenant A's plugin serving, capped", |s| {
        is(s, "Ready", "True", "Serving") && is(s, "Degraded", "True", "CappedToMemoryBudget")
    })
    .await;
    let capped = condition(&serving, "Degraded")["message"].as_str().unwrap_or_default().to_owned();
    assert!(capped.contains("256 MiB times 4 concurrent reconciles"), "{capped}");
    let primaries: Vec<String> = (0..8).map(|i| format!("hold-{i}")).collect();
    for name in &primaries {
        create_configmap(&apps_a, name).await;
    }

    // Tenant B keeps reconciling while A's calls fill the host.
    let a = format!("{}/hostile", tenant_a.name);
    let done = format!(r#"wasmloop_reconciles_total{{plugin="{a}",result="success"}}"#);
    let mut beside = Vec::new();
    let mut i = 0;
    while host.metric_or_zero(&done).await < primaries.len() as f64 {
        beside.push(label_latency(&apps_b, &format!("beside-{i}")).await);
        i += 1;
        assert!(i < 1_000, "tenant A's calls never completed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let (_, peak_kib) = host.memory_kib();
    let failures = [format!(r#"wasmloop_reconciles_total{{plugin="{a}",result="retry"}}"#), done.replace("success", "failed")];
    for series in &failures {
        assert_eq!(host.metric_or_zero(series).await, 0.0, "{series}: A's calls are never failures");
    }
    assert_eq!(cgroup.oom_kills(), 0, "the kernel's OOM killer never fired");
    assert!(peak_kib * 1024 < memory_limit, "peak RSS {} MiB, under the pod's {} MiB", peak_kib >> 10, memory_limit >> 20);
    let (solo, beside_p99) = (p99(solo), p99(beside.clone()));
    assert!(beside.len() >= 20, "B was sampled throughout: {} samples", beside.len());
    assert!(
        beside_p99 <= solo * 2,
        "tenant B's p99 {beside_p99:?} beside A, against {solo:?} solo: within 2x ({} samples)",
        beside.len()
    );
    eprintln!(
        "peak RSS {} MiB of {} MiB; B's p99 solo {solo:?}, beside A {beside_p99:?} over {} samples",
        peak_kib >> 10,
        memory_limit >> 20,
        beside.len()
    );
}
