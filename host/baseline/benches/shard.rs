//! Sharding: what each replica of `wasmloop run --shard` costs against one host running every
//! plugin, and how long a SIGKILLed replica's plugins take to move.
//!
//! Twelve plugins (the `stamp` guest built as `stamp-00` to `stamp-11`), each confined to a
//! namespace of its own holding `OBJECTS` ConfigMaps of ~1 KB (default 1,000), so each plugin
//! has its own informer and a replica's cache holds only its plugins' namespaces.
//!
//! - **Memory.** One `wasmloop run` serving all twelve, waited for until ready, left 2 s, its
//!   RSS read; then three `--shard` replicas (identities `replica-a..c`), waited for until
//!   every plugin runs on exactly one, and each replica's RSS read.
//! - **Moves.** `ROUNDS` times (default 3): SIGKILL one replica (in turn), and time until the
//!   other two run all twelve plugins again (`wasmloop_shard_running`, polled every 100 ms):
//!   the dead replica's Leases must first go a whole Lease duration unrenewed, as the
//!   survivors see them. The killed replica is then restarted and the shard left to settle.
//!
//! `scripts/bench-shard` builds the binaries in release and runs this. Knobs: `OBJECTS`,
//! `ROUNDS`, `LEASE_SECONDS` (default 15, the host's default), `WASMLOOP_BIN`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wasmloop_testenv::{TestNamespace, shared};

mod common;
use common::{binary, fill, free_address, get, median, remove, rss_mib, target_dir, warm_compile_cache};

