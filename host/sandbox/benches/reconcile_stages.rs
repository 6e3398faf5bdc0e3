//! Where one reconcile's time goes: `foo-deployment` in the sandbox against the same logic
//! compiled natively through the SDK's native path, in one run.
//!
//! Run with `scripts/bench-reconcile`. It passes two builds of the component: the shipped one
//! (`WASMLOOP_BENCH_COMPONENT`), measured for the whole reconcile, and one built with the
//! SDK's `phase-timing` feature (`WASMLOOP_BENCH_TIMED_COMPONENT`), whose guest reports its
//! decode / logic / encode split. Prints a Markdown table.
//!
//! The host keeps cache entries as serialized envelopes (JSON text plus routing fields), made
//! once per object change; "marshal" is building the request from them. The one-off
//! serialization is reported on its own line.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmloop_contract::names::{Name, Namespace};

use foo_deployment::FooController;
use serde_json::{Value, json};
use wasmloop_sandbox::{
    Gvk, HostServices, LogLevel, Object, Phase, Request, Sandbox, SandboxConfig, Selector, object_from_value,
};
use wasmloop_sdk::testing::{TestCase, timed_reconcile, with_case};

const ITERATIONS: usize = 3000;
const WARMUP: usize = 300;

/// The cache the guest reads, and the phase split it reports through `log`.
struct BenchHost {
    objects: Vec<Object>,
    phases: Mutex<Option<[u64; 3]>>,
}

impl HostServices for BenchHost {
    fn get(&self, kind: &Gvk, namespace: Option<&Namespace>, name: &Name) -> Option<Object> {
        let namespace = namespace.map(Namespace::as_str);
        self.objects
            .iter()
            .find(|o| {
                kind.matches(&o.api_version, &o.kind) && o.namespace.as_deref() == namespace && *name == o.name.as_str()
            })
            .cloned()
    }

    fn list(&self, kind: &Gvk, namespace: Option<&Namespace>, _: &Selector) -> Vec<Object> {
        let namespace = namespace.map(Namespace::as_str);
        self.objects
            .iter()
            .filter(|o| {
                kind.matches(&o.api_version, &o.kind) && (namespace.is_none() || o.namespace.as_deref() == namespace)
            })
            .cloned()
            .collect()
    }

    fn log(&self, _plugin: &str, _level: LogLevel, message: &str) {
        let Some(rest) = message.strip_prefix("wasmloop.phases ") else { return };
        let mut values = rest.split(' ').filter_map(|kv| kv.split_once('=')?.1.parse::<u64>().ok());
        let phases = [values.next().unwrap_or(0), values.next().unwrap_or(0), values.next().unwrap_or(0)];
        *self.phases.lock().unwrap() = Some(phases);
    }
}

fn foo(target_bytes: usize) -> Value {
    let mut foo = json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {
            "name": "example-foo", "namespace": "default",
            "uid": "6f1c2c9e-0d55-4f7b-9a8a-2f0c6f0f5a11", "resourceVersion": "48213",
            "generation": 3, "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": {"team": "platform", "tier": "web"},
            "annotations": {},
            "managedFields": []
        },
        "spec": {"deploymentName": "example-foo", "replicas": 3},
        "status": {"availableReplicas": 0}
    });
    // Grow the object the way real ones grow: annotations, then managed fields.
    let mut i = 0;
    while foo.to_string().len() < target_bytes {
        if i < 8 {
            foo["metadata"]["annotations"][format!("example.com/note-{i}")] = json!("x".repeat(160));
        } else {
            foo["metadata"]["managedFields"].as_array_mut().unwrap().push(json!({
                "manager": format!("tool-{i}"), "operation": "Apply", "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {format!("f:example.com/note-{i}"): {}}}, "f:spec": {"f:replicas": {}}}
            }));
        }
        i += 1;
    }
    foo
}

fn deployment(name: &str, available: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": "48300",
            "labels": {"app": "nginx", "controller": "example-foo"},
            "ownerReferences": [{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example-foo",
                                 "uid": "6f1c2c9e-0d55-4f7b-9a8a-2f0c6f0f5a11", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx", "controller": "example-foo"}},
            "template": {
                "metadata": {"labels": {"app": "nginx", "controller": "example-foo"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest", "ports": [{"containerPort": 80}],
                                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
            }
        },
        "status": {"availableReplicas": available, "readyReplicas": available, "replicas": 3, "observedGeneration": 3,
                   "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}
    })
}

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(d);
    }
    fn push_ns(&mut self, ns: u64) {
        self.0.push(Duration::from_nanos(ns));
    }
    fn p50(&self) -> f64 {
        let mut v = self.0.clone();
        v.sort();
        v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    }
}

#[derive(Default)]
struct Stages {
    serialize: Samples,
    marshal: Samples,
    instantiate: Samples,
    boundary: Samples,
    decode: Samples,
    logic: Samples,
    encode: Samples,
    host_decode: Samples,
    total: Samples,
}

