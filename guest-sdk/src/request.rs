//! What one reconcile sees: the primary, its owned children, the phase, why it runs
//! ([`Trigger`]) and the config.

use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::kind::{Gvk, Kind};
use crate::timing;

pub use crate::object_ref::ObjectRef;

/// One Kubernetes object as it crossed the boundary: routing fields plus unparsed JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, none for cluster-scoped objects.
    pub namespace: Option<String>,
    /// `metadata.uid`, empty for objects not stored yet.
    pub uid: String,
    json: String,
}

impl Object {
    /// Wraps JSON text whose routing fields are already known (no parsing).
    pub fn from_parts(
        api_version: String,
        kind: String,
        name: String,
        namespace: Option<String>,
        uid: String,
        json: String,
    ) -> Self {
        Object { api_version, kind, name, namespace, uid, json }
    }

    /// Builds an object from a JSON value, reading its routing fields from it.
    ///
    /// # Errors
    /// A permanent error when `apiVersion`, `kind` or `metadata.name` is missing.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, Error> {
        let text = |pointer: &str| value.pointer(pointer).and_then(|v| v.as_str());
        let required = |pointer: &str| {
            text(pointer).map(str::to_owned).ok_or_else(|| {
                Error::permanent(format!(
                    "object has no {pointer}: give every object apiVersion, kind and metadata.name"
                ))
            })
        };
        Ok(Object {
            api_version: required("/apiVersion")?,
            kind: required("/kind")?,
            name: required("/metadata/name")?,
            namespace: text("/metadata/namespace").map(str::to_owned),
            uid: text("/metadata/uid").unwrap_or_default().to_owned(),
            json: value.to_string(),
        })
    }

    /// The object's JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Consumes the object, returning its JSON text.
    pub fn into_json(self) -> String {
        self.json
    }

    /// True when the object is of kind `K`.
    pub fn is<K: Kind>(&self) -> bool {
        self.kind == K::KIND && self.api_version == K::API_VERSION
    }

    /// The object's kind.
    pub fn gvk(&self) -> Gvk {
        Gvk::from_api_version(&self.api_version, &self.kind)
    }

    /// Parses the JSON into `T`, once, straight from the text.
    ///
    /// # Errors
    /// A permanent error naming the object and the first field that did not fit `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, Error> {
        timing::decode(|| serde_json::from_str(&self.json)).map_err(|e| {
            Error::permanent(format!(
                "cannot decode {} {}: {e}; fix the object or the plugin's type for it",
                self.kind,
                self.display_name()
            ))
        })
    }

    /// A reference to this object, with its UID as a precondition when known.
    pub fn to_ref(&self) -> ObjectRef {
        ObjectRef {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            uid: (!self.uid.is_empty()).then(|| self.uid.clone()),
        }
    }

    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub fn display_name(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Why the host calls `reconcile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The primary exists: drive the world to its spec.
    Apply,
    /// The primary is being deleted and carries the plugin's finalizer: release what owner
    /// references do not cover. The host removes the finalizer after success.
    Cleanup,
    /// The primary is gone; the request carries its last known state.
    Deleted,
}

/// The plugin's configuration, parsed on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    json: String,
}

impl Config {
    /// Wraps configuration JSON text (`{}` when none was given).
    pub fn new(json: String) -> Self {
        Config { json }
    }

    /// The configuration's JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Parses the configuration into the plugin's own settings type.
    ///
    /// # Errors
    /// A permanent error that quotes the parse failure; fix the plugin's config.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, Error> {
        let text = if self.json.trim().is_empty() { "{}" } else { &self.json };
        serde_json::from_str(text).map_err(|e| {
            Error::permanent(format!(
                "invalid plugin config: {e}; fix the plugin's configuration (config.yaml or --config)"
            ))
        })
    }
}

/// A field another manager owns, which a non-forced apply would have taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldConflict {
    /// The manager that owns it (`kubectl-edit`, `wasmloop/other`).
    pub manager: String,
    /// The field, as the API server names it (`.spec.replicas`).
    pub field: String,
}

/// A non-forced apply ([`crate::action::Apply::unforced`]) that wrote nothing, because other
/// managers own fields it sets; nothing after it in that response ran either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyConflict {
    /// The object the apply named.
    pub target: ObjectRef,
    /// The fields and their owners (at most 64).
    pub fields: Vec<FieldConflict>,
    /// Conflicts beyond those listed.
    pub more: u32,
}

/// Why a reconcile runs. The host keeps every trigger of a key that arrives while the key
/// waits, in order, so one call may carry several.
///
/// ```
/// use wasmloop_sdk::prelude::*;
/// fn secret_rotated(request: &Request) -> bool {
///     request.triggers.iter().any(|t| matches!(t, Trigger::RelatedChanged(r) if r.kind == "Secret"))
/// }
/// # let _ = secret_rotated;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// The primary was created, changed or is being deleted, or is new to this host.
    PrimaryChanged {
        /// The generation the host last saw; none for an object new to it.
        old: Option<i64>,
        /// The generation now; none for kinds without one.
        new: Option<i64>,
    },
    /// A child of an owned kind changed or was deleted.
    OwnedChanged(ObjectRef),
    /// `map` named this primary for a change of this related object.
    RelatedChanged(ObjectRef),
    /// The periodic resync.
    Resync,
    /// The requeue the last response asked for came due.
    Requeue,
    /// The last reconcile failed; this is a retry.
    Retry,
    /// The last reconcile's non-forced apply met fields another manager owns.
    Conflict(ApplyConflict),
}

/// A change of a related object, as [`crate::Reconciler::map_change`] sees it.
#[derive(Debug, Clone)]
pub struct Related {
    /// Its new state, or its last state when it went.
    pub object: Object,
    /// It was deleted, or left the watch's selection.
    pub deleted: bool,
}

/// Everything one reconcile sees.
#[derive(Debug, Clone)]
pub struct Request {
    /// The primary object.
    pub object: Object,
    /// Observed children of owned kinds, found by owner UID.
    pub owned: Vec<Object>,
    /// Why the host calls.
    pub phase: Phase,
    /// With [`crate::Manifest::deliver_previous`]: the primary at the last successful
    /// reconcile in this host process; none the first time.
    pub previous: Option<Object>,
    /// 0 on the first try; n after n failures in a row.
    pub attempt: u32,
    /// The plugin's configuration.
    pub config: Config,
    /// Why it runs: every trigger since the last call, oldest first, at most 32.
    pub triggers: Vec<Trigger>,
    /// Triggers beyond those listed.
    pub triggers_dropped: u32,
}

impl Request {
    /// Parses the primary into `T` (a k8s-openapi type or your CRD struct).
    ///
    /// # Errors
    /// A permanent error naming the object and the field that did not fit.
    pub fn object<T: DeserializeOwned>(&self) -> Result<T, Error> {
        self.object.parse()
    }

    /// Parses the owned children of kind `K`; children of other kinds are not parsed.
    ///
    /// # Errors
    /// A permanent error naming the first child that did not fit `K`.
    pub fn owned<K: Kind + DeserializeOwned>(&self) -> Result<Vec<K>, Error> {
        self.owned.iter().filter(|o| o.is::<K>()).map(Object::parse).collect()
    }

    /// Parses the plugin's configuration.
    ///
    /// # Errors
    /// A permanent error quoting the parse failure.
    pub fn config<T: DeserializeOwned>(&self) -> Result<T, Error> {
        self.config.parse()
    }
}