const PLUGINS: usize = 12;
const REPLICAS: [&str; 3] = ["replica-a", "replica-b", "replica-c"];

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Host {
    child: Child,
    metrics: String,
    probes: String,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `wasmloop run` with every plugin, as `identity`; sharded with Leases in `leases` when given.
fn start(dir: &Path, plugins: &[(String, PathBuf)], config: &Path, shard: Option<(&str, &str, u64)>) -> Host {
    let (metrics, probes) = (free_address(), free_address());
    let mut command = Command::new(binary("WASMLOOP_BIN", target_dir().join("release/wasmloop")));
    command
        .args(["run", "--plugin-identity", "host", "--metrics-bind-address", &metrics])
        .args(["--health-probe-bind-address", &probes])
        .arg("--cache-dir")
        .arg(dir)
        .arg("--config")
        .arg(config);
    for (_, component) in plugins {
        command.arg("--plugin").arg(component);
    }
    if let Some((identity, leases, seconds)) = shard {
        command.args([
            "--shard",
            "--leader-election-namespace",
            leases,
            "--lease-duration-seconds",
            &seconds.to_string(),
        ]);
        command.env("POD_NAME", identity);
    }
    let child = command
        .env("KUBECONFIG", shared().kubeconfig())
        .env("WASMLOOP_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("wasmloop starts");
    Host { child, metrics, probes }
}

async fn ready(host: &Host) -> bool {
    get(&host.probes, "/readyz").await.is_ok_and(|(code, _)| code == 200)
}

/// The plugins `host` runs now.
async fn running(host: &Host) -> BTreeSet<String> {
    let Ok((_, text)) = get(&host.metrics, "/metrics").await else { return BTreeSet::new() };
    text.lines()
        .filter(|l| l.starts_with("wasmloop_shard_running{") && l.ends_with(" 1"))
        .filter_map(|l| l.split("plugin=\"").nth(1)?.split('"').next().map(str::to_owned))
        .collect()
}

/// True once each of `hosts` (named as `names`) is ready and runs exactly the plugins
/// rendezvous hashing assigns it among them, as every replica computes it.
async fn settled(hosts: &[(&str, &Host)]) -> bool {
    let members: Vec<String> = hosts.iter().map(|(n, _)| (*n).to_owned()).collect();
    for (name, host) in hosts {
        let want: BTreeSet<String> = (0..PLUGINS)
            .map(|i| format!("stamp-{i:02}"))
            .filter(|p| wasmloop::shard::hashing::owner(p, &members) == Some(*name))
            .collect();
        if !ready(host).await || running(host).await != want {
            return false;
        }
    }
    true
}

/// The replicas with their names.
fn all(replicas: &[Host]) -> Vec<(&str, &Host)> {
    REPLICAS.iter().copied().zip(replicas).collect()
}

async fn wait(what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

#[tokio::main]
async fn main() {
    let (objects, rounds, lease) = (knob("OBJECTS", 1000) as usize, knob("ROUNDS", 3), knob("LEASE_SECONDS", 15));
    let dir = tempfile_dir();
    let plugins: Vec<(String, PathBuf)> = (0..PLUGINS)
        .map(|i| {
            let name = format!("stamp-{i:02}");
            let built =
                wasmloop_testenv::components::component_named("stamp-plugin", "stamp_plugin", "STAMP_NAME", &name);
            let copy = dir.join(format!("{name}.wasm"));
            std::fs::copy(built, &copy).unwrap();
            warm_compile_cache(&dir, &copy);
            (name, copy)
        })
        .collect();
    let mut namespaces: Vec<TestNamespace> = Vec::new();
    let mut size = 0;
    for i in 0..PLUGINS {
        let ns = shared().namespace(&format!("shard-bench-{i}")).await.unwrap();
        size = fill(&ns, objects).await;
        namespaces.push(ns);
    }
    let leases = shared().namespace("shard-bench-leases").await.unwrap();
    let config = dir.join("host.yaml");
    let confined: String = plugins
        .iter()
        .zip(&namespaces)
        .map(|((name, _), ns)| format!("  {name}: {{namespace: {}}}\n", ns.name))
        .collect();
    std::fs::write(&config, format!("plugins:\n{confined}")).unwrap();
    let limit = Duration::from_secs(600);

    let single = start(&dir, &plugins, &config, None);
    wait("the single host ready", limit, async || ready(&single).await).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let single_rss = rss_mib(single.child.id());
    drop(single);

    let shard = |identity: &str| start(&dir, &plugins, &config, Some((identity, &leases.name, lease)));
    let mut replicas: Vec<Host> = REPLICAS.iter().map(|r| shard(r)).collect();
    wait("three replicas settled", limit, async || settled(&all(&replicas)).await).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let shares: Vec<(usize, f64)> =
        shares_of(&replicas).await.into_iter().zip(&replicas).map(|(n, h)| (n, rss_mib(h.child.id()))).collect();

    let mut moves = Vec::new();
    for round in 0..rounds as usize {
        let victim = round % REPLICAS.len();
        replicas[victim].child.kill().unwrap();
        replicas[victim].child.wait().unwrap();
        let survivors: Vec<(&str, &Host)> =
            all(&replicas).into_iter().enumerate().filter(|(i, _)| *i != victim).map(|(_, h)| h).collect();
        let took = wait("the dead replica's plugins moved", limit, async || settled(&survivors).await).await;
        moves.push(took.as_secs_f64());
        replicas[victim] = shard(REPLICAS[victim]);
        wait("the shard settled again", limit, async || settled(&all(&replicas)).await).await;
    }
    drop(replicas);

    println!("## Sharding ({PLUGINS} plugins, {objects} ConfigMaps of {size} B each per plugin, Lease {lease} s)\n");
    println!("| | plugins | RSS (MiB) | ratio to one host |");
    println!("|---|---|---|---|");
    println!("| one host, every plugin | {PLUGINS} | {single_rss:.1} | 1.00x |");
    for (name, (count, rss)) in REPLICAS.iter().zip(&shares) {
        println!("| `--shard` {name} | {count} | {rss:.1} | {:.2}x |", rss / single_rss);
    }
    let total: f64 = shares.iter().map(|(_, rss)| rss).sum();
    println!("| `--shard`, three replicas summed | {PLUGINS} | {total:.1} | {:.2}x |", total / single_rss);
    println!("\n| SIGKILL to every plugin running again | rounds | median | min | max |");
    println!("|---|---|---|---|---|");
    let (min, max) = moves.iter().fold((f64::MAX, 0.0f64), |(lo, hi), m| (lo.min(*m), hi.max(*m)));
    println!("| | {} | {:.2} s | {min:.2} s | {max:.2} s |", moves.len(), median(moves.clone()));
    for ns in namespaces.iter().chain([&leases]) {
        remove(ns).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

async fn shares_of(replicas: &[Host]) -> Vec<usize> {
    let mut shares = Vec::new();
    for host in replicas {
        shares.push(running(host).await.len());
    }
    shares
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasmloop-bench-shard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
