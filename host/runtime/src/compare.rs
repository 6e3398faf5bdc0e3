//! How two outcomes of one request compare: a recorded case against its replay
//! (`wasmloop replay`), and a serving version against its shadow, on every reconcile. One
//! comparison for both, so a shadow and a replay of the same change agree.
//!
//! ```
//! use serde_json::json;
//! use wasmloop_runtime::compare::{ShadowResult, Verdict, judge};
//! use wasmloop_runtime::record::Outcome;
//! let serving = Outcome::Response(json!({"actions": [{"image": "nginx:latest"}]}));
//! let shadow = Outcome::Response(json!({"actions": [{"image": "nginx:1.27"}]}));
//! let verdict = judge(&serving, &shadow, &[]);
//! assert_eq!(verdict, Verdict::Changed);
//! assert_eq!(ShadowResult::of(verdict, &shadow), ShadowResult::Differing);
//! ```

use crate::record::Outcome;
use serde::Serialize;
use similar::TextDiff;

/// How a case replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The same response, or the same failure.
    Same,
    /// Another response, or another failure (message, or whether it is retried).
    Changed,
    /// The recording succeeded; the new version fails.
    NewError,
    /// The recording failed; the new version succeeds.
    Fixed,
    /// The new version asked the cache something the recording does not hold.
    NotRecorded,
}

impl Verdict {
    /// As printed.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Changed => "changed",
            Verdict::NewError => "new error",
            Verdict::Fixed => "fixed",
            Verdict::NotRecorded => "not recorded",
        }
    }
}

/// The verdict on a replay: `then` was recorded, `now` is the new version's outcome (both
/// redacted), and `missing` the look-ups the recording could not answer.
pub fn judge(then: &Outcome, now: &Outcome, missing: &[String]) -> Verdict {
    if !missing.is_empty() {
        return Verdict::NotRecorded;
    }
    match (then, now) {
        (Outcome::Response(a), Outcome::Response(b)) if a == b => Verdict::Same,
        (Outcome::Response(_), Outcome::Response(_)) => Verdict::Changed,
        (
            Outcome::Error { message: a, transient: x, class: c },
            Outcome::Error { message: b, transient: y, class: d },
        ) if x == y && classes_or_messages_match((c, d), (a, b)) => Verdict::Same,
        (Outcome::Error { .. }, Outcome::Error { .. }) => Verdict::Changed,
        (Outcome::Response(_), Outcome::Error { .. }) => Verdict::NewError,
        (Outcome::Error { .. }, Outcome::Response(_)) => Verdict::Fixed,
    }
}

/// Two failures' classes when both have one (a trap is a trap wherever it happened), else
/// their messages.
fn classes_or_messages_match(classes: (&Option<String>, &Option<String>), messages: (&String, &String)) -> bool {
    match classes {
        (Some(c), Some(d)) => c == d,
        _ => messages.0 == messages.1,
    }
}

/// The outcomes as YAML, diffed line by line as `dev --dry-run` diffs objects, under the
/// headers `labels` (replay: recorded, replayed; shadow: serving, shadow); empty when they
/// are the same.
pub fn diff(then: &Outcome, now: &Outcome, labels: (&str, &str)) -> String {
    // Through serde_json::Value so enums print as plain maps, not YAML tags.
    let yaml =
        |o: &Outcome| serde_json::to_value(o).ok().and_then(|v| serde_saphyr::to_string(&v).ok()).unwrap_or_default();
    let (a, b) = (yaml(then), yaml(now));
    if a == b {
        return String::new();
    }
    TextDiff::from_lines(&a, &b).unified_diff().context_radius(3).header(labels.0, labels.1).to_string()
}

/// How a shadow's call compared with the serving version's, as the metric and the shadow's
/// status count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShadowResult {
    /// The same response, or the same failure.
    Same,
    /// Another response (or a response where the serving version failed).
    Differing,
    /// The shadow failed where the serving version did not fail the same way.
    Failed,
    /// Not compared: every instance the shadow may use was busy.
    Skipped,
}

