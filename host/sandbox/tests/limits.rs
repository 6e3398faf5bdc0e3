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
    hostile_in(SandboxConfig::default().cache_dir(None), limits).await
}

/// The hostile plugin, loaded into a sandbox made with `config`, with `limits` over its own.
async fn hostile_in(config: SandboxConfig, limits: impl FnOnce(Limits) -> Limits) -> Plugin {
    let path = wasmloop_testenv::components::component("hostile_plugin");
    let bytes = std::fs::read(&path).unwrap();
    let sandbox = Sandbox::new(config).unwrap();
    let plugin = sandbox.load(&bytes, "hostile_plugin.wasm").await.unwrap();
    let limits = limits(plugin.limits());
    plugin.with_limits(limits)
}

/// A reconcile of the victim ConfigMap with `config`.
fn request(config: &serde_json::Value) -> Request {
    let victim = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "victim", "namespace": "default", "uid": "4d5e6f70-8192-4a3b-b5c6-d7e8f90a1b23"},
        "data": {"key": "value"},
    });
    Request {
        object: object_from_value(&victim).unwrap(),
        owned: Vec::new(),
        phase: Phase::Apply,
        previous: None,
        attempt: 0,
        config: config.to_string(),
        triggers: Vec::new(),
        triggers_dropped: 0,
    }
}

/// One reconcile of the victim ConfigMap with `config`, which must fail: how it failed.
async fn failure(plugin: &Plugin, config: serde_json::Value) -> CallFailure {
    let request = request(&config);
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

const MIB: usize = 1 << 20;

/// A sandbox whose guests together may hold `budget` bytes, and wait `wait` for room.
fn budgeted(budget: usize, wait: Duration) -> SandboxConfig {
    let mut config = SandboxConfig::default().cache_dir(None).guest_memory_bytes(Some(budget as u64));
    config.guest_memory_wait = wait;
    config
}

/// Two calls that each fill 60 MiB and hold it `ms`, started together: how each ended.
async fn two_holders(plugin: &Plugin, ms: u64) -> [(Result<(), CallFailure>, wasmloop_sandbox::StageTimings); 2] {
    let config = json!({"mode": "hold", "bytes": 60 * MIB, "ms": ms});
    let call = || async {
        let (result, timings) = plugin.reconcile_timed(&request(&config), Arc::new(EmptyHost)).await;
        (result.map(drop).map_err(|e| e.failure), timings)
    };
    let (first, second) = tokio::join!(call(), call());
    [first, second]
}

#[tokio::test]
async fn calls_past_the_guest_memory_budget_wait_for_room_and_all_complete() {
    let plugin = hostile_in(budgeted(100 * MIB, Duration::from_secs(30)), |l| l.instances(2)).await;
    let ended = two_holders(&plugin, 300).await;
    assert!(ended.iter().all(|(result, _)| result.is_ok()), "{ended:?}");
    let waits: u32 = ended.iter().map(|(_, timings)| timings.memory_waits).sum();
    assert!(waits >= 1, "one call waited for the other's memory: {ended:?}");
}

#[tokio::test]
async fn without_a_budget_the_same_calls_hold_their_memory_at_once() {
    // The control: the test above fails here, for no call waits.
    let plugin = hostile_in(SandboxConfig::default().cache_dir(None), |l| l.instances(2)).await;
    let ended = two_holders(&plugin, 300).await;
    assert!(ended.iter().all(|(result, timings)| result.is_ok() && timings.memory_waits == 0), "{ended:?}");
}

#[tokio::test]
async fn waiting_for_room_does_not_count_against_the_deadline() {
    let plugin = hostile_in(budgeted(100 * MIB, Duration::from_secs(30)), |l| {
        l.instances(2).deadline(Duration::from_millis(1500))
    })
    .await;
    // The second waits about 1 s for the first, then holds 1 s: 2 s, past its deadline, of
    // which 1 s is its own.
    let ended = two_holders(&plugin, 1000).await;
    assert!(ended.iter().all(|(result, _)| result.is_ok()), "{ended:?}");
    let waited = ended.iter().map(|(_, timings)| timings.host_waited).max().unwrap();
    assert!(waited >= Duration::from_millis(800), "{ended:?}");
}

#[tokio::test]
async fn a_call_that_finds_no_room_in_time_fails_as_host_pressure() {
    let plugin = hostile_in(budgeted(100 * MIB, Duration::from_millis(200)), |l| l.instances(2)).await;
    let ended = two_holders(&plugin, 800).await;
    let pressured: Vec<_> = ended.iter().filter_map(|(result, _)| result.as_ref().err()).collect();
    assert_eq!(pressured.len(), 1, "{ended:?}");
    let failure = pressured[0];
    assert!(failure.is_host_pressure() && failure.is_transient(), "{failure:?}");
    assert!(failure.to_string().contains("guest memory budget"), "{failure}");
}

#[tokio::test]
async fn a_plugin_ceiling_past_what_one_plugin_may_hold_is_cut_to_fit_it() {
    let sandbox = Sandbox::new(budgeted(100 * MIB, Duration::from_secs(1))).unwrap();
    let (limits, capped) = sandbox.fit(Limits::default().memory_bytes(256 * MIB).instances(4));
    assert_eq!((limits.memory_bytes, limits.instances), (75 * MIB, 1));
    assert!(capped.is_some());
}
