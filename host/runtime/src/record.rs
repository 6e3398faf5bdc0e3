//! Recording reconciles (`--record-dir`): each call's request, every cache look-up the plugin
//! made with the answer it got, and what the plugin returned, as one [`Case`] that a later
//! version can be replayed against, offline (`wasmloop replay`).
//!
//! A case is plain data: the objects as the plugin saw them, so a replay needs no cluster.
//! It is the plugin's view of one call and nothing else: [`Recording`] sits between the
//! plugin's imports and its cache view, so it keeps exactly the questions the imports asked.
//! Cases flow one way, worker → [`CaseSink`] → the store's thread (`host/src/recording.rs`);
//! the store never reaches back into the controller. `wasmloop record` is `dev --dry-run` with
//! a record directory: the dry-run writer and the recording are two context options, so it
//! needs no code of its own.
//! Secrets never leave in clear: any Secret in a case, wherever it appears, has the values of
//! `data` and `stringData` replaced (the keys stay, so a plugin that checks for a key still
//! replays the same). What the plugin was given keeps each value's type under a keyed digest
//! ([`redact_input`]): `data` still decodes as bytes, and one value is always the same bytes
//! under the recorder's key, so a plugin that parses or hashes a Secret replays alike; what it
//! returned is replaced outright ([`redact`]).
//!
//! ```
//! use serde_json::json;
//! use wasmloop_runtime::record::{RedactionKey, redact, redact_input};
//! let secret = json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": "aHVudGVyMg=="}});
//! let mut given = secret.clone();
//! redact_input(&mut given, &RedactionKey::new([7; 32]));
//! assert_ne!(given["data"]["password"], "aHVudGVyMg==");
//! assert_eq!(given["data"]["password"].as_str().unwrap().len(), 24, "16 bytes, in base64");
//! let mut returned = secret;
//! redact(&mut returned);
//! assert_eq!(returned["data"]["password"], "<redacted>");
//! ```

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_sandbox::{
    CacheDenied, CallError, CallFailure, Gvk, HostServices, Index, ListKey, ListPage, LogLevel, Object, Phase, Plugin,
    Request, Response, Selector,
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
    /// The plugin, as the host knows it (`NAME`, or `NAMESPACE/NAME` from a plugin namespace).
    pub plugin: wasmloop_sandbox::PluginId,
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
    /// Why the call ran (contract 0.3), as [`triggers::to_json`] writes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<Value>,
    /// Triggers beyond those recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub triggers_dropped: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub use wasmloop_sandbox::triggers;

/// One cache look-up and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "verb")]
pub enum Lookup {
    /// `get`.
    Get {
        /// The kind as `Gvk` displays it: `apiVersion/Kind`, as in `apps/v1/Deployment`.
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
    /// `list-by-index` (contract 0.3): a page of what a declared index files under a key.
    Index {
        /// `apiVersion/Kind`.
        kind: String,
        /// The index's name, as the manifest declares it.
        index: String,
        /// The key asked; over Secrets, its digest (`redacted-HEX`, as a `stringData` value's),
        /// since an index over a Secret's fields files it under its values. A replay, which has
        /// no key, then reports that look-up missing rather than answer it.
        key: String,
        /// The namespace asked, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        /// The page asked.
        page: PageAsked,
        /// The objects answered.
        items: Vec<Value>,
        /// Where the next page starts, if one follows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<ListKey>,
    },
    /// A look-up refused before it was answered.
    Denied(Denial),
}

/// A look-up the cache refused before answering (a revoked grant, a namespace outside the
/// plugin's scope).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Denial {
    /// `apiVersion/Kind`.
    pub kind: String,
    /// The namespace asked, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// True for a revoked grant, false for a namespace outside the plugin's scope.
    pub revoked: bool,
    /// Why, as the plugin was told.
    pub why: String,
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
        /// For a trap, a deadline or a broken limit, its class (`PluginTrapped`, ...): two
        /// such failures are the same when their classes are, whatever their messages say of
        /// timings or code locations. None for other failures (an error the plugin returned,
        /// an action refused), and in cases recorded before classes: their messages compare.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<String>,
    },
}

/// Where cases go. Called on the worker after each call; it must not block.
pub type CaseSink = Arc<dyn Fn(Case) + Send + Sync>;