fn wasm_request(primary: &Object, owned: &[Object]) -> Request {
    Request {
        object: primary.clone(),
        owned: owned.to_vec(),
        phase: Phase::Apply,
        previous: None,
        attempt: 0,
        config: "{}".into(),
        triggers: Vec::new(),
        triggers_dropped: 0,
    }
}

fn run_wasm(sandbox_plugin: &wasmloop_sandbox::Plugin, primary: &Value, owned: &[Value], timed: bool) -> Stages {
    let owned: Vec<Object> = owned.iter().map(|o| object_from_value(o).unwrap()).collect();
    let primary = object_from_value(primary).unwrap();
    let host = Arc::new(BenchHost { objects: owned.clone(), phases: Mutex::new(None) });
    let mut stages = Stages::default();
    for i in 0..WARMUP + ITERATIONS {
        let start = Instant::now();
        let request = wasm_request(&primary, &owned);
        let marshal = start.elapsed();
        let (result, timings) = runtime().block_on(sandbox_plugin.reconcile_timed(&request, host.clone()));
        let total = start.elapsed();
        let response = result.expect("foo-deployment reconciles");
        assert_eq!(response.actions.len(), 3);
        let phases = host.phases.lock().unwrap().take();
        assert_eq!(
            phases.is_some(),
            timed,
            "WASMLOOP_BENCH_TIMED_COMPONENT must be built with phase-timing, the other without"
        );
        let [decode, logic, encode] = phases.unwrap_or_default();
        if i < WARMUP {
            continue;
        }
        stages.marshal.push(marshal);
        stages.instantiate.push(timings.instantiate);
        stages.boundary.push(timings.call.saturating_sub(Duration::from_nanos(decode + logic + encode)));
        stages.decode.push_ns(decode);
        stages.logic.push_ns(logic);
        stages.encode.push_ns(encode);
        stages.host_decode.push(timings.host_decode);
        stages.total.push(total);
    }
    stages
}

fn run_native(primary: &Value, owned: &[Value]) -> Stages {
    let mut case = TestCase::new(primary);
    for o in owned {
        case = case.owned(o);
    }
    let mut stages = Stages::default();
    // The native path starts from the same serialized cache entries.
    let primary = wasmloop_sdk::Object::from_value(primary).unwrap();
    let owned: Vec<wasmloop_sdk::Object> = owned.iter().map(|o| wasmloop_sdk::Object::from_value(o).unwrap()).collect();
    with_case::<FooController, _>(&case, || {
        for i in 0..WARMUP + ITERATIONS {
            let start = Instant::now();
            let request = wasmloop_sdk::Request {
                object: primary.clone(),
                owned: owned.clone(),
                phase: wasmloop_sdk::Phase::Apply,
                previous: None,
                attempt: 0,
                config: wasmloop_sdk::Config::new("{}".into()),
                triggers: Vec::new(),
                triggers_dropped: 0,
            };
            let marshal = start.elapsed();
            let (actions, [decode, logic, encode]) = timed_reconcile::<FooController>(&request);
            let actions = actions.expect("foo-deployment reconciles");
            // The host decodes native actions as it decodes the guest's: parse each JSON.
            let decode_start = Instant::now();
            for action in &actions {
                let json = match action {
                    wasmloop_sdk::Action::Apply(apply) => Some(&apply.json),
                    wasmloop_sdk::Action::Status(json) => Some(json),
                    _ => None,
                };
                if let Some(json) = json {
                    std::hint::black_box(serde_json::from_str::<Value>(json).unwrap());
                }
            }
            let host_decode = decode_start.elapsed();
            let total = start.elapsed();
            if i < WARMUP {
                continue;
            }
            stages.marshal.push(marshal);
            stages.decode.push_ns(decode);
            stages.logic.push_ns(logic);
            stages.encode.push_ns(encode);
            stages.host_decode.push(host_decode);
            stages.total.push(total);
        }
    });
    stages
}

/// One current-thread runtime for the whole bench: guest calls are futures.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime"))
}

fn load(sandbox: &Sandbox, var: &str) -> wasmloop_sandbox::Plugin {
    let path = std::env::var(var).unwrap_or_else(|_| panic!("set {var}; scripts/bench-reconcile does"));
    let bytes = std::fs::read(&path).expect("component readable");
    let plugin = runtime().block_on(sandbox.load(&bytes, &path)).expect("component loads");
    sandbox.reserve(&plugin).expect("the pool holds one plugin")
}

fn serialization(primary: &Value, owned: &[Value]) -> Samples {
    let mut samples = Samples::default();
    for _ in 0..ITERATIONS {
        let start = Instant::now();
        std::hint::black_box(object_from_value(primary).unwrap());
        for o in owned {
            std::hint::black_box(object_from_value(o).unwrap());
        }
        samples.push(start.elapsed());
    }
    samples
}

