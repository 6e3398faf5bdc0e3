//! Plugins shipped as ConfigMaps (`run --plugin-namespace NS`): created ones load, updated
//! ones swap, deleted ones unload, with no restart. What happens is reported on the registry's
//! stream (the registry's outcomes by the registry, this source's refusals and deletions by
//! the source), and the status writer (`crate::status`) shows it where users look: the
//! `wasmloop.dev/status` annotation and Events on the ConfigMap. This source writes no status.
//!
//! A ConfigMap annotated `wasmloop.dev/track: shadow` is a candidate: the registry seats it
//! beside its plugin's serving version, and reports what it finds. Removing the annotation
//! promotes it: it replaces the serving version, whichever ConfigMap of this namespace served,
//! and the host marks that one `wasmloop.dev/track: superseded`, which loads nothing, so that
//! a restart or another replica does not bring the old version back.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_runtime::api;
use wasmloop_runtime::identity::{AccountChoice, SERVICE_ACCOUNT_ANNOTATION, ServiceAccount};
use wasmloop_runtime::registry::reports::{Report, Reported, Reporter};
use wasmloop_runtime::registry::{Candidate, Loaded, Registry, RegistryError, Shadowed};
use wasmloop_sandbox::LoadError;

use crate::endpoints::Readiness;

mod plan;

use crate::oci::{self, OciError, PluginRef, Puller, RegistryPolicy};
use crate::pinning::{self, TrustedKeys};
use crate::plugin_configmap::{
    self, PLUGIN_LABEL, PluginPayload, STATUS_ANNOTATION, TRACK_ANNOTATION, Track, source_of,
};
use plan::{Content, DeleteStep, OfferStep, RetryStep, Seen, Waiting};

/// How long before a plugin that failed to start (a kind not served yet, a cache that did
/// not sync) is tried again with the same ConfigMap.
const START_RETRY: Duration = Duration::from_secs(15);

/// How long before a reference that could not be pulled is pulled again.
const PULL_RETRY: Duration = Duration::from_secs(30);

/// The longest refusal logged and reported.
const MAX_REFUSAL: usize = 4096;

/// A finished pull: the ConfigMap it was for, which pull it was, and the component or why not.
struct Pulled {
    cm: ConfigMap,
    /// The pull's id: a report of any other than the one under way for its ConfigMap is stale.
    id: u64,
    payload: PluginPayload,
    /// Holds its share of the pulls' memory until the component is loaded.
    result: Result<oci::Component, OciError>,
}

/// A load finished: what the registry did with a ConfigMap's version.
struct Finished {
    cm: ConfigMap,
    /// The load's id: a report of any other than the one under way for its ConfigMap is stale.
    id: u64,
    result: Result<Loaded, RegistryError>,
}

/// The Secret types a pull secret may have: those `kubectl create secret docker-registry`
/// writes. Any other Secret of the namespace (a token, a TLS key) is not read as credentials.
const PULL_SECRET_TYPES: [&str; 2] = ["kubernetes.io/dockerconfigjson", "kubernetes.io/dockercfg"];

