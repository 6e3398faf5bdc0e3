//! The only `bindgen!` of the host: Rust types for `wit/plugin.wit`.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "wasmloop:plugin/reconciler",
    additional_derives: [PartialEq, Eq, Hash],
});

pub use exports::wasmloop::plugin::plugin::{Phase, Request};
pub use wasmloop::plugin::types::{Gvk, Object};

pub(crate) mod wit {
    pub use super::exports::wasmloop::plugin::plugin::{Action, EventType, PatchKind, ReconcileError, Response};
    pub use super::wasmloop::plugin::host::Host;
    pub use super::wasmloop::plugin::types::{Host as TypesHost, KindSelector, LogLevel, ObjectRef, PluginManifest};
}

impl Gvk {
    /// The kind of an object with this `apiVersion` and `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Gvk {
        let (group, version) = wasmloop_sdk::kind::split_api_version(api_version);
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
