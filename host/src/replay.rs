//! `wasmloop replay`: a recorded case (`--record-dir`) run again, offline, against another
//! version of its plugin, and what changed.
//!
//! The plugin's cache look-ups are answered from the case, question for question. A question
//! the recording does not hold is never answered "not found": the case's verdict is then
//! `Verdict::NotRecorded`, naming what was asked, because the new version reads something
//! the old one did not and the recording cannot say what the cluster held.
//!
//! The command (`host/src/commands/replay.rs`) compares the redacted outcomes with
//! `wasmloop_runtime::compare::judge`, the comparison shadow mode makes too, so a replay and a
//! shadow of the same change give one verdict.

use std::sync::Mutex;

use serde_json::Value;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_contract::validate::quoted;
use wasmloop_runtime::record::{Case, Lookup, PageAsked};
use wasmloop_sandbox::{
    CacheDenied, Gvk, HostServices, Index, ListKey, ListPage, Object, Phase, Request, Selector, object_from_value,
};

/// A text that is no case `--record-dir` wrote: the parser's words, cut, never the file's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a recorded case: {0}; replay the files `--record-dir` writes")]
pub struct CaseError(String);

/// Why a recorded request cannot be made again: the plugin would be called with something the
/// host never sends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// An object without apiVersion, kind or name: the sandbox's sentence naming the field.
    #[error("{0}")]
    NotAnObject(String),
    /// A phase the contract does not have, quoted cut.
    #[error("phase {0} is none of apply, cleanup, deleted")]
    Phase(String),
}

/// A case file's text as a [`Case`], read as the host reads every YAML a user gives it.
///
/// # Errors
/// A [`CaseError`] saying what is wrong and where, without the file's text.
pub fn parse_case(text: &str) -> Result<Case, CaseError> {
    serde_saphyr::from_str_with_options(text, crate::input::case_yaml_options())
        .map_err(|e| CaseError(wasmloop_contract::validate::foreign(crate::input::yaml_error(&e))))
}

