//! What the benchmarks share: the binaries they run, what they read from /proc and from a
//! host's `/metrics`, and cleaning up.

// Each benchmark uses some of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use std::process::Stdio;
use wasmloop_testenv::TestNamespace;

/// Resident set size now, in MiB, from /proc.
pub fn rss_mib(pid: u32) -> f64 {
    status_kib(pid, "VmRSS:") / 1024.0
}

fn status_kib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the controller runs");
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field} in /proc/PID/status"));
    line.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap()
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

pub fn binary(var: &str, default: PathBuf) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    assert!(path.exists(), "{} is missing: run scripts/bench-convergence, which builds it", path.display());
    path
}

/// CPU seconds (user + system) a process has used, from /proc.
pub fn cpu_seconds(pid: u32) -> f64 {
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
pub fn peak_rss_mib(pid: u32) -> f64 {
    status_kib(pid, "VmHWM:") / 1024.0
}

/// A free loopback port for the host's `/metrics`.
pub fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `GET path` on `address`: the status code and the body.
pub async fn get(address: &str, path: &str) -> Result<(u16, String), String> {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let url = format!("http://{address}{path}");
    let response = client.get(url.parse().unwrap()).await.map_err(|e| format!("GET {url}: {e}"))?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// The sum of every `wasmloop_reconciles_total` series the host at `address` serves.
pub async fn reconciles(address: &str) -> f64 {
    let (_, text) = get(address, "/metrics").await.unwrap_or_else(|e| panic!("{e}"));
    text.lines()
        .filter(|l| l.starts_with("wasmloop_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Deletes the namespace and waits until it is gone, so the next controller's first list
/// does not meet this round's objects.
pub async fn remove(ns: &TestNamespace) {
    let namespaces: Api<Namespace> = Api::all(ns.client.clone());
    namespaces.delete(&ns.name, &DeleteParams::default()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    while namespaces.get_opt(&ns.name).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "namespace {} still there after 600 s", ns.name);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len().is_multiple_of(2) { (values[middle - 1] + values[middle]) / 2.0 } else { values[middle] }
}

/// A ConfigMap with ~1 KB of data.
pub fn configmap(i: usize) -> serde_json::Value {
    let payload: String = (0..1000).map(|k| char::from(b'a' + ((i + k) % 26) as u8)).collect();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i}"), "labels": {"app": "scale-bench"}},
        "data": {"payload": payload, "index": i.to_string()}
    })
}

/// Server-side applies `count` ConfigMaps, 50 at a time, and returns the JSON size of one as
/// the API server serves it.
pub async fn fill(ns: &TestNamespace, count: usize) -> usize {
    let api: Api<ConfigMap> = ns.api();
    let params = PatchParams::apply("scale-bench").force();
    futures::stream::iter(0..count)
        .for_each_concurrent(50, |i| {
            let (api, params) = (api.clone(), params.clone());
            async move {
                api.patch(&format!("cm-{i}"), &params, &Patch::Apply(configmap(i))).await.unwrap();
            }
        })
        .await;
    match count {
        0 => 0,
        _ => serde_json::to_vec(&api.get("cm-0").await.unwrap()).unwrap().len(),
    }
}

/// Compiles the component into the run's cache, as for a restart.
pub fn warm_compile_cache(dir: &Path, component: &Path) {
    // `scripts/link-order` runs an instrumented host, whose profile is of serving, not
    // compiling: it compiles with the regular one (the cache's key is the engine's settings).
    let compiler = std::env::var_os("WASMLOOP_COMPILE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| binary("WASMLOOP_BIN", target_dir().join("release/wasmloop")));
    let status = Command::new(compiler)
        .arg("inspect")
        .arg(component)
        .arg("--cache-dir")
        .arg(dir)
        .stdout(Stdio::null())
        .status()
        .expect("wasmloop inspect runs");
    assert!(status.success(), "wasmloop inspect {} failed", component.display());
}
