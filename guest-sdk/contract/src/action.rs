//! What each action a plugin returns must be before the host carries it out: the shape of its
//! JSON, the names it targets, its event words. The host's decoding (`host/sandbox/src/action.rs`)
//! and the SDKs' test harnesses (through the rules component, `guest-sdk/rules`) ask the same
//! functions, so a harness refuses an action with the host's own sentence.
//!
//! Whether the manifest grants the write is not here: that needs the plugin's grants and the
//! operator's confinement, which the sandbox holds.
//!
//! ```
//! use wasmloop_contract::action::{PatchKind, apply_target, patch_document};
//! let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}});
//! assert_eq!(apply_target(&object).unwrap().name, "web");
//! let refused = patch_document(PatchKind::Merge, &serde_json::json!([])).unwrap_err();
//! assert_eq!(refused, "a merge patch must be a JSON object");
//! ```

use serde_json::Value;

use crate::validate;

/// Why an apply, status or event action is refused in phase `deleted`.
pub const PRIMARY_GONE: &str =
    "in phase deleted the primary is gone: only delete and patch actions on other objects are carried out";

/// Why a prune is refused among a failed reconcile's actions.
pub const PRUNE_ONLY_ON_SUCCESS: &str = "prune belongs in a successful response";

/// How a patch document applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// A JSON merge patch: an object.
    Merge,
    /// A JSON patch: an array of operations.
    Json,
    /// A strategic merge patch: an object.
    Strategic,
}

/// What an apply action's object names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyTarget<'a> {
    /// `apiVersion`.
    pub api_version: &'a str,
    /// `kind`.
    pub kind: &'a str,
    /// `metadata.namespace`, when given.
    pub namespace: Option<&'a str>,
    /// `metadata.name`.
    pub name: &'a str,
}

/// `json` parsed, or why it is not JSON, naming `what` it should have been.
///
/// # Errors
/// `"{what} is not valid JSON: ..."` with serde_json's reason.
pub fn json(text: &str, what: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("{what} is not valid JSON: {e}"))
}

/// Checks the type a target names: a well-formed `apiVersion` and kind.
///
/// # Errors
/// The first rule broken, in the host's words.
pub fn check_type(api_version: &str, kind: &str) -> Result<(), String> {
    validate::api_version(api_version)?;
    validate::kind(kind)
}

/// Checks a target's place: a valid name and, when given, a valid namespace.
///
/// # Errors
/// The first rule broken, in the host's words.
pub fn check_place(namespace: Option<&str>, name: &str) -> Result<(), String> {
    if let Some(ns) = namespace {
        validate::namespace(ns)?;
    }
    validate::name(name)
}

/// Checks an object reference (a delete's or a patch's target), part by part.
///
/// # Errors
/// The first rule broken, in the host's words.
pub fn check_ref(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    uid: Option<&str>,
) -> Result<(), String> {
    check_type(api_version, kind)?;
    check_place(namespace, name)?;
    uid.map_or(Ok(()), validate::uid)
}

/// What an apply action's object names, checked.
///
/// # Errors
/// Missing fields, a namespace that is no string, or the first rule a name breaks.
pub fn apply_target(object: &Value) -> Result<ApplyTarget<'_>, String> {
    let field = |p: &str| object.pointer(p).and_then(Value::as_str).filter(|s| !s.is_empty());
    let (Some(api_version), Some(kind), Some(name)) = (field("/apiVersion"), field("/kind"), field("/metadata/name"))
    else {
        return Err("an apply action's object needs apiVersion, kind and metadata.name".into());
    };
    check_type(api_version, kind)?;
    let namespace = match object.pointer("/metadata/namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(ns)) => Some(ns.as_str()),
        Some(_) => return Err("an apply action's metadata.namespace must be a string".into()),
    };
    check_place(namespace, name)?;
    Ok(ApplyTarget { api_version, kind, namespace, name })
}

/// Checks that a patch document has its kind's shape.
///
/// # Errors
/// Which shape the kind needs.
pub fn patch_document(kind: PatchKind, patch: &Value) -> Result<(), String> {
    match kind {
        PatchKind::Merge if !patch.is_object() => Err("a merge patch must be a JSON object".into()),
        PatchKind::Strategic if !patch.is_object() => Err("a strategic merge patch must be a JSON object".into()),
        PatchKind::Json if !patch.is_array() => Err("a JSON patch must be an array of operations".into()),
        _ => Ok(()),
    }
}

/// Checks an apply's UID precondition, when it has one.
///
/// # Errors
/// When it is no UID.
pub fn apply_precondition(uid: Option<&str>) -> Result<(), String> {
    uid.map_or(Ok(()), |uid| validate::uid(uid).map_err(|e| format!("an apply action's precondition: {e}")))
}