/// The request a case recorded, as the plugin is called with it again.
///
/// # Errors
/// A [`RequestError`]: an object in it is not one (no apiVersion, kind or name), or its phase
/// is none of the three; the value is quoted cut.
pub fn request_of(case: &Case) -> Result<Request, RequestError> {
    let recorded = &case.request;
    let object = |v: &Value| object_from_value(v).map_err(RequestError::NotAnObject);
    Ok(Request {
        object: object(&recorded.object)?,
        owned: recorded.owned.iter().map(object).collect::<Result<Vec<Object>, RequestError>>()?,
        phase: match recorded.phase.as_str() {
            "apply" => Phase::Apply,
            "cleanup" => Phase::Cleanup,
            "deleted" => Phase::Deleted,
            other => return Err(RequestError::Phase(quoted(other))),
        },
        previous: recorded.previous.as_ref().map(object).transpose()?,
        attempt: recorded.attempt,
        config: recorded.config.to_string(),
        triggers: recorded.triggers.iter().filter_map(wasmloop_runtime::record::triggers::of).collect(),
        triggers_dropped: recorded.triggers_dropped,
    })
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
    fn denied(&self, kind: &Gvk, namespace: Option<&Namespace>) -> Option<CacheDenied> {
        let (text, namespace) = (kind.to_string(), namespace.map(Namespace::as_str));
        self.lookups.iter().find_map(|l| match l {
            Lookup::Denied(d) if d.kind == text && d.namespace.as_deref() == namespace => Some(if d.revoked {
                CacheDenied::Revoked(d.why.clone())
            } else {
                CacheDenied::OutOfScope(d.why.clone())
            }),
            _ => None,
        })
    }

    fn get(&self, kind: &Gvk, namespace: Option<&Namespace>, name: &Name) -> Option<Object> {
        let (text, namespace, name) = (kind.to_string(), namespace.map(Namespace::as_str), name.as_str());
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

    fn list(&self, kind: &Gvk, namespace: Option<&Namespace>, selector: &Selector) -> Vec<Object> {
        let (text, selector, namespace) = (kind.to_string(), selector.to_string(), namespace.map(Namespace::as_str));
        self.listed(&text, namespace, &selector, None).map(|(items, _)| items).unwrap_or_else(|| {
            self.miss(format!("list {text} in {} selecting {selector:?}", namespace.unwrap_or("every namespace")));
            Vec::new()
        })
    }

    fn list_page(
        &self,
        kind: &Gvk,
        namespace: Option<&Namespace>,
        selector: &Selector,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        let (text, selector, namespace) = (kind.to_string(), selector.to_string(), namespace.map(Namespace::as_str));
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

    fn list_by_index(
        &self,
        index: &Index,
        key: &str,
        namespace: Option<&Namespace>,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        let (text, namespace) = (index.kind.to_string(), namespace.map(Namespace::as_str));
        let asked = PageAsked { after: after.cloned(), limit };
        let answered = self.lookups.iter().find_map(|l| match l {
            Lookup::Index { kind, index: i, key: k, namespace: n, page, items, resume }
                if *kind == text && *i == index.name && k == key && n.as_deref() == namespace && *page == asked =>
            {
                let items = items.iter().filter_map(|v| object_from_value(v).ok()).collect();
                Some(ListPage { items, resume: resume.clone() })
            }
            _ => None,
        });
        answered.unwrap_or_else(|| {
            self.miss(format!(
                "list {text} by index {} key {key:?} in {}, {limit} after {after:?}",
                index.name,
                namespace.unwrap_or("every namespace")
            ));
            ListPage::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn seed(name: &str) -> String {
        let path = format!("{}/fuzz/corpus/case_file/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn the_fuzz_seed_is_a_case_the_recorder_writes_back_the_same() {
        let case = parse_case(&seed("apply")).unwrap();
        assert_eq!(case.lookups.len(), 3);
        assert_eq!(request_of(&case).unwrap().phase, Phase::Apply);
        assert_eq!(parse_case(&crate::recording::to_text(&case).unwrap()).unwrap(), case);
    }

    #[test]
    fn a_case_of_an_unknown_phase_is_refused_quoting_it_cut() {
        let long = "x".repeat(10_000);
        let mut case = parse_case(&seed("apply")).unwrap();
        case.request.phase = long;
        let refused = request_of(&case).unwrap_err();
        assert!(matches!(refused, RequestError::Phase(_)), "{refused:?}");
        let refused = refused.to_string();
        assert!(refused.starts_with("phase \"xxx") && refused.len() < 200, "{refused}");
    }

    #[test]
    fn a_recorded_index_look_up_is_answered_and_another_key_is_reported_missing() {
        let deployment =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"}});
        let cache = ReplayCache::new(vec![Lookup::Index {
            kind: "apps/v1/Deployment".into(),
            index: "configmap".into(),
            key: "settings".into(),
            namespace: Some("ns".into()),
            page: PageAsked { after: None, limit: 500 },
            items: vec![deployment],
            resume: None,
        }]);
        let kind = Gvk::from_api_version("apps/v1", "Deployment").unwrap();
        let index = Index { name: "configmap".into(), kind, fields: vec!["spec.x".parse().unwrap()] };
        let ns: Namespace = "ns".parse().unwrap();
        let page = cache.list_by_index(&index, "settings", Some(&ns), None, 500);
        assert_eq!(page.items.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["web"]);
        assert!(cache.missing().is_empty());
        assert!(cache.list_by_index(&index, "other", Some(&ns), None, 500).items.is_empty());
        assert_eq!(cache.missing(), ["list apps/v1/Deployment by index configmap key \"other\" in ns, 500 after None"]);
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
        let kind = Gvk::from_api_version("v1", "ConfigMap").unwrap();
        let (ns, other) = ("ns".parse().unwrap(), "other".parse().unwrap());
        let (a, gone) = ("a".parse().unwrap(), "gone".parse().unwrap());
        assert_eq!(cache.get(&kind, Some(&ns), &a).map(|o| o.name), Some("a".into()));
        assert!(cache.get(&kind, Some(&ns), &gone).is_none(), "recorded as not found");
        assert!(cache.missing().is_empty());
        assert!(cache.get(&kind, Some(&other), &a).is_none());
        assert_eq!(cache.missing(), ["get v1/ConfigMap other/a"]);
    }
}
