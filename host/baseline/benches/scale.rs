//! Scale: what one plugin costs in memory against a native kube-rs controller doing the same
//! nothing, as the objects it watches grow.
//!
//! For each count N in `SCALE_COUNTS` (default `0,1000,10000`): a fresh namespace holding N
//! ConfigMaps with ~1 KB of data each, server-side applied (so they carry `managedFields`, as
//! real objects do). Then each controller in turn, scoped to that namespace: started, waited for
//! until it has reconciled all N (`wasmloop_reconciles_total`; the native one prints when it
//! has), left 2 s to settle, and measured: RSS (`VmRSS`) after sync and peak RSS (`VmHWM`),
//! which is where the initial list's spike shows. N = 0 gives the fixed cost; the growth from
//! it, divided by N, is the cost per object, reported beside the object's JSON size.
//!
//! - native: `configmap-controller-native`, a kube-rs `Controller` over ConfigMaps whose
//!   reconcile does nothing (its reflector store keeps every object, as any controller's does);
//! - wasmloop: `wasmloop run` with the `noop` guest, whose primary is ConfigMap and whose
//!   reconcile returns no action, confined to the namespace by `host.yaml`.
//!
//! Then ten plugins over the same `TEN_AT` ConfigMaps (default 5,000): one wasmloop process
//! serving ten no-op plugins (the `noop` guest built ten times, `NOOP_NAME=noop-0..9`),
//! against ten native controllers, one process each, summed.
//!
//! `scripts/bench-scale` builds the binaries in release and runs this. Knobs: `SCALE_COUNTS`
//! (comma-separated), `ROUNDS` (default 1: each count measures both sides this many times,
//! taking turns, and reports medians with the spread), `TEN_AT` (0 to skip),
//! `WASMLOOP_BIN` / `NATIVE_CM_BIN`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wasmloop_testenv::{TestNamespace, shared};

mod common;
use common::{
    binary, fill, free_address, get, median, peak_rss_mib, reconciles, remove, rss_mib, target_dir, warm_compile_cache,
};

/// How long a controller may take to reconcile every object.
const SYNC_TIMEOUT: Duration = Duration::from_secs(900);

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
}

struct Running {
    child: Child,
    /// The native controller's stdout, where it says it has reconciled every object.
    reports: Option<std::sync::mpsc::Receiver<String>>,
    /// wasmloop's metrics and probes.
    metrics: String,
    probes: String,
}

/// Starts `which` over `ns`; wasmloop serves `plugins` (name, component).
fn start(which: Which, ns: &TestNamespace, count: usize, dir: &Path, plugins: &[(String, PathBuf)]) -> Running {
    let (metrics, probes) = (free_address(), free_address());
    let mut command = match which {
        Which::Native => {
            let mut c = Command::new(binary("NATIVE_CM_BIN", target_dir().join("release/configmap-controller-native")));
            c.args(["--namespace", &ns.name, "--report-at", &count.max(1).to_string()]);
            c
        }
        Which::Wasmloop => {
            let mut c = Command::new(binary("WASMLOOP_BIN", target_dir().join("release/wasmloop")));
            let yaml = dir.join(format!("host-{}.yaml", ns.name));
            let confined: String =
                plugins.iter().map(|(name, _)| format!("  {name}: {{namespace: {}}}\n", ns.name)).collect();
            std::fs::write(&yaml, format!("plugins:\n{confined}")).unwrap();
            c.args(["run", "--plugin-identity", "host", "--metrics-bind-address", &metrics])
                .args(["--health-probe-bind-address", &probes]);
            for (_, component) in plugins {
                c.arg("--plugin").arg(component);
            }
            c.arg("--cache-dir").arg(dir).arg("--config").arg(yaml);
            c
        }
    };
    let mut child = command
        .env("KUBECONFIG", shared().kubeconfig())
        .env("RUST_LOG", "warn")
        .env("WASMLOOP_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the controller starts");
    let stdout = child.stdout.take().expect("piped");
    let (send, reports) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    let reports = (which == Which::Native).then_some(reports);
    Running { child, reports, metrics, probes }
}