/// A recorder: where cases go, and the key their Secrets' values are digested with.
#[derive(Clone)]
pub struct Recorder {
    /// Where cases go.
    pub sink: CaseSink,
    /// The key of [`redact_input`].
    pub key: RedactionKey,
}

/// The key a recorder digests Secret values with (HMAC-SHA-256, cut to 16 bytes): the same
/// value gives the same digest under one key, and a digest tells nothing of the value without
/// the key, which stays out of the cases.
#[derive(Clone)]
pub struct RedactionKey([u8; 32]);

impl RedactionKey {
    /// The key of these bytes.
    pub fn new(bytes: [u8; 32]) -> RedactionKey {
        RedactionKey(bytes)
    }

    /// The digest of `value`.
    pub fn digest(&self, value: &[u8]) -> [u8; 16] {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(value);
        let full = mac.finalize().into_bytes();
        let mut cut = [0; 16];
        cut.copy_from_slice(&full[..16]);
        cut
    }
}

impl std::fmt::Debug for RedactionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedactionKey(..)")
    }
}

/// A Secret's values as a plugin is given them in a case: each `data` value becomes the
/// base64 of its digest (still bytes), each `stringData` value `redacted-` and the hex of its
/// digest (still a string); the last-applied annotation goes. Wherever a Secret appears in
/// `value`; anything else is left alone.
pub fn redact_input(value: &mut Value, key: &RedactionKey) {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    match value {
        Value::Array(items) => items.iter_mut().for_each(|v| redact_input(v, key)),
        Value::Object(object) => {
            if is_secret(object.get("apiVersion"), object.get("kind")) {
                if let Some(Value::Object(values)) = object.get_mut("data") {
                    for v in values.values_mut() {
                        let text = v.as_str().unwrap_or_default();
                        // A value that is no base64 is digested as its text.
                        let bytes = engine.decode(text).unwrap_or_else(|_| text.as_bytes().to_vec());
                        *v = Value::String(engine.encode(key.digest(&bytes)));
                    }
                }
                if let Some(Value::Object(values)) = object.get_mut("stringData") {
                    for v in values.values_mut() {
                        let digest = key.digest(v.as_str().unwrap_or_default().as_bytes());
                        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                        *v = Value::String(format!("redacted-{hex}"));
                    }
                }
                if let Some(Value::Object(annotations)) =
                    object.get_mut("metadata").and_then(|m| m.get_mut("annotations"))
                {
                    annotations.remove(LAST_APPLIED);
                }
            }
            object.values_mut().for_each(|v| redact_input(v, key));
        }
        _ => {}
    }
}

/// Replaces the values of a Secret's `data` and `stringData` (keeping the keys) and drops
/// its `kubectl.kubernetes.io/last-applied-configuration` annotation (a copy of the whole
/// Secret), wherever a Secret appears in `value`: an object, a List's items, an action's
/// object. A patch of a Secret has every value of its body replaced. Anything else is left
/// alone.
pub fn redact(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::Object(object) => {
            if is_secret(object.get("apiVersion"), object.get("kind")) {
                for field in ["data", "stringData"] {
                    if let Some(Value::Object(values)) = object.get_mut(field) {
                        values.values_mut().for_each(|v| *v = Value::String(REDACTED.into()));
                    }
                }
                if let Some(Value::Object(annotations)) =
                    object.get_mut("metadata").and_then(|m| m.get_mut("annotations"))
                {
                    annotations.remove(LAST_APPLIED);
                }
            }
            let target = object.get("target");
            if target.is_some_and(|t| is_secret(t.get("apiVersion"), t.get("kind")))
                && let Some(patch) = object.get_mut("patch")
            {
                redact_all(patch);
            }
            object.values_mut().for_each(redact);
        }
        _ => {}
    }
}

/// The annotation `kubectl apply` keeps the whole applied object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

fn is_secret(api_version: Option<&Value>, kind: Option<&Value>) -> bool {
    api_version.and_then(Value::as_str) == Some("v1") && kind.and_then(Value::as_str) == Some("Secret")
}

/// Every scalar in `value` replaced, the shape kept.
fn redact_all(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(redact_all),
        Value::Object(object) => object.values_mut().for_each(redact_all),
        Value::Null => {}
        other => *other = Value::String(REDACTED.into()),
    }
}

/// An object's JSON as a plugin was given it, redacted with `key`.
pub fn recorded(object: &Object, key: &RedactionKey) -> Value {
    let mut value = serde_json::from_str(&object.json).unwrap_or(Value::Null);
    redact_input(&mut value, key);
    value
}

