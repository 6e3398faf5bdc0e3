//! Save-to-live latency of `wasmloop dev`: from writing a new `.wasm` over the watched file
//! until the new version's first reconcile, on the real control plane.
//!
//! The component is pod-logger (~200 KB). Each version is the same component with a distinct
//! custom section appended, so its bytes (and its compile-cache key) differ:
//! - **cold**: a version never seen before: read, compile, validate, swap, reconcile;
//! - **cached**: versions alternate between two already compiled: a deserialize instead of a
//!   compile.
//!
//! The time is read from the host's own JSON log: the first `reconciled` line after the write
//! (the cluster is quiet, so the old version has nothing to reconcile meanwhile).
//! `scripts/bench-reload` runs it. Knobs: `COLD` (default 5) and `CACHED` (default 10) rounds.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{JsonLog, component, now_ms};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;
use wasmloop_testenv::shared;

/// Appends a custom section named `wasmloop-bench` holding `tag`: a valid component with
/// other bytes.
fn variant(base: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { byte } else { byte | 0x80 });
            if n == 0 {
                break;
            }
        }
    }
    let name = b"wasmloop-bench";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(tag.as_bytes());
    let mut out = base.to_vec();
    out.push(0);
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

/// Writes `bytes` as the watched file, atomically (as cargo and editors do), and returns when
/// (milliseconds since the epoch).
fn publish(file: &Path, bytes: &[u8]) -> f64 {
    let staging = file.with_extension("wasm.tmp");
    std::fs::write(&staging, bytes).unwrap();
    let at = now_ms();
    std::fs::rename(&staging, file).unwrap();
    at
}

fn stats(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(f64::total_cmp);
    let median = samples[samples.len() / 2];
    println!(
        "| {name} | {} | {median:.0} ms | {:.0} ms | {:.0} ms |",
        samples.len(),
        samples[0],
        samples[samples.len() - 1]
    );
}

async fn measure(file: &Path, log: &JsonLog, bytes: &[u8]) -> f64 {
    // Let the previous swap settle, so each round starts from a quiet host.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let written = publish(file, bytes);
    let live = log.wait_for("reconciled", None, written).await;
    log.wait_for("serving, replacing", None, written).await;
    live - written
}

#[tokio::main]
async fn main() {
    let cold_rounds: usize = std::env::var("COLD").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let cached_rounds: usize = std::env::var("CACHED").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let base = std::fs::read(component("pod_logger")).unwrap();
    let ns = shared().namespace("bench-reload").await.unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "subject"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(ns.client.clone(), &ns.name).create(&PostParams::default(), &pod).await.unwrap();

    let dir = std::env::temp_dir().join(format!("wasmloop-bench-reload-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("cache")).unwrap();
    let file = dir.join("pod_logger.wasm");
    std::fs::write(&file, variant(&base, "start")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .args(["--log-format", "json", "dev"])
        .arg(&file)
        .args(["--health-probe-bind-address", "0", "--cache-dir"])
        .arg(dir.join("cache"))
        .env("KUBECONFIG", shared().kubeconfig())
        .env("WASMLOOP_LOG", "info,wasmloop_runtime::controller=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = JsonLog::capture(child.stderr.take().unwrap());
    log.wait_for("watching for changes", None, 0.0).await;
    log.wait_for("reconciled", None, 0.0).await;

    let mut cold = Vec::new();
    for i in 0..cold_rounds {
        cold.push(measure(&file, &log, &variant(&base, &format!("cold-{i}"))).await);
    }
    // Compile the two cached versions once, then alternate between them.
    let (a, b) = (variant(&base, "cached-a"), variant(&base, "cached-b"));
    measure(&file, &log, &a).await;
    measure(&file, &log, &b).await;
    let mut cached = Vec::new();
    for i in 0..cached_rounds {
        cached.push(measure(&file, &log, if i % 2 == 0 { &a } else { &b }).await);
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    println!("save-to-live, pod-logger ({} KB component)", base.len() / 1024);
    println!("| case | rounds | median | min | max |\n|---|---|---|---|---|");
    stats("cold (compile)", cold);
    stats("cached (deserialize)", cached);
}