/// The component `reference` names, for a plugin of `secrets`' namespace, with the credentials
/// of pull secret `secret`; the Secret's read counts against the pull's time.
async fn pull(
    puller: &Puller,
    secrets: &Api<Secret>,
    reference: &PluginRef,
    secret: Option<&Name>,
) -> Result<oci::Component, OciError> {
    let deadline = tokio::time::Instant::now() + puller.timeout();
    let namespace = secrets.namespace().unwrap_or_default();
    let auth = match secret {
        None => oci_client::secrets::RegistryAuth::Anonymous,
        Some(name) => {
            let at = format!("{namespace}/{name}");
            let read = tokio::time::timeout_at(deadline, secrets.get_opt(name)).await.map_err(|_| {
                OciError::Credentials(format!(
                    "pull secret {at}: reading it took longer than {:?}; check the API server",
                    puller.timeout()
                ))
            })?;
            let secret = read
                .map_err(|e| OciError::Credentials(unreadable_secret(&at, name, &namespace, &e)))?
                .ok_or_else(|| {
                    OciError::Credentials(format!(
                        "pull secret {at} does not exist; create it with `kubectl create secret docker-registry`"
                    ))
                })?;
            let type_ = secret.type_.as_deref().unwrap_or("Opaque");
            if !PULL_SECRET_TYPES.contains(&type_) {
                return Err(OciError::Credentials(format!(
                    "pull secret {at} is of type {type_}, not {}; create it with `kubectl create secret docker-registry`",
                    PULL_SECRET_TYPES[0]
                )));
            }
            let data = secret.data.unwrap_or_default();
            let document = data.get(".dockerconfigjson").or_else(|| data.get(".dockercfg")).ok_or_else(|| {
                OciError::Credentials(format!(
                    "pull secret {at} has no .dockerconfigjson; create it with `kubectl create secret docker-registry`"
                ))
            })?;
            oci::credentials(&document.0, reference.registry(), &at)?
        }
    };
    puller.pull_by(deadline, &namespace, reference, &auth).await
}

/// Why pull secret `at` could not be read, and what to do: `deploy/` lets the host get only the
/// Secrets its Role names, so a forbidden read most likely wants the name added there.
fn unreadable_secret(at: &str, name: &str, namespace: &str, error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.is_forbidden() => format!(
            "pull secret {at}: the host may not read it ({}); add {name} to the resourceNames of Role wasmloop's rule on Secrets in {namespace} (deploy/base/rbac.yaml)",
            wasmloop_contract::validate::cut(status.message.clone(), 512)
        ),
        other => format!(
            "pull secret {at}: cannot read it ({}); the host needs get on Secrets in {namespace}",
            wasmloop_contract::validate::cut(other.to_string(), 512)
        ),
    }
}

/// Watches one namespace for plugin ConfigMaps until the registry's host stops.
pub struct ConfigMapSource {
    api: Api<ConfigMap>,
    namespace: Namespace,
    registry: Arc<Registry>,
    /// The registry's stream, for this source's own refusals and deletions.
    reporter: Reporter,
    readiness: Arc<Readiness>,
    seen: HashMap<String, Seen>,
    /// Names to offer again (a start failure's retry, or a ConfigMap another one blocked).
    retry: mpsc::UnboundedSender<String>,
    retries: Option<mpsc::UnboundedReceiver<String>>,
    /// When set, only components signed by one of these keys load.
    trusted: Option<Arc<TrustedKeys>>,
    /// Pulls the components ConfigMaps name by reference.
    puller: Arc<Puller>,
    /// The namespace's Secrets, for pull secrets.
    secrets: Api<Secret>,
    /// Pulls run beside the loop, so that a slow registry does not hold up the others' offers.
    pulls: mpsc::UnboundedSender<Pulled>,
    pulled: Option<mpsc::UnboundedReceiver<Pulled>>,
    /// The first list is handled: pulls started later do not hold readiness.
    listed: bool,
    /// Pulls started so far: the next one's id.
    pulls_started: u64,
    /// Loads run beside the loop too: a plugin whose caches take minutes to sync (a kind the
    /// host may not list yet) holds up no other ConfigMap's load.
    finish: mpsc::UnboundedSender<Finished>,
    finished: Option<mpsc::UnboundedReceiver<Finished>>,
    /// Loads started so far: the next one's id.
    loads_started: u64,
}