/// Waits until the controller has synced and reconciled every one of `count` objects.
async fn synced(which: Which, running: &mut Running, count: usize, plugins: usize) {
    let deadline = Instant::now() + SYNC_TIMEOUT;
    loop {
        assert!(Instant::now() < deadline, "{} did not reconcile {count} objects in time", which.name());
        assert!(running.child.try_wait().unwrap().is_none(), "{} exited", which.name());
        let done = match which {
            // With nothing to reconcile, nothing is reported: a synced cache is all there is.
            Which::Native if count == 0 => true,
            Which::Native => {
                let reports = running.reports.as_ref().expect("native");
                reports.try_iter().any(|line| line == format!("reconciled {count}"))
            }
            Which::Wasmloop => {
                let ready = get(&running.probes, "/readyz").await.is_ok_and(|(code, _)| code == 200);
                ready && reconciles(&running.metrics).await >= (count * plugins) as f64
            }
        };
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Stops a controller as Kubernetes stops a pod: SIGTERM, then a kill if it is still there
/// after 10 s. Exiting on its own is what lets an instrumented host write its profile
/// (`scripts/link-order`).
fn stop(child: &mut Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().is_ok_and(|exited| exited.is_some()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

struct Measured {
    rss: f64,
    peak: f64,
}

impl Measured {
    /// The median of each figure over rounds.
    fn median(rounds: &[Measured]) -> Measured {
        Measured {
            rss: median(rounds.iter().map(|m| m.rss).collect()),
            peak: median(rounds.iter().map(|m| m.peak).collect()),
        }
    }
}

async fn measure(which: Which, ns: &TestNamespace, count: usize, dir: &Path) -> Measured {
    let plugins = [("noop".to_owned(), dir.join("noop.wasm"))];
    let mut running = start(which, ns, count, dir, &plugins);
    synced(which, &mut running, count, 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = running.child.id();
    let measured = Measured { rss: rss_mib(pid), peak: peak_rss_mib(pid) };
    stop(&mut running.child);
    println!(
        "  {count:>6} ConfigMaps  {:<15} rss {:>7.1} MiB   peak {:>7.1} MiB",
        which.name(),
        measured.rss,
        measured.peak
    );
    measured
}

/// The `noop` guest built as plugin `name` (`NOOP_NAME`), copied to `dir/<name>.wasm`: cargo
/// rebuilds only the guest crate when the name changes.
fn noop_named(name: Option<&str>, dir: &Path) -> PathBuf {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.args(["build", "--release", "--target", "wasm32-wasip2", "-p", "noop-plugin"]);
    match name {
        Some(name) => cargo.env("NOOP_NAME", name),
        None => cargo.env_remove("NOOP_NAME"),
    };
    let status = cargo.env("CARGO_TARGET_DIR", target_dir()).stdout(Stdio::null()).status().expect("cargo runs");
    assert!(status.success(), "building the noop guest failed");
    let copy = dir.join(format!("{}.wasm", name.unwrap_or("noop")));
    std::fs::copy(target_dir().join("wasm32-wasip2/release/noop_plugin.wasm"), &copy).unwrap();
    warm_compile_cache(dir, &copy);
    copy
}

/// Ten plugins over `count` ConfigMaps: ten native processes, summed, against one wasmloop.
async fn ten(count: usize, dir: &Path) {
    let plugins: Vec<(String, PathBuf)> = (0..10)
        .map(|k| {
            let name = format!("noop-{k}");
            let component = noop_named(Some(&name), dir);
            (name, component)
        })
        .collect();
    let ns = shared().namespace(&format!("scale-ten-{count}")).await.unwrap();
    let size = fill(&ns, count).await;
    let mut natives: Vec<Running> = (0..10).map(|_| start(Which::Native, &ns, count, dir, &[])).collect();
    for running in &mut natives {
        synced(Which::Native, running, count, 1).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (mut native_rss, mut native_peak) = (0.0, 0.0);
    for running in &mut natives {
        native_rss += rss_mib(running.child.id());
        native_peak += peak_rss_mib(running.child.id());
        stop(&mut running.child);
    }
    let mut wasm = start(Which::Wasmloop, &ns, count, dir, &plugins);
    synced(Which::Wasmloop, &mut wasm, count, plugins.len()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (wasm_rss, wasm_peak) = (rss_mib(wasm.child.id()), peak_rss_mib(wasm.child.id()));
    stop(&mut wasm.child);
    remove(&ns).await;
    println!("\nten plugins over the same {count} ConfigMaps ({size} B each as served):");
    println!("| ten plugins, {count} ConfigMaps | ten native processes (sum) | wasmloop, one process | ratio |");
    println!("|---|---|---|---|");
    println!("| RSS after sync | {native_rss:.1} MiB | {wasm_rss:.1} MiB | {:.2}× |", wasm_rss / native_rss);
    println!("| peak RSS | {native_peak:.1} MiB | {wasm_peak:.1} MiB | {:.2}× |", wasm_peak / native_peak);
}

fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasmloop-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::main]
async fn main() {
    let counts: Vec<usize> = std::env::var("SCALE_COUNTS")
        .unwrap_or_else(|_| "0,1000,10000".into())
        .split(',')
        .map(|c| c.trim().parse().expect("SCALE_COUNTS: comma-separated numbers"))
        .collect();
    let ten_at: usize = std::env::var("TEN_AT").ok().and_then(|v| v.parse().ok()).unwrap_or(5000);
    let dir = scratch_dir();
    noop_named(None, &dir);
    println!("one plugin over N ConfigMaps (~1 KB of data each, server-side applied)");
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let mut rows = Vec::new();
    let mut turn = 0;
    for &count in &counts {
        let ns = shared().namespace(&format!("scale-{count}")).await.unwrap();
        let size = fill(&ns, count).await;
        let (mut natives, mut wasms) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            // Alternate who goes first, so neither always meets a warmer API server.
            let order = if turn % 2 == 0 { [Which::Native, Which::Wasmloop] } else { [Which::Wasmloop, Which::Native] };
            turn += 1;
            for which in order {
                let measured = measure(which, &ns, count, &dir).await;
                match which {
                    Which::Native => natives.push(measured),
                    Which::Wasmloop => wasms.push(measured),
                }
            }
        }
        remove(&ns).await;
        rows.push((count, size, Measured::median(&natives), Measured::median(&wasms)));
        if rounds > 1 {
            let spread = |ms: &[Measured], f: fn(&Measured) -> f64| {
                let values: Vec<f64> = ms.iter().map(f).collect();
                let (lo, hi) =
                    (values.iter().copied().fold(f64::MAX, f64::min), values.iter().copied().fold(0.0, f64::max));
                format!("{lo:.1}-{hi:.1} MiB")
            };
            println!(
                "  {count} ConfigMaps over {rounds} rounds: RSS native {}, wasmloop {}; peak native {}, wasmloop {}",
                spread(&natives, |m| m.rss),
                spread(&wasms, |m| m.rss),
                spread(&natives, |m| m.peak),
                spread(&wasms, |m| m.peak),
            );
        }
    }
    println!(
        "\n| ConfigMaps | JSON per object | native RSS | wasmloop RSS | ratio | native peak | wasmloop peak | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (count, size, native, wasm) in &rows {
        println!(
            "| {count} | {size} B | {:.1} MiB | {:.1} MiB | {:.2}× | {:.1} MiB | {:.1} MiB | {:.2}× |",
            native.rss,
            wasm.rss,
            wasm.rss / native.rss,
            native.peak,
            wasm.peak,
            wasm.peak / native.peak
        );
    }
    if let Some((_, _, native0, wasm0)) = rows.iter().find(|(count, ..)| *count == 0) {
        println!("\n| ConfigMaps | JSON per object | native per object | wasmloop per object | ratio |");
        println!("|---|---|---|---|---|");
        for (count, size, native, wasm) in rows.iter().filter(|(count, ..)| *count > 0) {
            let per = |m: &Measured, zero: &Measured| (m.rss - zero.rss) * 1024.0 * 1024.0 / *count as f64;
            let (n, w) = (per(native, native0), per(wasm, wasm0));
            println!("| {count} | {size} B | {n:.0} B | {w:.0} B | {:.2}× |", w / n);
        }
    }
    if ten_at > 0 {
        ten(ten_at, &dir).await;
        // Leave the guest as the workspace builds it.
        noop_named(None, &dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
