//! The host's two `bindgen!`s: `wit/plugin.wit` (contract 0.2.1, what the host is written
//! against) and `wit/v0.1/plugin.wit` (contract 0.1, served through the adapter in
//! `adapter.rs`).
//!
//! wasmtime type-checks records by shape, not by package, so 0.1's exports are called with
//! 0.2's Rust types wherever the two agree (the request, and the response and `map` results,
//! lifted through `lift.rs`'s counted mirrors); only the manifest and the error have 0.1 mirrors
//! of their own there, and the `host` import uses 0.1's generated types. (`with:` cannot share single
//! records between the two: wasmtime 48 remaps whole interfaces, and 0.1's `types` holds a
//! manifest of another shape.)

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "wasmloop:plugin/reconciler@0.2.1",
    additional_derives: [PartialEq, Eq],
});

pub use exports::wasmloop::plugin::plugin::{Phase, Request};
pub use wasmloop::plugin::types::Object;
pub use wasmloop_contract::names::Gvk;

pub(crate) mod wit {
    pub use super::exports::wasmloop::plugin::cache_options::{Keep, KeptFields};
    pub use super::exports::wasmloop::plugin::plugin::{Action, EventType, PatchKind, ReconcileError, Response};
    pub use super::wasmloop::plugin::cache::{CacheError, Host as CacheHost, Page};
    pub use super::wasmloop::plugin::log::Host as LogHost;
    pub use super::wasmloop::plugin::types::{
        Gvk, Host as TypesHost, KindSelector, LogLevel, ObjectRef, PluginManifest, WriteGrant, WriteScope, WriteVerbs,
    };
}

/// Contract 0.1: only what differs from 0.2 is generated anew.
pub(crate) mod v0_1 {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.1",
        world: "wasmloop:plugin/reconciler@0.1.0",
    });

    pub(crate) use wasmloop::plugin::host::Host;
    pub(crate) use wasmloop::plugin::types::{Gvk, Host as TypesHost, LogLevel, Object};
}

/// A kind a guest named, parsed: the one way a guest's `gvk` record becomes a [`Gvk`].
///
/// # Errors
/// A sentence naming the part that is not valid.
pub(crate) fn parse_gvk(g: &wit::Gvk) -> Result<Gvk, wasmloop_contract::names::Invalid> {
    Gvk::new(&g.group, &g.version, &g.kind)
}

impl Object {
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub fn display_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }

    /// The object's kind.
    ///
    /// # Errors
    /// When its `apiVersion` or `kind` is not a valid one.
    pub fn gvk(&self) -> Result<Gvk, wasmloop_contract::names::Invalid> {
        Gvk::from_api_version(&self.api_version, &self.kind)
    }
}
