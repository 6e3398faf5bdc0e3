//! A plugin's response, decoded and checked by the host ("host decode"): JSON parsed once,
//! every target's kind checked against the manifest, before anything reaches the executor.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::bindings::{Gvk, wit};
use crate::error::CallFailure;
use crate::manifest::Manifest;

/// Names one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// UID precondition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl ObjectRef {
    /// The referenced kind.
    pub fn gvk(&self) -> Gvk {
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
}

fn duration_text<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.collect_str(&format_args!("{}ms", d.as_millis())),
        None => s.serialize_none(),
    }
}

/// Total bytes of every string in a response: what the guest made the host copy.
pub(crate) fn response_size(r: &wit::Response) -> usize {
    let ref_size = |o: &wit::ObjectRef| {
        o.api_version.len()
            + o.kind.len()
            + o.name.len()
            + o.namespace.as_ref().map_or(0, String::len)
            + o.uid.as_ref().map_or(0, String::len)
    };
    r.actions
        .iter()
        .map(|a| match a {
            wit::Action::Apply(j) | wit::Action::Status(j) => j.len(),
            wit::Action::Delete(o) => ref_size(o),
            wit::Action::Patch(p) => ref_size(&p.target) + p.patch.len(),
            wit::Action::Event(e) => e.reason.len() + e.message.len() + e.action.as_ref().map_or(0, String::len),
        })
        .sum()
}

fn parse(json: &str, what: &str) -> Result<Value, CallFailure> {
    serde_json::from_str(json).map_err(|e| CallFailure::InvalidAction(format!("{what} is not valid JSON: {e}")))
}

fn declared(manifest: &Manifest, api_version: &str, kind: &str, verb: &str) -> Result<(), CallFailure> {
    if manifest.declares_api(api_version, kind) {
        Ok(())
    } else {
        Err(CallFailure::UndeclaredKind {
            verb: verb.into(),
            kind: Gvk::from_api_version(api_version, kind).to_string(),
        })
    }
}

pub(crate) fn object_ref(o: wit::ObjectRef) -> ObjectRef {
    ObjectRef { api_version: o.api_version, kind: o.kind, name: o.name, namespace: o.namespace, uid: o.uid }
}

fn decode_action(manifest: &Manifest, deleted: bool, action: wit::Action) -> Result<Action, CallFailure> {
    if deleted && matches!(action, wit::Action::Apply(_) | wit::Action::Status(_) | wit::Action::Event(_)) {
        return Err(CallFailure::InvalidAction(
            "in phase deleted the primary is gone: only delete and patch actions on other objects are carried out"
                .into(),
        ));
    }
    Ok(match action {
        wit::Action::Apply(json) => {
            let object = parse(&json, "an apply action's object")?;
            let field = |p: &str| object.pointer(p).and_then(Value::as_str).filter(|s| !s.is_empty());
            let (Some(api_version), Some(kind), Some(_)) =
                (field("/apiVersion"), field("/kind"), field("/metadata/name"))
            else {
                return Err(CallFailure::InvalidAction(
                    "an apply action's object needs apiVersion, kind and metadata.name".into(),
                ));
            };
            declared(manifest, api_version, kind, "apply")?;
            Action::Apply(object)
        }
        wit::Action::Delete(target) => {
            let target = object_ref(target);
            declared(manifest, &target.api_version, &target.kind, "delete")?;
            Action::Delete(target)
        }
        wit::Action::Patch(p) => {
            let target = object_ref(p.target);
            declared(manifest, &target.api_version, &target.kind, "patch")?;
            let patch = parse(&p.patch, "a patch document")?;
            let kind = match p.kind {
                wit::PatchKind::Merge if patch.is_object() => PatchKind::Merge,
                wit::PatchKind::Json if patch.is_array() => PatchKind::Json,
                wit::PatchKind::Merge => {
                    return Err(CallFailure::InvalidAction("a merge patch must be a JSON object".into()));
                }
                wit::PatchKind::Json => {
                    return Err(CallFailure::InvalidAction("a JSON patch must be an array of operations".into()));
                }
            };
            Action::Patch { target, kind, patch }
        }
        wit::Action::Status(json) => match parse(&json, "a status action")? {
            status @ Value::Object(_) => Action::Status(status),
            _ => {
                return Err(CallFailure::InvalidAction(
                    "a status action must be a JSON object (the content of `status`)".into(),
                ));
            }
        },
        wit::Action::Event(e) => {
            if e.reason.is_empty() {
                return Err(CallFailure::InvalidAction("an event needs a reason".into()));
            }
            Action::Event {
                event_type: match e.event_type {
                    wit::EventType::Normal => EventType::Normal,
                    wit::EventType::Warning => EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
                action: e.action,
            }
        }
    })
}

/// Decodes and checks a guest response.
pub(crate) fn decode(manifest: &Manifest, deleted: bool, response: wit::Response) -> Result<Response, CallFailure> {
    Ok(Response {
        actions: response
            .actions
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                decode_action(manifest, deleted, a).map_err(|f| match f {
                    CallFailure::InvalidAction(m) => CallFailure::InvalidAction(format!("actions[{i}]: {m}")),
                    other => other,
                })
            })
            .collect::<Result<_, _>>()?,
        requeue_after: response.requeue_after_ms.map(Duration::from_millis),
    })
}
