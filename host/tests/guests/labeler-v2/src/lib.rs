//! The labeler's next version: labels every Deployment `wasmloop.dev/labeled-by=v2`.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

const VERSION: &str = "v2";

include!("../../labeler/src/labeler.rs");
