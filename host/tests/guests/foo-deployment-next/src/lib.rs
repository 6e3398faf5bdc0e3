//! foo-deployment built again with another image (see `build.rs`): a "next version" whose
//! every Deployment differs from the recorded one, for `wasmloop replay`'s tests.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

#[path = "../../../../../plugins/foo-deployment/src/lib.rs"]
mod foo_deployment;
