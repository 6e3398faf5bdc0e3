//! `wasmloop replay`: a recorded case (`--record-dir`) run again, offline, against another
//! version of its plugin, and what changed.
//!
//! The plugin's cache look-ups are answered from the case, question for question. A question
//! the recording does not hold is never answered "not found": the case's verdict is then
//! [`Verdict::NotRecorded`], naming what was asked, because the new version reads something
//! the old one did not and the recording cannot say what the cluster held.

use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;
use similar::TextDiff;
use wasmloop_runtime::record::{Lookup, Outcome, PageAsked};
use wasmloop_sandbox::{CacheDenied, Gvk, HostServices, ListKey, ListPage, Object, Selector, object_from_value};

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
        (Outcome::Error { message: a, transient: x }, Outcome::Error { message: b, transient: y })
            if a == b && x == y =>
        {
            Verdict::Same
        }
        (Outcome::Error { .. }, Outcome::Error { .. }) => Verdict::Changed,
        (Outcome::Response(_), Outcome::Error { .. }) => Verdict::NewError,
        (Outcome::Error { .. }, Outcome::Response(_)) => Verdict::Fixed,
    }
}

/// The outcomes as YAML, diffed line by line as `dev --dry-run` diffs objects; empty when
/// they are the same.
pub fn diff(then: &Outcome, now: &Outcome) -> String {
    // Through serde_json::Value so enums print as plain maps, not YAML tags.
    let yaml =
        |o: &Outcome| serde_json::to_value(o).ok().and_then(|v| serde_saphyr::to_string(&v).ok()).unwrap_or_default();
    let (a, b) = (yaml(then), yaml(now));
    if a == b {
        return String::new();
    }
    TextDiff::from_lines(&a, &b).unified_diff().context_radius(3).header("recorded", "replayed").to_string()
}

/// The cache of one replayed case: the recorded answers, and what was asked beyond them.
pub struct ReplayCache {
    lookups: Vec<Lookup>,
    missing: Mutex<Vec<String>>,
}

impl ReplayCache {
    /// Answers from `lookups`.
    pub fn new(lookups: Vec<Lookup>) -> ReplayCache {
        ReplayCache { lookups, missing: Mutex::default() }
    }

    /// The questions the recording did not hold, in the order asked.
    pub fn missing(&self) -> Vec<String> {
        self.missing.lock().expect("lock").clone()
    }

    fn miss(&self, question: String) {
        self.missing.lock().expect("lock").push(question);
    }

    fn listed(
        &self,
        kind: &str,
        namespace: Option<&str>,
        selector: &str,
        page: Option<&PageAsked>,
    ) -> Option<(Vec<Object>, Option<ListKey>)> {
        self.lookups.iter().find_map(|l| match l {
            Lookup::List { kind: k, namespace: n, selector: s, page: p, items, resume }
                if k == kind && n.as_deref() == namespace && s == selector && p.as_ref() == page =>
            {
                Some((items.iter().filter_map(|v| object_from_value(v).ok()).collect(), resume.clone()))
            }
            _ => None,
        })
    }
}

fn place(namespace: Option<&str>, name: &str) -> String {
    namespace.map_or_else(|| name.to_owned(), |ns| format!("{ns}/{name}"))
}

impl HostServices for ReplayCache {
    fn denied(&self, kind: &Gvk, namespace: Option<&str>) -> Option<CacheDenied> {
        let text = kind.to_string();
        self.lookups.iter().find_map(|l| match l {
            Lookup::Denied(d) if d.kind == text && d.namespace.as_deref() == namespace => Some(if d.revoked {
                CacheDenied::Revoked(d.why.clone())
            } else {
                CacheDenied::OutOfScope(d.why.clone())
            }),
            _ => None,
        })
    }

    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<Object> {
        let text = kind.to_string();
        let found = self.lookups.iter().find_map(|l| match l {
            Lookup::Get { kind: k, namespace: n, name: m, found }
                if *k == text && n.as_deref() == namespace && m == name =>
            {
                Some(found.clone())
            }
            _ => None,
        });
        match found {
            Some(found) => found.and_then(|v| object_from_value(&v).ok()),
            None => {
                self.miss(format!("get {text} {}", place(namespace, name)));
                None
            }
        }
    }

