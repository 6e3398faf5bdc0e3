//! What the benchmarks that drive the `wasmloop` binary share: where the built components
//! are, and the host's JSON log as timestamps to measure against.

// Each bench binary compiles this module and uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// The cargo target directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// A component built by `scripts/build-plugins`.
pub fn component(name: &str) -> PathBuf {
    let path = target_dir().join("wasm32-wasip2/release").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: the bench script runs scripts/build-plugins first", path.display());
    path
}

/// Now, in milliseconds since the epoch (the unit of [`JsonLog`]'s times).
pub fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64() * 1000.0
}

/// A host's JSON log lines (`--log-format json`), collected as they arrive.
#[derive(Clone, Default)]
pub struct JsonLog(Arc<Mutex<Vec<Value>>>);

impl JsonLog {
    /// Collects the lines of `stream` (the host's stderr) on a thread of its own.
    pub fn capture(stream: impl Read + Send + 'static) -> JsonLog {
        let log = JsonLog::default();
        let lines = log.0.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    lines.lock().unwrap().push(value);
                }
            }
        });
        log
    }

    /// The time (ms since the epoch) of the first line after `after` whose message contains
    /// `text` and, when given, whose reconcile span is about `object`.
    pub fn first_after(&self, text: &str, object: Option<&str>, after: f64) -> Option<f64> {
        self.0.lock().unwrap().iter().find_map(|l| {
            let matches =
                l["fields"]["message"].as_str()?.contains(text) && object.is_none_or(|o| l["span"]["object"] == o);
            let ts: Timestamp = l["timestamp"].as_str()?.parse().ok()?;
            let at = ts.as_millisecond() as f64 + f64::from(ts.subsec_nanosecond() % 1_000_000) / 1e6;
            (matches && at > after).then_some(at)
        })
    }

    /// Waits (up to two minutes) for [`JsonLog::first_after`].
    pub async fn wait_for(&self, text: &str, object: Option<&str>, after: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(at) = self.first_after(text, object, after) {
                return at;
            }
            assert!(Instant::now() < deadline, "no {text:?} within 120 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