impl ConfigMapSource {
    /// A source for `namespace`; ready (for `/readyz`) once its first list is handled.
    pub fn new(
        client: kube::Client,
        namespace: &Namespace,
        registry: Arc<Registry>,
        readiness: Arc<Readiness>,
        trusted: Option<Arc<TrustedKeys>>,
    ) -> Self {
        readiness.pending(&Self::readiness_item(namespace), "plugin ConfigMaps not listed yet");
        let (retry, retries) = mpsc::unbounded_channel();
        let (pulls, pulled) = mpsc::unbounded_channel();
        let (finish, finished) = mpsc::unbounded_channel();
        ConfigMapSource {
            pulls,
            pulled: Some(pulled),
            listed: false,
            pulls_started: 0,
            finish,
            finished: Some(finished),
            loads_started: 0,
            retry,
            retries: Some(retries),
            trusted,
            api: api::typed_api(client.clone(), namespace),
            secrets: api::typed_api(client.clone(), namespace),
            puller: Arc::new(Puller::new(RegistryPolicy::default(), Duration::from_secs(120), None)),
            namespace: namespace.clone(),
            reporter: registry.reporter(),
            registry,
            readiness,
            seen: HashMap::new(),
        }
    }

    /// Pulls referenced components with `puller` (its registry policy, timeout and cache).
    #[must_use]
    pub fn puller(mut self, puller: Arc<Puller>) -> Self {
        self.puller = puller;
        self
    }

    fn readiness_item(namespace: &str) -> String {
        format!("plugin ConfigMaps in {namespace}")
    }

    /// Runs until the watch ends (never, short of the process stopping).
    pub async fn run(mut self) {
        let config = watcher::Config::default().labels(PLUGIN_LABEL);
        let mut events = watcher(self.api.clone(), config).default_backoff().boxed();
        let mut retries = self.retries.take().expect("run once");
        let mut pulled = self.pulled.take().expect("run once");
        let mut finished = self.finished.take().expect("run once");
        let mut listed: Option<HashSet<String>> = None;
        loop {
            tokio::select! {
                Some(done) = pulled.recv() => self.pulled(done).await,
                Some(done) = finished.recv() => self.finished(done).await,
                event = events.next() => match event {
                    Some(Ok(watcher::Event::Init)) => listed = Some(HashSet::new()),
                    Some(Ok(watcher::Event::InitApply(cm))) => {
                        if let Some(names) = listed.as_mut() { names.insert(cm.name_any()); }
                        self.offer(&cm).await;
                    }
                    Some(Ok(watcher::Event::InitDone)) => {
                        // ConfigMaps deleted while the watch was down.
                        let names = listed.take().unwrap_or_default();
                        let gone: Vec<String> = self.seen.keys().filter(|n| !names.contains(*n)).cloned().collect();
                        for name in gone { self.unload(&name).await; }
                        self.listed = true;
                        self.readiness.ready(&Self::readiness_item(&self.namespace));
                    }
                    Some(Ok(watcher::Event::Apply(cm))) => self.offer(&cm).await,
                    Some(Ok(watcher::Event::Delete(cm))) => self.unload(&cm.name_any()).await,
                    Some(Err(error)) => tracing::warn!(namespace = %self.namespace, %error, "watching plugin ConfigMaps failed; retrying with backoff (check that the host may list and watch ConfigMaps here)"),
                    None => return,
                },
                Some(name) = retries.recv() => {
                    if self.seen.get_mut(&name).is_some_and(|seen| seen.retry() == RetryStep::Skip) {
                        continue;
                    }
                    match self.api.get_opt(&name).await {
                        Ok(Some(cm)) => self.offer(&cm).await,
                        Ok(None) => {}
                        Err(error) => {
                            // The retry must not end with one failed read.
                            tracing::warn!(configmap = %source_of(&self.namespace, &name), %error, "cannot read the ConfigMap to try it again; trying again in {} s", START_RETRY.as_secs());
                            self.retry_after(&name, START_RETRY);
                        }
                    }
                }
            }
        }
    }