/// A call's outcome as a case records it, redacted: the shape `compare::judge` compares.
pub fn outcome(result: &Result<Response, CallError>) -> Outcome {
    match result {
        Ok(response) => {
            let mut value = serde_json::to_value(response).unwrap_or(Value::Null);
            redact(&mut value);
            Outcome::Response(value)
        }
        Err(error) => Outcome::Error {
            message: error.to_string(),
            transient: error.failure.is_transient(),
            class: match error.failure {
                // Where or how long: details that differ from version to version.
                CallFailure::Trap { .. }
                | CallFailure::Deadline { .. }
                | CallFailure::MemoryLimit { .. }
                | CallFailure::ResponseTooLarge { .. }
                | CallFailure::TooManyItems { .. } => Some(error.failure.metric_reason().to_owned()),
                // The plugin's own words, or what it asked for: the message is the failure.
                _ => None,
            },
        },
    }
}

/// The case of one call of `plugin` with `request`, whose look-ups `recording` kept.
pub fn case(plugin: &Plugin, request: &Request, recording: &Recording, result: &Result<Response, CallError>) -> Case {
    let (lookups, truncated) = recording.take();
    let outcome = outcome(result);
    let phase = match request.phase {
        Phase::Apply => "apply",
        Phase::Cleanup => "cleanup",
        Phase::Deleted => "deleted",
    };
    Case {
        plugin: plugin.manifest().id(),
        version: plugin.manifest().version.clone(),
        digest: plugin.digest().to_owned(),
        recorded_at: k8s_openapi::jiff::Timestamp::now().to_string(),
        request: RecordedRequest {
            phase: phase.to_owned(),
            object: recorded(&request.object, &recording.key),
            owned: request.owned.iter().map(|o| recorded(o, &recording.key)).collect(),
            previous: request.previous.as_ref().map(|o| recorded(o, &recording.key)),
            attempt: request.attempt,
            config: serde_json::from_str(&request.config).unwrap_or(Value::Null),
            triggers: request.triggers.iter().map(triggers::to_json).collect(),
            triggers_dropped: request.triggers_dropped,
        },
        lookups,
        truncated,
        outcome,
    }
}

/// The cache as a plugin reads it during one recorded call: answers as `inner` does, and
/// keeps each question with its answer as the plugin was served it (metadata-only kinds
/// stripped), within [`CASE_BYTES`] of answers.
pub struct Recording {
    inner: Arc<dyn HostServices>,
    metadata_only: Vec<Gvk>,
    kept: Mutex<Kept>,
    key: RedactionKey,
}

/// Answer bytes one case keeps; past them, or past [`MAX_LOOKUPS`], the case is truncated.
pub const CASE_BYTES: usize = 4 << 20;

#[derive(Default)]
struct Kept {
    lookups: Vec<Lookup>,
    bytes: usize,
    truncated: bool,
}

impl Recording {
    /// Records the look-ups made through `inner` by a plugin served `metadata_only` kinds
    /// as metadata, Secrets digested with `key`.
    pub fn new(inner: Arc<dyn HostServices>, metadata_only: Vec<Gvk>, key: RedactionKey) -> Arc<Recording> {
        Arc::new(Recording { inner, metadata_only, kept: Mutex::default(), key })
    }

    /// The look-ups made so far, and whether some were left out.
    pub fn take(&self) -> (Vec<Lookup>, bool) {
        let kept = std::mem::take(&mut *self.kept.lock().expect("lock"));
        (kept.lookups, kept.truncated)
    }

    /// An answer as the plugin is served it.
    fn served(&self, kind: &Gvk, object: &Object) -> Value {
        if self.metadata_only.contains(kind) {
            recorded(&wasmloop_sandbox::metadata_only(object), &self.key)
        } else {
            recorded(object, &self.key)
        }
    }

    /// Keeps a look-up whose answers are `objects`, unless the case is full.
    fn keep<'a>(&self, objects: impl Iterator<Item = &'a Object>, lookup: impl FnOnce() -> Lookup) {
        let bytes: usize = objects.map(|o| o.json.len()).sum();
        let mut kept = self.kept.lock().expect("lock");
        if kept.truncated || kept.lookups.len() >= MAX_LOOKUPS || kept.bytes + bytes > CASE_BYTES {
            kept.truncated = true;
            return;
        }
        kept.bytes += bytes;
        kept.lookups.push(lookup());
    }
}

