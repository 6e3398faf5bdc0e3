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
    /// Kubernetes strategic merge patch (built-in kinds).
    Strategic,
}

/// A server-side apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Apply {
    /// The object: the plugin's whole intent for the fields it manages.
    pub object: Value,
    /// Take fields other managers own.
    pub force: bool,
    /// Only act if the live object has this UID.
    pub uid: Option<String>,
}

impl Apply {
    /// A forced apply of `object`, as every apply of contracts 0.1 and 0.2 was.
    pub fn forced(object: Value) -> Apply {
        Apply { object, force: true, uid: None }
    }
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
///
/// It serializes (for `wasmloop reconcile`, recordings and their replay) as `{apply: OBJECT}`
/// for a forced apply without precondition, what every apply was before contract 0.3, so
/// cases recorded then replay unchanged; `force: false` and `uid` appear beside `apply` only
/// when set otherwise.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Server-side apply.
    Apply(Apply),
    /// Delete this object.
    Delete(ObjectRef),
    /// Patch this object.
    Patch {
        /// The target.
        target: ObjectRef,
        /// The patch format.
        kind: PatchKind,
        /// The patch document.
        patch: Value,
    },
    /// Set the primary's status.
    Status(Value),
    /// Record an Event on the primary.
    Event {
        /// Normal or Warning.
        event_type: EventType,
        /// Reason.
        reason: String,
        /// Message.
        message: String,
        /// Action; the host uses `Reconcile` when none.
        action: Option<String>,
    },
}

/// The other actions' shapes, borrowed: the derived form of the enum without `Apply`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum Shown<'a> {
    Delete(&'a ObjectRef),
    Patch {
        target: &'a ObjectRef,
        #[serde(rename = "type")]
        kind: PatchKind,
        patch: &'a Value,
    },
    Status(&'a Value),
    Event {
        #[serde(rename = "type")]
        event_type: EventType,
        reason: &'a str,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        action: &'a Option<String>,
    },
}

impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let shown = match self {
            Action::Apply(a) => {
                let entries = 1 + usize::from(!a.force) + usize::from(a.uid.is_some());
                let mut map = s.serialize_map(Some(entries))?;
                map.serialize_entry("apply", &a.object)?;
                if !a.force {
                    map.serialize_entry("force", &false)?;
                }
                if let Some(uid) = &a.uid {
                    map.serialize_entry("uid", uid)?;
                }
                return map.end();
            }
            Action::Delete(r) => Shown::Delete(r),
            Action::Patch { target, kind, patch } => Shown::Patch { target, kind: *kind, patch },
            Action::Status(v) => Shown::Status(v),
            Action::Event { event_type, reason, message, action } => {
                Shown::Event { event_type: *event_type, reason, message, action }
            }
        };
        shown.serialize(s)
    }
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
