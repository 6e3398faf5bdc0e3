//! Labels every Deployment `wasmloop.dev/labeled-by=v1`: a plugin whose behaviour a test can
//! see change when it is swapped for labeler-v2.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

const VERSION: &str = "v1";

include!("labeler.rs");
