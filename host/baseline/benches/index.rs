//! Index: what a related change costs as the namespace grows, through contract 0.3's index
//! and without one.
//!
//! For each count N in `INDEX_COUNTS` (default `50,5000`): a fresh namespace holding N
//! Deployments, each mounting a ConfigMap of its own, three of them also mounting `settings`.
//! Then each side in turn, scoped to the namespace, started, waited for until it has
//! reconciled all N, and `settings` changed `CHANGES` times (default 30), one at a time, each
//! waited for until it has been mapped:
//!
//! - native: `deployment-mapper-native`, a kube-rs `Controller` whose ConfigMap mapper reads
//!   every Deployment in its reflector store (kube-runtime has no index), timed around the
//!   scan alone;
//! - wasmloop, index: the `mapper` guest's `map` through `cache.list-by-index`;
//! - wasmloop, scan: the same guest reading every Deployment through `cache.list-objects`, as a
//!   0.2 plugin had to.
//!
//! wasmloop's figure is its `wasmloop_map_duration_seconds` histogram (the whole `map` call: a
//! fresh instance, the look-ups, the result), its mean over the changes. What each side read
//! comes from its own line (`mapped settings: K found, M read`).
//!
//! `scripts/bench-index` builds the binaries in release and runs this. Knobs: `INDEX_COUNTS`
//! (comma-separated), `CHANGES`, `WASMLOOP_BIN` / `NATIVE_MAPPER_BIN`.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, shared};

mod common;
use common::{binary, free_address, get, median, reconciles, remove, target_dir, warm_compile_cache};

const TIMEOUT: Duration = Duration::from_secs(900);
/// Deployments that mount `settings`, whatever N.
const MATCHING: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Native,
    Index,
    Scan,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Native => "native kube-rs (store scan)",
            Side::Index => "wasmloop, index",
            Side::Scan => "wasmloop, scan",
        }
    }
}

fn deployment(i: usize) -> serde_json::Value {
    let mut volumes = vec![json!({"name": "own", "configMap": {"name": format!("cm-{i}")}})];
    if i < MATCHING {
        volumes.push(json!({"name": "settings", "configMap": {"name": "settings"}}));
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("d-{i}")},
        "spec": {"selector": {"matchLabels": {"app": "index-bench"}},
                 "template": {"metadata": {"labels": {"app": "index-bench"}},
                              "spec": {"volumes": volumes, "containers": [{"name": "c", "image": "nginx"}]}}}
    })
}

async fn fill(ns: &TestNamespace, count: usize) {
    let api: Api<Deployment> = ns.api();
    let params = PatchParams::apply("index-bench").force();
    futures::stream::iter(0..count)
        .for_each_concurrent(50, |i| {
            let (api, params) = (api.clone(), params.clone());
            async move {
                api.patch(&format!("d-{i}"), &params, &Patch::Apply(deployment(i))).await.unwrap();
            }
        })
        .await;
    change(ns, 0).await;
}

async fn change(ns: &TestNamespace, round: usize) {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                      "data": {"round": round.to_string()}});
    let api: Api<ConfigMap> = ns.api();
    api.patch("settings", &PatchParams::apply("index-bench").force(), &Patch::Apply(body)).await.unwrap();
}

struct Running {
    child: Child,
    lines: Receiver<String>,
    metrics: String,
    probes: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every line of `stream`, as it comes.
fn lines(stream: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stream).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    lines
}

fn start(side: Side, ns: &TestNamespace, count: usize, dir: &Path) -> Running {
    let (metrics, probes) = (free_address(), free_address());
    let mut command = if side == Side::Native {
        let mut c = Command::new(binary("NATIVE_MAPPER_BIN", target_dir().join("release/deployment-mapper-native")));
        c.args(["--namespace", &ns.name, "--report-at", &count.to_string()]);
        c.stdout(Stdio::piped()).stderr(Stdio::inherit());
        c
    } else {
        let mode = if side == Side::Index { "index" } else { "scan" };
        let yaml = dir.join(format!("host-{}-{mode}.yaml", ns.name));
        std::fs::write(&yaml, format!("plugins:\n  mapper: {{namespace: {}, config: {{mode: {mode}}}}}\n", ns.name))
            .unwrap();
        let mut c = Command::new(binary("WASMLOOP_BIN", target_dir().join("release/wasmloop")));
        c.args(["run", "--plugin-identity", "host", "--metrics-bind-address", &metrics])
            .args(["--health-probe-bind-address", &probes, "--plugin"])
            .arg(dir.join("mapper.wasm"))
            .arg("--cache-dir")
            .arg(dir)
            .arg("--config")
            .arg(yaml);
        // The guest's lines are info, in the host's log on stderr.
        c.stdout(Stdio::null()).stderr(Stdio::piped()).env("WASMLOOP_LOG", "info");
        c
    };
    let mut child = command.env("KUBECONFIG", shared().kubeconfig()).spawn().expect("the controller starts");
    let stream: Box<dyn std::io::Read + Send> = match side {
        Side::Native => Box::new(child.stdout.take().expect("piped")),
        _ => Box::new(child.stderr.take().expect("piped")),
    };
    Running { lines: lines(stream), child, metrics, probes }
}