    fn list(&self, kind: &Gvk, namespace: Option<&str>, selector: &Selector) -> Vec<Object> {
        let (text, selector) = (kind.to_string(), selector.to_string());
        self.listed(&text, namespace, &selector, None).map(|(items, _)| items).unwrap_or_else(|| {
            self.miss(format!("list {text} in {} selecting {selector:?}", namespace.unwrap_or("every namespace")));
            Vec::new()
        })
    }

    fn list_page(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        let (text, selector) = (kind.to_string(), selector.to_string());
        let page = PageAsked { after: after.cloned(), limit };
        match self.listed(&text, namespace, &selector, Some(&page)) {
            Some((items, resume)) => ListPage { items, resume },
            None => {
                self.miss(format!(
                    "list {text} in {} selecting {selector:?}, {limit} after {after:?}",
                    namespace.unwrap_or("every namespace")
                ));
                ListPage::default()
            }
        }
    }
}

/// A case's outcome as recorded, redacted: the shape [`judge`] compares.
pub fn outcome_of(result: &Result<wasmloop_sandbox::Response, wasmloop_sandbox::CallError>) -> Outcome {
    match result {
        Ok(response) => {
            let mut value = serde_json::to_value(response).unwrap_or(Value::Null);
            wasmloop_runtime::record::redact(&mut value);
            Outcome::Response(value)
        }
        Err(error) => Outcome::Error { message: error.to_string(), transient: error.failure.is_transient() },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn verdicts_follow_the_outcomes_and_a_missing_answer_outranks_them() {
        let response = |image: &str| Outcome::Response(json!({"actions": [{"image": image}]}));
        let error = |m: &str| Outcome::Error { message: m.into(), transient: false };
        let missing = ["get v1/Secret ns/s".to_owned()];
        let cases: [(&str, Outcome, Outcome, &[String], Verdict); 9] = [
            ("the same response", response("a"), response("a"), &[], Verdict::Same),
            ("another response", response("a"), response("b"), &[], Verdict::Changed),
            ("failing the same", error("x"), error("x"), &[], Verdict::Same),
            ("failing otherwise", error("x"), error("y"), &[], Verdict::Changed),
            ("now retried", error("x"), Outcome::Error { message: "x".into(), transient: true }, &[], Verdict::Changed),
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
    fn a_recorded_question_is_answered_and_any_other_is_reported_missing() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        let cache = ReplayCache::new(vec![
            Lookup::Get {
                kind: "v1/ConfigMap".into(),
                namespace: Some("ns".into()),
                name: "a".into(),
                found: Some(cm),
            },
            Lookup::Get { kind: "v1/ConfigMap".into(), namespace: Some("ns".into()), name: "gone".into(), found: None },
        ]);
        let kind = Gvk::from_api_version("v1", "ConfigMap");
        assert_eq!(cache.get(&kind, Some("ns"), "a").map(|o| o.name), Some("a".into()));
        assert!(cache.get(&kind, Some("ns"), "gone").is_none(), "recorded as not found");
        assert!(cache.missing().is_empty());
        assert!(cache.get(&kind, Some("other"), "a").is_none());
        assert_eq!(cache.missing(), ["get v1/ConfigMap other/a"]);
    }

    #[test]
    fn a_change_shows_as_a_diff_of_the_outcomes() {
        let then = Outcome::Response(json!({"actions": [{"image": "nginx:latest"}]}));
        let now = Outcome::Response(json!({"actions": [{"image": "nginx:1.27"}]}));
        let text = diff(&then, &now);
        assert!(text.contains("-    image: nginx:latest") || text.contains("-  - image: nginx:latest"), "{text}");
        assert!(text.contains("nginx:1.27"), "{text}");
        assert!(diff(&then, &then).is_empty());
    }
}