    async fn offer(&mut self, cm: &ConfigMap) {
        let name = cm.name_any();
        // Read (up to 64 MiB unzipped and hashed) only once it is its turn.
        if self.seen.get_mut(&name).is_some_and(|seen| seen.wait_for_load(cm)) {
            return;
        }
        let read = plugin_configmap::read(cm);
        let content = match &read {
            Ok(payload) => content_of(cm, payload),
            Err(error) => Content { config: Some(error.to_string()), ..Content::default() },
        };
        match self.seen.entry(name.clone()).or_default().offer(cm, content) {
            OfferStep::Wait | OfferStep::Same => return,
            OfferStep::New { abandoned } => self.abandoned(&name, abandoned),
        }
        let payload = match read {
            Ok(payload) => payload,
            Err(error) => {
                return self.rejected(cm, "InvalidConfigMap", &format!("{error}{}", self.keeps(&name)));
            }
        };
        match payload.reference.clone() {
            // A superseded ConfigMap loads nothing: nothing to pull, or to refuse.
            Some(_) if payload.track == Track::Superseded => self.retire(cm).await,
            Some(reference) => {
                // What can be refused without the bytes is refused before a connection is made.
                if let Err((reason, message)) = self.before_pull(&payload, &reference) {
                    return self.rejected(
                        cm,
                        reason,
                        &format!("plugin {}: {message}{}", payload.name, self.keeps(&name)),
                    );
                }
                self.start_pull(cm.clone(), payload, reference);
            }
            None => self.admit(cm, payload).await,
        }
    }

    /// The checks of a referenced component that need no pull: the reference is pinned and
    /// allowed, the pin well formed, and a signature there when keys are trusted.
    fn before_pull(&self, payload: &PluginPayload, reference: &PluginRef) -> Result<(), (&'static str, String)> {
        self.puller.admissible(reference).map_err(|e| ("PullRefused", e.to_string()))?;
        pinning::check_without_component(payload.pin.as_deref(), payload.signature.as_deref(), self.trusted.as_deref())
            .map_err(|e| (e.reason(), e.to_string()))
    }

    /// Pulls the component `reference` names in a task of its own, which reports to
    /// [`Self::pulled`].
    fn start_pull(&mut self, cm: ConfigMap, payload: PluginPayload, reference: PluginRef) {
        let name = cm.name_any();
        let id = self.pulls_started;
        self.pulls_started += 1;
        if !self.listed {
            // A host that starts is ready once it serves what its ConfigMaps name.
            self.readiness.pending(&self.pull_item(&name), "pulling the component it names");
        }
        tracing::info!(configmap = %source_of(&self.namespace, &name), %reference, "pulling the plugin this ConfigMap names");
        let (puller, secrets, pulls) = (self.puller.clone(), self.secrets.clone(), self.pulls.clone());
        let task = tokio::spawn(async move {
            let pulling = pull(&puller, &secrets, &reference, payload.pull_secret.as_ref());
            // A panic must still report, or the ConfigMap would wait for this pull forever.
            let result = std::panic::AssertUnwindSafe(pulling).catch_unwind().await.unwrap_or_else(|_| {
                Err(OciError::Registry {
                    registry: reference.registry().to_owned(),
                    message: "the pull panicked (a bug in the host; the log has it)".to_owned(),
                })
            });
            let _ = pulls.send(Pulled { cm, id, payload, result });
        });
        self.seen.entry(name).or_default().pull_started(id, task.abort_handle());
    }

    fn pull_item(&self, name: &str) -> String {
        format!("{}: pull", source_of(&self.namespace, name))
    }

    /// Aborts the pull ConfigMap `name` abandoned, if any: a newer offer replaces it.
    fn abandoned(&self, name: &str, pull: Option<AbortHandle>) {
        if let Some(task) = pull {
            task.abort();
            // Its report will never come: readiness must not wait for it.
            self.readiness.ready(&self.pull_item(name));
        }
    }

