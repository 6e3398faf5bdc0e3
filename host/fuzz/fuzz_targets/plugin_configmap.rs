//! ConfigMaps of any content, as the API server would send them (JSON), through the plugin
//! ConfigMap parse (`plugin_configmap::read`): an accepted one names a valid plugin, a parsed
//! pull secret and a bounded component, which expands to no more than it said; a refusal is
//! bounded.

#![no_main]

use k8s_openapi::api::core::v1::ConfigMap;
use libfuzzer_sys::fuzz_target;
use wasmloop::plugin_configmap::{MAX_COMPONENT, read};
use wasmloop_contract::validate::{MAX_FOREIGN_TEXT, plugin_name};

fuzz_target!(|json: &[u8]| {
    let Ok(configmap) = serde_json::from_slice::<ConfigMap>(json) else {
        return;
    };
    match read(&configmap) {
        Ok(payload) => {
            assert!(plugin_name(&payload.name).is_ok(), "{:?}", payload.name);
            // What holding it will take is bounded before anything is expanded, and expanding
            // holds to it.
            assert!(payload.component.expanded_size() <= MAX_COMPONENT);
            assert!(payload.component.is_empty() == payload.reference.is_some());
            let said = payload.component.expanded_size();
            if let Ok(bytes) = payload.component.unpack("fuzzed") {
                assert!(bytes.len() as u64 <= said, "{} > {said}", bytes.len());
            }
            if let Some(config) = &payload.config {
                assert!(serde_json::from_str::<serde_json::Value>(config).is_ok(), "{config:.200}");
            }
        }
        Err(refused) => {
            let text = refused.to_string();
            assert!(text.len() <= 2 * MAX_FOREIGN_TEXT, "a refusal of {} bytes: {text:.300}", text.len());
        }
    }
});
