//! End-to-end convergence of many Foos on the real control plane: `wasmloop run` with the
//! foo-deployment component against `foo-controller-native`, the same logic as a kube-rs
//! `Controller`, on one control plane in one run.
//!
//! For each controller, in a fresh namespace: start it and wait until it runs, create the
//! Foos (20 at a time), and poll until every Deployment has the right replicas and every
//! Foo's status is set. Reports wall time from the first create to convergence, the
//! controller process's CPU seconds over the same span, and its peak RSS.
//!
//! Two more wasmloop runs measure what safe rollout costs: with `--record-dir` (every call
//! recorded to a fresh directory) and with `--shadow` (foo-deployment-next called beside the
//! serving version on every reconcile). For the wasmloop runs it also reads the reconciles
//! the host counted (`/metrics`), for CPU per reconcile.
//!
//! `scripts/bench-convergence` builds both binaries in release and runs this. Knobs:
//! `FOOS` (default 1000; a comma-separated list such as `1000,5000,10000` runs each size in
//! turn and reports how wall time and CPU grow with N), `ROUNDS` (default 3; the controllers
//! take turns going first), `CONTROLLERS` (default `native,wasmloop,record,shadow`),
//! `PERF_DIR` (when set, every controller runs under `perf record -g`, one file per run, for
//! a CPU profile of where the time goes, and each wasmloop run's `/metrics` at convergence is
//! saved beside it), and `WASMLOOP_BIN` / `NATIVE_BIN` (default: the
//! release binaries in the target directory).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, shared};

mod common;
use common::{binary, cpu_seconds, free_address, median, peak_rss_mib, reconciles, remove, target_dir};

const CRD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../plugins/foo-deployment/deploy/crd.yaml");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Native,
    Wasmloop,
    /// wasmloop with `--record-dir`.
    Recording,
    /// wasmloop with `--shadow foo-deployment=foo_deployment_next.wasm`.
    Shadow,
}

