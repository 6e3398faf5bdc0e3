//! A `WasmPlugin`'s status, as the Kubernetes API conventions give it: what serves and the
//! conditions `kubectl wait`, Argo CD and Flux read, each with its reason, message, transition
//! time and the generation it is about.
//!
//! | type          | `True` when                                                        |
//! |---------------|--------------------------------------------------------------------|
//! | `Ready`       | a version serves and is not quarantined, or a shadow is seated     |
//! | `Loaded`      | a version serves or shadows from it                                |
//! | `Degraded`    | its newest version was refused while an older one keeps serving,   |
//! |               | its reconciles failed over the error window ([`super::errors`]),   |
//! |               | or it runs capped to fit the host's guest memory budget            |
//! | `Quarantined` | its calls failed at the quarantine policy's rate: probes only      |
//! | `Shadowing`   | it is a seated shadow; the message counts same and differing calls |
//! | `Pinned`      | what serves was pinned by digest (an image's, `signature.digest`)  |
//!
//! Pure functions of what is shown ([`of`], [`status`]); the transition time of a condition
//! whose status did not change is carried over ([`carried_over`]).

use serde::Serialize;
use serde_json::json;

use super::plan::Shown;

/// One condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Condition {
    /// Its type.
    #[serde(rename = "type")]
    pub(super) type_: &'static str,
    /// `True` or `False`.
    pub(super) status: &'static str,
    /// A CamelCase word.
    pub(super) reason: String,
    /// A sentence for people.
    pub(super) message: String,
    /// When its status last changed.
    pub(super) last_transition_time: String,
    /// The generation it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) observed_generation: Option<i64>,
}

/// A reason as the API accepts it (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`): a refusal's
/// word passes; anything else becomes `fallback`, or the whole status would be refused.
fn reason(word: Option<&str>, fallback: &str) -> String {
    let fits = |w: &str| {
        w.len() <= 1024
            && w.starts_with(|c: char| c.is_ascii_alphabetic())
            && w.chars().all(|c| c.is_ascii_alphanumeric() || "_,:".contains(c))
            && !w.ends_with([',', ':'])
    };
    word.filter(|w| fits(w)).unwrap_or(fallback).to_owned()
}

/// The conditions `shown` calls for, each as of `now`.
pub(super) fn of(shown: &Shown, now: &str) -> Vec<Condition> {
    let condition = |type_, holds: bool, reason: String, message: String| Condition {
        type_,
        status: if holds { "True" } else { "False" },
        reason,
        message,
        last_transition_time: now.to_owned(),
        observed_generation: shown.observed,
    };
    let serving = shown.active.as_ref().map(|active| &active.loaded);
    let running = serving.or(shown.shadow.as_ref().map(|shadow| &shadow.loaded));
    let failure = || reason(shown.reason.as_deref(), "Refused");
    let why_not = || shown.last_error.clone().unwrap_or_else(|| "waiting for the host to load it".to_owned());
    let (not_loaded_reason, not_loaded) = match &shown.last_error {
        Some(_) => (failure(), why_not()),
        None => ("Pending".to_owned(), why_not()),
    };
    let loaded = match running {
        Some(v) => condition(
            "Loaded",
            true,
            "Loaded".into(),
            format!("plugin {} {} (sha256 {}) loaded at {}", v.plugin, v.version, v.digest, v.loaded_at),
        ),
        None => condition("Loaded", false, not_loaded_reason.clone(), not_loaded.clone()),
    };
    let ready = match (serving, &shown.shadow, &shown.quarantined) {
        (Some(_), _, Some(why)) => condition("Ready", false, "Quarantined".into(), why.clone()),
        (Some(v), _, None) => {
            condition("Ready", true, "Serving".into(), format!("plugin {} {} serving", v.plugin, v.version))
        }
        (None, Some(shadow), _) => condition(
            "Ready",
            true,
            "Shadowing".into(),
            format!("version {} shadows plugin {}", shadow.loaded.version, shadow.loaded.plugin),
        ),
        (None, None, _) => condition("Ready", false, not_loaded_reason, not_loaded),
    };
    let window = super::errors::WINDOW.as_secs();
    let degraded = match (&shown.last_error, running, shown.errors.filter(|n| *n > 0)) {
        (Some(error), Some(v), _) => {
            condition("Degraded", true, failure(), format!("{error} (version {} still runs)", v.version))
        }
        (None, Some(v), Some(errors)) => condition(
            "Degraded",
            true,
            "ReconcileErrors".into(),
            format!(
                "{errors} reconciles of plugin {} {} failed in the last {window} s (wasmloop_reconciles_total)",
                v.plugin, v.version
            ),
        ),
        (None, Some(_), None) if serving.is_some() && shown.capped.is_some() => {
            condition("Degraded", true, "CappedToMemoryBudget".into(), shown.capped.clone().unwrap_or_default())
        }
        _ => condition("Degraded", false, "AsExpected".into(), "no refused version, no failed reconciles".into()),
    };
    let quarantined = match &shown.quarantined {
        Some(why) => condition(
            "Quarantined",
            true,
            "FailureRate".into(),
            format!("quarantined until a probe call succeeds: {why}"),
        ),
        None => condition("Quarantined", false, "Healthy".into(), "calls are admitted".into()),
    };
    let shadowing = match &shown.shadow {
        Some(shadow) => {
            let f = &shadow.findings;
            condition(
                "Shadowing",
                true,
                if f.differences() > 0 { "Differing".into() } else { "Comparing".into() },
                format!(
                    "version {} of plugin {}: {} compared, {} same, {} differing, {} failed, {} skipped",
                    shadow.loaded.version, shadow.loaded.plugin, f.compared, f.same, f.differing, f.failed, f.skipped
                ),
            )
        }
        None => condition("Shadowing", false, "NotAShadow".into(), "track.mode is serving".into()),
    };
    let pinned = match (&shown.pinned, running) {
        (Some(pin), Some(_)) => condition("Pinned", true, "Digest".into(), format!("pinned by {pin}")),
        _ => condition(
            "Pinned",
            false,
            "NotPinned".into(),
            "nothing running is pinned by digest; use spec.image with a digest, or set spec.signature.digest".into(),
        ),
    };
    vec![ready, loaded, degraded, quarantined, shadowing, pinned]
}

