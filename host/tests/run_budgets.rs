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
use common::{Host, create_configmap, grant_user, kubeconfig_as};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, shared};

const MIB: u64 = 1 << 20;

/// Held by each test here: they measure the host's memory, CPU and latency, which another's
/// compiles and guests would disturb.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

/// Time between two latency samples, solo and beside alike: both phases sample the same
/// cluster at the same pace, so what the cluster does anyway (its controllers' work for each
/// sample's Deployment) weighs the same on both.
const PACE: Duration = Duration::from_millis(100);

/// Latency samples of tenant B alone: as many as the phase beside A takes, give or take, so
/// that both p99s are taken over enough samples to hold the same share of the cluster's own
/// stalls.
const SOLO_SAMPLES: usize = 100;

/// The 99th percentile of `samples` (with fewer than a hundred, the largest).
fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * 0.99).round() as usize]
}

#[tokio::test]
async fn a_tenant_filling_all_its_settings_allow_cannot_get_the_host_oom_killed() {
    let _alone = ALONE.lock().await;
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
        shared().kubeconfig(),
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
    for i in 0..SOLO_SAMPLES {
        solo.push(label_latency(&apps_b, &format!("solo-{i}")).await);
        tokio::time::sleep(PACE).await;
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
    assert!(capped.contains("256 MiB and response limit of 4 MiB, times 4 concurrent reconciles"), "{capped}");
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
        assert!(i < 2_000, "tenant A's calls never completed");
        tokio::time::sleep(PACE).await;
    }

    let (_, peak_kib) = host.memory_kib();
    let failures =
        [format!(r#"wasmloop_reconciles_total{{plugin="{a}",result="retry"}}"#), done.replace("success", "failed")];
    for series in &failures {
        assert_eq!(host.metric_or_zero(series).await, 0.0, "{series}: A's calls are never failures");
    }
    assert_eq!(cgroup.oom_kills(), 0, "the kernel's OOM killer never fired");
    assert!(
        peak_kib * 1024 < memory_limit,
        "peak RSS {} MiB, under the pod's {} MiB",
        peak_kib >> 10,
        memory_limit >> 20
    );
    let (solo, beside_p99) = (p99(solo), p99(beside.clone()));
    assert!(beside.len() >= SOLO_SAMPLES, "B was sampled throughout: {} samples", beside.len());
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

/// `component` with a custom section of `bytes` zeros after it: a component as large as the
/// host takes, yet a small ConfigMap once gzipped.
fn padded(component: &[u8], bytes: usize) -> Vec<u8> {
    fn leb128(out: &mut Vec<u8>, mut n: u64) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                return out.push(byte);
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"padding";
    let mut out = component.to_vec();
    out.push(0);
    leb128(&mut out, (1 + name.len() + bytes) as u64);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.resize(out.len() + bytes, 0);
    out
}

/// A plugin ConfigMap shipping `component` as plugin `name`, gzipped.
fn gzipped_plugin(name: &str, component: &[u8]) -> ConfigMap {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(component).unwrap();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"wasmloop.dev/plugin": name}},
        "binaryData": {"plugin.wasm.gz": k8s_openapi::ByteString(encoder.finish().unwrap())},
    }))
    .unwrap()
}

