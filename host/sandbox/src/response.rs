//! The host's form of a plugin's response: what the executor carries out. Kept apart from
//! the decoding in `action`, which needs `error`, because `error::CallFailure::Plugin` carries
//! these actions too.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::bindings::Gvk;
use wasmloop_contract::names::{Name, Namespace};

/// Names one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: Name,
    /// `metadata.namespace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Namespace>,
    /// UID precondition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl ObjectRef {
    /// The referenced kind.
    ///
    /// # Errors
    /// When `apiVersion` or `kind` is not valid (never for a reference the sandbox decoded).
    pub fn gvk(&self) -> Result<Gvk, wasmloop_contract::names::Invalid> {
        Gvk::from_api_version(&self.api_version, &self.kind)
    }
}

/// Patch formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchKind {
    /// JSON merge patch.
    Merge,
    /// JSON patch.
    Json,
}

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventType {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

/// One checked action, ready for the executor.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Action {
    /// Server-side apply of this object.
    Apply(Value),
    /// Delete this object.
    Delete(ObjectRef),
    /// Patch this object.
    Patch {
        /// The target.
        target: ObjectRef,
        /// The patch format.
        #[serde(rename = "type")]
        kind: PatchKind,
        /// The patch document.
        patch: Value,
    },
    /// Set the primary's status.
    Status(Value),
    /// Record an Event on the primary.
    Event {
        /// Normal or Warning.
        #[serde(rename = "type")]
        event_type: EventType,
        /// Reason.
        reason: String,
        /// Message.
        message: String,
        /// Action; the host uses `Reconcile` when none.
        #[serde(skip_serializing_if = "Option::is_none")]
        action: Option<String>,
    },
}

/// A successful reconcile, decoded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// Actions in order.
    pub actions: Vec<Action>,
    /// Requeue after this long.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "duration_text")]
    pub requeue_after: Option<Duration>,
    /// The plugin asked to prune: delete the controlled children of owned kinds that
    /// `actions` does not apply, after every action has succeeded.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub prune: bool,
}

fn duration_text<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.collect_str(&format_args!("{}ms", d.as_millis())),
        None => s.serialize_none(),
    }
}
