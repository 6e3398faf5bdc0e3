//! Failover time of leader election with the default Lease settings (15 s): from the
//! leader's SIGKILL to the first reconcile by the standby, on the real control plane.
//!
//! Each round starts two `wasmloop run --leader-elect` processes (release build) with hostile
//! in requeue mode, which reconciles a ConfigMap every 500 ms and logs a `tick`; waits until
//! the first leads and ticks and the second stands by with synced caches; kills the leader
//! with SIGKILL; and reads the standby's JSON log for its first tick. Where in the renewal
//! cycle the kill lands decides how much of the Lease is left, so the rounds spread.
//! `scripts/bench-failover` runs it. Knob: `ROUNDS` (default 5).

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{JsonLog, component, now_ms};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use wasmloop_testenv::shared;

/// One host and its JSON log lines.
struct Candidate {
    child: Child,
    log: JsonLog,
}

impl Candidate {
    fn start(namespace: &str, config: &Path) -> Candidate {
        let plugin = component("hostile_plugin");
        let mut child = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
            // As the admin, like the native baseline: identity is not what this measures.
            .args(["--log-format", "json", "run", "--plugin-identity", "host", "--health-probe-bind-address", "0"])
            .arg("--plugin")
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
        let log = JsonLog::capture(child.stderr.take().unwrap());
        Candidate { child, log }
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
    std::fs::write(&config, "plugins:\n  hostile:\n    minRequeueAfterMs: 100\n    config: {mode: requeue}\n").unwrap();
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
        leader.log.wait_for("acquired the leader Lease", None, 0.0).await;
        let standby = Candidate::start(&ns.name, &config);
        standby.log.wait_for("plugin hostile", None, 0.0).await;
        leader.log.wait_for("tick ticker", Some(&object), now_ms()).await;
        // Land the kill at a different point of the renewal cycle each round.
        tokio::time::sleep(Duration::from_millis(1000 + 1700 * round as u64 % 9000)).await;
        leader.child.kill().unwrap();
        let killed = now_ms();
        leader.child.wait().unwrap();
        let took_over = standby.log.wait_for("tick ticker", Some(&object), killed).await;
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