impl HostServices for Recording {
    fn get(&self, kind: &Gvk, namespace: Option<&Namespace>, name: &Name) -> Option<Object> {
        let found = self.inner.get(kind, namespace, name);
        self.keep(found.iter(), || Lookup::Get {
            kind: kind.to_string(),
            namespace: namespace.map(Namespace::to_string),
            name: name.to_string(),
            found: found.as_ref().map(|o| self.served(kind, o)),
        });
        found
    }

    fn list(&self, kind: &Gvk, namespace: Option<&Namespace>, selector: &Selector) -> Vec<Object> {
        let items = self.inner.list(kind, namespace, selector);
        self.keep(items.iter(), || Lookup::List {
            kind: kind.to_string(),
            namespace: namespace.map(Namespace::to_string),
            selector: selector.to_string(),
            page: None,
            items: items.iter().map(|o| self.served(kind, o)).collect(),
            resume: None,
        });
        items
    }

    fn list_page(
        &self,
        kind: &Gvk,
        namespace: Option<&Namespace>,
        selector: &Selector,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        let page = self.inner.list_page(kind, namespace, selector, after, limit);
        self.keep(page.items.iter(), || Lookup::List {
            kind: kind.to_string(),
            namespace: namespace.map(Namespace::to_string),
            selector: selector.to_string(),
            page: Some(PageAsked { after: after.cloned(), limit }),
            items: page.items.iter().map(|o| self.served(kind, o)).collect(),
            resume: page.resume.clone(),
        });
        page
    }

    fn list_by_index(
        &self,
        index: &Index,
        key: &str,
        namespace: Option<&Namespace>,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        // Forwarded, not left to the default: the host's informers answer from the index they
        // keep, and a replay must be asked the same question to give the same answer.
        let page = self.inner.list_by_index(index, key, namespace, after, limit);
        let secret = index.kind.to_string() == "v1/Secret";
        let asked = if secret {
            let hex: String = self.key.digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            format!("redacted-{hex}")
        } else {
            key.to_owned()
        };
        self.keep(page.items.iter(), || Lookup::Index {
            kind: index.kind.to_string(),
            index: index.name.clone(),
            key: asked,
            namespace: namespace.map(Namespace::to_string),
            page: PageAsked { after: after.cloned(), limit },
            items: page.items.iter().map(|o| self.served(&index.kind, o)).collect(),
            resume: page.resume.clone(),
        });
        page
    }

    fn denied(&self, kind: &Gvk, namespace: Option<&Namespace>) -> Option<CacheDenied> {
        let denied = self.inner.denied(kind, namespace);
        if let Some(denial) = &denied {
            let (revoked, why) = match denial {
                CacheDenied::Revoked(why) => (true, why.clone()),
                CacheDenied::OutOfScope(why) => (false, why.clone()),
            };
            let denial =
                Denial { kind: kind.to_string(), namespace: namespace.map(Namespace::to_string), revoked, why };
            self.keep(std::iter::empty::<&Object>(), || Lookup::Denied(denial));
        }
        denied
    }

    fn log(&self, plugin: &str, level: LogLevel, message: &str) {
        self.inner.log(plugin, level, message);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A cache holding one Deployment, refusing namespace `elsewhere`.
    struct OneDeployment;

    impl HostServices for OneDeployment {
        fn get(&self, _: &Gvk, _: Option<&Namespace>, name: &Name) -> Option<Object> {
            let name = name.as_str();
            let value = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                               "metadata": {"name": name, "namespace": "ns"}, "spec": {"replicas": 1}});
            wasmloop_sandbox::object_from_value(&value).ok()
        }

        fn list(&self, _: &Gvk, _: Option<&Namespace>, _: &Selector) -> Vec<Object> {
            Vec::new()
        }

        fn denied(&self, _: &Gvk, namespace: Option<&Namespace>) -> Option<CacheDenied> {
            (namespace.is_some_and(|ns| ns == "elsewhere"))
                .then(|| CacheDenied::OutOfScope("served from ns only".into()))
        }

