//! Stamps each ConfigMap labelled `wasmloop.dev/stamp=true` with the annotation
//! `stamp.wasmloop.dev/<name>: "true"`, once: a plugin whose every reconcile a test can see.
//!
//! Its name is `stamp`, or `STAMP_NAME` at build time, so that the sharding tests can build
//! several plugins that differ only in name (cargo rebuilds only this crate for each).

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;
use wasmloop_sdk::prelude::*;

const NAME: &str = match option_env!("STAMP_NAME") {
    Some(name) => name,
    None => "stamp",
};

struct Stamp;

impl Reconciler for Stamp {
    fn manifest() -> Manifest {
        Manifest::new(NAME, "0.1.0")
            .primary_selector(KindSelector::of::<ConfigMap>().labels("wasmloop.dev/stamp=true"))
            .writes(Grant::of::<ConfigMap>().patch())
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let key = format!("stamp.wasmloop.dev/{NAME}");
        let configmap: ConfigMap = request.object()?;
        if configmap.metadata.annotations.unwrap_or_default().contains_key(&key) {
            return Ok(Vec::new());
        }
        let stamp = json!({"metadata": {"annotations": {key: "true"}}});
        Ok(vec![patch(request.object.to_ref(), PatchKind::Merge, &stamp)])
    }
}

wasmloop_sdk::export_plugin!(Stamp);
