//! The units of work in a plugin's queue: `Work::Reconcile` of a primary's key, and
//! `Work::Map` of a watched object's kind, namespace and name. Both go through the same queue
//! and the same workers; items are small keys, never objects.

use wasmloop_sandbox::{Gvk, Object};

/// A primary's place: namespace (none for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// Namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A related object whose change waits for the plugin's `map`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Related {
    pub(super) kind: Gvk,
    pub(super) namespace: Option<String>,
    pub(super) name: String,
}

/// A unit of work in a plugin's queue. Both kinds are taken by the same workers, so `map`
/// calls count against the plugin's concurrency and show in its metrics like reconciles.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Work {
    /// Reconcile the primary with this key.
    Reconcile(Key),
    /// Ask the plugin which primaries a related object's change concerns.
    Map(Related),
}

impl std::fmt::Display for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Work::Reconcile(key) => key.fmt(f),
            Work::Map(r) => {
                let key = Key { namespace: r.namespace.clone(), name: r.name.clone() };
                write!(f, "{} {key} (map)", r.kind.kind())
            }
        }
    }
}

/// The key of a primary.
pub(super) fn key_of(object: &Object) -> Key {
    Key { namespace: object.namespace.clone(), name: object.name.clone() }
}
