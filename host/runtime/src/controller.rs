//! One plugin's controller: informer changes become keys, workers take keys from the
//! [`WorkQueue`], call the plugin with the latest cached state and hand its actions to the
//! [`Executor`].
//!
//! Edge-triggered, level-driven: events only say *which* primary to look at; the worker
//! reads that primary and its children from the cache when it runs, so a burst of changes
//! is one reconcile of the latest state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use tokio::sync::broadcast::{self, error::RecvError};
use tracing::Instrument;
use wasmloop_sandbox::{
    Action, CacheDenied, CallError, CallFailure, EventType, Gvk, HostServices, ListKey, ListPage, Manifest, Object,
    ObjectRef, Phase, Plugin, Request, Selector, WriteScope,
};

use crate::context::Context;
use crate::discovery::{DiscoveryError, Kinds};
use crate::executor::{DryRunReport, ExecError, Executor, WriteBudget};
use crate::identity::{Access, Identities, Identity, IdentityError, ServiceAccount};
use crate::informer::{Change, Entry, Informer, InformerScope};
use crate::metrics::{Metrics, Outcome as MetricOutcome, PluginMetrics};
use crate::quarantine::{Admission, Board, Health, Policy as QuarantinePolicy, Transition};
use crate::queue::{QueueConfig, WorkQueue};

/// How long a controller waits for its caches to fill before giving up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// A plugin's controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A declared kind is not served.
    #[error("plugin {plugin}: {source}")]
    Discovery {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: DiscoveryError,
    },
    /// A declared label selector does not parse.
    #[error("plugin {plugin}: {reason}; fix the selector in the plugin's manifest")]
    Selector {
        /// The plugin.
        plugin: String,
        /// Which selector, and why.
        reason: String,
    },
    /// The plugin's identity cannot be used: its ServiceAccount is missing, or may not read what
    /// the plugin declares.
    #[error("plugin {plugin}: {source}")]
    Identity {
        /// The plugin.
        plugin: String,
        /// Why.
        #[source]
        source: IdentityError,
    },
    /// The plugin declares a namespace other than the one the operator confines it to.
    #[error("plugin {plugin}: {what}: {reason}")]
    Confined {
        /// The plugin.
        plugin: String,
        /// Which declaration.
        what: String,
        /// The conflict, and what to change.
        reason: String,
    },
    /// A cache did not fill in time.
    #[error("plugin {plugin}: the cache of {kind} did not sync within {} s; check that the host may list and watch {kind} (RBAC) and that the API server is reachable", SYNC_TIMEOUT.as_secs())]
    NotSynced {
        /// The plugin.
        plugin: String,
        /// The kind.
        kind: String,
    },
}

/// A selector the manifest declared. The sandbox checked it at load; a failure here is a bug,
/// and it refuses the plugin rather than fall back to selecting everything.
fn parse_selector(plugin: &str, role: &str, text: Option<&str>) -> Result<Selector, StartError> {
    text.unwrap_or_default().parse().map_err(|e: wasmloop_sandbox::SelectorError| StartError::Selector {
        plugin: plugin.to_owned(),
        reason: format!("the {role} label selector {:?} does not parse: {e}", text.unwrap_or_default()),
    })
}

/// A primary's place: namespace (none for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// Namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// How a controller runs.
///
/// Settings win in this order: the operator's setting for the plugin (`*_override`, from
/// `host.yaml`'s `plugins.<name>`), then the plugin's proposal held to the operator's
/// ceiling, then the host default.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Reconciles at once when neither the operator (`concurrency_override`) nor the plugin
    /// says otherwise.
    pub concurrency: usize,
    /// The operator's setting for this plugin; wins over the plugin's own.
    pub concurrency_override: Option<usize>,
    /// The most reconciles at once a plugin may propose for itself.
    pub max_concurrency: usize,
    /// The shortest resync a plugin may propose for itself.
    pub min_resync: Duration,
    /// The queue's backoff and bucket.
    pub queue: QueueConfig,
    /// The plugin's configuration as JSON text.
    pub plugin_config: String,
    /// Requeue every primary this often: the operator's setting, which wins over the
    /// plugin's.
    pub resync: Option<Duration>,
    /// Whom the plugin's requests act as; set by the registry from the source's choice and
    /// `service_account`.
    pub identity: Identity,
    /// The operator's ServiceAccount for this plugin, for plugins loaded from files.
    pub service_account: Option<ServiceAccount>,
    /// The one namespace the operator confines the plugin to (`host.yaml`'s
    /// `plugins.<name>.namespace`): its primaries, children, watches and reads are served from
    /// there only, so its ServiceAccount needs grants there only.
    pub namespace: Option<String>,
    /// The plugin's budget of API writes.
    pub write_budget: WriteBudget,
    /// The shortest `requeue_after` the plugin gets: a plugin asking for less waits this long,
    /// so a requeue storm cannot spin a worker.
    pub min_requeue: Duration,
    /// When the plugin is quarantined, and how it is probed.
    pub quarantine: QuarantinePolicy,
}

/// The default floor on `requeue_after`.
pub const DEFAULT_MIN_REQUEUE: Duration = Duration::from_secs(1);

impl ControllerConfig {
    /// Reconciles at once, given what the plugin proposes.
    pub fn concurrency_for(&self, proposed: Option<u32>) -> usize {
        let proposed = proposed.map(|n| (n as usize).min(self.max_concurrency));
        self.concurrency_override.or(proposed).unwrap_or(self.concurrency).max(1)
    }

    /// How often every primary is requeued, given what the plugin proposes.
    pub fn resync_for(&self, proposed_seconds: Option<u32>) -> Option<Duration> {
        let proposed = proposed_seconds.map(|s| Duration::from_secs(s.into()).max(self.min_resync));
        self.resync.or(proposed).filter(|every| !every.is_zero())
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            concurrency: 4,
            concurrency_override: None,
            max_concurrency: 16,
            min_resync: Duration::from_secs(10),
            queue: QueueConfig::default(),
            plugin_config: "{}".into(),
            resync: None,
            identity: Identity::Host,
            service_account: None,
            namespace: None,
            write_budget: WriteBudget::default(),
            min_requeue: DEFAULT_MIN_REQUEUE,
            quarantine: QuarantinePolicy::default(),
        }
    }
}

/// The cache a plugin reads through its imports: every informer of the kinds it declared.
struct CacheView {
    by_kind: HashMap<Gvk, Vec<Arc<Informer>>>,
    /// Set while the plugin's grant is revoked: a call already running is served nothing more.
    denied: tokio::sync::watch::Receiver<Option<String>>,
}

impl CacheView {
    fn serves(&self) -> bool {
        self.denied.borrow().is_none()
    }
}

impl HostServices for CacheView {
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<Object> {
        if !self.serves() {
            return None;
        }
        self.by_kind.get(kind)?.iter().find_map(|i| i.get(namespace, name)).map(|e| e.envelope.clone())
    }

