//! A plugin's response, decoded and checked by the host ("host decode"): JSON parsed once,
//! every target's kind checked against the manifest, before anything reaches the executor.
//!
//! Each action's shape is the contract's (`wasmloop_contract::action`, which the SDKs' harnesses
//! ask too), checked before its grant; every name it carries is parsed into the contract's
//! types where it arrives (`object_ref`). A `prune` is taken out of the actions into the
//! response's flag, and refused without the manifest's `prune`, outside phase `apply` or
//! twice; in phase `deleted`, `apply`, `status` and `event` would target the gone primary and
//! are refused; a failed reconcile may carry only `status` and `event` (`decode_failure`).
//! All are invalid actions, and permanent. The grant is asked of [`crate::capability::permits`]
//! for every namespace an object left without one could land in, so `wasmloop reconcile`
//! shows a refusal offline too.

use std::time::Duration;

use serde_json::Value;

use crate::bindings::{Gvk, Object, Phase, wit};
use crate::capability::{self, Verb};
use crate::error::CallFailure;
use crate::manifest::Manifest;
use crate::response::{Action, Apply, EventType, ObjectRef, PatchKind, Response};
use crate::validate;
use wasmloop_contract::action as rules;
use wasmloop_contract::names::{Name, Namespace};

fn parse(json: &str, what: &str) -> Result<Value, CallFailure> {
    rules::json(json, what).map_err(invalid)
}