impl Which {
    fn parse(text: &str) -> Which {
        match text {
            "native" => Which::Native,
            "wasmloop" => Which::Wasmloop,
            "record" => Which::Recording,
            "shadow" => Which::Shadow,
            other => panic!("CONTROLLERS: unknown {other:?}; use native, wasmloop, record, shadow"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Which::Native => "native kube-rs",
            Which::Wasmloop => "wasmloop",
            Which::Recording => "wasmloop+record",
            Which::Shadow => "wasmloop+shadow",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Which::Native => "native",
            Which::Wasmloop => "wasm",
            Which::Recording => "record",
            Which::Shadow => "shadow",
        }
    }

    /// Starts the controller; a wasmloop one serves `/metrics` on `metrics`.
    fn start(self, kubeconfig: &Path, cache: &Path, metrics: &str, records: &Path) -> Child {
        let wasmloop = |extra: &[&std::ffi::OsStr]| {
            let mut c = Command::new(binary("WASMLOOP_BIN", target_dir().join("release/wasmloop")));
            let component = target_dir().join("wasm32-wasip2/release/foo_deployment.wasm");
            // As the admin, like the native controller: both send the same requests. The write
            // budget is raised out of the way, as the native controller has none: at the
            // default 50 writes per second, 1,000 Foos (3,000 writes) take a minute.
            c.args(["run", "--plugin-identity", "host", "--health-probe-bind-address", "0"])
                .args(["--metrics-bind-address", metrics, "--plugin"])
                .arg(component)
                .arg("--cache-dir")
                .arg(cache)
                .arg("--config")
                .arg(cache.join("host.yaml"))
                .args(extra);
            c
        };
        let mut shadow = std::ffi::OsString::from("foo-deployment=");
        shadow.push(target_dir().join("wasm32-wasip2/release/foo_deployment_next.wasm"));
        let mut command = match self {
            Which::Native => Command::new(binary("NATIVE_BIN", target_dir().join("release/foo-controller-native"))),
            Which::Wasmloop => wasmloop(&[]),
            Which::Recording => wasmloop(&["--record-dir".as_ref(), records.as_os_str()]),
            Which::Shadow => wasmloop(&["--shadow".as_ref(), shadow.as_os_str()]),
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
            d.spec.replicas == Some(1 + (i % 3) as i32)
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
    /// Reconciles the host counted; none for the native controller.
    reconciles: Option<f64>,
}

async fn measure(which: Which, count: usize, round: usize, cache: &Path) -> Measured {
    let ns = shared().namespace(&format!("bench-{}-{round}", which.slug())).await.unwrap();
    let foos = ns.install_crd(Path::new(CRD)).await;
    let (address, records) = (free_address(), cache.join(format!("records-{round}")));
    let mut child = which.start(shared().kubeconfig(), cache, &address, &records);
    let pid = child.id();
    let profiler = profile(pid, &format!("{}-{count}-{round}", which.slug()));
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
    // Each poll lists every Foo and Deployment: at 10,000 of each, ten a second would load the
    // API server both controllers share more than the controllers do.
    let poll = Duration::from_millis((count as u64 / 10).clamp(100, 1000));
    let deadline = Instant::now() + Duration::from_secs(1800);
    while !converged(&ns, &foos, count).await {
        assert!(Instant::now() < deadline, "{} did not converge within 1800 s", which.name());
        tokio::time::sleep(poll).await;
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu_before;
    let reconciles = if which == Which::Native { None } else { Some(reconciles(&address).await) };
    if let (Some(dir), false) = (std::env::var_os("PERF_DIR"), which == Which::Native) {
        // The host's own account of the run (queue, retries, reconcile durations) beside the profile.
        let (_, text) = common::get(&address, "/metrics").await.unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(Path::new(&dir).join(format!("{}-{count}-{round}.metrics", which.slug())), text).unwrap();
    }
    let measured = Measured { wall, cpu, rss: peak_rss_mib(pid), reconciles };
    if let Some(mut perf) = profiler {
        // SIGINT makes perf write its file and exit.
        let _ = Command::new("kill").args(["-INT", &perf.id().to_string()]).status();
        let _ = perf.wait();
    }
    let _ = child.kill();
    let _ = child.wait();
    remove(&ns).await;
    let _ = std::fs::remove_dir_all(&records);
    println!(
        "  {count} Foos, round {round} {:<15} wall {:>6.2} s   cpu {:>6.2} s   peak rss {:>6.1} MiB   reconciles {}",
        which.name(),
        measured.wall,
        measured.cpu,
        measured.rss,
        measured.reconciles.map_or("-".to_owned(), |r| format!("{r:.0}")),
    );
    measured
}

/// With `PERF_DIR` set, `perf record -g` on the controller, sampling from before the first
/// create until it is stopped at convergence.
fn profile(pid: u32, name: &str) -> Option<Child> {
    let dir = PathBuf::from(std::env::var_os("PERF_DIR")?);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("{name}.data"));
    let child = Command::new("perf")
        .args(["record", "-g", "-F", "499", "-q", "-p", &pid.to_string(), "-o"])
        .arg(&out)
        .stdout(Stdio::null())
        .spawn()
        .expect("perf runs (PERF_DIR is set)");
    Some(child)
}

/// Compiles the component into the run's cache, as a host that restarts (or a standby) has it:
/// every measured start deserializes instead of compiling.
fn warm_compile_cache(cache: &Path) {
    let wasmloop = binary("WASMLOOP_BIN", target_dir().join("release/wasmloop"));
    // The serving component, and the shadow's.
    for name in ["foo_deployment", "foo_deployment_next"] {
        let component = target_dir().join(format!("wasm32-wasip2/release/{name}.wasm"));
        let status = Command::new(&wasmloop)
            .arg("inspect")
            .arg(component)
            .arg("--cache-dir")
            .arg(cache)
            .stdout(Stdio::null())
            .status()
            .expect("wasmloop inspect runs");
        assert!(status.success(), "wasmloop inspect {name}.wasm failed");
    }
}

#[tokio::main]
async fn main() {
    let counts: Vec<usize> = std::env::var("FOOS")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .map(|n| n.trim().parse().unwrap_or_else(|_| panic!("FOOS: {n:?} is not a count")))
        .collect();
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let controllers: Vec<Which> = std::env::var("CONTROLLERS")
        .unwrap_or_else(|_| "native,wasmloop,record,shadow".into())
        .split(',')
        .map(Which::parse)
        .collect();
    let cache = tempfile_dir();
    warm_compile_cache(&cache);
    std::fs::write(cache.join("host.yaml"), "limits: {writesPerSecond: 1000000, writeBurst: 1000000}\n").unwrap();
    let mut medians: Vec<(usize, Which, Medians)> = Vec::new();
    for &count in &counts {
        println!("convergence of {count} Foos, {rounds} round(s), controllers taking turns");
        let mut results: Vec<(Which, Measured)> = Vec::new();
        for round in 0..rounds {
            // Rotate who goes first, so none always meets a warmer API server.
            let mut order = controllers.clone();
            let first = round % order.len();
            order.rotate_left(first);
            for which in order {
                results.push((which, measure(which, count, round, &cache).await));
            }
        }
        report(count, rounds, &controllers, &results);
        for &which in &controllers {
            let pick = |f: fn(&Measured) -> f64| {
                median(results.iter().filter(|(w, _)| *w == which).map(|(_, m)| f(m)).collect())
            };
            medians.push((count, which, Medians { wall: pick(|m| m.wall), cpu: pick(|m| m.cpu) }));
        }
    }
    if counts.len() > 1 {
        growth(&medians, &controllers);
    }
    let _ = std::fs::remove_dir_all(&cache);
}

/// Medians of one controller at one size.
struct Medians {
    wall: f64,
    cpu: f64,
}

/// How wall time and CPU grow with N: per size, each controller's medians, CPU per Foo, and
/// wasmloop's ratio to native.
fn growth(medians: &[(usize, Which, Medians)], controllers: &[Which]) {
    let both = controllers.contains(&Which::Native) && controllers.contains(&Which::Wasmloop);
    if !both {
        return;
    }
    let of = |count: usize, which: Which| {
        medians.iter().find(|(c, w, _)| *c == count && *w == which).map(|(_, _, m)| m).unwrap()
    };
    println!("\ngrowth with N (medians):");
    println!(
        "| Foos | native wall | wasmloop wall | ratio | native CPU | wasmloop CPU | ratio | native CPU per Foo | wasmloop CPU per Foo |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut counts: Vec<usize> = medians.iter().map(|(c, _, _)| *c).collect();
    counts.dedup();
    for count in counts {
        let (native, wasm) = (of(count, Which::Native), of(count, Which::Wasmloop));
        println!(
            "| {count} | {:.2} s | {:.2} s | {:.2}× | {:.2} s | {:.2} s | {:.2}× | {:.3} ms | {:.3} ms |",
            native.wall,
            wasm.wall,
            wasm.wall / native.wall,
            native.cpu,
            wasm.cpu,
            wasm.cpu / native.cpu,
            1e3 * native.cpu / count as f64,
            1e3 * wasm.cpu / count as f64,
        );
    }
}

/// The tables of one size: native against wasmloop, and what safe rollout costs.
fn report(count: usize, rounds: usize, controllers: &[Which], results: &[(Which, Measured)]) {
    let pick = |which: Which, f: fn(&Measured) -> f64| {
        median(results.iter().filter(|(w, _)| *w == which).map(|(_, m)| f(m)).collect())
    };
    let has = |which: Which| controllers.contains(&which);
    println!("\nmedians over {rounds} round(s):");
    let metrics: [(&str, fn(&Measured) -> f64, &str); 3] =
        [("wall time", |m| m.wall, "s"), ("controller CPU", |m| m.cpu, "s"), ("peak RSS", |m| m.rss, "MiB")];
    if has(Which::Native) && has(Which::Wasmloop) {
        println!("| {count} Foos | native kube-rs | wasmloop | ratio |");
        println!("|---|---|---|---|");
        for (what, f, unit) in metrics {
            let (native, wasm) = (pick(Which::Native, f), pick(Which::Wasmloop, f));
            println!("| {what} | {native:.2} {unit} | {wasm:.2} {unit} | {:.2}× |", wasm / native);
        }
    }
    let rollout: Vec<Which> = [Which::Recording, Which::Shadow].into_iter().filter(|w| has(*w)).collect();
    if has(Which::Wasmloop) && !rollout.is_empty() {
        let per_reconcile: fn(&Measured) -> f64 = |m| 1e3 * m.cpu / m.reconciles.unwrap_or(f64::NAN);
        let throughput: fn(&Measured) -> f64 = |m| m.reconciles.unwrap_or(f64::NAN) / m.wall;
        let header: String = rollout.iter().map(|w| format!(" {} | ratio |", w.name())).collect();
        println!("\n| {count} Foos | wasmloop |{header}");
        println!("|---|---|{}", "---|---|".repeat(rollout.len()));
        let rows: [(&str, fn(&Measured) -> f64, &str); 6] = [
            ("wall time", |m| m.wall, "s"),
            ("reconciles", |m| m.reconciles.unwrap_or(f64::NAN), ""),
            ("reconciles per second", throughput, "/s"),
            ("controller CPU", |m| m.cpu, "s"),
            ("CPU per reconcile", per_reconcile, "ms"),
            ("peak RSS", |m| m.rss, "MiB"),
        ];
        for (what, f, unit) in rows {
            let base = pick(Which::Wasmloop, f);
            let cells: String = rollout
                .iter()
                .map(|w| {
                    let value = pick(*w, f);
                    format!(" {value:.2} {unit} | {:.2}× |", value / base)
                })
                .collect();
            println!("| {what} | {base:.2} {unit} |{cells}");
        }
    }
}

/// The compiled-component cache of this run, so the host deserializes after its first start.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasmloop-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