fn main() {
    let mut config = SandboxConfig::default().cache_dir(None);
    if let Some(bytes) = std::env::var("WASMLOOP_BENCH_KEEP_RESIDENT").ok().and_then(|v| v.parse().ok()) {
        config = config.keep_resident_bytes(bytes);
    }
    eprintln!("keep_resident_bytes = {}", config.keep_resident_bytes);
    let sandbox = Sandbox::new(config).expect("sandbox");
    let shipped = load(&sandbox, "WASMLOOP_BENCH_COMPONENT");
    let timed = load(&sandbox, "WASMLOOP_BENCH_TIMED_COMPONENT");
    // The Python and JavaScript twins (plugins/foo-deployment-py, -js), when
    // scripts/bench-reconcile builds them.
    let twins: Vec<(&str, _)> =
        [("Python", "WASMLOOP_BENCH_PYTHON_COMPONENT"), ("JavaScript", "WASMLOOP_BENCH_JS_COMPONENT")]
            .into_iter()
            .filter(|(_, var)| std::env::var_os(var).is_some())
            .map(|(label, var)| (label, load(&sandbox, var)))
            .collect();

    let owned = [deployment("example-foo", 1), deployment("example-foo-old-1", 0), deployment("example-foo-old-2", 0)];
    println!("| stage (p50, µs) | wasm 2 KB | native 2 KB | wasm 50 KB | native 50 KB |");
    println!("|---|---:|---:|---:|---:|");
    let mut results = Vec::new();
    let mut twin_runs: Vec<Vec<Stages>> = twins.iter().map(|_| Vec::new()).collect();
    for size in [2048, 50 * 1024] {
        let primary = foo(size);
        eprintln!(
            "primary {} bytes, {} owned children of ~{} bytes",
            primary.to_string().len(),
            owned.len(),
            owned[0].to_string().len()
        );
        let mut split = run_wasm(&timed, &primary, &owned, true);
        let whole = run_wasm(&shipped, &primary, &owned, false);
        split.total = Samples(whole.total.0.clone());
        split.serialize = serialization(&primary, &owned);
        let mut native = run_native(&primary, &owned);
        native.serialize = serialization(&primary, &owned);
        for ((_, twin), runs) in twins.iter().zip(&mut twin_runs) {
            runs.push(run_wasm(twin, &primary, &owned, false));
        }
        results.push((split, native, whole));
    }
    let row = |name: &str, f: &dyn Fn(&Stages) -> f64| {
        let (a, b) = (&results[0], &results[1]);
        println!("| {name} | {:.1} | {:.1} | {:.1} | {:.1} |", f(&a.0), f(&a.1), f(&b.0), f(&b.1));
    };
    row("cache entry serialization (once per object change, not per reconcile)", &|s| s.serialize.p50());
    row("marshal the request (host)", &|s| s.marshal.p50());
    row("instantiate (fresh Store + instance)", &|s| s.instantiate.p50());
    row("boundary: lower, lift, SDK glue, guest clock reads", &|s| s.boundary.p50());
    row("guest decode", &|s| s.decode.p50());
    row("plugin logic (includes the cache get host call)", &|s| s.logic.p50());
    row("encode the actions", &|s| s.encode.p50());
    row("host decode", &|s| s.host_decode.p50());
    row("**whole reconcile** (wasm: shipped build, no timing)", &|s| s.total.p50());
    println!();
    for (label, (_, native, whole)) in ["2 KB", "50 KB"].iter().zip(&results) {
        let overhead = whole.total.p50() - (native.decode.p50() + native.logic.p50() + native.encode.p50());
        let host = whole.marshal.p50() + whole.instantiate.p50() + whole.host_decode.p50();
        println!(
            "- {label}: wasm/native whole reconcile = **{:.2}×**; host-side overhead (marshal + instantiate + host decode) {:.1} µs; wasm whole minus the native plugin work {:.1} µs",
            whole.total.p50() / native.total.p50(),
            host,
            overhead
        );
    }
    for ((name, _), runs) in twins.iter().zip(&twin_runs) {
        let [small, large] = runs.as_slice() else { continue };
        println!("\n| {name} foo-deployment (p50, µs) | 2 KB | 50 KB |");
        println!("|---|---:|---:|");
        println!("| instantiate | {:.1} | {:.1} |", small.instantiate.p50(), large.instantiate.p50());
        let call = |s: &Stages| s.total.p50() - s.instantiate.p50();
        println!("| call (whole minus instantiate) | {:.1} | {:.1} |", call(small), call(large));
        println!("| **whole reconcile** | {:.1} | {:.1} |", small.total.p50(), large.total.p50());
        for (label, twin, (_, native, whole)) in [("2 KB", small, &results[0]), ("50 KB", large, &results[1])] {
            println!(
                "- {label}: {name}/native whole reconcile = **{:.1}×**, {name}/Rust-wasm = **{:.1}×**",
                twin.total.p50() / native.total.p50(),
                twin.total.p50() / whole.total.p50()
            );
        }
    }
    println!(
        "\n{ITERATIONS} iterations after {WARMUP} warm-up, p50 per stage (stages are medians of their own samples, so they need not add up to the whole)."
    );
}
