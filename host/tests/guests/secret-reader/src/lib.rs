//! Reads the Secret that a ConfigMap labelled `wasmloop.dev/secret-reader` names in
//! `data.secret`, and says how many keys it holds: a plugin whose recorded cases hold a
//! Secret, so a test can check that none is written in clear.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use wasmloop_sdk::prelude::*;

struct SecretReader;

impl Reconciler for SecretReader {
    fn manifest() -> Manifest {
        Manifest::new("secret-reader", "0.1.0")
            .primary_selector(KindSelector::of::<ConfigMap>().labels("wasmloop.dev/secret-reader"))
            .reads::<Secret>()
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let cm: ConfigMap = request.object()?;
        let Some(name) = cm.data.unwrap_or_default().remove("secret") else { return Ok(Vec::new()) };
        let secret = cache::get::<Secret>(request.object.namespace.as_deref(), &name)?;
        let keys = secret.and_then(|s| s.data).map_or(0, |d| d.len());
        Ok(vec![event(EventType::Normal, "SecretRead", format!("secret {name} holds {keys} keys"))])
    }
}

wasmloop_sdk::export_plugin!(SecretReader);
