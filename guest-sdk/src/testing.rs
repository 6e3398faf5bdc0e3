//! Run a plugin's logic natively in `cargo test`, with no wasm and no cluster.
//!
//! [`TestCase`] plays the host: it builds the request, serves cache look-ups from the objects
//! you give it (only for kinds the manifest declares, as the host does), collects log lines,
//! and returns an [`Outcome`] with helpers to read the actions.
//!
//! ```
//! # use wasmloop_sdk::prelude::*;
//! # use k8s_openapi::api::core::v1::ConfigMap;
//! # struct P;
//! # impl Reconciler for P {
//! #     fn manifest() -> Manifest { Manifest::new("p", "0").primary::<ConfigMap>() }
//! #     fn reconcile(_: &Request) -> Result<Vec<Action>, Error> { Ok(vec![status(serde_json::json!({"ok": true}))]) }
//! # }
//! use wasmloop_sdk::testing::TestCase;
//! let outcome = TestCase::new(serde_json::json!({
//!     "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}
//! }))
//! .run::<P>();
//! assert_eq!(outcome.status().unwrap()["ok"], true);
//! ```

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::abi::Level;
use crate::action::{Action, EventAction, PatchKind};
use crate::error::Error;
use crate::host::with_host;
use crate::kind::{Gvk, Kind};
use crate::manifest::{Manifest, WriteScope};
use crate::reconciler::Reconciler;
use crate::request::{Config, Object, ObjectRef, Phase, Related, Request, Trigger};
use wasmloop_contract::action as rules;

pub use crate::host::PAGE_SIZE;

/// The first write of `actions` that no grant of `manifest` covers, as the host words it.
fn ungranted(manifest: &Manifest, primary: &Object, actions: &[Action]) -> Option<String> {
    actions.iter().find_map(|action| {
        let (verb, api_version, kind, namespace) = match action {
            Action::Apply(apply) => {
                let value: Value = serde_json::from_str(&apply.json).ok()?;
                let text = |p: &str| value.pointer(p).and_then(Value::as_str).map(str::to_owned);
                ("apply", text("/apiVersion")?, text("/kind")?, text("/metadata/namespace"))
            }
            Action::Patch { target, .. } => ("patch", target.api_version.clone(), target.kind.clone(), target.namespace.clone()),
            Action::Delete(target) => ("delete", target.api_version.clone(), target.kind.clone(), target.namespace.clone()),
            _ => return None,
        };
        let gvk = Gvk::from_api_version(&api_version, &kind);
        let namespace = namespace.or_else(|| primary.namespace.clone());
        let here = namespace == primary.namespace;
        let implied = matches!(verb, "apply" | "delete") && here && manifest.owns.contains(&gvk);
        let granted = manifest.writes.iter().any(|g| {
            g.kind == gvk
                && match verb {
                    "apply" => g.apply,
                    "patch" => g.patch,
                    _ => g.delete,
                }
                && match &g.scope {
                    WriteScope::PrimaryNamespace => here,
                    WriteScope::Namespaces(list) => namespace.as_ref().is_some_and(|ns| list.contains(ns)),
                    WriteScope::Any => true,
                }
        });
        let place = namespace.map_or_else(|| "cluster-scoped".to_owned(), |ns| format!("in namespace {ns}"));
        (!implied && !granted).then(|| {
            format!(
                "plugin {:?}: no write grant lets it {verb} {gvk} {place}; declare one with Manifest::writes(Grant::of::<{kind}>().{verb}()...)",
                manifest.name
            )
        })
    })
}

/// Why the host would refuse the `prune` actions in `actions`, in its words.
fn misused_prune(manifest: &Manifest, phase: Phase, actions: &[Action]) -> Option<String> {
    // Numbered as the host numbers them: requeue_after never reaches it.
    let sent = actions.iter().filter(|a| !matches!(a, Action::RequeueAfter(_)));
    let at: Vec<usize> = sent.enumerate().filter(|(_, a)| **a == Action::Prune).map(|(i, _)| i).collect();
    let phase = match phase {
        Phase::Apply => rules::Phase::Apply,
        Phase::Cleanup => rules::Phase::Cleanup,
        Phase::Deleted => rules::Phase::Deleted,
    };
    rules::prune_asked(manifest.prune, phase, &at).err().map(|why| format!("plugin {:?}: {why}", manifest.name))
}

/// `P`'s manifest, refused as the host would refuse it at load: a test of a plugin the host
/// cannot load must not pass.
fn checked<P: Reconciler>() -> Manifest {
    let manifest = P::manifest();
    if let Err(why) = manifest.validate() {
        panic!("the host would refuse plugin {:?} at load: {why}; fix its Reconciler::manifest", manifest.name);
    }
    manifest
}

