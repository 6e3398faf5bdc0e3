//! What a reconcile asks the host to do, and the builders that make it.
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use wasmloop_sdk::prelude::*;
//!
//! let cm = ConfigMap { metadata: Default::default(), ..Default::default() };
//! let actions = vec![
//!     apply(&cm),
//!     status(serde_json::json!({"ready": true})),
//!     event(EventType::Normal, "Synced", "all good"),
//!     requeue_after(Duration::from_secs(60)),
//! ];
//! assert_eq!(actions.len(), 4);
//! ```

use std::time::Duration;

use serde::Serialize;

use crate::object_ref::ObjectRef;
use crate::timing;

/// Event severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Normal operation.
    Normal,
    /// Something the user should look at.
    Warning,
}

/// An Event to record on the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAction {
    /// Normal or Warning.
    pub event_type: EventType,
    /// Short CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// What the controller did; the host uses `Reconcile` when none.
    pub action: Option<String>,
}

/// How to patch an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// RFC 7386 JSON merge patch: lists are replaced whole.
    Merge,
    /// RFC 6902 JSON patch.
    Json,
    /// Kubernetes' strategic merge patch: lists of built-in kinds merge by their key (a
    /// container by `name`). The API server refuses it for custom resources.
    Strategic,
}

/// A server-side apply, as [`apply`] makes it (forced) or as you set it.
///
/// The object is the plugin's whole intent for the fields it manages (field manager
/// `wasmloop/<plugin name>`): a field it applied before and leaves out now is removed, unless
/// another manager set it too. So apply a partial object naming only the fields the plugin
/// cares about ([`crate::partial::Partial`], or `json!`), never a typed object whose empty
/// required fields (`"selector": {}`) would claim them.
///
/// ```
/// use serde_json::json;
/// use wasmloop_sdk::action::{Action, Apply};
/// let replicas = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}});
/// // Not forced: if another manager owns spec.replicas, nothing is written and the next
/// // reconcile carries a `Trigger::Conflict` naming it.
/// let polite: Action = Apply::of(&replicas).unforced().into();
/// # let _ = polite;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Apply {
    /// The object as JSON text.
    pub json: String,
    /// Take fields other managers own.
    pub force: bool,
    /// Only act if the live object has this UID.
    pub uid: Option<String>,
}

impl Apply {
    /// A forced apply of `object`.
    pub fn of(object: &impl Serialize) -> Apply {
        Apply { json: to_json(object, "apply"), force: true, uid: None }
    }

    /// Takes no field another manager owns: a conflict writes nothing, and comes back to the
    /// plugin as a [`crate::Trigger::Conflict`] in the next reconcile.
    #[must_use]
    pub fn unforced(mut self) -> Apply {
        self.force = false;
        self
    }

    /// Acts only if the live object has this UID (and creates nothing when it is gone).
    #[must_use]
    pub fn uid(mut self, uid: impl Into<String>) -> Apply {
        self.uid = Some(uid.into());
        self
    }
}

impl From<Apply> for Action {
    fn from(apply: Apply) -> Action {
        Action::Apply(apply)
    }
}

/// One thing for the host to do. Build them with [`apply`] (or [`Apply`]), [`delete`],
/// [`patch`], [`status`], [`event`], [`prune`] and [`requeue_after`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Server-side apply.
    Apply(Apply),
    /// Delete the object.
    Delete(ObjectRef),
    /// Patch an object.
    Patch {
        /// Which object.
        target: ObjectRef,
        /// Which patch format.
        kind: PatchKind,
        /// The patch as JSON text.
        patch: String,
    },
    /// Set the primary's status to this JSON value.
    Status(String),
    /// Record an Event on the primary.
    Event(EventAction),
    /// Delete the controlled children of owned kinds that this response does not apply.
    Prune,
    /// Reconcile again after this long, even without changes.
    RequeueAfter(Duration),
}

fn to_json(value: &impl Serialize, what: &str) -> String {
    timing::encode(|| serde_json::to_string(value)).unwrap_or_else(|e| {
        // Only maps with non-string keys fail here: a bug in the plugin's types.
        panic!("wasmloop-sdk: cannot serialize the {what} action: {e}")
    })
}

/// Server-side applies `object`, forced (taking fields other managers own): any serializable
/// object that carries `apiVersion`, `kind` and `metadata.name`. List only the fields you own:
/// see [`Apply`] for what a field left out does, and [`Apply::unforced`] to be told of
/// conflicts instead.
pub fn apply(object: &impl Serialize) -> Action {
    Apply::of(object).into()
}

/// Deletes the referenced object (with its UID as a precondition when set).
pub fn delete(target: ObjectRef) -> Action {
    Action::Delete(target)
}

/// Patches the referenced object with a merge, JSON or strategic merge patch.
pub fn patch(target: ObjectRef, kind: PatchKind, patch: &impl Serialize) -> Action {
    Action::Patch { target, kind, patch: to_json(patch, "patch") }
}

/// Sets the primary's status subresource to `status` (the content of the `status` field).
pub fn status(status: impl Serialize) -> Action {
    Action::Status(to_json(&status, "status"))
}

/// Records an Event on the primary.
pub fn event(event_type: EventType, reason: impl Into<String>, message: impl Into<String>) -> Action {
    Action::Event(EventAction { event_type, reason: reason.into(), message: message.into(), action: None })
}

/// Asks the host to delete every child the primary controls, of an owned kind, that this
/// response does not [`apply`]: the applies in the response are the whole desired set.
///
/// The host prunes after every other action has succeeded, wherever `prune()` is in the
/// list. It needs [`crate::Manifest::prune`] in the manifest and phase `Apply`; once per
/// response. Return it only when the response applies everything that should exist: a
/// response without it deletes nothing it does not name, and an [`crate::Error`] deletes
/// nothing at all.
///
/// ```
/// use wasmloop_sdk::action::{apply, prune};
/// # let desired = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
/// let actions = vec![apply(&desired), prune()];
/// # assert_eq!(actions.len(), 2);
/// ```
pub fn prune() -> Action {
    Action::Prune
}

/// Asks the host to reconcile this primary again after `after`, even without changes.
/// With several, the shortest wins.
pub fn requeue_after(after: Duration) -> Action {
    Action::RequeueAfter(after)
}
