//! The host's three `bindgen!`s: `wit/plugin.wit` (contract 0.3, what the host is written
//! against), `wit/v0.2/plugin.wit` and `wit/v0.1/plugin.wit` (contracts 0.2 and 0.1, served
//! through the adapters in `adapter/`).
//!
//! wasmtime type-checks records by shape, not by package, so older exports are called with
//! the types that have their shape: counted mirrors in `lift/` for what a guest returns, and
//! borrowed mirrors in `adapter/` for what the host hands it. Only their imports use their own
//! generated types. (`with:` cannot share single records between versions: wasmtime 48 remaps
//! whole interfaces, and each version's `types` holds a manifest of another shape.)
//!
//! Names in the WIT: `list` and `map` are WIT keywords, so the imports are `get-object` and
//! `list-objects` and the export is `%map` (still `map` on the wire); the manifest record is
//! `plugin-manifest` because `manifest` is the export's name.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "wasmloop:plugin/reconciler@0.3.0",
    additional_derives: [PartialEq, Eq],
});

pub use exports::wasmloop::plugin::plugin::{ApplyConflict, FieldConflict, GenerationChange, Phase, Request, Trigger};
pub use wasmloop::plugin::types::Object;
/// The contract's `object-ref`, as triggers carry it (the host's own decoded form is
/// [`crate::ObjectRef`]).
pub use wasmloop::plugin::types::ObjectRef as WitObjectRef;
pub use wasmloop_contract::names::Gvk;

pub(crate) mod wit {
    pub use super::exports::wasmloop::plugin::cache_options::{Keep, KeptFields};
    pub use super::exports::wasmloop::plugin::plugin::{
        Action, ApplyObject, Event, EventType, Patch, PatchKind, ReconcileError, Response,
    };
    pub use super::wasmloop::plugin::cache::{CacheError, Host as CacheHost, Page};
    pub use super::wasmloop::plugin::log::Host as LogHost;
    pub use super::wasmloop::plugin::types::{
        AnnotationMatch, Gvk, Host as TypesHost, Index, KindSelector, LogLevel, ObjectRef, PluginManifest, Settings,
        WriteGrant, WriteScope, WriteVerbs,
    };
}

/// Contract 0.2: its imports, generated anew (their package names carry `@0.2.1`).
pub(crate) mod v0_2 {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.2",
        world: "wasmloop:plugin/reconciler@0.2.1",
    });

    pub(crate) use wasmloop::plugin::cache::{CacheError, Host as CacheHost, Page};
    pub(crate) use wasmloop::plugin::log::Host as LogHost;
    pub(crate) use wasmloop::plugin::types::{Gvk, Host as TypesHost, LogLevel, Object};
}

/// Contract 0.1: its `host` import, generated anew.
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