fn object(value: &impl Serialize) -> Object {
    let value = serde_json::to_value(value).expect("test objects serialize");
    Object::from_value(&value).unwrap_or_else(|e| panic!("test object: {}", e.message))
}

/// One native reconcile, set up like the host would.
#[derive(Debug, Clone)]
pub struct TestCase {
    object: Object,
    owned: Vec<Object>,
    cache: Vec<Object>,
    config: String,
    phase: Phase,
    previous: Option<Object>,
    attempt: u32,
    triggers: Vec<Trigger>,
}

impl TestCase {
    /// A reconcile of `primary` (a typed object or a `json!` value) in phase `apply`.
    pub fn new(primary: impl Serialize) -> Self {
        TestCase {
            object: object(&primary),
            owned: Vec::new(),
            cache: Vec::new(),
            config: "{}".into(),
            phase: Phase::Apply,
            previous: None,
            attempt: 0,
            triggers: Vec::new(),
        }
    }

    /// Adds a reason the reconcile runs ([`Request::triggers`]), after those given before.
    #[must_use]
    pub fn trigger(mut self, trigger: Trigger) -> Self {
        self.triggers.push(trigger);
        self
    }

    /// Adds an observed owned child (also visible in the cache). The cache holds one copy of
    /// each object, the last given (primary, then owned, then cached), as the host's holds
    /// the latest state.
    #[must_use]
    pub fn owned(mut self, child: impl Serialize) -> Self {
        self.owned.push(object(&child));
        self
    }

    /// Adds an object that only the cache look-ups see. One with the primary's or an owned
    /// child's kind, namespace and name replaces it in the cache (not in the request).
    #[must_use]
    pub fn cached(mut self, other: impl Serialize) -> Self {
        self.cache.push(object(&other));
        self
    }

    /// Sets the plugin's configuration.
    #[must_use]
    pub fn config(mut self, config: impl Serialize) -> Self {
        self.config = serde_json::to_string(&config).expect("config serializes");
        self
    }

    /// Sets the phase.
    #[must_use]
    pub fn phase(mut self, phase: Phase) -> Self {
        self.phase = phase;
        self
    }

    /// Sets the primary as it was at the last successful reconcile.
    #[must_use]
    pub fn previous(mut self, previous: impl Serialize) -> Self {
        self.previous = Some(object(&previous));
        self
    }

    /// Sets the attempt number.
    #[must_use]
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }

    /// The request this case hands to the plugin.
    pub fn request(&self) -> Request {
        Request {
            object: self.object.clone(),
            owned: self.owned.clone(),
            phase: self.phase,
            previous: self.previous.clone(),
            attempt: self.attempt,
            config: Config::new(self.config.clone()),
            triggers: self.triggers.clone(),
            triggers_dropped: 0,
        }
    }

    /// Every object the cache look-ups see: the primary, the owned children and the rest.
    fn cache_objects(&self) -> Vec<Object> {
        std::iter::once(&self.object).chain(&self.owned).chain(&self.cache).cloned().collect()
    }

    /// Runs `P::reconcile` natively and collects what it did. As in the host, a look-up of a
    /// kind the manifest does not declare fails the reconcile even if the plugin ignored the
    /// error.
    ///
    /// As in the host, an apply, patch or delete no write grant covers fails the reconcile
    /// (a target without a namespace counts as in the primary's, as the host decodes it), and
    /// so does a `prune` the manifest does not allow, outside phase `Apply`, or twice.
    pub fn run<P: Reconciler>(&self) -> Outcome {
        let manifest = checked::<P>();
        // As the host hands them over: from its cache, stripped as the plugin's cache is.
        let mut request = self.request();
        request.object = crate::host::as_cached(&manifest, request.object);
        request.owned = request.owned.into_iter().map(|o| crate::host::as_cached(&manifest, o)).collect();
        request.previous = request.previous.map(|o| crate::host::as_cached(&manifest, o));
        let (result, logs, undeclared) = with_host(manifest.clone(), self.cache_objects(), || P::reconcile(&request));
        let result = match (undeclared, result) {
            (Some(message), _) => Err(Error::permanent(message)),
            (None, Ok(actions)) => {
                // In the host's order: the prune is checked before the writes.
                let refused = misused_prune(&manifest, request.phase, &actions)
                    .or_else(|| ungranted(&manifest, &self.object, &actions));
                match refused {
                    Some(message) => Err(Error::permanent(message)),
                    None => Ok(actions),
                }
            }
            (None, Err(e)) => Err(e),
        };
        Outcome { result, logs }
    }

    /// Runs `P::map` natively on `related` (changed, not deleted), with this case's cache
    /// and config.
    pub fn map<P: Reconciler>(&self, related: impl Serialize) -> Vec<ObjectRef> {
        self.map_change::<P>(related, false)
    }

    /// Runs `P::map_change` natively on `related`, deleted or not, with this case's cache and
    /// config.
    pub fn map_change<P: Reconciler>(&self, related: impl Serialize, deleted: bool) -> Vec<ObjectRef> {
        let manifest = checked::<P>();
        let related = Related { object: crate::host::as_cached(&manifest, object(&related)), deleted };
        with_host(manifest, self.cache_objects(), || P::map_change(&related, &Config::new(self.config.clone()))).0
    }
}

