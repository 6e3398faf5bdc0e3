//! Recording reconciles (`--record-dir`): each call's request, every cache look-up the plugin
//! made with the answer it got, and what the plugin returned, as one [`Case`] that a later
//! version can be replayed against, offline (`wasmloop replay`).
//!
//! A case is plain data: the objects as the plugin saw them, so a replay needs no cluster.
//! Secrets never leave in clear: any Secret in a case, wherever it appears, has the values of
//! `data` and `stringData` replaced (the keys stay, so a plugin that checks for a key still
//! replays the same).
//!
//! ```
//! use serde_json::json;
//! use wasmloop_runtime::record::redact;
//! let mut secret = json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": "aHVudGVyMg=="}});
//! redact(&mut secret);
//! assert_eq!(secret["data"]["password"], "<redacted>");
//! ```

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmloop_sandbox::{
    CacheDenied, CallError, Gvk, HostServices, ListKey, ListPage, LogLevel, Object, Phase, Plugin, Request, Response,
    Selector,
};

/// What replaces a Secret's value.
pub const REDACTED: &str = "<redacted>";
/// Look-ups one case keeps; a plugin that makes more is recorded as truncated, and a replay
/// reports the rest as not recorded.
const MAX_LOOKUPS: usize = 1_000;

/// One recorded reconcile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Case {
    /// The plugin's name, version and component digest.
    pub plugin: String,
    /// Its version.
    pub version: String,
    /// Its component's sha256, hex.
    pub digest: String,
    /// When the call was made (RFC 3339).
    pub recorded_at: String,
    /// What the plugin was given.
    pub request: RecordedRequest,
    /// Every cache look-up, in the order made.
    pub lookups: Vec<Lookup>,
    /// True when the plugin made more look-ups than a case keeps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// What it returned.
    pub outcome: Outcome,
}

/// A request, as JSON objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedRequest {
    /// `apply`, `cleanup` or `deleted`.
    pub phase: String,
    /// The primary.
    pub object: Value,
    /// Its owned children.
    #[serde(default)]
    pub owned: Vec<Value>,
    /// The primary as the previous call saw it, when delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Value>,
    /// Failed attempts before this one.
    #[serde(default)]
    pub attempt: u32,
    /// The plugin's configuration.
    #[serde(default)]
    pub config: Value,
}

/// One cache look-up and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "verb")]
pub enum Lookup {
    /// `get`.
    Get {
        /// `apiVersion/Kind`, as in `apps/v1/Deployment`.
        kind: String,
        /// The namespace asked, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        /// The name asked.
        name: String,
        /// The answer.
        found: Option<Value>,
    },
    /// `list` (a page of it, or, for 0.1 plugins, all of it).
    List {
        /// `apiVersion/Kind`.
        kind: String,
        /// The namespace asked, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        /// The label selector asked, as text.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        selector: String,
        /// The page asked: after this (namespace, name), at most `limit`; none for the whole list.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        page: Option<PageAsked>,
        /// The objects answered.
        items: Vec<Value>,
        /// Where the next page starts, if one follows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<ListKey>,
    },
}

/// A page asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageAsked {
    /// The position after which the page starts.
    pub after: Option<ListKey>,
    /// The most objects asked.
    pub limit: usize,
}

/// What the plugin returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Its response: actions, requeue and prune, as the executor got them.
    Response(Value),
    /// Its failure, as the host reported it.
    Error {
        /// The message, naming plugin and object.
        message: String,
        /// Whether the host retries it.
        transient: bool,
    },
}

/// Where cases go. Called on the worker after each call; it must not block.
pub type CaseSink = Arc<dyn Fn(Case) + Send + Sync>;

/// Replaces the values of a Secret's `data` and `stringData`, keeping the keys, wherever a
/// Secret appears in `value` (a List's items, an action's object); anything else is left alone.
pub fn redact(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::Object(object) => {
            let secret = object.get("kind").and_then(Value::as_str) == Some("Secret")
                && object.get("apiVersion").and_then(Value::as_str) == Some("v1");
            if secret {
                for field in ["data", "stringData"] {
                    if let Some(Value::Object(values)) = object.get_mut(field) {
                        values.values_mut().for_each(|v| *v = Value::String(REDACTED.into()));
                    }
                }
            }
            object.values_mut().for_each(redact);
        }
        _ => {}
    }
}

/// An object's JSON, redacted.
pub fn recorded(object: &Object) -> Value {
    let mut value = serde_json::from_str(&object.json).unwrap_or(Value::Null);
    redact(&mut value);
    value
}

