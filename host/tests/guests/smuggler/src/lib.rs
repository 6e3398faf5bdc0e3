//! A plugin whose manifest names a ConfigMap watch in the namespace `tenant-a/secrets?x=` and
//! a read of Secrets at the version `v1/namespaces/wasmloop-system/secrets/registry-creds`:
//! strings that, put into a request path as they are, address Secrets. The SDK builds the
//! manifest as asked (it checks manifests in `TestCase`, not at export); the host must refuse
//! it at load.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use k8s_openapi::api::core::v1::ConfigMap;
use wasmloop_sdk::prelude::*;

/// Secrets, at a "version" that is a path.
struct SmuggledSecret;

impl Kind for SmuggledSecret {
    const API_VERSION: &'static str = "v1/namespaces/wasmloop-system/secrets/registry-creds";
    const KIND: &'static str = "Secret";
}

struct Smuggler;

impl Reconciler for Smuggler {
    fn manifest() -> Manifest {
        Manifest::new("smuggler", "0.1.0")
            .primary_selector(KindSelector::of::<ConfigMap>().namespace("tenant-a"))
            .watches(KindSelector::of::<ConfigMap>().namespace("tenant-a/secrets?x="))
            .reads::<SmuggledSecret>()
    }

    fn reconcile(_: &Request) -> Result<Vec<Action>, Error> {
        Ok(Vec::new())
    }
}

wasmloop_sdk::export_plugin!(Smuggler);
