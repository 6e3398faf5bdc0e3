//! End-to-end convergence of many Foos on the real control plane: `wasmloop run` with the
//! foo-deployment component against `foo-controller-native`, the same logic as a kube-rs
//! `Controller`, on one control plane in one run.
//!
//! For each controller, in a fresh namespace: start it and wait until it runs, create the
//! Foos (20 at a time), and poll until every Deployment has the right replicas and every
//! Foo's status is set. Reports wall time from the first create to convergence, the
//! controller process's CPU seconds over the same span, and its peak RSS.
//!
//! `scripts/bench-convergence` builds both binaries in release and runs this. Knobs:
//! `FOOS` (default 1000), `ROUNDS` (default 3; the controllers alternate), and
//! `WASMLOOP_BIN` / `NATIVE_BIN` (default: the release binaries in the target directory).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, shared};

const CRD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../plugins/foo-deployment/deploy/crd.yaml");

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

fn binary(var: &str, default: PathBuf) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    assert!(path.exists(), "{} is missing: run scripts/bench-convergence, which builds it", path.display());
    path
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Native,
    Wasmloop,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Native => "native kube-rs",
            Which::Wasmloop => "wasmloop",
        }
    }

    fn start(self, kubeconfig: &Path, cache: &Path) -> Child {
        let mut command = match self {
            Which::Native => Command::new(binary("NATIVE_BIN", target_dir().join("release/foo-controller-native"))),
            Which::Wasmloop => {
                let mut c = Command::new(binary("WASMLOOP_BIN", target_dir().join("release/wasmloop")));
                let component = target_dir().join("wasm32-wasip2/release/foo_deployment.wasm");
                // As the admin, like the native controller: both send the same requests.
                c.args(["run", "--plugin-identity", "host", "--health-probe-bind-address", "0", "--plugin"])
                    .arg(component)
                    .arg("--cache-dir")
                    .arg(cache);
                c
            }
        };
        command
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .env("WASMLOOP_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the controller starts")
    }
}

/// CPU seconds (user + system) a process has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the controller runs");
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / clock_ticks()
}

fn clock_ticks() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().expect("getconf runs");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(100.0)
}

/// Peak resident set size in MiB, from /proc.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the controller runs");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
    line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap() / 1024.0
}

fn foo(i: usize) -> DynamicObject {
    let name = format!("foo-{i}");
    serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": name},
        "spec": {"deploymentName": name, "replicas": 1 + i % 3}
    }))
    .unwrap()
}

async fn converged(ns: &TestNamespace, foos: &Api<DynamicObject>, count: usize) -> bool {
    let deployments: Api<Deployment> = ns.api();
    let Ok(listed) = deployments.list(&ListParams::default()).await else { return false };
    let right = listed
        .items
        .iter()
        .filter(|d| {
            let i: usize = d.metadata.name.as_deref().unwrap_or("foo-x")["foo-".len()..].parse().unwrap_or(usize::MAX);
            d.spec.as_ref().and_then(|s| s.replicas) == Some(1 + (i % 3) as i32)
        })
        .count();
    if right < count {
        return false;
    }
    let Ok(listed) = foos.list(&ListParams::default()).await else { return false };
    listed.items.iter().filter(|f| f.data["status"]["availableReplicas"] == 0).count() == count
}

struct Measured {
    wall: f64,
    cpu: f64,
    rss: f64,
}

async fn measure(which: Which, count: usize, round: usize, cache: &Path) -> Measured {
    let ns = shared()
        .namespace(&format!("bench-{}-{round}", if which == Which::Native { "native" } else { "wasm" }))
        .await
        .unwrap();
    let foos = ns.install_crd(Path::new(CRD)).await;
    let mut child = which.start(&shared().kubeconfig(), cache);
    let pid = child.id();
    // Both start in well under a second; give each the same settling time.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(child.try_wait().unwrap().is_none(), "{} exited at start", which.name());
    let cpu_before = cpu_seconds(pid);
    let started = Instant::now();
    futures::stream::iter(0..count)
        .for_each_concurrent(20, |i| {
            let foos = foos.clone();
            async move {
                foos.create(&PostParams::default(), &foo(i)).await.unwrap();
            }
        })
        .await;
    let deadline = Instant::now() + Duration::from_secs(600);
    while !converged(&ns, &foos, count).await {
        assert!(Instant::now() < deadline, "{} did not converge within 600 s", which.name());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wall = started.elapsed().as_secs_f64();
    let measured = Measured { wall, cpu: cpu_seconds(pid) - cpu_before, rss: peak_rss_mib(pid) };
    let _ = child.kill();
    let _ = child.wait();
    remove(&ns).await;
    println!(
        "  round {round} {:<15} wall {:>6.2} s   cpu {:>6.2} s   peak rss {:>6.1} MiB",
        which.name(),
        measured.wall,
        measured.cpu,
        measured.rss
    );
    measured
}

/// Deletes the namespace and waits until it is gone, so the next controller's first list
/// does not meet this round's objects.
async fn remove(ns: &TestNamespace) {
    let namespaces: Api<Namespace> = Api::all(ns.client.clone());
    namespaces.delete(&ns.name, &DeleteParams::default()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    while namespaces.get_opt(&ns.name).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "namespace {} still there after 600 s", ns.name);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 0 { (values[middle - 1] + values[middle]) / 2.0 } else { values[middle] }
}

/// Compiles the component into the run's cache, as a host that restarts (or a standby) has it:
/// every measured start deserializes instead of compiling.
fn warm_compile_cache(cache: &Path) {
    let wasmloop = binary("WASMLOOP_BIN", target_dir().join("release/wasmloop"));
    let component = target_dir().join("wasm32-wasip2/release/foo_deployment.wasm");
    let status = Command::new(wasmloop)
        .arg("inspect")
        .arg(component)
        .arg("--cache-dir")
        .arg(cache)
        .stdout(Stdio::null())
        .status()
        .expect("wasmloop inspect runs");
    assert!(status.success(), "wasmloop inspect foo_deployment.wasm failed");
}

#[tokio::main]
async fn main() {
    let count: usize = std::env::var("FOOS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let cache = tempfile_dir();
    warm_compile_cache(&cache);
    println!("convergence of {count} Foos, {rounds} round(s), controllers alternating");
    let mut results: Vec<(Which, Measured)> = Vec::new();
    for round in 0..rounds {
        // Alternate who goes first, so neither always meets a warmer API server.
        let order = if round % 2 == 0 { [Which::Native, Which::Wasmloop] } else { [Which::Wasmloop, Which::Native] };
        for which in order {
            results.push((which, measure(which, count, round, &cache).await));
        }
    }
    let pick = |which: Which, f: fn(&Measured) -> f64| {
        median(results.iter().filter(|(w, _)| *w == which).map(|(_, m)| f(m)).collect())
    };
    println!("\nmedians over {rounds} round(s):");
    println!("| {count} Foos | native kube-rs | wasmloop | ratio |");
    println!("|---|---|---|---|");
    for (what, f, unit) in [
        ("wall time", (|m: &Measured| m.wall) as fn(&Measured) -> f64, "s"),
        ("controller CPU", |m: &Measured| m.cpu, "s"),
        ("peak RSS", |m: &Measured| m.rss, "MiB"),
    ] {
        let (native, wasm) = (pick(Which::Native, f), pick(Which::Wasmloop, f));
        println!("| {what} | {native:.2} {unit} | {wasm:.2} {unit} | {:.2}× |", wasm / native);
    }
    let _ = std::fs::remove_dir_all(&cache);
}

/// The compiled-component cache of this run, so the host deserializes after its first start.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasmloop-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
