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
    // Not `Hash`: wasmtime's `flags` types (write-verbs) do not derive it. Gvk, the one
    // map key, implements it below.
    additional_derives: [PartialEq, Eq],
});

impl std::hash::Hash for Gvk {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.group, &self.version, &self.kind).hash(state);
    }
}

pub use exports::wasmloop::plugin::plugin::{Phase, Request};
pub use wasmloop::plugin::types::{Gvk, Object};

pub(crate) mod wit {
    pub use super::exports::wasmloop::plugin::cache_options::{Keep, KeptFields};
    pub use super::exports::wasmloop::plugin::plugin::{Action, EventType, PatchKind, ReconcileError, Response};
    pub use super::wasmloop::plugin::cache::{CacheError, Host as CacheHost, Page};
    pub use super::wasmloop::plugin::log::Host as LogHost;
    pub use super::wasmloop::plugin::types::{
        Host as TypesHost, KindSelector, LogLevel, ObjectRef, PluginManifest, WriteGrant, WriteScope, WriteVerbs,
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

impl Gvk {
    /// The kind of an object with this `apiVersion` and `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Gvk {
        let (group, version) = wasmloop_contract::gvk::split_api_version(api_version);
        Gvk { group: group.into(), version: version.into(), kind: kind.into() }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version(), self.kind)
    }
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
    pub fn gvk(&self) -> Gvk {
        Gvk::from_api_version(&self.api_version, &self.kind)
    }
}