        // As the host's informers: an answer from the index, not from `list` (empty here).
        fn list_by_index(
            &self,
            _: &Index,
            key: &str,
            _: Option<&Namespace>,
            _: Option<&ListKey>,
            _: usize,
        ) -> ListPage {
            let name = Name::parse(key).expect("a name");
            ListPage {
                items: self
                    .get(&Gvk::from_api_version("apps/v1", "Deployment").unwrap(), None, &name)
                    .into_iter()
                    .collect(),
                resume: None,
            }
        }
    }

    #[test]
    fn a_look_up_by_index_is_asked_of_the_inner_cache_and_kept_with_its_page() {
        let deployments = Gvk::from_api_version("apps/v1", "Deployment").unwrap();
        let index = Index { name: "configmap".into(), kind: deployments, fields: vec!["spec.x".parse().unwrap()] };
        let recording = Recording::new(Arc::new(OneDeployment), Vec::new(), RedactionKey::new([1; 32]));
        let page = recording.list_by_index(&index, "web", None, None, 500);
        assert_eq!(page.items.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["web"]);
        let (lookups, _) = recording.take();
        let Lookup::Index { index: name, key, page, items, .. } = &lookups[0] else { panic!("{lookups:?}") };
        assert_eq!((name.as_str(), key.as_str(), page.limit, items.len()), ("configmap", "web", 500, 1));
    }

    #[test]
    fn a_look_up_by_an_index_over_secrets_keeps_its_key_digested() {
        let secrets = Gvk::from_api_version("v1", "Secret").unwrap();
        let index = Index { name: "token".into(), kind: secrets, fields: vec!["data.token".parse().unwrap()] };
        let recording = Recording::new(Arc::new(OneDeployment), Vec::new(), RedactionKey::new([1; 32]));
        recording.list_by_index(&index, "s3cr3t", None, None, 500);
        let (lookups, _) = recording.take();
        let Lookup::Index { key, .. } = &lookups[0] else { panic!("{lookups:?}") };
        assert!(key.starts_with("redacted-") && !key.contains("s3cr3t"), "{key}");
    }

    #[test]
    fn a_recording_keeps_answers_as_served_and_refusals_and_stops_at_its_bounds() {
        let deployments = Gvk::from_api_version("apps/v1", "Deployment").unwrap();
        let (ns, web) = (Namespace::parse("ns").unwrap(), Name::parse("web").unwrap());
        let lean = Recording::new(Arc::new(OneDeployment), vec![deployments.clone()], RedactionKey::new([1; 32]));
        lean.get(&deployments, Some(&ns), &web);
        lean.denied(&deployments, Some(&Namespace::parse("elsewhere").unwrap()));
        let (lookups, truncated) = lean.take();
        let Lookup::Get { found: Some(found), .. } = &lookups[0] else { panic!("{lookups:?}") };
        assert!(found.get("spec").is_none(), "a metadata-only kind is recorded as served: {found}");
        assert!(matches!(&lookups[1], Lookup::Denied(d) if !d.revoked && d.why.contains("ns only")), "{lookups:?}");
        assert!(!truncated);

        let full = Recording::new(Arc::new(OneDeployment), Vec::new(), RedactionKey::new([1; 32]));
        for _ in 0..=MAX_LOOKUPS {
            full.get(&deployments, Some(&ns), &web);
        }
        let (lookups, truncated) = full.take();
        let Lookup::Get { found: Some(found), .. } = &lookups[0] else { panic!("{lookups:?}") };
        assert_eq!(found["spec"]["replicas"], 1);
        assert_eq!((lookups.len(), truncated), (MAX_LOOKUPS, true));
    }

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
        let patch = |api_version: &str, kind: &str, body: Value| json!({"patch": {"target": {"apiVersion": api_version, "kind": kind, "name": "s"}, "type": "merge", "patch": body}});
        let mut applied = secret("k");
        applied["metadata"]["annotations"] = json!({LAST_APPLIED: "{\"data\":{\"a\":\"YQ==\"}}", "team": "a"});
        let mut applied_redacted = redacted("k");
        applied_redacted["metadata"]["annotations"] = json!({"team": "a"});
        let cases = [
            (
                "a patch of a Secret",
                patch("v1", "Secret", json!({"data": {"a": "YQ=="}, "n": [1, null]})),
                patch("v1", "Secret", json!({"data": {"a": REDACTED}, "n": [REDACTED, null]})),
            ),
            (
                "a patch of a ConfigMap",
                patch("v1", "ConfigMap", json!({"data": {"a": "b"}})),
                patch("v1", "ConfigMap", json!({"data": {"a": "b"}})),
            ),
            ("a Secret kubectl applied", applied, applied_redacted),
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
