//! The contract's rules as a component (`wit/rules/rules.wit`, `wasmloop:rules@0.1.1`): the
//! answers `wasmloop_contract` gives the host, behind functions that take the contract's JSON.
//!
//! Built for `wasm32-wasip2`, this crate is the component the Python and JavaScript test
//! harnesses run, so their refusals are the host's own sentences and no rule is written twice.
//! Built natively, the same functions answer the conformance suite (`conformance.json`) for
//! Rust; the SDKs run that suite through the component.
//!
//! `scripts/sdk-assets` builds it and ships it into the Python SDK (run by `wasmtime` from
//! PyPI) and the JavaScript SDK (transpiled by jco). The suite, `guest-sdk/rules/conformance.json`,
//! is run by three harnesses (`guest-sdk/rules/tests/conformance.rs`,
//! `guest-sdk/python/tests/test_conformance.py`, `guest-sdk/js/test/conformance.test.js`) and
//! answered by the sandbox's own loading and decoding too (`host/sandbox/src/rules_suite.rs`),
//! so the suite's sentences are the host's. A new rule of the contract is a new case there.
//! One rule is the glue's alone: a setting the WIT's integer cannot carry is refused
//! (`wire::WireSettings::view`), where JavaScript would wrap it.
//!
//! ```
//! use wasmloop_rules::{ValueRule, check_action, check_value};
//! assert_eq!(check_value(ValueRule::Namespace, "team-a"), None);
//! let refused = check_action(r#"{"status": "[]"}"#, false).unwrap();
//! assert_eq!(refused, "a status action must be a JSON object (the content of `status`)");
//! ```

mod wire;

#[cfg(target_arch = "wasm32")]
mod component;

use wasmloop_contract::action;
use wasmloop_contract::manifest::{self, check_finalizer};
use wasmloop_contract::selector::{self, Selector};
use wasmloop_contract::validate;

/// A rule a single value is held to (the WIT's `value-rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueRule {
    /// A plugin's own name.
    PluginName,
    /// An object's name.
    Name,
    /// A namespace.
    Namespace,
    /// A kind.
    Kind,
    /// An `apiVersion`.
    ApiVersion,
    /// An object's UID.
    Uid,
    /// An Event's reason.
    EventReason,
    /// An Event's action.
    EventAction,
    /// A finalizer.
    Finalizer,
}

/// `None` when `value` keeps `rule`, else the host's sentence.
pub fn check_value(rule: ValueRule, value: &str) -> Option<String> {
    match rule {
        ValueRule::PluginName => validate::plugin_name(value),
        ValueRule::Name => validate::name(value),
        ValueRule::Namespace => validate::namespace(value),
        ValueRule::Kind => validate::kind(value),
        ValueRule::ApiVersion => validate::api_version(value),
        ValueRule::Uid => validate::uid(value),
        ValueRule::EventReason => validate::event_word("reason", value),
        ValueRule::EventAction => validate::event_word("action", value),
        ValueRule::Finalizer => check_finalizer(value),
    }
    .err()
}

/// `None` when the host would send `text` to the API server as a watch's label selector, else
/// its sentence.
pub fn check_selector(text: &str) -> Option<String> {
    let parsed = text.parse::<Selector>().map_err(|e| e.to_string());
    parsed.and_then(|s| selector::for_server(&s)).err()
}

/// Whether `text` selects these labels, as the host's cache filters.
///
/// # Errors
/// The host's sentence when `text` does not parse.
pub fn selector_matches(text: &str, labels: &[(String, String)]) -> Result<bool, String> {
    let parsed = text.parse::<Selector>().map_err(|e| e.to_string())?;
    Ok(parsed.matches(|key| labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())))
}

/// `None` when the host would load a component with this manifest (the WIT's
/// `plugin-manifest`, with `keep-fields`, as JSON), else its sentence.
pub fn check_manifest(json: &str) -> Option<String> {
    let manifest = match manifest_of(json) {
        Ok(manifest) => manifest,
        Err(e) => return Some(e),
    };
    manifest.view().and_then(|view| manifest::validate(&view)).err()
}

