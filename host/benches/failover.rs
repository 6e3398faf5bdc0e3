//! Failover time of leader election with the default Lease settings (15 s): from the
//! leader's SIGKILL to the first reconcile by the standby, on the real control plane.
//!
//! Each round starts two `wasmloop run --leader-elect` processes (release build) with hostile
//! in requeue mode, which reconciles a ConfigMap every 500 ms and logs a `tick`; waits until
//! the first leads and ticks and the second stands by with synced caches; kills the leader
//! with SIGKILL; and reads the standby's JSON log for its first tick. Where in the renewal
//! cycle the kill lands decides how much of the Lease is left, so the rounds spread.
//! `scripts/bench-failover` runs it. Knob: `ROUNDS` (default 5).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::Value;
use wasmloop_testenv::shared;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1000.0
}

/// One host and its JSON log lines.
struct Candidate {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Candidate {
    fn start(namespace: &str, config: &Path) -> Candidate {
        let plugin = target_dir().join("wasm32-wasip2/release/hostile_plugin.wasm");
        let mut child = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
            .args(["--log-format", "json", "run", "--health-probe-bind-address", "0", "--plugin"])
            .arg(plugin)
            .arg("--config")
            .arg(config)
            .args(["--leader-elect", "--leader-election-namespace", namespace])
            .env("KUBECONFIG", shared().kubeconfig())
            .env("WASMLOOP_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (stderr, sink) = (child.stderr.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap().push(value);
                }
            }
        });
        Candidate { child, lines }
    }

    /// The time (ms since the epoch) of the first line after `after` whose message contains
    /// `text` and, if given, whose span names `object`.
    fn first(&self, text: &str, object: Option<&str>, after: f64) -> Option<f64> {
        self.lines.lock().unwrap().iter().find_map(|l| {
            let message = l["fields"]["message"].as_str()?;
            let matches = message.contains(text) && object.is_none_or(|o| l["span"]["object"] == o);
            let ts: Timestamp = l["timestamp"].as_str()?.parse().ok()?;
            let at = ts.as_millisecond() as f64;
            (matches && at > after).then_some(at)
        })
    }

    async fn wait(&self, text: &str, object: Option<&str>, after: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(at) = self.first(text, object, after) {
                return at;
            }
            assert!(Instant::now() < deadline, "no {text:?} within 120 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Candidate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let config = std::env::temp_dir().join(format!("wasmloop-bench-failover-{}.yaml", std::process::id()));
    std::fs::write(&config, "plugins:\n  hostile:\n    config: {mode: requeue}\n").unwrap();
    let mut samples = Vec::new();
    for round in 0..rounds {
        let ns = shared().namespace(&format!("bench-failover-{round}")).await.unwrap();
        let cm = ConfigMap {
            metadata: ObjectMeta { name: Some("ticker".into()), ..ObjectMeta::default() },
            ..ConfigMap::default()
        };
        Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name).create(&PostParams::default(), &cm).await.unwrap();
        let object = format!("{}/ticker", ns.name);
        let mut leader = Candidate::start(&ns.name, &config);
        leader.wait("acquired the leader Lease", None, 0.0).await;
        let standby = Candidate::start(&ns.name, &config);
        standby.wait("plugin hostile", None, 0.0).await;
        leader.wait("tick ticker", Some(&object), now_ms()).await;
        // Land the kill at a different point of the renewal cycle each round.
        tokio::time::sleep(Duration::from_millis(1000 + 1700 * round as u64 % 9000)).await;
        leader.child.kill().unwrap();
        let killed = now_ms();
        leader.child.wait().unwrap();
        let took_over = standby.wait("tick ticker", Some(&object), killed).await;
        let failover = (took_over - killed) / 1000.0;
        println!("  round {round}: first reconcile by the new leader {failover:.2} s after the SIGKILL");
        samples.push(failover);
    }
    let _ = std::fs::remove_file(&config);
    samples.sort_by(f64::total_cmp);
    println!("\nfailover with the default Lease (15 s), {rounds} rounds:");
    println!("| median | min | max |\n|---|---|---|");
    println!("| {:.2} s | {:.2} s | {:.2} s |", samples[samples.len() / 2], samples[0], samples[samples.len() - 1]);
}
