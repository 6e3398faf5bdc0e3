//! Plugins shipped as ConfigMaps (`run --plugin-namespace NS`): created ones load, updated
//! ones swap, deleted ones unload, with no restart. The outcome is written back where users
//! look: the `wasmloop.dev/status` annotation and `PluginLoaded` / `PluginRejected` Events
//! on the ConfigMap.
//!
//! A ConfigMap annotated `wasmloop.dev/track: shadow` is a candidate: the registry seats it
//! beside its plugin's serving version, and its findings (compared, same, differing, failed,
//! the latest difference) go to its status annotation, at most once per
//! [`SHADOW_STATUS_EVERY`], with a `ShadowDiffers` Event the first time it differs. Removing
//! the annotation promotes it: it replaces the serving version, whichever ConfigMap of this
//! namespace served, and the host marks that one `wasmloop.dev/track: superseded`, which
//! loads nothing, so that a restart or another replica does not bring the old version back.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_runtime::api;
use wasmloop_runtime::compare::ShadowResult;
use wasmloop_runtime::events::Recorders;
use wasmloop_runtime::identity::{AccountChoice, SERVICE_ACCOUNT_ANNOTATION, ServiceAccount};
use wasmloop_runtime::quarantine::Board;
use wasmloop_runtime::registry::{Candidate, Loaded, Registry, RegistryError, Shadowed};
use wasmloop_runtime::shadow::ShadowReport;
use wasmloop_sandbox::LoadError;

use crate::endpoints::Readiness;

mod plan;

use crate::oci::{self, OciError, PluginRef, Puller, RegistryPolicy};
use crate::pinning::{self, TrustedKeys};
use crate::plugin_configmap::{self, PLUGIN_LABEL, PluginPayload, STATUS_ANNOTATION, TRACK_ANNOTATION, Track};
use plan::{Active, Content, DeleteStep, OfferStep, RetryStep, Seen, Shadowing, Version, Waiting, status_of};

/// How long before a plugin that failed to start (a kind not served yet, a cache that did
/// not sync) is tried again with the same ConfigMap.
const START_RETRY: Duration = Duration::from_secs(15);

/// How long before a reference that could not be pulled is pulled again.
const PULL_RETRY: Duration = Duration::from_secs(30);

/// How often a shadow's findings are written to its status, at most.
const SHADOW_STATUS_EVERY: Duration = Duration::from_secs(1);

/// The longest refusal a status shows.
const MAX_LAST_ERROR: usize = 4096;

/// The field manager of the status annotation.
const MANAGER: &str = "wasmloop";

