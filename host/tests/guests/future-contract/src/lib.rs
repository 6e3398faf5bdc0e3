//! Exports `wasmloop:plugin/plugin@0.4.0`, which a 0.3 host must refuse by name.

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // the export glue wit-bindgen generates
mod component {
    wit_bindgen::generate!({ path: "wit", world: "reconciler" });

    struct Future;

    impl exports::wasmloop::plugin::plugin::Guest for Future {
        fn manifest() -> String {
            "future".into()
        }
    }

    export!(Future);
}
