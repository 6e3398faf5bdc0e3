//! Plugins run in a fresh instance per call, Rust, Python and JavaScript alike: module state one
//! reconcile leaves behind is invisible to the next, even in the same loaded plugin.

use std::sync::Arc;

use serde_json::json;
use wasmloop_sandbox::{Action, EmptyHost, Phase, Request, Sandbox, SandboxConfig, object_from_value};

fn request(name: &str, config: &str) -> Request {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default", "uid": name}});
    Request {
        object: object_from_value(&cm).unwrap(),
        owned: Vec::new(),
        phase: Phase::Apply,
        previous: None,
        attempt: 0,
        config: config.into(),
        triggers: Vec::new(),
        triggers_dropped: 0,
    }
}

fn seen(actions: &[Action]) -> serde_json::Value {
    match actions {
        [Action::Status(status)] => status["seen"].clone(),
        other => panic!("expected one status action, got {other:?}"),
    }
}

/// Reconciles three primaries with the `remember` guest at `path`, which reports every primary
/// its module state has seen, under the default reset of freed memory and under one that keeps
/// 16 MiB resident (copied back in place from the memory image rather than returned).
async fn each_reconcile_sees_only_itself(path: &std::path::Path, plugin_config: &str) {
    let bytes = std::fs::read(path).unwrap();
    for keep_resident in [SandboxConfig::default().keep_resident_bytes, 16 << 20] {
        let config = SandboxConfig::default().cache_dir(None).keep_resident_bytes(keep_resident);
        let sandbox = Sandbox::new(config).unwrap();
        let plugin = sandbox.load(&bytes, &path.display().to_string()).await.unwrap();
        let plugin = sandbox.reserve(&plugin).unwrap();
        for name in ["first", "second", "first"] {
            let response = plugin.reconcile(&request(name, plugin_config), Arc::new(EmptyHost)).await.unwrap();
            assert_eq!(
                seen(&response.actions),
                json!([name]),
                "a reconcile saw an earlier one's state (keeping {keep_resident} bytes resident)"
            );
        }
    }
}

#[tokio::test]
async fn module_state_from_one_rust_reconcile_is_invisible_to_the_next() {
    let hostile = wasmloop_testenv::components::component("hostile_plugin");
    each_reconcile_sees_only_itself(&hostile, r#"{"mode": "remember"}"#).await;
}

#[tokio::test]
async fn module_state_from_one_python_reconcile_is_invisible_to_the_next() {
    let remember = wasmloop_testenv::components::python_component("host/tests/guests-py/remember");
    each_reconcile_sees_only_itself(&remember, "{}").await;
}

#[tokio::test]
async fn module_state_from_one_javascript_reconcile_is_invisible_to_the_next() {
    let remember = wasmloop_testenv::components::js_component("host/tests/guests-js/remember");
    each_reconcile_sees_only_itself(&remember, "{}").await;
}