#[tokio::test]
async fn queued_loads_of_large_components_whose_caches_cannot_sync_hold_none_of_their_bytes() {
    let _alone = ALONE.lock().await;
    let plugins = shared().namespace("budget-loads").await.unwrap();
    let apps = shared().namespace("budget-loads-apps").await.unwrap();
    // The host may read its plugin ConfigMaps, and nothing in `apps`: the plugins' caches of
    // `apps` never sync, and each load waits out its sync timeout, compiled.
    let user = format!("host-{}", plugins.name);
    let rules = json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]);
    grant_user(&plugins, "host", &user, rules).await;
    let kubeconfig = kubeconfig_as(&user);
    let names: Vec<String> = (0..8).map(|i| format!("stamp-load-{i}")).collect();
    let settings = tempfile::NamedTempFile::new().unwrap();
    let confined: String =
        names.iter().map(|name| format!("  {}/{name}: {{namespace: {}}}\n", plugins.name, apps.name)).collect();
    std::fs::write(settings.path(), format!("plugins:\n{confined}")).unwrap();
    // Eight plugins of 60 MiB each (64 MiB is the most a component may be), about 60 KiB in
    // their ConfigMaps.
    let configmaps: Vec<ConfigMap> = names
        .iter()
        .map(|name| {
            let built =
                wasmloop_testenv::components::component_named("stamp-plugin", "stamp_plugin", "STAMP_NAME", name);
            gzipped_plugin(name, &padded(&std::fs::read(built).unwrap(), 60 * MIB as usize))
        })
        .collect();
    let cgroup = PodCgroup::like_the_pod("loads");
    let args = ["run", "--config", settings.path().to_str().unwrap(), "--plugin-namespace", &plugins.name];
    let host = Host::start_in(&cgroup, kubeconfig.path(), args);
    host.ready(Duration::from_secs(60), "the host ready, serving nothing").await;
    let (idle_kib, _) = host.memory_kib();
    host.reset_peak_memory();

    let api: Api<ConfigMap> = plugins.api();
    for configmap in &configmaps {
        api.create(&PostParams::default(), configmap).await.unwrap();
    }
    host.metric_until("wasmloop_plugins_preparing", "all eight compiled, waiting for their caches", |n| n == 8.0).await;
    let (_, peak_kib) = host.memory_kib();
    let grew = (peak_kib.saturating_sub(idle_kib)) >> 10;
    eprintln!("idle {} MiB, peak {} MiB while eight 60 MiB loads queued", idle_kib >> 10, peak_kib >> 10);
    assert!(grew < 100, "the host grew {grew} MiB over its idle {} MiB: loads hold their bytes", idle_kib >> 10);
    assert_eq!(cgroup.oom_kills(), 0);
}

/// The `wasmloop.dev/status` annotation of plugin ConfigMap `name`, once it passes `check`.
async fn configmap_status(api: &Api<ConfigMap>, name: &str, what: &str, check: impl Fn(&serde_json::Value) -> bool) {
    wasmloop_testenv::eventually(Duration::from_secs(90), what, || {
        let (api, check) = (api.clone(), &check);
        async move {
            let cm = api.get(name).await.map_err(|e| e.to_string())?;
            let text = cm.metadata.annotations.unwrap_or_default().remove("wasmloop.dev/status").unwrap_or_default();
            let status: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if check(&status) { Ok(()) } else { Err(text) }
        }
    })
    .await;
}