/// The case of one call of `plugin` with `request`, whose look-ups `recording` kept.
pub fn case(plugin: &Plugin, request: &Request, recording: &Recording, result: &Result<Response, CallError>) -> Case {
    let (lookups, truncated) = recording.take();
    let outcome = match result {
        Ok(response) => {
            let mut value = serde_json::to_value(response).unwrap_or(Value::Null);
            redact(&mut value);
            Outcome::Response(value)
        }
        Err(error) => Outcome::Error { message: error.to_string(), transient: error.failure.is_transient() },
    };
    let phase = match request.phase {
        Phase::Apply => "apply",
        Phase::Cleanup => "cleanup",
        Phase::Deleted => "deleted",
    };
    Case {
        plugin: plugin.manifest().name.clone(),
        version: plugin.manifest().version.clone(),
        digest: plugin.digest().to_owned(),
        recorded_at: k8s_openapi::jiff::Timestamp::now().to_string(),
        request: RecordedRequest {
            phase: phase.to_owned(),
            object: recorded(&request.object),
            owned: request.owned.iter().map(recorded).collect(),
            previous: request.previous.as_ref().map(recorded),
            attempt: request.attempt,
            config: serde_json::from_str(&request.config).unwrap_or(Value::Null),
        },
        lookups,
        truncated,
        outcome,
    }
}

fn kind_text(kind: &Gvk) -> String {
    if kind.group.is_empty() {
        format!("{}/{}", kind.version, kind.kind)
    } else {
        format!("{}/{}/{}", kind.group, kind.version, kind.kind)
    }
}

/// The cache as a plugin reads it during one recorded call: answers as `inner` does, and
/// keeps each question with its answer.
pub struct Recording {
    inner: Arc<dyn HostServices>,
    lookups: Mutex<(Vec<Lookup>, bool)>,
}

impl Recording {
    /// Records the look-ups made through `inner`.
    pub fn new(inner: Arc<dyn HostServices>) -> Arc<Recording> {
        Arc::new(Recording { inner, lookups: Mutex::default() })
    }

    /// The look-ups made so far, and whether some were left out.
    pub fn take(&self) -> (Vec<Lookup>, bool) {
        std::mem::take(&mut *self.lookups.lock().expect("lock"))
    }

    fn keep(&self, lookup: impl FnOnce() -> Lookup) {
        let mut lookups = self.lookups.lock().expect("lock");
        if lookups.0.len() < MAX_LOOKUPS {
            lookups.0.push(lookup());
        } else {
            lookups.1 = true;
        }
    }
}

impl HostServices for Recording {
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<Object> {
        let found = self.inner.get(kind, namespace, name);
        self.keep(|| Lookup::Get {
            kind: kind_text(kind),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            found: found.as_ref().map(recorded),
        });
        found
    }

    fn list(&self, kind: &Gvk, namespace: Option<&str>, selector: &Selector) -> Vec<Object> {
        let items = self.inner.list(kind, namespace, selector);
        self.keep(|| Lookup::List {
            kind: kind_text(kind),
            namespace: namespace.map(str::to_owned),
            selector: selector.to_string(),
            page: None,
            items: items.iter().map(recorded).collect(),
            resume: None,
        });
        items
    }

    fn list_page(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        let page = self.inner.list_page(kind, namespace, selector, after, limit);
        self.keep(|| Lookup::List {
            kind: kind_text(kind),
            namespace: namespace.map(str::to_owned),
            selector: selector.to_string(),
            page: Some(PageAsked { after: after.cloned(), limit }),
            items: page.items.iter().map(recorded).collect(),
            resume: page.resume.clone(),
        });
        page
    }

    fn denied(&self, kind: &Gvk, namespace: Option<&str>) -> Option<CacheDenied> {
        self.inner.denied(kind, namespace)
    }

    fn log(&self, plugin: &str, level: LogLevel, message: &str) {
        self.inner.log(plugin, level, message);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secrets_are_redacted_wherever_they_appear_and_nothing_else_is() {
        let secret = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                   "data": {"a": "YQ=="}, "stringData": {"b": "b"}, "type": "Opaque"})
        };
        let redacted = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                   "data": {"a": REDACTED}, "stringData": {"b": REDACTED}, "type": "Opaque"})
        };
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "visible"}});
        let lookalike = json!({"apiVersion": "example.com/v1", "kind": "Secret", "data": {"a": "visible"}});
        let action = |object: Value| json!({"apply": {"object": object}});
        let cases = [
            ("a Secret an action writes", action(secret("w")), action(redacted("w"))),
            ("a Secret", secret("s"), redacted("s")),
            (
                "a List of Secrets",
                json!({"kind": "List", "items": [secret("x")]}),
                json!({"kind": "List", "items": [redacted("x")]}),
            ),
            ("an array", json!([secret("y"), configmap.clone()]), json!([redacted("y"), configmap.clone()])),
            ("a ConfigMap", configmap.clone(), configmap.clone()),
            ("another group's Secret kind", lookalike.clone(), lookalike),
        ];
        for (name, mut given, want) in cases {
            redact(&mut given);
            assert_eq!(given, want, "{name}");
        }
    }
}