    fn list(&self, kind: &Gvk, namespace: Option<&str>, selector: &Selector) -> Vec<Object> {
        if !self.serves() {
            return Vec::new();
        }
        let mut seen = HashSet::new();
        self.by_kind
            .get(kind)
            .into_iter()
            .flatten()
            .flat_map(|i| i.list(namespace, selector))
            .filter(|e| seen.insert((e.envelope.namespace.clone(), e.envelope.name.clone())))
            .map(|e| e.envelope.clone())
            .collect()
    }

    fn list_page(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        if !self.serves() {
            return ListPage::default();
        }
        let pages = self.by_kind.get(kind).into_iter().flatten().map(|informer| {
            let (entries, resume) = informer.list_after(namespace, selector, after, limit, PAGE_SCAN);
            let keyed = entries.iter().map(|e| {
                ((e.envelope.namespace.clone().unwrap_or_default(), e.envelope.name.clone()), e.envelope.clone())
            });
            (keyed.collect(), resume)
        });
        merge_pages(pages, limit)
    }

    fn denied(&self, kind: &Gvk, namespace: Option<&str>) -> Option<CacheDenied> {
        if let Some(why) = self.denied.borrow().as_ref() {
            return Some(CacheDenied::Revoked(format!(
                "its read access was revoked ({why}); the call's answer is dropped"
            )));
        }
        let informers = self.by_kind.get(kind)?;
        let wanted = namespace?;
        let served: Vec<&str> = informers
            .iter()
            .filter(|i| i.namespaced())
            .map(|i| i.scope().namespace.as_deref())
            .collect::<Option<Vec<&str>>>()?;
        if served.is_empty() || served.contains(&wanted) {
            return None;
        }
        Some(CacheDenied::OutOfScope(format!(
            "{kind} is served to it from namespace {} only, not {wanted}",
            served.join(", ")
        )))
    }
}

/// One page from the pages of several informers of a kind (scopes may overlap): merged in
/// order and deduplicated, and valid only up to the earliest place an informer stopped, since
/// past that one of them has not looked yet.
fn merge_pages(pages: impl Iterator<Item = (Vec<(ListKey, Object)>, Option<ListKey>)>, limit: usize) -> ListPage {
    let mut merged: BTreeMap<ListKey, Object> = BTreeMap::new();
    let mut bound: Option<ListKey> = None;
    for (entries, resume) in pages {
        for (key, object) in entries {
            merged.entry(key).or_insert(object);
        }
        if let Some(resume) = resume {
            bound = Some(bound.map_or(resume.clone(), |b| b.min(resume)));
        }
    }
    if let Some(bound) = &bound {
        merged.retain(|k, _| k <= bound);
    }
    let full = merged.len() > limit;
    let items: Vec<(ListKey, Object)> = merged.into_iter().take(limit).collect();
    let resume = if full { items.last().map(|(k, _)| k.clone()) } else { bound };
    ListPage { items: items.into_iter().map(|(_, o)| o).collect(), resume }
}

/// Cache entries one page may look at: a selector that matches little costs a call a bounded
/// time under the informer's lock, and the page resumes where it stopped.
const PAGE_SCAN: usize = 10_000;

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// The keys being reconciled by any version of one plugin, each with the generation of the
/// version reconciling it. Kept apart from the queue's own book-keeping, so that a broken
/// queue shows up as `wasmloop_reconcile_overlaps_total` instead of passing unseen, and handed
/// from version to version, so that a new version never starts on a key an old version's
/// reconcile (one that outlived the drain timeout) still holds.
#[derive(Default)]
pub struct RunningKeys(Mutex<HashMap<Key, u64>>);

enum Claim {
    Claimed,
    /// This version already reconciles the key: the queue failed its promise.
    Overlap,
    /// An older version still reconciles the key.
    Busy,
}

impl RunningKeys {
    fn claim(&self, key: &Key, generation: u64) -> Claim {
        let mut keys = self.0.lock().expect("lock");
        match keys.get(key) {
            Some(g) if *g == generation => Claim::Overlap,
            Some(_) => Claim::Busy,
            None => {
                keys.insert(key.clone(), generation);
                Claim::Claimed
            }
        }
    }

    fn release(&self, key: &Key, generation: u64) {
        let mut keys = self.0.lock().expect("lock");
        if keys.get(key) == Some(&generation) {
            keys.remove(key);
        }
    }
}

/// Releases a key and the in-flight count when its reconcile ends, however it ends: the
/// guard lives in the reconcile's own task, which outlives an aborted worker.
struct RunningGuard {
    shared: Arc<Shared>,
    running: Arc<RunningKeys>,
    key: Key,
    claimed: bool,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if self.claimed {
            self.running.release(&self.key, self.shared.generation);
        }
        self.shared.plugin_metrics.in_flight(-1);
    }
}

/// What a stopped version leaves its successor: the keys its reconciles may still hold, and
/// the deleted objects and previous states it had not delivered yet.
pub struct Handover {
    running: Arc<RunningKeys>,
    primary: Gvk,
    tombstones: HashMap<Key, Arc<Entry>>,
    previous: HashMap<Key, Arc<Entry>>,
}

struct Shared {
    plugin: Plugin,
    manifest: Manifest,
    selector: Selector,
    primary: Arc<Informer>,
    owned: Vec<Arc<Informer>>,
    cache: Arc<CacheView>,
    queue: WorkQueue<Key>,
    /// Writes as the plugin's identity.
    executor: Arc<Executor>,
    /// Writes as the host: Events about the plugin's failures, which its identity may not be
    /// allowed to write.
    host_executor: Arc<Executor>,
    kinds: Arc<Kinds>,
    /// Acts as the plugin's identity (finalizers).
    client: kube::Client,
    /// Why the plugin may not be served its caches now (a revoked grant); none while it may.
    denied: tokio::sync::watch::Receiver<Option<String>>,
    /// Whether its guest calls keep failing, and its quarantine.
    health: Mutex<Health>,
    /// The host's list of quarantined plugins.
    quarantines: Arc<Board>,
    metrics: Arc<Metrics>,
    /// This plugin's series, resolved once.
    plugin_metrics: PluginMetrics,
    leading: tokio::sync::watch::Receiver<bool>,
    config: ControllerConfig,
    /// Tells this version's reconciles from its predecessors'.
    generation: u64,
    /// Set when the workers start: fresh, or handed over by the previous version.
    running: OnceLock<Arc<RunningKeys>>,
    /// True once the workers run; a prepared version's queue is not yet the plugin's.
    serving: AtomicBool,
    previous: Mutex<HashMap<Key, Arc<Entry>>>,
    tombstones: Mutex<HashMap<Key, Arc<Entry>>>,
}

/// A controller with synced caches and a filling queue, not reconciling yet.
pub struct Prepared {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    concurrency: usize,
}

impl Prepared {
    /// Starts the workers.
    pub fn run(self) -> Controller {
        self.start(Arc::default())
    }