/// `None` when the host would decode this action (the WIT's `action`, as JSON), else its
/// sentence. `deleted`: the call's phase is `deleted`. Grants are the caller's to check.
pub fn check_action(json: &str, deleted: bool) -> Option<String> {
    let action = match serde_json::from_str::<wire::Action>(json) {
        Ok(action) => action,
        Err(e) => return Some(format!("the action is not the contract's JSON: {e}")),
    };
    action.check(deleted).err()
}

/// Whether the host's cache holds `object` (JSON) for a plugin with this manifest (JSON, as
/// for [`check_manifest`]).
///
/// # Errors
/// The sentence when the manifest or the object does not parse.
pub fn cache_holds(manifest: &str, object: &str) -> Result<bool, String> {
    let manifest = manifest_of(manifest)?;
    let view = manifest.view()?;
    let object = object_of(object)?;
    let api_version = object.get("apiVersion").and_then(serde_json::Value::as_str).unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = object.get("kind").and_then(serde_json::Value::as_str).unwrap_or_default();
    Ok(view.visible(&manifest::KindRef { group, version, kind }).admits(&object))
}

/// The keys the manifest's index named `index` files `object` (JSON) under.
///
/// # Errors
/// The sentence when the manifest declares no such index, or the object does not parse.
pub fn index_keys(manifest: &str, index: &str, object: &str) -> Result<Vec<String>, String> {
    let manifest = manifest_of(manifest)?;
    let view = manifest.view()?;
    let Some(declared) = view.indexes.iter().find(|i| i.name == index) else {
        return Err(format!("the manifest declares no index {}; declare it under `indexes`", validate::quoted(index)));
    };
    let paths = declared
        .fields
        .iter()
        .map(|f| f.parse::<wasmloop_contract::fields::FieldPath>().map_err(|e| format!("index {index}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(wasmloop_contract::fields::index_keys(&paths, &object_of(object)?))
}

fn manifest_of(json: &str) -> Result<wire::Manifest, String> {
    serde_json::from_str(json).map_err(|e| format!("the manifest is not the contract's JSON: {e}"))
}

fn object_of(json: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str(json) {
        Ok(object @ serde_json::Value::Object(_)) => Ok(object),
        Ok(_) => Err("the object must be a JSON object".into()),
        Err(e) => Err(format!("the object is not JSON: {e}")),
    }
}

/// What an action is (the WIT's `action-kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    /// `apply`.
    Apply,
    /// `delete`.
    Delete,
    /// `patch`.
    Patch,
    /// `status`.
    Status,
    /// `event`.
    Event,
    /// `prune`.
    Prune,
}

/// `None` when the host would go on to decode a response of these actions one by one, else
/// its sentence: a successful response's prune rules, a failed one's reports-only rule.
pub fn check_response(
    actions: &[ActionKind],
    failed: bool,
    phase: action::Phase,
    prune_allowed: bool,
) -> Option<String> {
    if failed {
        let reports = actions.iter().map(|a| matches!(a, ActionKind::Status | ActionKind::Event));
        return action::failure_reports(reports).err();
    }
    let prunes: Vec<usize> = (0..actions.len()).filter(|&i| actions[i] == ActionKind::Prune).collect();
    action::prune_asked(prune_allowed, phase, &prunes).err()
}

impl wire::Action {
    fn check(&self, deleted: bool) -> Result<(), String> {
        use wire::Action::{Apply, Delete, Event, Patch, Prune, Status};
        if deleted && matches!(self, Apply(_) | Status(_) | Event(_)) {
            return Err(action::PRIMARY_GONE.into());
        }
        match self {
            Apply(apply) => {
                action::apply_target(&action::json(apply.object(), "an apply action's object")?)?;
                action::apply_precondition(apply.uid())
            }
            Delete(target) => target.check(),
            Patch(p) => {
                p.target.check()?;
                action::patch_document(p.kind.into(), &action::json(&p.patch, "a patch document")?)
            }
            Status(status) => action::status(&action::json(status, "a status action")?),
            Event(e) => action::event(&e.reason, e.action.as_deref()),
            Prune => Ok(()),
        }
    }
}

impl wire::ObjectRef {
    fn check(&self) -> Result<(), String> {
        let Self { api_version, kind, name, namespace, uid } = self;
        action::check_ref(api_version, kind, namespace.as_deref(), name, uid.as_deref())
    }
}