fn source_of(namespace: &str, name: &str) -> String {
    format!("ConfigMap {namespace}/{name}")
}

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
    readiness: Arc<Readiness>,
    recorders: Recorders,
    seen: HashMap<String, Seen>,
    /// Names to offer again (a start failure's retry, or a ConfigMap another one blocked).
    retry: mpsc::UnboundedSender<String>,
    retries: Option<mpsc::UnboundedReceiver<String>>,
    /// Only the leader writes statuses and Events, so replicas do not talk over each other.
    leading: watch::Receiver<bool>,
    /// The host's quarantined plugins, shown on their ConfigMaps' status.
    quarantines: Arc<Board>,
    /// When set, only components signed by one of these keys load.
    trusted: Option<Arc<TrustedKeys>>,
    /// Shadows' findings: the ConfigMap, the seating's id, the findings.
    found: mpsc::UnboundedSender<(String, u64, ShadowReport)>,
    findings: Option<mpsc::UnboundedReceiver<(String, u64, ShadowReport)>>,
    /// With `--shard`, this replica's identity, shown in the status of what it runs.
    replica: Option<String>,
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
        leading: watch::Receiver<bool>,
        quarantines: Arc<Board>,
        trusted: Option<Arc<TrustedKeys>>,
    ) -> Self {
        readiness.pending(&Self::readiness_item(namespace), "plugin ConfigMaps not listed yet");
        let (retry, retries) = mpsc::unbounded_channel();
        let (found, findings) = mpsc::unbounded_channel();
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
            found,
            findings: Some(findings),
            retry,
            retries: Some(retries),
            leading,
            quarantines,
            trusted,
            api: api::typed_api(client.clone(), namespace),
            secrets: api::typed_api(client.clone(), namespace),
            puller: Arc::new(Puller::new(RegistryPolicy::default(), Duration::from_secs(120), None)),
            namespace: namespace.clone(),
            registry,
            readiness,
            recorders: Recorders::new(client),
            seen: HashMap::new(),
            replica: None,
        }
    }

    /// Shows `identity` in the status of the plugins this replica runs (`--shard`): the
    /// replicas that park a plugin write nothing about it, the one that runs it says so.
    #[must_use]
    pub fn replica(mut self, identity: String) -> Self {
        self.replica = Some(identity);
        self
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
        let mut findings = self.findings.take().expect("run once");
        let mut pulled = self.pulled.take().expect("run once");
        let mut finished = self.finished.take().expect("run once");
        let mut quarantines = self.quarantines.subscribe();
        let mut moves = self.registry.moves();
        let mut listed: Option<HashSet<String>> = None;
        loop {
            tokio::select! {
                Ok(()) = quarantines.changed() => self.show_quarantines().await,
                moved = moves.recv() => self.moved(moved).await,
                Some((name, id, report)) = findings.recv() => self.shadow_found(&name, id, report).await,
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
                return self.rejected(cm, "InvalidConfigMap", &format!("{error}{}", self.keeps(&name))).await;
            }
        };
        match payload.reference.clone() {
            // A superseded ConfigMap loads nothing: nothing to pull, or to refuse.
            Some(_) if payload.track == Track::Superseded => self.retire(cm).await,
            Some(reference) => {
                // What can be refused without the bytes is refused before a connection is made.
                if let Err((reason, message)) = self.before_pull(&payload, &reference) {
                    return self
                        .rejected(cm, reason, &format!("plugin {}: {message}{}", payload.name, self.keeps(&name)))
                        .await;
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
                self.rejected(&cm, "PullFailed", &message).await;
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
            self.rejected(cm, error.reason(), &message).await;
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
                    self.rejected(cm, "InvalidConfigMap", &message).await;
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

    /// A load finished: its status and Event are written, then whatever came for its
    /// ConfigMap meanwhile is handled.
    async fn finished(&mut self, finished: Finished) {
        let Finished { cm, id, result } = finished;
        let name = cm.name_any();
        let Some(waiting) = self.seen.get_mut(&name).and_then(|seen| seen.load_finished(id)) else { return };
        self.readiness.ready(&self.load_item(&name));
        match result {
            Ok(loaded) => {
                self.loaded(&cm, &loaded).await;
            }
            Err(error) => {
                if matches!(error, RegistryError::Start { .. }) {
                    // A kind that is not served yet may be soon (a CRD applied after the
                    // plugin).
                    self.retry_after(&name, START_RETRY);
                }
                self.rejected(&cm, error.reason(), &error.to_string()).await;
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

    /// A version this source offered serves here now, or no longer does (`--shard`: this
    /// replica took its plugin over, or handed it to another).
    async fn moved(&mut self, moved: Result<(String, Loaded), tokio::sync::broadcast::error::RecvError>) {
        let Ok((source, loaded)) = moved else { return };
        let prefix = source_of(&self.namespace, "");
        let Some(name) = source.strip_prefix(&prefix) else { return };
        if let Ok(Some(cm)) = self.api.get_opt(name).await {
            self.loaded(&cm, &loaded).await;
        }
    }

    fn keeps(&self, name: &str) -> String {
        match self.seen.get(name).and_then(|s| s.active.as_ref()) {
            Some(active) => format!(" (plugin {} {} keeps serving)", active.loaded.plugin, active.loaded.version),
            None => String::new(),
        }
    }

    async fn loaded(&mut self, cm: &ConfigMap, loaded: &Loaded) {
        let name = cm.name_any();
        tracing::info!(configmap = %source_of(&self.namespace, &name), digest = loaded.digest(), "{loaded}");
        if let Loaded::Parked { .. } = loaded {
            // Another replica runs it, and says so in the status.
            self.seen.entry(name).or_default().active = None;
            return;
        }
        if let Loaded::Unchanged { .. } = loaded {
            // Back to what serves after a refusal (as the refusal advised): the error is over.
            let seen = self.seen.entry(name.clone()).or_default();
            if seen.last_error.take().is_some() {
                seen.last_error_at = None;
                let status = status_of(seen, self.replica.as_deref());
                self.write_status(&name, &status).await;
            }
            return;
        }
        let (id, version) = match loaded {
            Loaded::Started { name, version, .. }
            | Loaded::Replaced { name, version, .. }
            | Loaded::Promoted { name, version, .. } => (name, version),
            Loaded::Unchanged { .. } | Loaded::Parked { .. } => unreachable!("returned above"),
        };
        let plugin = wasmloop_sandbox::name_in_id(id);
        // Serving now: whatever this ConfigMap shadowed before is unseated.
        self.seen.entry(name.clone()).or_default().shadow = None;
        if let Loaded::Promoted { superseded: Some(old), .. } = loaded {
            self.superseded(old.clone(), plugin, &source_of(&self.namespace, &name)).await;
        }
        let active = Active {
            id: id.clone(),
            loaded: Version {
                plugin: plugin.to_owned(),
                version: version.clone(),
                digest: loaded.digest().to_owned(),
                loaded_at: Timestamp::now().to_string(),
            },
        };
        let seen = self.seen.entry(name.clone()).or_default();
        (seen.active, seen.last_error, seen.last_error_at) = (Some(active), None, None);
        // A new version starts healthy.
        seen.quarantined = None;
        let status = status_of(seen, self.replica.as_deref());
        self.write_status(&name, &status).await;
        let note = format!("plugin {plugin} {version} serving (sha256 {})", short(loaded.digest()));
        self.event(cm, EventType::Normal, "PluginLoaded", note).await;
    }

    async fn rejected(&mut self, cm: &ConfigMap, reason: &str, message: &str) {
        // Refusals quote what others wrote (a registry, a manifest, a compiler on a component):
        // a status annotation past the API's limits would lose the whole status.
        let message = &wasmloop_contract::validate::cut(message.to_owned(), MAX_LAST_ERROR);
        let name = cm.name_any();
        tracing::error!(configmap = %source_of(&self.namespace, &name), reason, "{message}");
        let seen = self.seen.entry(name.clone()).or_default();
        if seen.last_error.as_deref() == Some(message) {
            // Already said: writing again would only echo back as another watch event.
            return;
        }
        seen.last_error = Some(message.to_owned());
        seen.last_error_at = Some(Timestamp::now().to_string());
        let status = status_of(seen, self.replica.as_deref());
        self.write_status(&name, &status).await;
        self.event(cm, EventType::Warning, "PluginRejected", format!("{reason}: {message}")).await;
    }

    /// Shows each serving plugin's quarantine, entered or lifted, on its ConfigMap's status.
    async fn show_quarantines(&mut self) {
        let mut changed = Vec::new();
        for (name, seen) in &mut self.seen {
            let Some(active) = &seen.active else { continue };
            let now = self.quarantines.get(&active.id);
            if now != seen.quarantined {
                seen.quarantined = now;
                changed.push((name.clone(), status_of(seen, self.replica.as_deref())));
            }
        }
        for (name, status) in changed {
            self.write_status(&name, &status).await;
        }
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
        if removed.is_some() || !unshadowed.is_empty() {
            self.retry_blocked();
        }
    }

    /// Offers again every ConfigMap refused while another held its plugin or its shadow seat
    /// (a rename, a second candidate, a promotion another replica saw first): it may load now.
    fn retry_blocked(&self) {
        for (other, seen) in &self.seen {
            if seen.blocked() {
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
        // The promotion's own words, on the status since, name the successor: keep them, and
        // say nothing again after a restart.
        let said = cm
            .annotations()
            .get(STATUS_ANNOTATION)
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
            .and_then(|status| status["lastError"].as_str().map(str::to_owned));
        let seen = self.seen.entry(name.clone()).or_default();
        (seen.active, seen.shadow) = (None, None);
        if seen.last_error.is_none() {
            seen.last_error = said;
        }
        if seen.last_error.as_deref().is_some_and(|e| e.starts_with("superseded")) {
            return;
        }
        let message = format!(
            "superseded ({TRACK_ANNOTATION}: superseded): this ConfigMap loads nothing; delete it, or remove the annotation to offer it again"
        );
        (seen.last_error, seen.last_error_at) = (Some(message.clone()), Some(Timestamp::now().to_string()));
        let status = status_of(seen, self.replica.as_deref());
        self.write_status(&name, &status).await;
        self.event(cm, EventType::Normal, "Superseded", message).await;
    }

    fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    async fn write_status(&self, name: &str, status: &serde_json::Value) {
        if !self.leads() {
            return;
        }
        let patch = json!({"metadata": {"annotations": {STATUS_ANNOTATION: status.to_string()}}});
        let params = PatchParams { field_manager: Some(MANAGER.into()), ..PatchParams::default() };
        if let Err(error) = self.api.patch(name, &params, &Patch::Merge(&patch)).await {
            tracing::warn!(configmap = %source_of(&self.namespace, name), %error, "cannot write the plugin status annotation; grant the host patch on ConfigMaps in this namespace");
        }
    }

    async fn event(&self, cm: &ConfigMap, type_: EventType, reason: &str, note: String) {
        self.event_on(&cm.object_ref(&()), type_, reason, "LoadPlugin", note).await;
    }

    async fn event_on(&self, regarding: &ObjectReference, type_: EventType, reason: &str, action: &str, note: String) {
        if !self.leads() {
            return;
        }
        // A note over the API's limit would lose the whole Event.
        let note = wasmloop_contract::validate::event_note(note);
        let recorder = self.recorders.get(MANAGER, &note, regarding);
        let event = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: None };
        if let Err(error) = recorder.publish(&event, regarding).await {
            let configmap = regarding.name.as_deref().unwrap_or_default();
            tracing::warn!(configmap, %error, "cannot record the Event; grant the host create on events.k8s.io Events");
        }
    }

    /// Seats the candidate a shadow ConfigMap ships, and forwards what it finds to the status.
    async fn offer_shadow(&mut self, cm: &ConfigMap, source: String, payload: PluginPayload) {
        let name = cm.name_any();
        if let Some(active) = self.seen.get(&name).and_then(|s| s.active.as_ref()) {
            let message = format!(
                "this ConfigMap serves plugin {}; a shadow is a second ConfigMap (`wasmloop bundle --shadow`): remove the {TRACK_ANNOTATION} annotation here{}",
                active.loaded.plugin,
                self.keeps(&name)
            );
            self.rejected(cm, "InvalidConfigMap", &message).await;
            return;
        }
        tracing::info!(configmap = %source, plugin = %payload.name, "seating the shadow this ConfigMap ships");
        let account = AccountChoice::LikePlugin { namespace: self.namespace.to_string() };
        let candidate = self.candidate(source, payload, account);
        match self.registry.shadow(candidate).await {
            Ok(Shadowed::Unchanged { .. }) => {
                let seen = self.seen.entry(name.clone()).or_default();
                if seen.last_error.take().is_some() {
                    seen.last_error_at = None;
                    let status = status_of(seen, self.replica.as_deref());
                    self.write_status(&name, &status).await;
                }
            }
            Ok(Shadowed::Seated { name: plugin, version, digest, id, findings }) => {
                self.forward(name.clone(), id, findings);
                let loaded_at = Timestamp::now().to_string();
                let loaded = Version { plugin: plugin.clone(), version: version.clone(), digest, loaded_at };
                let shadowing = Shadowing { id, loaded, findings: ShadowReport::default(), announced: false };
                let seen = self.seen.entry(name.clone()).or_default();
                (seen.shadow, seen.last_error, seen.last_error_at) = (Some(shadowing), None, None);
                let status = status_of(seen, self.replica.as_deref());
                self.write_status(&name, &status).await;
                let note = format!(
                    "version {version} shadows plugin {plugin}: called beside the serving version, compared, never written"
                );
                self.event(cm, EventType::Normal, "ShadowStarted", note).await;
            }
            Err(error) => self.rejected(cm, error.reason(), &error.to_string()).await,
        }
    }

    /// Sends a shadow's findings to the source's loop as they change, at most once per
    /// [`SHADOW_STATUS_EVERY`]; ends when the shadow is gone.
    fn forward(&self, name: String, id: u64, mut findings: watch::Receiver<ShadowReport>) {
        let found = self.found.clone();
        tokio::spawn(async move {
            while findings.changed().await.is_ok() {
                let report = findings.borrow_and_update().clone();
                if found.send((name.clone(), id, report)).is_err() {
                    return;
                }
                tokio::time::sleep(SHADOW_STATUS_EVERY).await;
            }
        });
    }

    /// Shows a shadow's findings on its status, and says so with an Event the first time it
    /// differs.
    async fn shadow_found(&mut self, name: &str, id: u64, report: ShadowReport) {
        let Some(seen) = self.seen.get_mut(name) else { return };
        // A report from a candidate since replaced is stale.
        let Some(shadow) = seen.shadow.as_mut().filter(|s| s.id == id) else { return };
        shadow.findings = report;
        let first = !shadow.announced && shadow.findings.differences() > 0;
        shadow.announced |= first;
        let note = shadow.findings.latest.as_ref().filter(|_| first).map(|latest| {
            format!(
                "version {} of plugin {} {} from the serving version on {}; the wasmloop.dev/status annotation counts and shows the latest difference",
                shadow.loaded.version,
                shadow.loaded.plugin,
                if latest.result == ShadowResult::Failed { "failed where it did not" } else { "differs" },
                latest.object
            )
        });
        let status = status_of(seen, self.replica.as_deref());
        self.write_status(name, &status).await;
        if let Some(note) = note {
            let regarding = ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                namespace: Some(self.namespace.to_string()),
                name: Some(name.to_owned()),
                ..ObjectReference::default()
            };
            self.event_on(&regarding, EventType::Normal, "ShadowDiffers", "CompareShadow", note).await;
        }
    }

    /// Marks the ConfigMap `old` (a source name) superseded, since a promoted shadow serves
    /// its plugin now, and says so on its status. The mark is what a restart reads: without it
    /// the two ConfigMaps would race for the plugin, and the old one, listed first, would win.
    async fn superseded(&mut self, old: String, plugin: &str, by: &str) {
        let Some(name) = self.seen.keys().find(|n| source_of(&self.namespace, n) == old).cloned() else { return };
        let seen = self.seen.get_mut(&name).expect("found above");
        seen.active = None;
        seen.last_error = Some(format!(
            "superseded: plugin {plugin} is served from {by} now (a promoted shadow); delete this ConfigMap"
        ));
        seen.last_error_at = Some(Timestamp::now().to_string());
        let mut mark = json!({"metadata": {"annotations": {TRACK_ANNOTATION: "superseded"}}});
        // Every replica marks it, not only the leader: the mark is what keeps a restarted
        // replica from loading the old version, and it is the same from each. The status is
        // the leader's to write, as always.
        if *self.leading.borrow() {
            mark["metadata"]["annotations"][STATUS_ANNOTATION] =
                json!(status_of(seen, self.replica.as_deref()).to_string());
        }
        let params = PatchParams { field_manager: Some(MANAGER.into()), ..PatchParams::default() };
        if let Err(error) = self.api.patch(&name, &params, &Patch::Merge(&mark)).await {
            tracing::warn!(configmap = %old, %error, "cannot mark the superseded ConfigMap; delete it, or a restart may load it instead of {by}");
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

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}
