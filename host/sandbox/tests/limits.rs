//! Every limit of a guest call, asserted as the `CallFailure` the sandbox returns: the host's
//! decisions (retry or not, which Event, what the error says) are made on these variants, not
//! on text. The hostile test plugin (`host/tests/guests/hostile`) does the misbehaving; its
//! configuration's `mode` picks how.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use wasmloop_sandbox::{
    CallFailure, EmptyHost, Limits, Phase, Plugin, Request, Sandbox, SandboxConfig, object_from_value,
};

/// The hostile plugin, loaded into a sandbox of its own with `limits` over its own.
async fn hostile(limits: impl FnOnce(Limits) -> Limits) -> Plugin {
    let path = wasmloop_testenv::components::component("hostile_plugin");
    let bytes = std::fs::read(&path).unwrap();
    let sandbox = Sandbox::new(SandboxConfig::default().cache_dir(None)).unwrap();
    let plugin = sandbox.load(&bytes, "hostile_plugin.wasm").await.unwrap();
    let limits = limits(plugin.limits());
    plugin.with_limits(limits)
}

/// One reconcile of the victim ConfigMap with `config`, which must fail: how it failed.
async fn failure(plugin: &Plugin, config: serde_json::Value) -> CallFailure {
    let victim = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "victim", "namespace": "default", "uid": "4d5e6f70-8192-4a3b-b5c6-d7e8f90a1b23"},
        "data": {"key": "value"},
    });
    let request = Request {
        object: object_from_value(&victim).unwrap(),
        owned: Vec::new(),
        phase: Phase::Apply,
        previous: None,
        attempt: 0,
        config: config.to_string(),
    };
    match plugin.reconcile(&request, Arc::new(EmptyHost)).await {
        Ok(response) => panic!("config {config}: the call succeeded with {} actions", response.actions.len()),
        Err(error) => {
            assert_eq!(error.plugin, "hostile", "{error}");
            assert_eq!(error.object, "ConfigMap default/victim", "{error}");
            error.failure
        }
    }
}

#[tokio::test]
async fn a_guest_looping_forever_is_stopped_at_its_deadline() {
    let plugin = hostile(|l| l.deadline(Duration::from_millis(200))).await;
    match failure(&plugin, json!({"mode": "loop"})).await {
        CallFailure::Deadline { deadline, elapsed } => {
            assert_eq!(deadline, Duration::from_millis(200));
            assert!(elapsed >= deadline, "stopped after {elapsed:?}, before its deadline");
        }
        other => panic!("not a deadline: {other:?}"),
    }
}

#[tokio::test]
async fn a_guest_waiting_on_the_clock_is_stopped_at_its_deadline() {
    let plugin = hostile(|l| l.deadline(Duration::from_millis(300))).await;
    let failure = failure(&plugin, json!({"mode": "sleep"})).await;
    assert!(
        matches!(failure, CallFailure::Deadline { deadline, .. } if deadline == Duration::from_millis(300)),
        "{failure:?}"
    );
}

#[tokio::test]
async fn a_guest_allocating_without_bound_hits_its_memory_limit() {
    let plugin = hostile(|l| l.memory_bytes(16 << 20)).await;
    match failure(&plugin, json!({"mode": "alloc"})).await {
        CallFailure::MemoryLimit { limit, requested } => {
            assert_eq!(limit, 16 << 20);
            assert!(requested > limit, "asked for {requested}");
        }
        other => panic!("not the memory limit: {other:?}"),
    }
}

#[tokio::test]
async fn a_response_over_the_cap_is_refused_with_its_size() {
    let plugin = hostile(|l| l).await;
    match failure(&plugin, json!({"mode": "oversize"})).await {
        CallFailure::ResponseTooLarge { size, limit } => {
            assert_eq!(limit, 4 << 20, "the default cap");
            assert!(size > limit, "{size}");
        }
        other => panic!("not the response cap: {other:?}"),
    }
}

#[tokio::test]
async fn a_flood_of_actions_is_refused_before_any_is_read() {
    let plugin = hostile(|l| l.max_actions(1000)).await;
    let failure = failure(&plugin, json!({"mode": "flood", "count": 5000})).await;
    assert!(matches!(failure, CallFailure::TooManyItems { what: "actions", count: 5000, limit: 1000 }), "{failure:?}");
}

#[tokio::test]
async fn a_guest_panic_is_a_trap_carrying_the_panic_message() {
    let plugin = hostile(|l| l).await;
    match failure(&plugin, json!({"mode": "panic"})).await {
        CallFailure::Trap { panic: Some(panic), .. } => {
            assert!(panic.contains("hostile plugin panicked on purpose"), "{panic}");
        }
        other => panic!("not a trap with its panic: {other:?}"),
    }
}
