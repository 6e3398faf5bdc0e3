//! Exports `wasmloop:plugin/plugin@0.2.0` with the action variant as it was before `prune`:
//! its manifest is valid, its `reconcile` has a type the host no longer serves, and the host
//! must say so at load instead of failing every call.

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // the export glue wit-bindgen generates
mod component {
    wit_bindgen::generate!({ path: "wit", world: "reconciler" });

    use exports::wasmloop::plugin::plugin::{Guest, Object, ObjectRef, ReconcileError, Request, Response};
    use wasmloop::plugin::types::{Gvk, KindSelector, PluginManifest, Settings};

    struct Stale;

    impl Guest for Stale {
        fn manifest() -> PluginManifest {
            let configmap = Gvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() };
            PluginManifest {
                name: "stale".into(),
                version: "0.1.0".into(),
                primary: KindSelector { kind: configmap, namespace: None, label_selector: None },
                owns: Vec::new(),
                watches: Vec::new(),
                reads: Vec::new(),
                metadata_only: Vec::new(),
                writes: Vec::new(),
                finalizer: None,
                prune: false,
                deliver_deleted: false,
                deliver_previous: false,
                settings: Settings {
                    max_concurrent_reconciles: None,
                    deadline_ms: None,
                    memory_limit_bytes: None,
                    response_limit_bytes: None,
                    resync_seconds: None,
                },
            }
        }

        fn reconcile(_: Request) -> Result<Response, ReconcileError> {
            Ok(Response { actions: Vec::new(), requeue_after_ms: None })
        }

        fn map(_: Object, _: String) -> Vec<ObjectRef> {
            Vec::new()
        }
    }

    export!(Stale);
}
