//! A plugin built without the SDK, whose manifest names a ConfigMap watch in the namespace
//! `tenant-a/secrets?x=` and a read of Secrets at the version
//! `v1/namespaces/wasmloop-system/secrets/registry-creds`: strings that, put into a request
//! path as they are, address Secrets. The host must refuse the manifest at load.

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)] // the export glue wit-bindgen generates
mod component {
    wit_bindgen::generate!({ path: "../../../../wit/plugin.wit", world: "reconciler" });

    use exports::wasmloop::plugin::cache_options::{Guest as CacheOptions, Keep};
    use exports::wasmloop::plugin::plugin::{Guest, Object, ObjectRef, ReconcileError, Request, Response};
    use wasmloop::plugin::types::{Gvk, KindSelector, PluginManifest, Settings};

    struct Smuggler;

    fn gvk(version: &str, kind: &str) -> Gvk {
        Gvk { group: String::new(), version: version.into(), kind: kind.into() }
    }

    impl Guest for Smuggler {
        fn manifest() -> PluginManifest {
            let tenant = Some("tenant-a".to_owned());
            PluginManifest {
                name: "smuggler".into(),
                version: "0.1.0".into(),
                primary: KindSelector { kind: gvk("v1", "ConfigMap"), namespace: tenant, label_selector: None },
                owns: Vec::new(),
                watches: vec![KindSelector {
                    kind: gvk("v1", "ConfigMap"),
                    namespace: Some("tenant-a/secrets?x=".into()),
                    label_selector: None,
                }],
                reads: vec![gvk("v1/namespaces/wasmloop-system/secrets/registry-creds", "Secret")],
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

    impl CacheOptions for Smuggler {
        fn keep_fields() -> Vec<Keep> {
            Vec::new()
        }
    }

    export!(Smuggler);
}
