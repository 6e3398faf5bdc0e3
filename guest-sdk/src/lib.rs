//! Write a [wasmloop](https://github.com/wasmloop/wasmloop) reconcile plugin as one trait
//! impl and one macro call.
//!
//! The host runs the controller machinery (informers, work queue, server-side apply, owner
//! references, finalizers, events, backoff). A plugin only answers one question: given this
//! primary object and what is observed around it, which actions bring the world to its spec?
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use serde_json::json;
//! use wasmloop_sdk::prelude::*;
//!
//! struct Hello;
//!
//! impl Reconciler for Hello {
//!     fn manifest() -> Manifest {
//!         Manifest::new("hello", "0.1.0").primary::<ConfigMap>()
//!     }
//!
//!     fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
//!         let cm: ConfigMap = request.object()?;
//!         let keys = cm.data.map(|d| d.len()).unwrap_or(0);
//!         Ok(vec![event(EventType::Normal, "Counted", format!("{keys} keys"))])
//!     }
//! }
//!
//! wasmloop_sdk::export_plugin!(Hello);
//!
//! // The same logic runs natively in `cargo test`:
//! let outcome = wasmloop_sdk::testing::TestCase::new(json!({
//!     "apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "a", "namespace": "default", "uid": "1"},
//!     "data": {"x": "1"}
//! }))
//! .run::<Hello>();
//! assert_eq!(outcome.events()[0].message, "1 keys");
//! ```
//!
//! # Cost model
//! Objects arrive as JSON text and are parsed only when the plugin asks, straight into the
//! type it asks for: [`Request::object`], [`Request::owned`], [`cache::get`]. Routing fields
//! (kind, name, namespace, uid) travel beside the JSON, so filtering children by kind parses
//! nothing. Each parse is one `serde_json::from_str` into the caller's type, with no
//! intermediate `Value`. Actions serialize when they are built, so encoding happens once;
//! `requeue_after` is an action here and becomes the response's `requeue-after-ms`, the
//! shortest winning.
//!
//! # How it is built
//! [`export_plugin!`] is `macro_rules!`, not a proc macro: it implements the generated
//! `Guest` trait on a hidden type, and expands to nothing on native targets, so the crate and
//! every plugin build and test natively. The bindings are generated from the repository's
//! `wit/` (`bindings`), so a plugin has no WIT of its own. `testing::TestCase` plays the host
//! natively: the same undeclared-kind check, the host's refusals of a write no grant covers
//! and of a misused `prune`, and the manifest checks of `wasmloop_contract`. The feature
//! `phase-timing` records decode, logic and encode time in the guest and reports it through
//! `log`; only the host's benchmark builds with it.

// The root only declares modules and re-exports their items; it defines nothing a module
// uses, so it takes no part in the module graph, which stays acyclic.
mod abi;
pub mod action;
#[cfg(target_arch = "wasm32")]
mod bindings;
pub mod cache;
pub mod error;
mod host;
pub mod kind;
pub mod log;
pub mod manifest;
mod object_ref;
pub mod partial;
mod reconciler;
pub mod request;
pub use wasmloop_contract::selector;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
mod timing;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod __private;

pub use action::{
    Action, Apply, EventAction, EventType, PatchKind, apply, delete, event, patch, prune, requeue_after, status,
};
pub use error::Error;
pub use kind::{Gvk, Kind};
pub use manifest::{Grant, Index, Kept, KindSelector, Manifest, Settings, WriteScope};
pub use partial::Partial;
pub use reconciler::Reconciler;
pub use request::{ApplyConflict, Config, FieldConflict, Object, ObjectRef, Phase, Related, Request, Trigger};

/// Re-exported so plugins name the same k8s-openapi release as the SDK. The SDK picks no
/// Kubernetes version: a plugin depends on `k8s-openapi` itself and enables the one feature of
/// the oldest cluster it supports (`v1_37`, `v1_34`, `earliest`), as k8s-openapi requires of
/// the final crate.
pub use k8s_openapi;
/// Re-exported for `json!` in action builders.
pub use serde_json;

/// Everything a plugin usually needs, in one `use`: names a plugin is unlikely to define itself
/// (the host's [`Settings`] is left out, since a plugin's own configuration struct is often called
/// that; name it as `wasmloop_sdk::Settings`).
pub mod prelude {
    pub use crate::action::{
        Action, Apply, EventType, PatchKind, apply, delete, event, patch, prune, requeue_after, status,
    };
    pub use crate::cache;
    pub use crate::error::Error;
    pub use crate::kind::{Gvk, Kind};
    pub use crate::manifest::{Grant, KindSelector, Manifest};
    pub use crate::partial::Partial;
    pub use crate::reconciler::Reconciler;
    pub use crate::request::{Config, Object, ObjectRef, Phase, Related, Request, Trigger};
}

/// Exports a [`Reconciler`] as the plugin's component interface.
///
/// Call it once, at the crate root, with the type that implements [`Reconciler`]. On native
/// targets it expands to nothing, so the crate still builds and tests natively.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __WasmloopExport;
            impl $crate::__private::Guest for __WasmloopExport {
                fn manifest() -> $crate::__private::WitManifest {
                    $crate::__private::manifest::<$plugin>()
                }
                fn reconcile(
                    request: $crate::__private::WitRequest,
                ) -> ::core::result::Result<$crate::__private::WitResponse, $crate::__private::WitReconcileError>
                {
                    $crate::__private::reconcile::<$plugin>(request)
                }
                fn map(
                    change: $crate::__private::WitRelatedChange,
                    config: ::std::string::String,
                ) -> ::std::vec::Vec<$crate::__private::WitObjectRef> {
                    $crate::__private::map::<$plugin>(change, config)
                }
            }
            impl $crate::__private::CacheOptions for __WasmloopExport {
                fn keep_fields() -> ::std::vec::Vec<$crate::__private::WitKeep> {
                    $crate::__private::keep_fields::<$plugin>()
                }
            }
    $crate::__private::export!(__WasmloopExport with_types_in $crate::__private::bindings);
        };
    };
}