    /// A pull finished: what it brought is offered, unless it is not the pull under way for its
    /// ConfigMap (an abort came too late to stop its report: the ConfigMap was deleted, edited
    /// or retried since, and a newer offer is under way).
    async fn pulled(&mut self, pulled: Pulled) {
        let Pulled { cm, id, mut payload, result } = pulled;
        let name = cm.name_any();
        if !self.seen.get_mut(&name).is_some_and(|seen| seen.pulled(id)) {
            return;
        }
        self.readiness.ready(&self.pull_item(&name));
        match result {
            Ok(mut component) => {
                payload.component = std::mem::take(&mut component.bytes);
                self.admit(&cm, payload).await;
                drop(component);
            }
            Err(error) => {
                let reference = payload.reference.as_ref().map(ToString::to_string).unwrap_or_default();
                let message = format!(
                    "plugin {}: cannot pull {reference}: {error}; trying again every {} s{}",
                    payload.name,
                    PULL_RETRY.as_secs(),
                    self.keeps(&name)
                );
                self.retry_after(&name, PULL_RETRY);
                self.rejected(&cm, "PullFailed", &message);
            }
        }
    }

    /// Checks and loads the component a ConfigMap ships, whole (its bytes pulled if it named
    /// a reference).
    async fn admit(&mut self, cm: &ConfigMap, mut payload: PluginPayload) {
        let name = cm.name_any();
        let source = source_of(&self.namespace, &name);
        let annotation = cm.annotations().get(SERVICE_ACCOUNT_ANNOTATION).cloned();
        if payload.track == Track::Superseded {
            // It loads nothing, so there is nothing to check.
            return self.retire(cm).await;
        }
        let (pin, signature, trusted) = (payload.pin.clone(), payload.signature.clone(), self.trusted.clone());
        let component = std::mem::take(&mut payload.component);
        // Hashing and verifying up to 64 MiB is blocking work: off the runtime's threads.
        let (component, checked) = tokio::task::spawn_blocking(move || {
            let checked = pinning::check(&component, pin.as_deref(), signature.as_deref(), trusted.as_deref());
            (component, checked)
        })
        .await
        .expect("checking a pin does not panic");
        payload.component = component;
        if let Err(error) = checked {
            let message = format!("plugin {}: {error}{}", payload.name, self.keeps(&name));
            self.rejected(cm, error.reason(), &message);
            return;
        }
        if payload.track == Track::Shadow {
            return self.offer_shadow(cm, source, payload).await;
        }
        tracing::info!(configmap = %source, plugin = %payload.name, "loading the plugin this ConfigMap ships");
        let account = match annotation {
            // The ServiceAccount is always in the ConfigMap's namespace: whoever may write
            // plugin ConfigMaps there chooses among that namespace's accounts, as a pod's
            // author chooses among its namespace's.
            Some(named) => match ServiceAccount::new(&self.namespace, &named) {
                Ok(account) => AccountChoice::Named(account),
                Err(error) => {
                    let message = format!(
                        "the {SERVICE_ACCOUNT_ANNOTATION} annotation: {error}; name a ServiceAccount of namespace {}{}",
                        self.namespace,
                        self.keeps(&name)
                    );
                    self.rejected(cm, "InvalidConfigMap", &message);
                    return;
                }
            },
            None => AccountChoice::LikePlugin { namespace: self.namespace.to_string() },
        };
        let candidate = self.candidate(source, payload, account);
        self.start_load(cm.clone(), candidate);
    }

    /// The version `payload` ships from ConfigMap `source` of this namespace, acting as `account`.
    fn candidate(&self, source: String, payload: PluginPayload, account: AccountChoice) -> Candidate {
        Candidate {
            source,
            realm: Some(self.namespace.clone()),
            expected_name: Some(payload.name),
            bytes: payload.component.into(),
            config: payload.config,
            account,
        }
    }