impl ShadowResult {
    /// The metric's label.
    pub fn label(self) -> &'static str {
        match self {
            ShadowResult::Same => "same",
            ShadowResult::Differing => "differing",
            ShadowResult::Failed => "failed",
            ShadowResult::Skipped => "skipped",
        }
    }

    /// The result of a comparison whose verdict is `verdict`, the shadow's outcome being
    /// `shadow`: a shadow that fails, however the serving version did, has failed.
    pub fn of(verdict: Verdict, shadow: &Outcome) -> ShadowResult {
        match (verdict, shadow) {
            (Verdict::Same, _) => ShadowResult::Same,
            (_, Outcome::Error { .. }) => ShadowResult::Failed,
            _ => ShadowResult::Differing,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn verdicts_follow_the_outcomes_and_a_missing_answer_outranks_them() {
        let response = |image: &str| Outcome::Response(json!({"actions": [{"image": image}]}));
        let error = |m: &str| Outcome::Error { message: m.into(), transient: false, class: None };
        let trap =
            |m: &str| Outcome::Error { message: m.into(), transient: false, class: Some("PluginTrapped".into()) };
        let missing = ["get v1/Secret ns/s".to_owned()];
        let cases: [(&str, Outcome, Outcome, &[String], Verdict); 12] = [
            ("the same response", response("a"), response("a"), &[], Verdict::Same),
            ("another response", response("a"), response("b"), &[], Verdict::Changed),
            ("failing the same", error("x"), error("x"), &[], Verdict::Same),
            ("failing otherwise", error("x"), error("y"), &[], Verdict::Changed),
            (
                "now retried",
                error("x"),
                Outcome::Error { message: "x".into(), transient: true, class: None },
                &[],
                Verdict::Changed,
            ),
            ("trapping elsewhere in the code", trap("at 0x1f"), trap("at 0x2e"), &[], Verdict::Same),
            ("trapping where it returned an error", error("x"), trap("y"), &[], Verdict::Changed),
            ("a trap recorded before classes, the same words", error("at 0x1f"), trap("at 0x1f"), &[], Verdict::Same),
            ("now failing", response("a"), error("x"), &[], Verdict::NewError),
            ("now working", error("x"), response("a"), &[], Verdict::Fixed),
            ("same, but it read more", response("a"), response("a"), &missing, Verdict::NotRecorded),
            ("changed, and read more", response("a"), response("b"), &missing, Verdict::NotRecorded),
        ];
        for (name, then, now, missing, want) in cases {
            assert_eq!(judge(&then, &now, missing), want, "{name}");
        }
    }

    #[test]
    fn a_change_shows_as_a_diff_of_the_outcomes() {
        let then = Outcome::Response(json!({"actions": [{"image": "nginx:latest"}]}));
        let now = Outcome::Response(json!({"actions": [{"image": "nginx:1.27"}]}));
        let text = diff(&then, &now, ("recorded", "replayed"));
        assert!(text.contains("-    image: nginx:latest") || text.contains("-  - image: nginx:latest"), "{text}");
        assert!(text.contains("nginx:1.27"), "{text}");
        assert!(diff(&then, &then, ("recorded", "replayed")).is_empty());
    }

    #[test]
    fn a_shadow_that_fails_has_failed_and_any_other_change_differs() {
        let response = Outcome::Response(json!({"actions": []}));
        let error = Outcome::Error { message: "x".into(), transient: false, class: None };
        let cases = [
            ("the same response", Verdict::Same, &response, ShadowResult::Same),
            ("failing as the serving version does", Verdict::Same, &error, ShadowResult::Same),
            ("another response", Verdict::Changed, &response, ShadowResult::Differing),
            ("working where serving fails", Verdict::Fixed, &response, ShadowResult::Differing),
            ("failing where serving works", Verdict::NewError, &error, ShadowResult::Failed),
            ("failing otherwise than serving", Verdict::Changed, &error, ShadowResult::Failed),
        ];
        for (name, verdict, shadow, want) in cases {
            assert_eq!(ShadowResult::of(verdict, shadow), want, "{name}");
        }
    }
}