    /// Starts the workers as the successor of a stopped version: keys its reconciles still
    /// hold wait for them, and deletions and previous states it had not delivered are
    /// delivered by this version (when the primary kind is the same).
    pub fn run_after(self, handover: Handover) -> Controller {
        let shared = &self.shared;
        if handover.primary == shared.manifest.primary.kind {
            if shared.manifest.deliver_deleted {
                let mut tombstones = shared.tombstones.lock().expect("lock");
                for (key, entry) in handover.tombstones {
                    tombstones.entry(key.clone()).or_insert(entry);
                    shared.queue.add(key);
                }
            }
            if shared.manifest.deliver_previous {
                let mut previous = shared.previous.lock().expect("lock");
                for (key, entry) in handover.previous {
                    previous.entry(key).or_insert(entry);
                }
            }
        }
        self.start(handover.running)
    }

    fn start(mut self, running: Arc<RunningKeys>) -> Controller {
        let _ = self.shared.running.set(running);
        self.shared.serving.store(true, Ordering::Relaxed);
        self.shared.plugin_metrics.queue_depth(self.shared.queue.len());
        for _ in 0..self.concurrency {
            self.tasks.push(tokio::spawn(work(self.shared.clone())));
        }
        let tasks = std::mem::take(&mut self.tasks);
        Controller { shared: self.shared.clone(), tasks }
    }

    /// The plugin's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.shared.manifest
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A running plugin controller.
pub struct Controller {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn key_of(object: &Object) -> Key {
    Key { namespace: object.namespace.clone(), name: object.name.clone() }
}

impl Controller {
    /// Starts the informers the plugin needs, waits for them to sync, then starts the
    /// workers: [`Controller::prepare`] and [`Prepared::run`] in one go.
    ///
    /// # Errors
    /// When a declared kind is not served or its cache does not sync.
    pub async fn start(plugin: Plugin, context: &Context, config: ControllerConfig) -> Result<Controller, StartError> {
        Ok(Controller::prepare(plugin, context, config).await?.run())
    }