    /// Offers `candidate` to the registry in a task of its own, which reports to
    /// [`Self::finished`]; until then, the ConfigMap's events wait.
    fn start_load(&mut self, cm: ConfigMap, candidate: Candidate) {
        let name = cm.name_any();
        let id = self.loads_started;
        self.loads_started += 1;
        if !self.listed {
            // A host that starts is ready once it serves what its ConfigMaps name.
            self.readiness.pending(&self.load_item(&name), "loading the plugin it ships");
        }
        let (registry, finish, origin) = (self.registry.clone(), self.finish.clone(), candidate.source.clone());
        tokio::spawn(async move {
            let loading = registry.upsert(candidate);
            // A panic must still report, or the ConfigMap would wait for this load forever.
            let result = std::panic::AssertUnwindSafe(loading).catch_unwind().await.unwrap_or_else(|_| {
                let message = "the load panicked (a bug in the host; the log has it)".to_owned();
                Err(RegistryError::Load { source: LoadError::Panicked { origin, message }, running: None })
            });
            let _ = finish.send(Finished { cm, id, result });
        });
        self.seen.entry(name).or_default().load_started(id);
    }

    fn load_item(&self, name: &str) -> String {
        format!("{}: load", source_of(&self.namespace, name))
    }

    /// A load finished: what it did is carried on, then whatever came for its ConfigMap
    /// meanwhile is handled.
    async fn finished(&mut self, finished: Finished) {
        let Finished { cm, id, result } = finished;
        let name = cm.name_any();
        let Some(waiting) = self.seen.get_mut(&name).and_then(|seen| seen.load_finished(id)) else { return };
        self.readiness.ready(&self.load_item(&name));
        match result {
            Ok(loaded) => self.loaded(&cm, &loaded),
            Err(error) => {
                if matches!(error, RegistryError::Start { .. }) {
                    // A kind that is not served yet may be soon (a CRD applied after the
                    // plugin).
                    self.retry_after(&name, START_RETRY);
                }
                self.rejected(&cm, error.reason(), &error.to_string());
            }
        }
        match waiting {
            Some(Waiting::Offer(cm)) => self.offer(&cm).await,
            Some(Waiting::Delete) => self.unload(&name).await,
            None => {}
        }
    }

