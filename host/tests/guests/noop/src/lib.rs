//! Reconciles every ConfigMap it is served and returns no action: what a plugin costs the host
//! when its logic costs nothing. The scale benchmark runs it against a native kube-rs
//! controller doing the same nothing.
//!
//! Its name is `noop`, or `NOOP_NAME` at build time, so that a benchmark can build several
//! plugins that differ only in name.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use k8s_openapi::api::core::v1::ConfigMap;
use wasmloop_sdk::prelude::*;

const NAME: &str = match option_env!("NOOP_NAME") {
    Some(name) => name,
    None => "noop",
};

struct Noop;

impl Reconciler for Noop {
    fn manifest() -> Manifest {
        Manifest::new(NAME, "0.1.0").primary::<ConfigMap>()
    }

    fn reconcile(_request: &Request) -> Result<Vec<Action>, Error> {
        Ok(Vec::new())
    }
}

wasmloop_sdk::export_plugin!(Noop);