/// Runs `f` with this case's cache installed as the native host, so benchmarks can call
/// `P::reconcile` many times without re-creating the host.
pub fn with_case<P: Reconciler, T>(case: &TestCase, f: impl FnOnce() -> T) -> T {
    with_host(checked::<P>(), case.cache_objects(), f).0
}

/// Runs `P::reconcile` and reports (decode, logic, encode) nanoseconds, measured as in a
/// component built with the `phase-timing` feature (zeros without it).
pub fn timed_reconcile<P: Reconciler>(request: &Request) -> (Result<Vec<Action>, Error>, [u64; 3]) {
    crate::timing::phases(|| P::reconcile(request))
}

/// What a native reconcile returned and logged.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The plugin's result.
    pub result: Result<Vec<Action>, Error>,
    /// Lines logged through the host.
    pub logs: Vec<(Level, String)>,
}

impl Outcome {
    /// The actions; panics with the plugin's error if it failed.
    pub fn actions(&self) -> &[Action] {
        match &self.result {
            Ok(actions) => actions,
            Err(e) => panic!("reconcile failed: {e}"),
        }
    }

    /// The error; panics if the reconcile succeeded.
    pub fn error(&self) -> &Error {
        match &self.result {
            Ok(actions) => panic!("reconcile succeeded with {actions:?}"),
            Err(e) => e,
        }
    }

    /// Applied objects of kind `K`, parsed.
    pub fn applied<K: Kind + DeserializeOwned>(&self) -> Vec<K> {
        self.actions()
            .iter()
            .filter_map(|a| match a {
                Action::Apply(apply) => Some(&apply.json),
                _ => None,
            })
            .map(|json| serde_json::from_str::<Value>(json).expect("applied JSON parses"))
            .filter(|v| v["kind"] == K::KIND && v["apiVersion"] == K::API_VERSION)
            .map(|v| serde_json::from_value(v).expect("applied object fits its kind"))
            .collect()
    }

    /// The last status set, parsed.
    pub fn status(&self) -> Option<Value> {
        self.actions().iter().rev().find_map(|a| match a {
            Action::Status(json) => Some(serde_json::from_str(json).expect("status JSON parses")),
            _ => None,
        })
    }