/// Checks that the plugin may `verb` this object: a kind it names in its manifest, then a grant
/// covering a place the object may be in. Discovery, in the executor, settles an object left
/// without a namespace: the primary's for a namespaced kind, none for a cluster-scoped one. So
/// here it is refused only if neither place is granted; the executor checks the settled one
/// (and the operator's confinement, which the sandbox does not know).
fn granted(
    manifest: &Manifest,
    primary: &Object,
    verb: Verb,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Result<(), CallFailure> {
    let gvk = Gvk::from_api_version(api_version, kind).map_err(|e| invalid(e.into()))?;
    if !manifest.writes_api(api_version, kind) {
        return Err(CallFailure::UndeclaredKind { verb: verb.as_str().into(), kind: gvk.to_string() });
    }
    let bounds = capability::Bounds { primary_namespace: primary.namespace.as_deref(), confined_to: None };
    let check = |ns: Option<&str>| capability::permits(manifest, bounds, verb, &gvk, ns);
    match namespace {
        Some(ns) => check(Some(ns)),
        None => check(primary.namespace.as_deref()).or_else(|refused| check(None).map_err(|_| refused)),
    }
    .map_err(CallFailure::NotGranted)
}

fn invalid(e: String) -> CallFailure {
    CallFailure::InvalidAction(e)
}

/// A checked object reference: every part parsed before it can reach a URL.
pub(crate) fn object_ref(o: wit::ObjectRef) -> Result<ObjectRef, CallFailure> {
    rules::check_ref(&o.api_version, &o.kind, o.namespace.as_deref(), &o.name, o.uid.as_deref()).map_err(invalid)?;
    let namespace = o.namespace.as_deref().map(Namespace::parse).transpose().map_err(|e| invalid(e.into()))?;
    let name = Name::parse(&o.name).map_err(|e| invalid(e.into()))?;
    Ok(ObjectRef { api_version: o.api_version, kind: o.kind, name, namespace, uid: o.uid })
}

fn decode_action(
    manifest: &Manifest,
    primary: &Object,
    deleted: bool,
    action: wit::Action,
) -> Result<Action, CallFailure> {
    if deleted && matches!(action, wit::Action::Apply(_) | wit::Action::Status(_) | wit::Action::Event(_)) {
        return Err(invalid(rules::PRIMARY_GONE.into()));
    }
    Ok(match action {
        wit::Action::Apply(apply) => {
            let object = parse(&apply.object, "an apply action's object")?;
            let target = rules::apply_target(&object).map_err(invalid)?;
            rules::apply_precondition(apply.uid.as_deref()).map_err(invalid)?;
            granted(manifest, primary, Verb::Apply, target.api_version, target.kind, target.namespace)?;
            Action::Apply(Apply { object, force: apply.force, uid: apply.uid })
        }
        wit::Action::Delete(target) => {
            let target = object_ref(target)?;
            let ns = target.namespace.as_deref();
            granted(manifest, primary, Verb::Delete, &target.api_version, &target.kind, ns)?;
            Action::Delete(target)
        }
        wit::Action::Patch(p) => {
            // What the action is, then whether it may: every action's own checks come before
            // its grant, as the rules component's `check-action` and then the harnesses' grant
            // checks take them.
            let target = object_ref(p.target)?;
            let patch = parse(&p.patch, "a patch document")?;
            let (kind, shape) = match p.kind {
                wit::PatchKind::Merge => (PatchKind::Merge, rules::PatchKind::Merge),
                wit::PatchKind::Json => (PatchKind::Json, rules::PatchKind::Json),
                wit::PatchKind::Strategic => (PatchKind::Strategic, rules::PatchKind::Strategic),
            };
            rules::patch_document(shape, &patch).map_err(invalid)?;
            let ns = target.namespace.as_deref();
            granted(manifest, primary, Verb::Patch, &target.api_version, &target.kind, ns)?;
            Action::Patch { target, kind, patch }
        }
        wit::Action::Status(json) => {
            let status = parse(&json, "a status action")?;
            rules::status(&status).map_err(invalid)?;
            Action::Status(status)
        }
        // A successful response's prune is skipped when its actions are decoded; anywhere else
        // (a failed reconcile's actions) it has no meaning.
        wit::Action::Prune => {
            return Err(invalid(rules::PRUNE_ONLY_ON_SUCCESS.into()));
        }
        wit::Action::Event(e) => {
            rules::event(&e.reason, e.action.as_deref()).map_err(invalid)?;
            Action::Event {
                event_type: match e.event_type {
                    wit::EventType::Normal => EventType::Normal,
                    wit::EventType::Warning => EventType::Warning,
                },
                reason: e.reason,
                message: validate::event_note(e.message),
                action: e.action,
            }
        }
    })
}

fn decode_actions(
    manifest: &Manifest,
    primary: &Object,
    deleted: bool,
    actions: Vec<wit::Action>,
    field: &str,
) -> Result<Vec<Action>, CallFailure> {
    // Numbered before a successful response's prune is skipped, so indices match the list
    // the plugin returned.
    actions
        .into_iter()
        .enumerate()
        .filter(|(_, a)| !matches!(a, wit::Action::Prune))
        .map(|(i, a)| {
            decode_action(manifest, primary, deleted, a).map_err(|f| match f {
                CallFailure::InvalidAction(m) => CallFailure::InvalidAction(format!("{field}[{i}]: {m}")),
                other => other,
            })
        })
        .collect()
}

/// Decodes and checks a guest response.
pub(crate) fn decode(
    manifest: &Manifest,
    primary: &Object,
    phase: Phase,
    response: wit::Response,
) -> Result<Response, CallFailure> {
    let prune = prune_asked(manifest, phase, &response.actions)?;
    Ok(Response {
        actions: decode_actions(manifest, primary, phase == Phase::Deleted, response.actions, "actions")?,
        requeue_after: response.requeue_after_ms.map(Duration::from_millis),
        prune,
    })
}

/// Whether a response asks to prune, refusing a `prune` the manifest does not allow, one
/// outside phase apply, and a second one.
fn prune_asked(manifest: &Manifest, phase: Phase, actions: &[wit::Action]) -> Result<bool, CallFailure> {
    let at: Vec<usize> =
        actions.iter().enumerate().filter(|(_, a)| matches!(a, wit::Action::Prune)).map(|(i, _)| i).collect();
    let phase = match phase {
        Phase::Apply => rules::Phase::Apply,
        Phase::Cleanup => rules::Phase::Cleanup,
        Phase::Deleted => rules::Phase::Deleted,
    };
    rules::prune_asked(manifest.prune, phase, &at).map_err(invalid)
}

/// Decodes a guest's error into [`CallFailure::Plugin`]. Its actions may only report on the
/// primary (status and event); anything else makes the call fail as an invalid action.
pub(crate) fn decode_failure(
    manifest: &Manifest,
    primary: &Object,
    deleted: bool,
    e: wit::ReconcileError,
) -> Result<CallFailure, CallFailure> {
    rules::failure_reports(e.actions.iter().map(|a| matches!(a, wit::Action::Status(_) | wit::Action::Event(_))))
        .map_err(invalid)?;
    let actions = decode_actions(manifest, primary, deleted, e.actions, "error.actions")?;
    // The message is the plugin's words, bound for a log line and an Event: cut here, once.
    // A reason that is no Event reason is dropped for the host's own.
    Ok(CallFailure::Plugin {
        message: validate::foreign(e.message),
        transient: e.transient,
        reason: e.reason.filter(|r| validate::event_word("reason", r).is_ok()),
        retry_after: e.retry_after_ms.map(Duration::from_millis),
        actions,
    })
}
