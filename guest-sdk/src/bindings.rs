//! Bindings generated from `wit/plugin.wit`. A module of their own, used by both the host
//! imports (`host`) and the export glue (`__private`), so that neither depends on the other;
//! `__private::bindings` re-exports them at the path `export_plugin!` names.
#![allow(missing_docs)]

wit_bindgen::generate!({
    path: "../wit",
    world: "wasmloop:plugin/reconciler",
    pub_export_macro: true,
    default_bindings_module: "wasmloop_sdk::__private::bindings",
    export_macro_name: "export",
});