    /// The events recorded.
    pub fn events(&self) -> Vec<&EventAction> {
        self.actions()
            .iter()
            .filter_map(|a| match a {
                Action::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// The patches, with their parsed documents.
    pub fn patches(&self) -> Vec<(&ObjectRef, PatchKind, Value)> {
        self.actions()
            .iter()
            .filter_map(|a| match a {
                Action::Patch { target, kind, patch } => {
                    Some((target, *kind, serde_json::from_str(patch).expect("patch JSON parses")))
                }
                _ => None,
            })
            .collect()
    }

    /// The deletes.
    pub fn deletes(&self) -> Vec<&ObjectRef> {
        self.actions()
            .iter()
            .filter_map(|a| match a {
                Action::Delete(target) => Some(target),
                _ => None,
            })
            .collect()
    }

    /// True when the response asks the host to prune (see [`crate::action::prune`]).
    pub fn prunes(&self) -> bool {
        self.actions().contains(&Action::Prune)
    }

    /// The shortest requeue-after asked for.
    pub fn requeue_after(&self) -> Option<Duration> {
        self.actions()
            .iter()
            .filter_map(|a| match a {
                Action::RequeueAfter(d) => Some(*d),
                _ => None,
            })
            .min()
    }

    /// True when a log line at `level` contains `text`.
    pub fn logged(&self, level: Level, text: &str) -> bool {
        self.logs.iter().any(|(l, m)| *l == level && m.contains(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};

    struct ReadsSecret;

    impl Reconciler for ReadsSecret {
        fn manifest() -> Manifest {
            Manifest::new("reads-secret", "0").primary::<ConfigMap>()
        }

        fn reconcile(_: &Request) -> Result<Vec<Action>, Error> {
            // Swallows the error, as a careless plugin might.
            let _ = cache::get::<Secret>(Some("ns"), "token");
            Ok(Vec::new())
        }
    }

    #[test]
    fn reading_an_undeclared_kind_fails_the_run_as_in_the_host() {
        let outcome = TestCase::new(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}
        }))
        .run::<ReadsSecret>();
        let error = outcome.error();
        assert!(error.message.contains("read kind v1/Secret, which its manifest does not declare"), "{error}");
        assert!(!error.transient);
    }

    /// Patches the ConfigMap its config names, `NAMESPACE/NAME`, with a grant in its own
    /// namespace only.
    struct PatchesConfigMaps;

    impl Reconciler for PatchesConfigMaps {
        fn manifest() -> Manifest {
            Manifest::new("patcher", "0").primary::<ConfigMap>().writes(Grant::of::<ConfigMap>().patch())
        }

        fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
            let target: String = request.config()?;
            let (ns, name) = target.split_once('/').unwrap_or(("", &target));
            let mut to = ObjectRef::new::<ConfigMap>(name);
            if !ns.is_empty() {
                to = to.namespace(ns);
            }
            Ok(vec![patch(to, PatchKind::Merge, &serde_json::json!({"data": {"x": "1"}}))])
        }
    }

    #[test]
    fn a_write_no_grant_covers_fails_the_run_as_in_the_host() {
        let primary =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        let cases = [("other", true), ("ns/other", true), ("kube-system/other", false)];
        for (config, allowed) in cases {
            let outcome = TestCase::new(primary.clone()).config(config).run::<PatchesConfigMaps>();
            match allowed {
                true => assert_eq!(outcome.patches().len(), 1, "{config}"),
                false => {
                    let error = outcome.error();
                    assert!(
                        error.message.contains("no write grant lets it patch v1/ConfigMap in namespace kube-system"),
                        "{error}"
                    );
                }
            }
        }
    }

    /// Prunes when its config says `prune`, twice when it says `twice`; allows pruning when
    /// built as [`AllowsPrune`].
    struct Prunes<const ALLOWED: bool>;
    type AllowsPrune = Prunes<true>;

    impl<const ALLOWED: bool> Reconciler for Prunes<ALLOWED> {
        fn manifest() -> Manifest {
            Manifest::new("pruner", "0").primary::<ConfigMap>().owns::<Secret>().prune(ALLOWED)
        }

        fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
            let times: String = request.config()?;
            Ok(match times.as_str() {
                "twice" => vec![prune(), prune()],
                _ => vec![prune()],
            })
        }
    }

    #[test]
    fn a_prune_is_refused_as_in_the_host_unless_allowed_once_in_phase_apply() {
        let primary =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        let case = |config: &str, phase| TestCase::new(primary.clone()).config(config).phase(phase);
        assert!(case("once", Phase::Apply).run::<AllowsPrune>().prunes());
        let refusals = [
            (case("once", Phase::Apply).run::<Prunes<false>>(), "prune needs the manifest to allow it"),
            (case("once", Phase::Cleanup).run::<AllowsPrune>(), "prune is carried out in phase apply only"),
            (case("twice", Phase::Apply).run::<AllowsPrune>(), "actions[1]: prune may appear once"),
        ];
        for (outcome, expected) in refusals {
            let error = outcome.error();
            assert!(error.message.contains(expected), "{error}");
        }
    }

    /// Declares a finalizer the API server would refuse.
    struct BadFinalizer;

    impl Reconciler for BadFinalizer {
        fn manifest() -> Manifest {
            Manifest::new("bad-finalizer", "0").primary::<ConfigMap>().finalizer("cleanup")
        }

        fn reconcile(_: &Request) -> Result<Vec<Action>, Error> {
            Ok(Vec::new())
        }
    }

    #[test]
    #[should_panic(
        expected = "the host would refuse plugin \"bad-finalizer\" at load: finalizer \"cleanup\" must look like `example.com/name`"
    )]
    fn a_manifest_the_host_would_refuse_fails_the_test_with_the_hosts_words() {
        let primary =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        TestCase::new(primary).run::<BadFinalizer>();
    }

    /// Looks up its primary's Namespace, giving the primary's namespace as a careless plugin
    /// might: a cluster-scoped kind ignores it, in the host and here.
    struct ReadsNamespace;

    impl Reconciler for ReadsNamespace {
        fn manifest() -> Manifest {
            Manifest::new("reads-namespace", "0")
                .primary::<ConfigMap>()
                .reads::<k8s_openapi::api::core::v1::Namespace>()
        }

        fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
            let ns = request.object.namespace.as_deref();
            let found = cache::get::<k8s_openapi::api::core::v1::Namespace>(ns, ns.unwrap_or_default())?;
            Ok(vec![event(EventType::Normal, "Found", format!("{}", found.is_some()))])
        }
    }

    #[test]
    fn a_namespace_given_for_a_cluster_scoped_kind_is_ignored_as_in_the_host() {
        let primary =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}});
        let outcome = TestCase::new(primary).cached(namespace).run::<ReadsNamespace>();
        assert_eq!(outcome.events()[0].message, "true");
    }
}
