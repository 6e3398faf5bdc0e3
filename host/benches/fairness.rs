//! Fairness between plugins in one host: plugin B's reconcile latency alone, then beside a
//! hostile plugin A in each of its modes, on the real control plane.
//!
//! B is the labeler test plugin; one sample is the time from creating a Deployment to seeing
//! B's label on it through a watch, one Deployment at a time. A is the hostile test plugin
//! confined to a namespace of its own holding `OBJECTS` ConfigMaps, misbehaving on each: a
//! WASI sleep, a busy loop, spinning 900 ms of its 1 s deadline and succeeding, allocating
//! without end, a flood of Events, and a requeue storm (asking to requeue after 1 ms). Each
//! scenario starts a fresh `wasmloop run` (release build) with both plugins and default
//! settings, inside a cgroup with the memory limit and CPU quota of `deploy/`'s pod (1 CPU),
//! waits until A is busy on its objects, then samples B. `scripts/bench-fairness` runs it.
//! Knobs: `SAMPLES` (default 100), `OBJECTS` (default 50).

#[allow(dead_code)]
#[path = "../tests/common/cgroup.rs"]
mod cgroup;
mod common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{JsonLog, component};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, shared};

const LABEL: &str = "wasmloop.dev/labeled-by";

struct HostProcess {
    child: Child,
    log: JsonLog,
    _config: tempfile::NamedTempFile,
    _cgroup: cgroup::PodCgroup,
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(apps: &TestNamespace, hostile: Option<(&TestNamespace, &str)>) -> HostProcess {
    let config = tempfile::NamedTempFile::new().unwrap();
    let mut yaml = format!("plugins:\n  labeler: {{namespace: {}}}\n", apps.name);
    let mut args: Vec<std::ffi::OsString> = vec!["--plugin".into(), component("labeler_plugin").into_os_string()];
    if let Some((ns, mode)) = hostile {
        yaml.push_str(&format!("  hostile: {{namespace: {}, config: {{{mode}}}}}\n", ns.name));
        args.extend(["--plugin".into(), component("hostile_plugin").into_os_string()]);
    }
    std::fs::write(config.path(), yaml).unwrap();
    let mut all: Vec<std::ffi::OsString> =
        ["--log-format", "json", "run", "--plugin-identity", "host", "--health-probe-bind-address", "0", "--config"]
            .map(Into::into)
            .into();
    all.push(config.path().into());
    all.extend(args);
    // The pod's limits, as the kubelet would set them: one cgroup per scenario.
    let cgroup = cgroup::PodCgroup::like_the_pod(&format!("fairness-{}", apps.name));
    let mut child = cgroup
        .command(std::path::Path::new(env!("CARGO_BIN_EXE_wasmloop")), &all)
        .env("KUBECONFIG", shared().kubeconfig())
        .env("WASMLOOP_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = JsonLog::capture(child.stderr.take().unwrap());
    HostProcess { child, log, _config: config, _cgroup: cgroup }
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .unwrap()
}

/// Creates `samples` Deployments one at a time, each after the previous was labelled, and
/// returns the latencies in milliseconds, sorted.
async fn sample_labeler(apps: &TestNamespace, prefix: &str, samples: usize) -> Vec<f64> {
    let deployments: Api<Deployment> = apps.api();
    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        let name = format!("{prefix}-{i}");
        let params = WatchParams::default().fields(&format!("metadata.name={name}")).timeout(60);
        let mut watch = deployments.watch(&params, "0").await.unwrap().boxed();
        let created = Instant::now();
        deployments.create(&PostParams::default(), &deployment(&name)).await.unwrap();
        loop {
            let event = watch.try_next().await.unwrap().unwrap_or_else(|| panic!("{name} never labelled"));
            if let WatchEvent::Added(d) | WatchEvent::Modified(d) = event {
                if d.metadata.labels.unwrap_or_default().contains_key(LABEL) {
                    break;
                }
            }
        }
        latencies.push(created.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    latencies
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

#[tokio::main]
async fn main() {
    let samples: usize = std::env::var("SAMPLES").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let objects: usize = std::env::var("OBJECTS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let scenarios: [(&str, Option<&str>, &str); 7] = [
        ("solo", None, ""),
        ("sleep", Some("mode: sleep"), "sleeping on"),
        ("loop", Some("mode: loop"), "ran past its"),
        ("spin, succeeding", Some("mode: spin, ms: 900"), "spun on"),
        ("alloc", Some("mode: alloc"), "memory"),
        // No log line: the flood waits on its write budget, silently.
        ("flood", Some("mode: flood, count: 5000"), ""),
        ("requeue storm", Some("mode: requeue, intervalMs: 1"), "tick"),
    ];
    let mut rows = Vec::new();
    for (round, (name, mode, busy)) in scenarios.iter().enumerate() {
        let apps = shared().namespace(&format!("fair-apps-{round}")).await.unwrap();
        let hostile_ns = shared().namespace(&format!("fair-hostile-{round}")).await.unwrap();
        let host = start(&apps, mode.map(|m| (&hostile_ns, m)));
        host.log.wait_for("wasmloop running", None, 0.0).await;
        if mode.is_some() {
            let configmaps: Api<ConfigMap> = hostile_ns.api();
            for i in 0..objects {
                let cm = ConfigMap {
                    metadata: ObjectMeta { name: Some(format!("cm-{i}")), ..ObjectMeta::default() },
                    ..ConfigMap::default()
                };
                configmaps.create(&PostParams::default(), &cm).await.unwrap();
            }
            // A is at work on its objects before B is measured.
            if !busy.is_empty() {
                host.log.wait_for(busy, None, 0.0).await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let latencies = sample_labeler(&apps, "web", samples).await;
        let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
        println!("  {name}: p50 {p50:.1} ms, p99 {p99:.1} ms over {samples} samples");
        rows.push((*name, p50, p99));
        drop(host);
    }
    let (_, solo50, solo99) = rows[0];
    let (memory, millicores) = cgroup::deploy_limits();
    println!(
        "\nplugin B (labeler) latency, create to labelled, beside hostile plugin A on {objects} objects, the host in a cgroup of {} MiB and {millicores}m CPU:",
        memory >> 20
    );
    println!("| A's mode | B p50 | B p99 | p50 / solo | p99 / solo |\n|---|---|---|---|---|");
    for (name, p50, p99) in rows {
        println!("| {name} | {p50:.1} ms | {p99:.1} ms | {:.2}× | {:.2}× |", p50 / solo50, p99 / solo99);
    }
}