/// Checks a status action's content: the object that becomes `status`.
///
/// # Errors
/// When it is no JSON object.
pub fn status(status: &Value) -> Result<(), String> {
    match status {
        Value::Object(_) => Ok(()),
        _ => Err("a status action must be a JSON object (the content of `status`)".into()),
    }
}

/// Checks an event's reason and, when given, its action.
///
/// # Errors
/// The first word that is no Event word, in the host's words.
pub fn event(reason: &str, action: Option<&str>) -> Result<(), String> {
    validate::event_word("reason", reason)?;
    action.map_or(Ok(()), |a| validate::event_word("action", a))
}

/// Checks a failed reconcile's actions: status and events only. `reports` holds, in order,
/// whether each action is one of those.
///
/// # Errors
/// The index of the first action that is neither.
pub fn failure_reports(reports: impl IntoIterator<Item = bool>) -> Result<(), String> {
    match reports.into_iter().position(|report| !report) {
        None => Ok(()),
        Some(i) => Err(format!(
            "error.actions[{i}]: a failed reconcile may only set status and record events; return the other actions in a successful response"
        )),
    }
}

/// A call's phase, as far as the rules of a response go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The primary exists.
    Apply,
    /// The primary is being deleted and the plugin's finalizer holds it.
    Cleanup,
    /// The primary is gone.
    Deleted,
}

/// Whether a successful response asks to prune. `prunes` holds the indices of its prune
/// actions; `allowed` is the manifest's `prune`.
///
/// # Errors
/// A prune the manifest does not allow, one outside phase apply, or a second one.
pub fn prune_asked(allowed: bool, phase: Phase, prunes: &[usize]) -> Result<bool, String> {
    let refuse = |i: usize, why: &str| Err(format!("actions[{i}]: {why}"));
    match prunes {
        [] => Ok(false),
        [i] if !allowed => refuse(*i, "prune needs the manifest to allow it; set the manifest's prune"),
        [i] if phase == Phase::Cleanup => refuse(*i, "prune is carried out in phase apply only, not cleanup"),
        [i] if phase == Phase::Deleted => refuse(*i, "prune is carried out in phase apply only, not deleted"),
        [_] => Ok(true),
        [_, i, ..] => refuse(*i, "prune may appear once in a response"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The name and namespace an apply names, or a part of why it is refused.
    type Named = Result<(&'static str, Option<&'static str>), &'static str>;

    /// Whether a response prunes, or the start of why it is refused.
    type Pruned = Result<bool, &'static str>;

    #[test]
    fn an_apply_object_names_its_type_and_place() {
        let cases: [(Value, Named); 6] = [
            (json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}), Ok(("a", None))),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}),
                Ok(("a", Some("ns"))),
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": null}}),
                Ok(("a", None)),
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}),
                Err("needs apiVersion, kind and metadata.name"),
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": 3}}),
                Err("must be a string"),
            ),
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "Bad"}}),
                Err("is not a valid namespace"),
            ),
        ];
        for (object, expected) in cases {
            let got = apply_target(&object).map(|t| (t.name, t.namespace));
            match expected {
                Ok(want) => assert_eq!(got, Ok(want), "{object}"),
                Err(part) => assert!(got.as_ref().is_err_and(|e| e.contains(part)), "{object}: {got:?}"),
            }
        }
    }

    #[test]
    fn a_patch_document_has_its_kind_s_shape() {
        assert_eq!(patch_document(PatchKind::Merge, &json!({})), Ok(()));
        assert_eq!(patch_document(PatchKind::Json, &json!([])), Ok(()));
        assert!(patch_document(PatchKind::Merge, &json!([])).is_err());
        assert!(patch_document(PatchKind::Json, &json!({})).is_err());
    }

    #[test]
    fn a_prune_is_asked_once_in_phase_apply_when_allowed() {
        let cases: [(bool, Phase, &[usize], Pruned); 6] = [
            (false, Phase::Cleanup, &[], Ok(false)),
            (true, Phase::Apply, &[2], Ok(true)),
            (false, Phase::Apply, &[2], Err("actions[2]: prune needs the manifest to allow it")),
            (true, Phase::Cleanup, &[0], Err("actions[0]: prune is carried out in phase apply only, not cleanup")),
            (true, Phase::Deleted, &[0], Err("actions[0]: prune is carried out in phase apply only, not deleted")),
            (true, Phase::Apply, &[0, 3, 4], Err("actions[3]: prune may appear once in a response")),
        ];
        for (allowed, phase, prunes, expected) in cases {
            let got = prune_asked(allowed, phase, prunes);
            match expected {
                Ok(want) => assert_eq!(got, Ok(want)),
                Err(start) => assert!(got.as_ref().is_err_and(|e| e.starts_with(start)), "{prunes:?}: {got:?}"),
            }
        }
    }

    #[test]
    fn a_failed_reconcile_reports_only() {
        assert_eq!(failure_reports([true, true]), Ok(()));
        assert!(failure_reports([true, false]).unwrap_err().starts_with("error.actions[1]: "));
    }
}