#[tokio::test]
async fn a_metadata_only_edit_of_a_plugin_configmap_holding_60_mib_expands_nothing() {
    let _alone = ALONE.lock().await;
    let plugins = shared().namespace("budget-edits").await.unwrap();
    let apps = shared().namespace("budget-edits-apps").await.unwrap();
    let settings = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(settings.path(), format!("plugins:\n  {}/stamp-edit: {{namespace: {}}}\n", plugins.name, apps.name))
        .unwrap();
    let host = Host::start(["run", "--config", settings.path().to_str().unwrap(), "--plugin-namespace", &plugins.name]);
    let built =
        wasmloop_testenv::components::component_named("stamp-plugin", "stamp_plugin", "STAMP_NAME", "stamp-edit");
    let configmap = gzipped_plugin("stamp-edit", &padded(&std::fs::read(built).unwrap(), 60 * MIB as usize));
    let api: Api<ConfigMap> = plugins.api();
    api.create(&PostParams::default(), &configmap).await.unwrap();
    configmap_status(&api, "stamp-edit", "the plugin serving", |s| s["plugin"] == "stamp-edit").await;
    // Then an edit the host answers: once its refusal shows, the edits before it were read.
    let caught_up = async {
        let patch = json!({"metadata": {"annotations": {"wasmloop.dev/track": "caught-up"}}});
        api.patch("stamp-edit", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        configmap_status(&api, "stamp-edit", "the last edit's refusal", |s| {
            s["lastError"].as_str().is_some_and(|e| e.contains("caught-up"))
        })
        .await;
    };
    let per_edit_ms = cpu_per_edit(&host, &api, "stamp-edit", caught_up).await;
    assert!(per_edit_ms < 5.0, "{per_edit_ms:.1} ms of host CPU per metadata-only edit");
}

/// The host's CPU per metadata-only edit of ConfigMap `name`, in milliseconds: 20 edits, then
/// one whose answer (`caught_up` waits for it) says the host has read them all; the host's
/// idle CPU over as long is taken off.
async fn cpu_per_edit(host: &Host, api: &Api<ConfigMap>, name: &str, caught_up: impl Future<Output = ()>) -> f64 {
    let idle = host.cpu_time();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_per_second = (host.cpu_time() - idle).as_secs_f64() / 5.0;
    let (started, cpu) = (Instant::now(), host.cpu_time());
    const EDITS: u32 = 20;
    for i in 0..EDITS {
        let patch = json!({"metadata": {"annotations": {"example.com/edited": i.to_string()}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    caught_up.await;
    let spent = (host.cpu_time() - cpu).as_secs_f64() - idle_per_second * started.elapsed().as_secs_f64();
    let per_edit_ms = 1000.0 * spent.max(0.0) / f64::from(EDITS + 1);
    eprintln!("{per_edit_ms:.1} ms of host CPU per metadata-only edit of {name} ({idle_per_second:.3} s/s idle)");
    per_edit_ms
}

#[tokio::test]
async fn a_metadata_only_edit_of_the_configmap_behind_a_wasmplugin_expands_nothing() {
    let _alone = ALONE.lock().await;
    let plugins = shared().namespace("budget-wp-edits").await.unwrap();
    let apps = shared().namespace("budget-wp-edits-apps").await.unwrap();
    let wasmplugins = plugins.install_crd(Path::new(WASMPLUGIN_CRD)).await;
    let settings = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(settings.path(), format!("plugins:\n  {}/stamp-wp: {{namespace: {}}}\n", plugins.name, apps.name))
        .unwrap();
    let host = Host::start(["run", "--config", settings.path().to_str().unwrap(), "--plugin-namespace", &plugins.name]);
    let built = wasmloop_testenv::components::component_named("stamp-plugin", "stamp_plugin", "STAMP_NAME", "stamp-wp");
    // The component's ConfigMap, as `bundle --wasmplugin` ships it (no plugin label), gzipped.
    let mut component =
        gzipped_plugin("stamp-wp-component", &padded(&std::fs::read(built).unwrap(), 60 * MIB as usize));
    component.metadata.labels = None;
    let api: Api<ConfigMap> = plugins.api();
    api.create(&PostParams::default(), &component).await.unwrap();
    let plugin = serde_json::from_value(json!({
        "apiVersion": "wasmloop.dev/v1alpha1", "kind": "WasmPlugin", "metadata": {"name": "stamp-wp"},
        "spec": {"configMapRef": {"name": "stamp-wp-component"}},
    }))
    .unwrap();
    wasmplugins.create(&PostParams::default(), &plugin).await.unwrap();
    status(&wasmplugins, "stamp-wp", "the WasmPlugin serving", |s| is(s, "Ready", "True", "Serving")).await;
    // Then an edit the host answers: the component gone, the version serving keeps serving,
    // degraded.
    let caught_up = async {
        let patch = json!({"binaryData": null});
        api.patch("stamp-wp-component", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        status(&wasmplugins, "stamp-wp", "the component's removal refused", |s| {
            is(s, "Degraded", "True", "InvalidWasmPlugin")
        })
        .await;
    };
    let per_edit_ms = cpu_per_edit(&host, &api, "stamp-wp-component", caught_up).await;
    assert!(per_edit_ms < 5.0, "{per_edit_ms:.1} ms of host CPU per metadata-only edit");
}