    /// Offers ConfigMap `name` again after `delay`: one retry at a time, whatever the watch
    /// brings meanwhile.
    fn retry_after(&mut self, name: &str, delay: Duration) {
        if !self.seen.entry(name.to_owned()).or_default().schedule_retry() {
            return;
        }
        let (retry, again) = (self.retry.clone(), name.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = retry.send(again);
        });
    }

    /// What keeps serving from ConfigMap `name` when its newest offer is refused, as the
    /// refusal's last words.
    fn keeps(&self, name: &str) -> String {
        match self.registry.serving(&source_of(&self.namespace, name)) {
            Some((id, version)) => format!(" (plugin {} {version} keeps serving)", wasmloop_sandbox::name_in_id(&id)),
            None => String::new(),
        }
    }

    /// A version this ConfigMap offered was taken (the registry reports it; the status writer
    /// shows it, and marks the ConfigMap a promotion superseded).
    fn loaded(&mut self, cm: &ConfigMap, loaded: &Loaded) {
        let name = cm.name_any();
        tracing::info!(configmap = %source_of(&self.namespace, &name), digest = loaded.digest(), "{loaded}");
        self.seen.entry(name).or_default().refused = false;
    }

    /// Refuses ConfigMap `cm`'s newest offer: logged here, shown by the status writer.
    fn rejected(&mut self, cm: &ConfigMap, reason: &str, message: &str) {
        let name = cm.name_any();
        let source = source_of(&self.namespace, &name);
        // Refusals quote what others wrote (a registry, a manifest, a compiler on a component).
        let message = wasmloop_contract::validate::cut(message.to_owned(), MAX_REFUSAL);
        tracing::error!(configmap = %source, reason, "{message}");
        self.seen.entry(name).or_default().refused = true;
        self.reporter.publish(Report::new(source, Reported::Refused { reason: reason.to_owned(), message }));
    }

    async fn unload(&mut self, name: &str) {
        match self.seen.get_mut(name).map(Seen::delete) {
            Some(DeleteStep::Wait) => return,
            Some(DeleteStep::Unload { abandoned }) => self.abandoned(name, abandoned),
            None => {}
        }
        self.seen.remove(name);
        let source = source_of(&self.namespace, name);
        let unshadowed = self.registry.unshadow(&source);
        for plugin in &unshadowed {
            tracing::info!(configmap = %source, plugin, "ConfigMap deleted: shadow removed");
        }
        let removed = self.registry.remove(&source).await;
        if let Some(plugin) = &removed {
            tracing::info!(configmap = %source, plugin, "ConfigMap deleted: plugin unloaded");
        }
        // Reported once what it served and shadowed is gone: nothing about it comes after.
        self.reporter.publish(Report::new(source, Reported::Removed));
        if removed.is_some() || !unshadowed.is_empty() {
            self.retry_blocked();
        }
    }

    /// Offers again every ConfigMap refused while another held its plugin or its shadow seat
    /// (a rename, a second candidate, a promotion another replica saw first): it may load now.
    fn retry_blocked(&self) {
        for (other, seen) in &self.seen {
            // The registry is asked only about the refused: a deletion costs one pass.
            if seen.refused && seen.blocked(self.registry.serving(&source_of(&self.namespace, other)).is_some()) {
                let _ = self.retry.send(other.clone());
            }
        }
    }

    /// A ConfigMap marked superseded loads nothing: what it served or shadowed stops, and
    /// whatever waited for its plugin may load.
    async fn retire(&mut self, cm: &ConfigMap) {
        let name = cm.name_any();
        let source = source_of(&self.namespace, &name);
        self.registry.unshadow(&source);
        if let Some(plugin) = self.registry.remove(&source).await {
            tracing::info!(configmap = %source, plugin, "ConfigMap marked superseded: plugin unloaded");
            self.retry_blocked();
        }
        // What its status says already: the promotion's own words, after a restart.
        let said = cm
            .annotations()
            .get(STATUS_ANNOTATION)
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
            .and_then(|status| {
                status["lastError"].as_str().map(|said| wasmloop_contract::validate::cut(said.to_owned(), MAX_REFUSAL))
            });
        self.seen.entry(name).or_default().refused = false;
        self.reporter.publish(Report::new(source, Reported::Retired { said }));
    }

    /// Seats the candidate a shadow ConfigMap ships; the registry reports the seating and what
    /// it finds.
    async fn offer_shadow(&mut self, cm: &ConfigMap, source: String, payload: PluginPayload) {
        let name = cm.name_any();
        if let Some((serving, _)) = self.registry.serving(&source) {
            let message = format!(
                "this ConfigMap serves plugin {}; a shadow is a second ConfigMap (`wasmloop bundle --shadow`): remove the {TRACK_ANNOTATION} annotation here{}",
                wasmloop_sandbox::name_in_id(&serving),
                self.keeps(&name)
            );
            self.rejected(cm, "InvalidConfigMap", &message);
            return;
        }
        tracing::info!(configmap = %source, plugin = %payload.name, "seating the shadow this ConfigMap ships");
        let account = AccountChoice::LikePlugin { namespace: self.namespace.to_string() };
        let candidate = self.candidate(source, payload, account);
        match self.registry.shadow(candidate).await {
            Ok(Shadowed::Unchanged { .. } | Shadowed::Seated { .. }) => {
                self.seen.entry(name).or_default().refused = false
            }
            Err(error) => self.rejected(cm, error.reason(), &error.to_string()),
        }
    }
}

/// What ConfigMap `cm` offers, as far as loading goes. A pinned reference names its content as
/// surely as a digest of the bytes would, so an echo of the host's own status write pulls
/// nothing.
fn content_of(cm: &ConfigMap, payload: &PluginPayload) -> Content {
    let digest = match &payload.reference {
        Some(reference) => reference.to_string(),
        None => wasmloop_sandbox::digest(&payload.component),
    };
    Content {
        digest,
        config: payload.config.clone(),
        account: cm.annotations().get(SERVICE_ACCOUNT_ANNOTATION).cloned(),
        pin: payload.pin.clone(),
        signature: payload.signature.clone(),
        track: payload.track,
        pull_secret: payload.pull_secret.clone(),
    }
}