async fn synced(side: Side, running: &mut Running, count: usize) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        assert!(Instant::now() < deadline, "{} did not reconcile {count} Deployments in time", side.name());
        assert!(running.child.try_wait().unwrap().is_none(), "{} exited", side.name());
        let done = match side {
            Side::Native => running.lines.try_iter().any(|line| line == format!("reconciled {count}")),
            _ => {
                let ready = get(&running.probes, "/readyz").await.is_ok_and(|(code, _)| code == 200);
                ready && reconciles(&running.metrics).await >= count as f64
            }
        };
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `mapped settings: K found, M read` (and, natively, `in T ns`) out of a line, as (K, M, T).
fn mapped(line: &str) -> Option<(usize, usize, Option<f64>)> {
    let at = line
        .find("mapped ConfigMap settings: ")
        .map(|i| i + 27)
        .or_else(|| line.strip_prefix("mapped settings: ").map(|rest| line.len() - rest.len()))?;
    let words: Vec<&str> = line[at..].split([' ', ',', '"', '\\']).filter(|w| !w.is_empty()).collect();
    let found = words.first()?.parse().ok()?;
    let read = words.get(2)?.parse().ok()?;
    let nanos = (words.get(4) == Some(&"in")).then(|| words.get(5)?.parse::<f64>().ok()).flatten();
    Some((found, read, nanos))
}

/// The wasmloop histogram's (sum, count) for the mapper's `map` calls.
async fn map_histogram(metrics: &str) -> (f64, f64) {
    let (_, text) = get(metrics, "/metrics").await.unwrap_or_else(|e| panic!("{e}"));
    let value = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains(r#"plugin="mapper""#))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (value("wasmloop_map_duration_seconds_sum{"), value("wasmloop_map_duration_seconds_count{"))
}

struct Measured {
    found: usize,
    read: usize,
    /// Microseconds per mapping.
    mean: f64,
    median: Option<f64>,
}

/// Changes `settings` `changes` times on `side`, one at a time, and measures the mappings.
async fn measure(side: Side, ns: &TestNamespace, count: usize, changes: usize, dir: &Path) -> Measured {
    let mut running = start(side, ns, count, dir);
    synced(side, &mut running, count).await;
    // The first list's mappings are not the changes: wait until they stop (no line, and no
    // `map` call counted, for half a second), and leave them out.
    let mut before = (-1.0, -1.0);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let quiet = running.lines.try_iter().count() == 0;
        let now = if side == Side::Native { (0.0, 0.0) } else { map_histogram(&running.metrics).await };
        if quiet && now == before {
            break;
        }
        before = now;
    }
    let (mut seen, mut times) = (Vec::new(), Vec::new());
    for round in 1..=changes {
        change(ns, round).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "{}: change {round} was not mapped", side.name());
            if let Some((found, read, nanos)) = running.lines.try_iter().find_map(|l| mapped(&l)) {
                seen.push((found, read));
                times.extend(nanos);
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let (found, read) = seen[seen.len() / 2];
    let measured = if side == Side::Native {
        let micros: Vec<f64> = times.iter().map(|t| t / 1_000.0).collect();
        Measured { found, read, mean: micros.iter().sum::<f64>() / micros.len() as f64, median: Some(median(micros)) }
    } else {
        // The histogram catches up with the log line within a moment.
        let mut after = map_histogram(&running.metrics).await;
        for _ in 0..100 {
            if after.1 - before.1 >= changes as f64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            after = map_histogram(&running.metrics).await;
        }
        let calls = after.1 - before.1;
        Measured { found, read, mean: (after.0 - before.0) / calls * 1e6, median: None }
    };
    println!(
        "  {count:>6} Deployments  {:<28} found {:>2}  read {:>5}  mean {:>9.1} µs{}",
        side.name(),
        measured.found,
        measured.read,
        measured.mean,
        measured.median.map(|m| format!("  median {m:.1} µs")).unwrap_or_default()
    );
    measured
}

fn counts(var: &str, default: &str) -> Vec<usize> {
    std::env::var(var).unwrap_or_else(|_| default.into()).split(',').map(|n| n.trim().parse().unwrap()).collect()
}

#[tokio::main]
async fn main() {
    let counts = counts("INDEX_COUNTS", "50,5000");
    let changes = number("CHANGES", 30);
    let dir = std::env::temp_dir().join(format!("wasmloop-index-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(target_dir().join("wasm32-wasip2/release/mapper_plugin.wasm"), dir.join("mapper.wasm"))
        .expect("the mapper guest is built (scripts/build-plugins)");
    warm_compile_cache(&dir, &dir.join("mapper.wasm"));
    let mut rows = Vec::new();
    for &count in &counts {
        let ns = shared().namespace(&format!("index-{count}")).await.unwrap();
        fill(&ns, count).await;
        let mut row = Vec::new();
        for side in [Side::Native, Side::Index, Side::Scan] {
            row.push(measure(side, &ns, count, changes, &dir).await);
        }
        remove(&ns).await;
        rows.push((count, row));
    }
    println!("\n| Deployments | side | found | read | µs per mapping (mean) | against native |");
    println!("|---|---|---|---|---|---|");
    for (count, row) in &rows {
        let native = row[0].mean;
        for (side, m) in [Side::Native, Side::Index, Side::Scan].iter().zip(row) {
            println!(
                "| {count} | {} | {} | {} | {:.1} | {:.2}× |",
                side.name(),
                m.found,
                m.read,
                m.mean,
                m.mean / native
            );
        }
    }
    if let [(small, a), .., (large, b)] = rows.as_slice() {
        println!("\nGrowth from {small} to {large} Deployments, per mapping:");
        for (i, side) in [Side::Native, Side::Index, Side::Scan].iter().enumerate() {
            println!("- {}: {:.2}×", side.name(), b[i].mean / a[i].mean);
        }
    }
}

fn number(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
