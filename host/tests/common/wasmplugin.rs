//! `WasmPlugin`s as the tests make and read them: `wasmloop bundle --wasmplugin`'s output
//! created as it is, and the status and conditions the host writes.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;
use wasmloop_testenv::{TestNamespace, eventually};

use super::component;

/// The kind, as `deploy/` installs it.
pub const WASMPLUGIN_CRD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/base/wasmplugin-crd.yaml");

/// The kind's resource, for an `Api` of a namespace that did not install it.
pub fn wasmplugins_resource() -> kube::api::ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk("wasmloop.dev", "v1alpha1", "WasmPlugin");
    kube::api::ApiResource::from_gvk_with_plural(&gvk, "wasmplugins")
}

/// `wasmloop bundle <component> --name <name> --namespace <ns> --wasmplugin [extra]`: the
/// component's ConfigMap, if any, and the `WasmPlugin`.
pub fn bundle(component_name: &str, name: &str, namespace: &str, extra: &[&str]) -> (Option<ConfigMap>, DynamicObject) {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .arg("bundle")
        .arg(component(component_name))
        .args(["--name", name, "--namespace", namespace, "--wasmplugin"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "bundle failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut documents: Vec<Value> =
        serde_saphyr::from_multiple_with_options(&text, wasmloop::input::yaml_options()).expect("bundle prints YAML");
    let plugin = serde_json::from_value(documents.pop().expect("a WasmPlugin")).unwrap();
    let configmap = documents.pop().map(|cm| serde_json::from_value(cm).unwrap());
    (configmap, plugin)
}

/// Creates what `bundle` printed.
pub async fn apply(ns: &TestNamespace, plugins: &Api<DynamicObject>, bundled: (Option<ConfigMap>, DynamicObject)) {
    if let Some(configmap) = bundled.0 {
        ns.api::<ConfigMap>().create(&PostParams::default(), &configmap).await.unwrap();
    }
    plugins.create(&PostParams::default(), &bundled.1).await.unwrap();
}

/// Waits until the `WasmPlugin`'s status passes `check`, and returns it.
pub async fn status(api: &Api<DynamicObject>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(Duration::from_secs(90), what, || {
        let api = api.clone();
        let check = &check;
        async move {
            let plugin = api.get(name).await.map_err(|e| e.to_string())?;
            let status = plugin.data.get("status").cloned().unwrap_or_default();
            if check(&status) { Ok(status) } else { Err(status.to_string()) }
        }
    })
    .await
}

/// The condition of type `type_` in `status`.
pub fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == type_)).unwrap_or(&Value::Null)
}

/// Whether condition `type_` has status `holds` and reason `reason`.
pub fn is(status: &Value, type_: &str, holds: &str, reason: &str) -> bool {
    let condition = condition(status, type_);
    condition["status"] == holds && condition["reason"] == reason
}