    /// Acquires the plugin's informers (shared ones keep their warm caches), waits for them to
    /// sync and starts queueing keys, every primary among them, without reconciling yet. A
    /// new plugin version is prepared while the old one still serves; it runs once the old
    /// one has finished its reconciles in flight.
    ///
    /// # Errors
    /// When a declared kind is not served or its cache does not sync.
    pub async fn prepare(plugin: Plugin, context: &Context, config: ControllerConfig) -> Result<Prepared, StartError> {
        let informers = &context.informers;
        let manifest = plugin.manifest().clone();
        let confined = |what: &str, declared: Option<&str>| {
            effective_namespace(declared, config.namespace.as_deref()).map_err(|reason| StartError::Confined {
                plugin: manifest.name.clone(),
                what: what.to_owned(),
                reason,
            })
        };
        let namespace = confined("its primary kind", manifest.primary.namespace.as_deref())?;
        if let Some(operator) = config.namespace.as_deref() {
            grants_within(&manifest, operator).map_err(|(what, reason)| StartError::Confined {
                plugin: manifest.name.clone(),
                what,
                reason,
            })?;
        }
        let scope = |kind: &Gvk, namespace: Option<String>| InformerScope { kind: kind.clone(), namespace };
        let discovery = |source| StartError::Discovery { plugin: manifest.name.clone(), source };
        let primary = informers.acquire(&scope(&manifest.primary.kind, namespace.clone())).await.map_err(discovery)?;
        let mut owned = Vec::new();
        for kind in &manifest.owns {
            owned.push(informers.acquire(&scope(kind, namespace.clone())).await.map_err(discovery)?);
        }
        let mut watched = Vec::new();
        for w in &manifest.watches {
            let within = confined(&format!("watched kind {}", w.kind), w.namespace.as_deref())?;
            watched.push(informers.acquire(&scope(&w.kind, within)).await.map_err(discovery)?);
        }
        // Reads are served from the primary's namespace when it has one: a plugin confined to
        // one namespace must not see every namespace's objects of a kind it reads.
        let mut read = Vec::new();
        for kind in &manifest.reads {
            read.push(informers.acquire(&scope(kind, namespace.clone())).await.map_err(discovery)?);
        }
        let mut by_kind: HashMap<Gvk, Vec<Arc<Informer>>> = HashMap::new();
        for informer in std::iter::once(&primary).chain(&owned).chain(&watched).chain(&read) {
            by_kind.entry(informer.scope().kind.clone()).or_default().push(informer.clone());
        }
        for informers in by_kind.values() {
            for informer in informers {
                if tokio::time::timeout(SYNC_TIMEOUT, informer.synced()).await.is_err() {
                    return Err(StartError::NotSynced {
                        plugin: manifest.name.clone(),
                        kind: informer.scope().kind.to_string(),
                    });
                }
            }
        }
        let selector = parse_selector(&manifest.name, "primary", manifest.primary.label_selector.as_deref())?;
        let concurrency = config.concurrency_for(manifest.settings.max_concurrent_reconciles);
        let resync = config.resync_for(manifest.settings.resync_seconds);
        let watch_selectors = manifest
            .watches
            .iter()
            .map(|w| parse_selector(&manifest.name, "watched", w.label_selector.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        let plugin_metrics = context.metrics.plugin(&manifest.name);
        let identity_error = |source| StartError::Identity { plugin: manifest.name.clone(), source };
        let reads = reads_needed(&context.kinds, by_kind.values().flatten())
            .await
            .map_err(|source| StartError::Discovery { plugin: manifest.name.clone(), source })?;
        if let Identity::ServiceAccount(account) = &config.identity {
            context.identities.ensure_usable(account).await.map_err(identity_error)?;
            context.identities.review(account, &reads).await.map_err(identity_error)?;
        }
        let client = context.identities.client_for(&config.identity).map_err(identity_error)?;
        let holder = match &config.identity {
            Identity::ServiceAccount(account) => account.user(),
            Identity::Host => format!("plugin {}", manifest.name),
        };
        let bucket = context.write_buckets.bucket(&holder, config.write_budget);
        let executor = Arc::new(
            context
                .executor
                .acting_as(client.clone(), config.identity.to_string())
                .with_write_bucket(bucket)
                .confined_to(config.namespace.clone()),
        );
        let (deny, denied) = tokio::sync::watch::channel(None);
        let shared = Arc::new(Shared {
            queue: WorkQueue::new(config.queue),
            selector,
            cache: Arc::new(CacheView { by_kind, denied: denied.clone() }),
            primary,
            owned,
            plugin,
            manifest,
            executor,
            host_executor: context.executor.clone(),
            kinds: context.kinds.clone(),
            client,
            denied,
            health: Mutex::default(),
            quarantines: context.quarantines.clone(),
            plugin_metrics,
            metrics: context.metrics.clone(),
            leading: context.leading.clone(),
            config,
            generation: NEXT_GENERATION.fetch_add(1, Ordering::Relaxed),
            running: OnceLock::new(),
            serving: AtomicBool::new(false),
            previous: Mutex::default(),
            tombstones: Mutex::default(),
        });
        // Subscribe before the first full enqueue, so no change falls between the two.
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(pump_primary(shared.clone(), shared.primary.subscribe())));
        for informer in shared.owned.clone() {
            tasks.push(tokio::spawn(pump_owned(shared.clone(), informer.subscribe())));
        }
        for (informer, selector) in watched.iter().zip(watch_selectors) {
            // Watches share informers by kind; each applies its own label selector.
            tasks.push(tokio::spawn(pump_watched(shared.clone(), informer.subscribe(), selector)));
        }
        enqueue_all(&shared);
        {
            // Taking over the lead: every primary, from the warm cache.
            let (shared, mut leading) = (shared.clone(), shared.leading.clone());
            tasks.push(tokio::spawn(async move {
                while leading.changed().await.is_ok() {
                    if *leading.borrow_and_update() {
                        enqueue_all(&shared);
                    }
                }
            }));
        }
        if let Identity::ServiceAccount(account) = &shared.config.identity {
            let review = review_again(shared.clone(), context.identities.clone(), account.clone(), reads, deny);
            tasks.push(tokio::spawn(review));
        }
        if let Some(every) = resync {
            let shared = shared.clone();
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    enqueue_all(&shared);
                }
            }));
        }
        Ok(Prepared { shared, tasks, concurrency })
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.shared.manifest.name
    }

    /// The plugin version this controller runs.
    pub fn plugin(&self) -> &Plugin {
        &self.shared.plugin
    }

    /// The queue (for metrics and tests).
    pub fn queue(&self) -> &WorkQueue<Key> {
        &self.shared.queue
    }

    /// Stops taking keys, waits up to `timeout` for reconciles in flight, then stops. Returns
    /// what a successor version needs to carry on.
    pub async fn shut_down(self, timeout: Duration) -> Handover {
        let shared = &self.shared;
        shared.queue.shut_down();
        if tokio::time::timeout(timeout, shared.queue.drained()).await.is_err() {
            let running = self.running_keys();
            tracing::warn!(
                plugin = %shared.manifest.name,
                objects = ?running,
                "reconciles still running after {timeout:?}; they finish in the background, and a successor version waits for them (raise shutdownTimeoutSeconds if this repeats)"
            );
        }
        // A version that stops takes its quarantine with it; its successor starts healthy.
        if shared.health.lock().expect("lock").quarantined().is_some() {
            shared.quarantines.set(&shared.manifest.name, None);
            shared.metrics.quarantined(&shared.manifest.name, false);
        }
        // Dropping `self` aborts the pumps and workers, which releases the informers.
        Handover {
            running: shared.running.get().cloned().unwrap_or_default(),
            primary: shared.manifest.primary.kind.clone(),
            tombstones: std::mem::take(&mut *shared.tombstones.lock().expect("lock")),
            previous: std::mem::take(&mut *shared.previous.lock().expect("lock")),
        }
    }

    fn running_keys(&self) -> Vec<String> {
        let Some(running) = self.shared.running.get() else { return Vec::new() };
        let keys = running.0.lock().expect("lock");
        keys.iter().filter(|(_, g)| **g == self.shared.generation).map(|(k, _)| k.to_string()).collect()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.shared.queue.shut_down();
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Shared {
    fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    fn enqueue(&self, key: Key) {
        // A standby keeps its cache, not a backlog: on taking over it enqueues every primary.
        if !self.leads() {
            return;
        }
        self.queue.add(key);
        if self.serving.load(Ordering::Relaxed) {
            self.plugin_metrics.queue_depth(self.queue.len());
        }
    }
}

fn enqueue_all(shared: &Shared) {
    for entry in shared.primary.list(shared.primary.scope().namespace.as_deref(), &shared.selector) {
        shared.enqueue(key_of(&entry.envelope));
    }
}

/// The namespace a plugin is served a kind from, given the one it declares and the one the
/// operator confines it to: the operator's, which a declaration may only repeat.
///
/// # Errors
/// When the two differ, saying what to change.
fn effective_namespace(declared: Option<&str>, operator: Option<&str>) -> Result<Option<String>, String> {
    match (declared, operator) {
        (Some(declared), Some(operator)) if declared != operator => Err(format!(
            "declares namespace {declared} but the operator confines the plugin to namespace {operator}; \
             change plugins.<name>.namespace in host.yaml or the plugin's manifest"
        )),
        (declared, operator) => Ok(operator.or(declared).map(str::to_owned)),
    }
}

/// A plugin the operator confines to one namespace may not be granted writes beyond it: its
/// grants must be `primary-namespace` or list that namespace only. Returns the grant that
/// reaches further, and what to change.
fn grants_within(manifest: &Manifest, operator: &str) -> Result<(), (String, String)> {
    for grant in &manifest.writes {
        let beyond = match &grant.scope {
            WriteScope::PrimaryNamespace => continue,
            WriteScope::Any => "every namespace".to_owned(),
            WriteScope::Namespaces(list) => match list.iter().find(|ns| *ns != operator) {
                Some(other) => format!("namespace {other}"),
                None => continue,
            },
        };
        return Err((
            format!("its write grant on {}", grant.kind),
            format!(
                "reaches {beyond}, but the operator confines the plugin to namespace {operator}; narrow the grant to primary-namespace, or change plugins.<name>.namespace in host.yaml"
            ),
        ));
    }
    Ok(())
}

/// The reads a plugin is served from the shared caches: `list` and `watch` of every kind it
/// declares, in the scope it declares it.
async fn reads_needed<'a>(
    kinds: &Kinds,
    informers: impl Iterator<Item = &'a Arc<Informer>>,
) -> Result<Vec<Access>, DiscoveryError> {
    let mut needed: Vec<Access> = Vec::new();
    for informer in informers {
        let resolved = kinds.resolve(&informer.scope().kind).await?;
        let namespace = informer.scope().namespace.clone().filter(|_| resolved.namespaced);
        for verb in ["list", "watch"] {
            let access = Access { verb, resource: resolved.resource.clone(), namespace: namespace.clone() };
            if !needed.contains(&access) {
                needed.push(access);
            }
        }
    }
    Ok(needed)
}

