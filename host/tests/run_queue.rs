//! Queue behaviour seen through the `wasmloop` binary on the real control plane.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::Value;
use wasmloop_testenv::{TestNamespace, eventually, shared};

fn component(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("wasm32-wasip2/release").join(format!("{name}.wasm"))
}

/// The host with the hostile test plugin in one mode, logging JSON lines.
struct Host {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    _config: tempfile::NamedTempFile,
}

impl Host {
    fn start(mode: &str) -> Host {
        let config = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(config.path(), format!("plugins:\n  hostile:\n    config: {{mode: {mode}}}\n")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
            .args(["--log-format", "json", "run", "--plugin"])
            .arg(component("hostile_plugin"))
            .arg("--config")
            .arg(config.path())
            .env("KUBECONFIG", shared().kubeconfig())
            .env("WASMLOOP_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("wasmloop starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (stderr, sink) = (child.stderr.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap().push(value);
                }
            }
        });
        Host { child, lines, _config: config }
    }

    /// Log lines inside the reconcile span of `object` whose message contains `text`.
    fn reconcile_lines(&self, object: &str, text: &str) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l["span"]["object"] == object)
            .filter(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains(text)))
            .cloned()
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn configmap(ns: &TestNamespace, name: &str) {
    let cm =
        ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, ..ConfigMap::default() };
    Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name).create(&PostParams::default(), &cm).await.unwrap();
}

fn millis(line: &Value) -> f64 {
    // RFC 3339 with nanoseconds: seconds of the day are enough within one test.
    let ts = line["timestamp"].as_str().unwrap();
    let time = &ts[11..ts.len() - 1];
    let mut parts = time.split(':');
    let (h, m, s): (f64, f64, f64) = (
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    );
    ((h * 60.0 + m) * 60.0 + s) * 1000.0
}

#[tokio::test]
async fn a_plugin_that_always_fails_backs_off_with_growing_intervals() {
    let ns = shared().namespace("queue-backoff").await.unwrap();
    let host = Host::start("panic");
    configmap(&ns, "victim").await;
    let object = format!("{}/victim", ns.name);
    let failures = eventually(Duration::from_secs(60), "seven failed attempts", || {
        let lines = host.reconcile_lines(&object, "the guest panicked");
        async move { if lines.len() >= 7 { Ok(lines) } else { Err(format!("{} so far", lines.len())) } }
    })
    .await;
    let attempts: Vec<u64> = failures.iter().map(|l| l["span"]["attempt"].as_u64().unwrap()).collect();
    assert_eq!(&attempts[..7], &[0, 1, 2, 3, 4, 5, 6], "attempts count up");
    let times: Vec<f64> = failures.iter().take(7).map(millis).collect();
    let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    // 5, 10, 20, 40, 80, 160 ms of backoff plus the time of each try (the first try also
    // warms the instance pool, so it is left out). Neighbours may swap on a slow API call;
    // two doublings apart they cannot: the gaps grow, and the backoff alone puts the last
    // above 160 ms.
    assert!(gaps[1] < gaps[3] && gaps[3] < gaps[5], "gaps {gaps:?}");
    assert!(gaps[5] >= 160.0 && gaps[5] > 3.0 * gaps[1], "gaps {gaps:?}");
}

#[tokio::test]
async fn requeue_after_fires_again_and_again() {
    let ns = shared().namespace("queue-requeue").await.unwrap();
    let host = Host::start("requeue");
    configmap(&ns, "ticker").await;
    let object = format!("{}/ticker", ns.name);
    let ticks = eventually(Duration::from_secs(30), "four ticks", || {
        let lines = host.reconcile_lines(&object, "tick ticker");
        async move { if lines.len() >= 4 { Ok(lines) } else { Err(format!("{} so far", lines.len())) } }
    })
    .await;
    let times: Vec<f64> = ticks.iter().take(4).map(millis).collect();
    for gap in times.windows(2).map(|w| w[1] - w[0]) {
        assert!(gap >= 450.0, "requeued after {gap} ms, asked for 500");
    }
}