/// `fresh` with the transition time of each condition whose status is what it was in
/// `previous`.
pub(super) fn carried_over(previous: &[Condition], mut fresh: Vec<Condition>) -> Vec<Condition> {
    for condition in &mut fresh {
        if let Some(before) = previous.iter().find(|p| p.type_ == condition.type_ && p.status == condition.status) {
            condition.last_transition_time.clone_from(&before.last_transition_time);
        }
    }
    fresh
}

/// `conditions` with the transition time of each condition whose type and status `written`
/// (a `conditions` list as the API server holds it, written before this process started) has
/// too: a restart or a new leader changes no transition time.
pub(super) fn adopted(mut conditions: Vec<Condition>, written: &serde_json::Value) -> Vec<Condition> {
    let Some(written) = written.as_array() else { return conditions };
    for condition in &mut conditions {
        let before = written.iter().find(|w| w["type"] == condition.type_ && w["status"] == condition.status);
        if let Some(time) = before.and_then(|w| w["lastTransitionTime"].as_str()) {
            // Outside text, kept only when it is the time the schema admits.
            if time.len() <= 64 && time.parse::<k8s_openapi::jiff::Timestamp>().is_ok() {
                condition.last_transition_time = time.to_owned();
            }
        }
    }
    conditions
}

/// The status subresource of a `WasmPlugin` showing `shown`, its conditions made already. With
/// `--shard`, `replica` names the replica that runs it.
pub(super) fn status(shown: &Shown, replica: Option<&str>) -> serde_json::Value {
    let serving = shown.active.as_ref().map(|active| &active.loaded);
    let running = serving.or(shown.shadow.as_ref().map(|shadow| &shadow.loaded));
    let mut status = json!({
        "version": running.map(|v| v.version.clone()),
        "digest": running.map(|v| v.digest.clone()),
        "lastError": shown.last_error,
        "conditions": shown.conditions,
    });
    if let Some(generation) = shown.observed {
        status["observedGeneration"] = json!(generation);
    }
    status["replica"] = json!(replica.filter(|_| serving.is_some()));
    status["errors"] = json!(shown.errors.filter(|_| serving.is_some()));
    if let Some(shadow) = &shown.shadow {
        status["shadow"] = json!({"plugin": shadow.loaded.plugin, "findings": shadow.findings});
    } else {
        status["shadow"] = serde_json::Value::Null;
    }
    status
}