/// Asks again, every review interval, whether the plugin's ServiceAccount may still be acted
/// as and may still read what it is served. A revoked grant, a deleted or no longer opted-in
/// account, or an API server that cannot answer [`UNANSWERED_REVIEWS`] times in a row stops its
/// reconciles and `map` calls until the answer is yes again, when every primary is requeued.
async fn review_again(
    shared: Arc<Shared>,
    identities: Arc<Identities>,
    account: ServiceAccount,
    reads: Vec<Access>,
    deny: tokio::sync::watch::Sender<Option<String>>,
) {
    let plugin = shared.manifest.name.clone();
    let mut tick = tokio::time::interval(identities.review_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut unanswered = 0;
    loop {
        tick.tick().await;
        let answer = match identities.ensure_usable(&account).await {
            Ok(()) => identities.review(&account, &reads).await,
            Err(error) => Err(error),
        };
        let refusal = match answer {
            Ok(()) => {
                unanswered = 0;
                if deny.send_replace(None).is_some() {
                    tracing::info!(plugin, "access granted again to {account}; requeueing every primary");
                    enqueue_all(&shared);
                }
                continue;
            }
            Err(error @ IdentityError::Api { .. }) => {
                unanswered += 1;
                if unanswered < UNANSWERED_REVIEWS {
                    // Keep what we knew for a while: one failed request is no revocation.
                    tracing::warn!(plugin, %error, "could not review the plugin's access; asking again");
                    continue;
                }
                format!("its access could not be reviewed {unanswered} times in a row: {error}")
            }
            Err(error) => error.to_string(),
        };
        if deny.send_replace(Some(refusal.clone())).is_none() {
            shared.metrics.plugin_rejected(&plugin, "AccessRevoked");
            tracing::error!(plugin, "access revoked, reconciles stop until it is granted again: {refusal}");
        }
    }
}

/// How many reviews in a row may go unanswered before a plugin is treated as revoked.
const UNANSWERED_REVIEWS: u32 = 3;

fn selected(shared: &Shared, entry: &Entry) -> bool {
    entry.selected_by(&shared.selector)
}

/// The next changed object of a related kind; a lagging subscriber requeues every primary
/// instead. None when the informer is gone.
async fn next_related(shared: &Shared, changes: &mut broadcast::Receiver<Change>) -> Option<Arc<Entry>> {
    loop {
        match changes.recv().await {
            Ok(Change::Applied(e) | Change::Deleted(e)) => return Some(e),
            Err(RecvError::Lagged(_)) => enqueue_all(shared),
            Err(RecvError::Closed) => return None,
        }
    }
}

async fn pump_primary(shared: Arc<Shared>, mut changes: broadcast::Receiver<Change>) {
    loop {
        match changes.recv().await {
            Ok(Change::Applied(entry)) if selected(&shared, &entry) => shared.enqueue(key_of(&entry.envelope)),
            Ok(Change::Applied(_)) => {}
            Ok(Change::Deleted(entry)) => {
                let key = key_of(&entry.envelope);
                shared.previous.lock().expect("lock").remove(&key);
                // Deletions seen as a standby were the leader's to deliver.
                if shared.manifest.deliver_deleted && shared.leads() && selected(&shared, &entry) {
                    shared.tombstones.lock().expect("lock").insert(key.clone(), entry);
                    shared.enqueue(key);
                }
            }
            Err(RecvError::Lagged(_)) => enqueue_all(&shared),
            Err(RecvError::Closed) => return,
        }
    }
}

async fn pump_owned(shared: Arc<Shared>, mut changes: broadcast::Receiver<Change>) {
    let primary = &shared.manifest.primary.kind;
    while let Some(entry) = next_related(&shared, &mut changes).await {
        for owner in entry.object.owner_references().iter().filter(|o| o.controller == Some(true)) {
            // Group and kind, not version: a CRD served at a new version still owns its children.
            let (group, _) = wasmloop_sdk::kind::split_api_version(&owner.api_version);
            if owner.kind == primary.kind && group == primary.group {
                let namespace = shared.primary.namespaced().then(|| entry.envelope.namespace.clone()).flatten();
                shared.enqueue(Key { namespace, name: owner.name.clone() });
            }
        }
    }
}

async fn pump_watched(shared: Arc<Shared>, mut changes: broadcast::Receiver<Change>, selector: Selector) {
    while let Some(entry) = next_related(&shared, &mut changes).await {
        if !entry.selected_by(&selector) || shared.denied.borrow().is_some() {
            continue;
        }
        let related_namespace = entry.envelope.namespace.clone();
        let services: Arc<dyn HostServices> = shared.cache.clone();
        match shared.plugin.map(&entry.envelope, &shared.config.plugin_config, services).await {
            Ok(refs) => refs.into_iter().for_each(|r: ObjectRef| {
                // One object, one key: a namespaced primary named without a namespace is in the
                // related object's; a cluster-scoped primary has none.
                let namespace =
                    if shared.primary.namespaced() { r.namespace.or_else(|| related_namespace.clone()) } else { None };
                // A key outside the primary's scope names nothing the plugin is served.
                let scope = shared.primary.scope().namespace.as_ref().filter(|_| shared.primary.namespaced());
                if scope.is_none_or(|scope| namespace.as_ref() == Some(scope)) {
                    shared.enqueue(Key { namespace, name: r.name });
                }
            }),
            Err(error) => tracing::warn!(plugin = %shared.manifest.name, %error, "map failed"),
        }
    }
}

/// How long a key waits when an older version's reconcile still holds it.
const BUSY_RETRY: Duration = Duration::from_millis(100);

async fn work(shared: Arc<Shared>) {
    let plugin = shared.manifest.name.as_str();
    let running = shared.running.get().cloned().expect("set before the workers start");
    let mut leading = shared.leading.clone();
    loop {
        // A standby queues keys but takes none until it leads.
        if leading.wait_for(|leads| *leads).await.is_err() {
            return;
        }
        let Some(key) = shared.queue.get().await else { return };
        if !shared.leads() {
            // The lead went while this worker waited for a key.
            shared.queue.done(&key);
            continue;
        }
        shared.plugin_metrics.queue_depth(shared.queue.len());
        if shared.denied.borrow().is_some() {
            // Served nothing while its grant is revoked; every primary is requeued when it is
            // granted again.
            tracing::info!(plugin, %key, "skipped: access revoked");
            shared.queue.forget(&key);
            shared.queue.done(&key);
            continue;
        }
        let admission = shared.health.lock().expect("lock").admit(Instant::now());
        if let Admission::Defer(wait) = admission {
            // Quarantined: the key waits for the next probe instead of holding a worker.
            tracing::debug!(plugin, %key, ?wait, "deferred: plugin quarantined");
            shared.queue.add_after(key.clone(), wait);
            shared.queue.done(&key);
            continue;
        }
        let claimed = match running.claim(&key, shared.generation) {
            Claim::Claimed => true,
            Claim::Busy => {
                shared.queue.add_after(key.clone(), BUSY_RETRY);
                shared.queue.done(&key);
                continue;
            }
            Claim::Overlap => {
                shared.plugin_metrics.overlapped();
                tracing::error!(plugin, object = %key, "two reconciles of one object at once; this is a wasmloop bug, please report it");
                false
            }
        };
        let attempt = shared.queue.retries(&key);
        let span = tracing::info_span!("reconcile", plugin, object = %key, attempt, actions = tracing::field::Empty, duration_ms = tracing::field::Empty);
        let started = Instant::now();
        shared.plugin_metrics.in_flight(1);
        let guard = RunningGuard { shared: shared.clone(), running: running.clone(), key: key.clone(), claimed };
        // Its own task: a panic in host code must not strand the key in `processing`, and a
        // worker aborted at shutdown leaves the reconcile (and its guard) to finish.
        let task = tokio::spawn({
            let (shared, key) = (shared.clone(), key.clone());
            async move {
                let _guard = guard;
                reconcile(&shared, &key, attempt).await
            }
            .instrument(span.clone())
        });
        let outcome = task.await.unwrap_or_else(|panic| {
            tracing::error!(plugin, object = %key, %panic, "reconcile panicked; retrying with backoff");
            Outcome::Retry
        });
        let took = started.elapsed();
        span.record("duration_ms", took.as_millis() as u64);
        let result = match outcome {
            Outcome::Done { actions, requeue_after } => {
                span.record("actions", actions);
                shared.queue.forget(&key);
                if let Some(after) = requeue_after {
                    shared.queue.add_after(key.clone(), after.max(shared.config.min_requeue));
                }
                span.in_scope(|| tracing::debug!("reconciled"));
                MetricOutcome::Success
            }
            Outcome::Retry => {
                shared.queue.add_rate_limited(key.clone());
                shared.plugin_metrics.retried();
                MetricOutcome::Retry
            }
            Outcome::RetryAfter(after) => {
                // Held to the requeue floor already, and to the backoff's ceiling by the queue.
                shared.queue.add_retry_after(key.clone(), after);
                shared.plugin_metrics.retried();
                MetricOutcome::Retry
            }
            Outcome::Wait => {
                shared.queue.forget(&key);
                MetricOutcome::Failed
            }
        };
        shared.plugin_metrics.reconciled(result, took);
        shared.queue.done(&key);
        shared.plugin_metrics.queue_depth(shared.queue.len());
    }
}

enum Outcome {
    Done {
        actions: usize,
        requeue_after: Option<Duration>,
    },
    /// Back off and retry.
    Retry,
    /// Retry after this delay, which the plugin chose.
    RetryAfter(Duration),
    /// Do not retry until something changes.
    Wait,
}

async fn reconcile(shared: &Arc<Shared>, key: &Key, attempt: u32) -> Outcome {
    let Some(entry) = shared.primary.get(key.namespace.as_deref(), &key.name) else {
        let tombstone = shared.tombstones.lock().expect("lock").remove(key);
        shared.previous.lock().expect("lock").remove(key);
        return match tombstone {
            Some(last) => {
                let outcome = call(shared, key, last.clone(), Phase::Deleted, attempt).await;
                if matches!(outcome, Outcome::Retry | Outcome::RetryAfter(_)) {
                    // Keep the last state for the retry, unless the name was reused meanwhile.
                    shared.tombstones.lock().expect("lock").entry(key.clone()).or_insert(last);
                }
                outcome
            }
            None => Outcome::Done { actions: 0, requeue_after: None },
        };
    };
    let finalizer = shared.manifest.finalizer.as_deref();
    let holds = |f: &str| entry.object.finalizers().iter().any(|x| x == f);
    // Cleanup before the selector: a primary that holds our finalizer must get it released
    // even if its labels no longer select it.
    if entry.object.metadata.deletion_timestamp.is_some() {
        return match finalizer {
            Some(f) if holds(f) => call(shared, key, entry, Phase::Cleanup, attempt).await,
            _ => Outcome::Done { actions: 0, requeue_after: None },
        };
    }
    if !selected(shared, &entry) {
        return Outcome::Done { actions: 0, requeue_after: None };
    }
    if let Some(f) = finalizer.filter(|f| !holds(f)) {
        if shared.executor.is_dry_run() {
            // Nothing is written in a dry run, so no update would requeue the key: say what
            // would happen and show the plugin's actions right away.
            shared.executor.report(finalizer_report(shared, &entry, "add finalizer", f));
            return call(shared, key, entry, Phase::Apply, attempt).await;
        }
        // Before the first apply: the update this makes requeues the key.
        return match set_finalizers(shared, &entry, add_finalizer(&entry, f)).await {
            Ok(()) => Outcome::Done { actions: 0, requeue_after: None },
            Err(error) => {
                failed(shared, &entry.envelope, &error.to_string(), error.event_reason(), error.is_transient()).await
            }
        };
    }
    call(shared, key, entry, Phase::Apply, attempt).await
}

fn add_finalizer(entry: &Entry, finalizer: &str) -> Vec<String> {
    let mut list = entry.object.finalizers().to_vec();
    list.push(finalizer.to_owned());
    list
}

/// Removes our finalizer after a successful cleanup. The cleanup's own writes (a status, say)
/// change the resourceVersion, so the live object is re-read and the removal retried on a
/// conflict, without running the cleanup again.
fn finalizer_report(shared: &Shared, entry: &Entry, verb: &'static str, finalizer: &str) -> DryRunReport {
    DryRunReport {
        plugin: shared.manifest.name.clone(),
        verb,
        target: format!("{} {}", entry.envelope.kind, entry.envelope.display_name()),
        before: None,
        after: None,
        note: Some(finalizer.to_owned()),
    }
}

async fn release_finalizer(shared: &Shared, entry: &Entry, finalizer: &str) -> Result<(), ExecError> {
    if shared.executor.is_dry_run() {
        shared.executor.report(finalizer_report(shared, entry, "remove finalizer", finalizer));
        return Ok(());
    }
    let api = primary_api(shared, entry).await?;
    let mut last = None;
    for _ in 0..5 {
        let live = match api.get_opt(&entry.envelope.name).await {
            Ok(Some(live)) if live.uid().as_deref() == Some(entry.envelope.uid.as_str()) => live,
            // Gone, or another object of the same name: nothing of ours to release.
            Ok(_) => return Ok(()),
            Err(source) => return Err(finalizer_error(shared, entry, source)),
        };
        let rest: Vec<String> = live.finalizers().iter().filter(|x| *x != finalizer).cloned().collect();
        if rest.len() == live.finalizers().len() {
            return Ok(());
        }
        let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": live.resource_version()}});
        shared.executor.charge(&shared.manifest.name).await;
        let params = PatchParams { field_manager: Some(shared.manifest.field_manager()), ..PatchParams::default() };
        match api.patch(&entry.envelope.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => last = Some(kube::Error::Api(status)),
            Err(source) => return Err(finalizer_error(shared, entry, source)),
        }
    }
    Err(finalizer_error(shared, entry, last.expect("five conflicts")))
}

fn finalizer_error(shared: &Shared, entry: &Entry, source: kube::Error) -> ExecError {
    ExecError::Api {
        plugin: shared.manifest.name.clone(),
        actor: shared.config.identity.to_string(),
        verb: "update finalizers of",
        target: format!("{} {}", entry.envelope.kind, entry.envelope.display_name()),
        source,
    }
}

async fn primary_api(shared: &Shared, entry: &Entry) -> Result<Api<DynamicObject>, ExecError> {
    let resolved = shared
        .kinds
        .resolve(&shared.manifest.primary.kind)
        .await
        .map_err(|source| ExecError::Discovery { plugin: shared.manifest.name.clone(), source })?;
    Ok(match &entry.envelope.namespace {
        Some(ns) if resolved.namespaced => Api::namespaced_with(shared.client.clone(), ns, &resolved.resource),
        _ => Api::all_with(shared.client.clone(), &resolved.resource),
    })
}

async fn set_finalizers(shared: &Shared, entry: &Entry, finalizers: Vec<String>) -> Result<(), ExecError> {
    let api = primary_api(shared, entry).await?;
    // The resourceVersion makes this a compare-and-swap: a concurrent change is a conflict
    // and a retry, never a lost finalizer.
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": entry.object.resource_version()}});
    shared.executor.charge(&shared.manifest.name).await;
    let params = PatchParams { field_manager: Some(shared.manifest.field_manager()), ..PatchParams::default() };
    api.patch(&entry.envelope.name, &params, &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(|source| finalizer_error(shared, entry, source))
}

async fn call(shared: &Arc<Shared>, key: &Key, entry: Arc<Entry>, phase: Phase, attempt: u32) -> Outcome {
    let uid = entry.envelope.uid.clone();
    let owned: Vec<Object> = if phase == Phase::Deleted {
        Vec::new()
    } else {
        shared.owned.iter().flat_map(|i| i.owned_by(&uid)).map(|e| e.envelope.clone()).collect()
    };
    let previous = shared
        .manifest
        .deliver_previous
        .then(|| shared.previous.lock().expect("lock").get(key).map(|e| e.envelope.clone()))
        .flatten()
        // A recreated object of the same name has no previous state.
        .filter(|p| p.uid == uid);
    let request = Request {
        object: entry.envelope.clone(),
        owned,
        phase,
        previous,
        attempt,
        config: shared.config.plugin_config.clone(),
    };
    let services: Arc<dyn HostServices> = shared.cache.clone();
    // A future on this task: the guest's log lines stay in the reconcile's span, and the
    // deadline holds even while the guest waits in a host call.
    let (result, timings) = shared.plugin.reconcile_timed(&request, services).await;
    shared.plugin_metrics.instantiated(timings.instantiate);
    // The guest answered, even with an error of its own; traps and broken limits are the
    // failures that say the plugin itself is sick.
    let healthy = result.as_ref().err().is_none_or(|e| matches!(e.failure, CallFailure::Plugin { .. }));
    record_health(shared, &entry.envelope, healthy).await;
    if shared.denied.borrow().is_some() {
        // Revoked while the guest ran: what it answered rests on reads it may no longer make.
        // Every primary is requeued when access is granted again.
        tracing::info!(plugin = %shared.manifest.name, %key, "skipped: access revoked");
        return Outcome::Done { actions: 0, requeue_after: None };
    }
    let response = match result {
        Ok(response) => response,
        Err(error) => {
            let transient = error.failure.is_transient();
            return guest_failed(shared, &entry.envelope, &error, transient).await;
        }
    };
    let applied = match shared.executor.execute(&shared.manifest, &entry.envelope, &response.actions).await {
        Ok(applied) => applied,
        Err(error) => {
            return failed(shared, &entry.envelope, &error.to_string(), error.event_reason(), error.is_transient())
                .await;
        }
    };
    if phase == Phase::Apply && shared.manifest.prune {
        let keep: HashSet<(Gvk, Option<String>, String)> =
            applied.iter().map(|a| (a.kind.clone(), a.namespace.clone(), a.name.clone())).collect();
        let stale: Vec<Action> = shared
            .owned
            .iter()
            .flat_map(|i| i.owned_by(&uid))
            .filter(|child| child.object.owner_references().iter().any(|o| o.uid == uid && o.controller == Some(true)))
            .filter(|child| {
                !keep.contains(&(child.envelope.gvk(), child.envelope.namespace.clone(), child.envelope.name.clone()))
            })
            .map(|child| {
                Action::Delete(ObjectRef {
                    api_version: child.envelope.api_version.clone(),
                    kind: child.envelope.kind.clone(),
                    name: child.envelope.name.clone(),
                    namespace: child.envelope.namespace.clone(),
                    uid: Some(child.envelope.uid.clone()),
                })
            })
            .collect();
        if let Err(error) = shared.executor.execute(&shared.manifest, &entry.envelope, &stale).await {
            return failed(shared, &entry.envelope, &error.to_string(), error.event_reason(), error.is_transient())
                .await;
        }
    }
    if phase == Phase::Cleanup {
        if let Some(f) = &shared.manifest.finalizer {
            if let Err(error) = release_finalizer(shared, &entry, f).await {
                return failed(shared, &entry.envelope, &error.to_string(), error.event_reason(), error.is_transient())
                    .await;
            }
        }
    }
    if phase == Phase::Apply && shared.manifest.deliver_previous {
        shared.previous.lock().expect("lock").insert(key.clone(), entry);
    }
    Outcome::Done { actions: response.actions.len(), requeue_after: response.requeue_after }
}

/// Records how a guest call ended in the plugin's health, and reports a quarantine entered or
/// lifted: in the log, the metrics, the host's board (`/readyz`) and an Event on `primary`.
async fn record_health(shared: &Shared, primary: &Object, healthy: bool) {
    let plugin = shared.manifest.name.as_str();
    let transition = shared.health.lock().expect("lock").record(healthy, Instant::now(), &shared.config.quarantine);
    match transition {
        Some(Transition::Entered(reason)) => {
            shared.quarantines.set(plugin, Some(&reason));
            shared.metrics.quarantined(plugin, true);
            tracing::error!(plugin, "plugin quarantined: {reason}");
            let note = format!("plugin {plugin} quarantined: {reason}; fix the plugin or its limits");
            if let Err(error) = shared
                .host_executor
                .event(&shared.manifest, primary, EventType::Warning, "PluginQuarantined", &note, None)
                .await
            {
                tracing::warn!(%error, "could not record the quarantine as an Event");
            }
        }
        Some(Transition::Lifted) => {
            shared.quarantines.set(plugin, None);
            shared.metrics.quarantined(plugin, false);
            tracing::info!(plugin, "quarantine lifted: a call succeeded; requeueing every primary");
            enqueue_all(shared);
        }
        None => {}
    }
}

/// Logs a failed reconcile and records it as a Warning Event on the primary, written as the
/// host: only for failures the host detected and names with a reason of its own.
async fn failed(shared: &Shared, primary: &Object, message: &str, reason: &'static str, transient: bool) -> Outcome {
    let retry = if transient { Outcome::Retry } else { Outcome::Wait };
    failed_as(shared, &shared.host_executor, primary, message, (reason, reason), retry).await
}

/// A failed guest call. Traps, deadlines and broken limits are the host's findings, reported
/// as the host; an error the plugin returned carries the plugin's own reason and words, so it
/// is recorded as the plugin, and paid from its write budget, like any Event it emits.
///
/// A plugin's error may carry status and event actions (a condition saying why): they are
/// carried out first, as the plugin, and a retry delay it chose replaces the backoff.
async fn guest_failed(shared: &Shared, primary: &Object, error: &CallError, transient: bool) -> Outcome {
    let (message, reason) = (error.to_string(), error.failure.event_reason());
    let CallFailure::Plugin { retry_after, actions, .. } = &error.failure else {
        let metric = error.failure.metric_reason();
        let retry = if transient { Outcome::Retry } else { Outcome::Wait };
        return failed_as(shared, &shared.host_executor, primary, &message, (reason, metric), retry).await;
    };
    if !primary.uid.is_empty() {
        if let Err(e) = shared.executor.execute(&shared.manifest, primary, actions).await {
            tracing::warn!(error = %e, "could not carry out the actions of a failed reconcile");
        }
        shared.executor.charge(&shared.manifest.name).await;
    }
    // A delay the plugin chose replaces the backoff, held to the requeue floor.
    let retry = match (transient, retry_after) {
        (false, _) => Outcome::Wait,
        (true, None) => Outcome::Retry,
        (true, Some(after)) => Outcome::RetryAfter((*after).max(shared.config.min_requeue)),
    };
    failed_as(shared, &shared.executor, primary, &message, (reason, error.failure.metric_reason()), retry).await
}

async fn failed_as(
    shared: &Shared,
    writer: &Executor,
    primary: &Object,
    message: &str,
    (reason, metric): (&str, &'static str),
    retry: Outcome,
) -> Outcome {
    let transient = !matches!(retry, Outcome::Wait);
    tracing::warn!(reason, transient, "{message}");
    // The metric's reason label comes from a fixed set; a plugin's own reasons would not be.
    shared.metrics.reconcile_failed(&shared.manifest.name, metric);
    if !primary.uid.is_empty() {
        let next = match &retry {
            Outcome::RetryAfter(after) => format!("retrying in {} ms, as the plugin asked", after.as_millis()),
            Outcome::Retry => "retrying with backoff".to_owned(),
            _ => "waiting for the object or the plugin to change".to_owned(),
        };
        let note = format!("{message} ({next})");
        if let Err(error) = writer.event(&shared.manifest, primary, EventType::Warning, reason, &note, None).await {
            tracing::warn!(%error, "could not record the failure as an Event");
        }
    }
    retry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_namespace_confines_a_plugin_and_a_declaration_may_only_repeat_it() {
        let cases = [
            (None, None, Ok(None)),
            (Some("a"), None, Ok(Some("a"))),
            (None, Some("t"), Ok(Some("t"))),
            (Some("t"), Some("t"), Ok(Some("t"))),
            (Some("a"), Some("t"), Err("declares namespace a but the operator confines the plugin to namespace t")),
        ];
        for (declared, operator, expected) in cases {
            let got = effective_namespace(declared, operator);
            match (got, expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got.as_deref(), expected, "{declared:?} {operator:?}"),
                (Err(got), Err(expected)) => assert!(got.starts_with(expected), "{got}"),
                (got, expected) => panic!("{declared:?} {operator:?}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn pages_of_overlapping_informers_merge_in_order_once_each_up_to_where_one_stopped() {
        let obj = |n: &str| Object {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: n.into(),
            namespace: Some("a".into()),
            uid: String::new(),
            json: "{}".into(),
        };
        let key = |n: &str| ("a".to_owned(), n.to_owned());
        let page = |names: &[&str], resume: Option<&str>| {
            (names.iter().map(|n| (key(n), obj(n))).collect::<Vec<_>>(), resume.map(key))
        };
        let names = |p: &ListPage| p.items.iter().map(|o| o.name.clone()).collect::<Vec<_>>().join(",");
        #[rustfmt::skip]
        let cases: Vec<(Vec<(Vec<(ListKey, Object)>, Option<ListKey>)>, usize, &str, Option<&str>)> = vec![
            // Both informers done: everything, once, in order.
            (vec![page(&["b", "d"], None), page(&["a", "b", "c"], None)], 10, "a,b,c,d", None),
            // Over the limit: cut, resume after the last kept.
            (vec![page(&["b", "d"], None), page(&["a", "c"], None)], 3, "a,b,c", Some("c")),
            // One informer stopped at "b": nothing past it, resume there.
            (vec![page(&["a", "b"], Some("b")), page(&["a", "c", "d"], None)], 10, "a,b", Some("b")),
            // Stopped before finding any: an empty page that still says where to go on.
            (vec![page(&[], Some("m"))], 10, "", Some("m")),
        ];
        for (pages, limit, expected, resume) in cases {
            let got = merge_pages(pages.into_iter(), limit);
            assert_eq!((names(&got).as_str(), got.resume.clone()), (expected, resume.map(key)), "{expected}");
        }
    }

    #[test]
    fn an_operator_confined_plugin_may_only_hold_grants_inside_its_namespace() {
        use wasmloop_sandbox::{Contract, KindSelector, Settings, WriteGrant, WriteVerbs};
        let configmap = Gvk::from_api_version("v1", "ConfigMap");
        let manifest = |scope: WriteScope| Manifest {
            name: "p".into(),
            version: "1".into(),
            primary: KindSelector { kind: configmap.clone(), namespace: None, label_selector: None },
            owns: Vec::new(),
            watches: Vec::new(),
            reads: Vec::new(),
            metadata_only: Vec::new(),
            writes: vec![WriteGrant {
                kind: configmap.clone(),
                verbs: WriteVerbs { patch: true, ..Default::default() },
                scope,
            }],
            contract: Contract::V0_2,
            finalizer: None,
            prune: false,
            deliver_deleted: false,
            deliver_previous: false,
            settings: Settings::default(),
        };
        let list = |l: &[&str]| WriteScope::Namespaces(l.iter().map(|s| (*s).to_owned()).collect());
        let cases = [
            (WriteScope::PrimaryNamespace, None),
            (list(&["t"]), None),
            (list(&["t", "kube-system"]), Some("reaches namespace kube-system")),
            (WriteScope::Any, Some("reaches every namespace")),
        ];
        for (scope, expected) in cases {
            let got = grants_within(&manifest(scope.clone()), "t").err().map(|(what, reason)| {
                assert_eq!(what, "its write grant on v1/ConfigMap");
                reason
            });
            match (got, expected) {
                (None, None) => {}
                (Some(reason), Some(part)) => assert!(reason.starts_with(part), "{reason}"),
                (got, expected) => panic!("{scope:?}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn concurrency_settings_win_in_order_operator_then_capped_plugin_then_default() {
        let config = ControllerConfig { concurrency: 4, max_concurrency: 16, ..ControllerConfig::default() };
        let operator = ControllerConfig { concurrency_override: Some(32), ..config.clone() };
        let cases = [
            (&config, None, 4),
            (&config, Some(2), 2),
            (&config, Some(u32::MAX), 16),
            (&operator, Some(2), 32),
            (&operator, None, 32),
            (&ControllerConfig { concurrency_override: Some(0), ..config.clone() }, None, 1),
        ];
        for (config, proposed, expected) in cases {
            assert_eq!(config.concurrency_for(proposed), expected, "{config:?} {proposed:?}");
        }
    }

    #[test]
    fn the_operators_resync_wins_and_a_plugins_is_held_to_the_floor() {
        let config = ControllerConfig { min_resync: Duration::from_secs(10), ..ControllerConfig::default() };
        let operator = ControllerConfig { resync: Some(Duration::from_secs(300)), ..config.clone() };
        let cases = [
            (&config, None, None),
            (&config, Some(60), Some(Duration::from_secs(60))),
            (&config, Some(1), Some(Duration::from_secs(10))),
            (&operator, Some(1), Some(Duration::from_secs(300))),
            (&operator, None, Some(Duration::from_secs(300))),
        ];
        for (config, proposed, expected) in cases {
            assert_eq!(config.resync_for(proposed), expected, "{config:?} {proposed:?}");
        }
    }
}
