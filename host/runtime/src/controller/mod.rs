//! One plugin's controller: informer changes become keys, workers take keys from the
//! [`WorkQueue`], call the plugin with the latest cached state and hand its actions to the
//! [`Executor`].
//!
//! Edge-triggered, level-driven: events only say *which* primary to look at; the worker
//! reads that primary and its children from the cache when it runs, so a burst of changes
//! is one reconcile of the latest state.
//!
//! The stages, in the order data flows through them:
//! - [`config`]: the operator's settings and the plugin's proposals, settled at start;
//! - `triggers`: informer changes become work in the queue (a primary's key, or a related
//!   object to `map`);
//! - `worker`: takes work from the queue and carries out what `plan` decides, through the
//!   plugin and the executor;
//! - `plan`: the pure decisions (which phase, finalizer on or off, what prune deletes, how an
//!   outcome is requeued), table-tested;
//! - `memory`: what a controller keeps per key between passes, handed to the next version.
//!
//! `cache_view` is what the plugin reads through its imports; `access` re-reviews a plugin's
//! ServiceAccount while it runs; `scopes` decides which informers it reads through; `shared`
//! is what one version's triggers and workers share; `reasons` says why each key runs.
//!
//! [`Controller::prepare`] goes in parts: `admitted` (the confinement and the scopes; the
//! identity checked, the kinds discovered as that identity and its reads reviewed, before any
//! informer lists or watches on its behalf with the host's credentials), `acquired` (the
//! informers, shared ones with their warm caches, synced together within 120 s), the
//! version's `Shared` state and executor, and `spawned` (the change streams, subscribed before
//! every primary is enqueued so no change falls between; every primary again on taking the
//! lead and each resync; the access review). The result is a [`Prepared`] controller with a
//! filling queue and no workers: [`Prepared::run`] starts them, [`Prepared::run_after`] as the
//! successor of a stopped version, from its [`Handover`]. [`StartError`] says why a plugin could
//! not start.

mod access;
mod cache_view;
pub mod config;
mod memory;
mod plan;
pub mod reasons;
mod scopes;
mod shared;
mod triggers;
mod work;
mod worker;

pub use config::{ControllerConfig, DEFAULT_MIN_REQUEUE};
pub use memory::RunningKeys;
pub use work::Key;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use wasmloop_sandbox::PluginId;

use wasmloop_contract::names::LabelSelector;
use wasmloop_sandbox::{GenerationChange, Gvk, Manifest, Plugin, Selector, Trigger};

use crate::context::Context;
use crate::discovery::DiscoveryError;
use crate::identity::{Access, Identity, IdentityError};
use crate::informer::{self, Informer, InformerScope};
use crate::queue::WorkQueue;
use crate::shadow::ShadowSeat;
use cache_view::CacheView;
use config::grants_within;
use memory::{Memory, Remembered};
use shared::Shared;
use work::Work;

/// How long a controller waits for its caches to fill before giving up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// A plugin's controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A declared kind is not served.
    #[error("plugin {plugin}: {source}")]
    Discovery {
        /// The plugin.
        plugin: PluginId,
        /// Why.
        #[source]
        source: DiscoveryError,
    },
    /// The plugin's identity cannot be used: its ServiceAccount is missing, or may not read what
    /// the plugin declares.
    #[error("plugin {plugin}: {source}")]
    Identity {
        /// The plugin.
        plugin: PluginId,
        /// Why.
        #[source]
        source: IdentityError,
    },
    /// The plugin declares a namespace other than the one the operator confines it to.
    #[error("plugin {plugin}: {what}: {reason}")]
    Confined {
        /// The plugin.
        plugin: PluginId,
        /// Which declaration.
        what: String,
        /// The conflict, and what to change.
        reason: String,
    },
    /// A cache did not fill in time.
    #[error("plugin {plugin}: the cache of {kind} did not sync within {} s; check that the host may list and watch {kind} (RBAC) and that the API server is reachable", SYNC_TIMEOUT.as_secs())]
    NotSynced {
        /// The plugin.
        plugin: PluginId,
        /// The kind.
        kind: String,
    },
}

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// What a stopped version leaves its successor: the keys its reconciles may still hold, and
/// the deleted objects and previous states it had not delivered yet.
pub struct Handover {
    running: Arc<RunningKeys>,
    primary: Gvk,
    remembered: Remembered,
}

impl Handover {
    /// Waits until the last reconcile of the stopped version, and of every earlier version it
    /// succeeded, has ended, however long past the drain timeout that is: what must not
    /// overlap with another replica's reconciles of the same plugin waits here (`--shard`).
    /// Versions of one plugin share the set, and no newer one runs once this one stopped.
    pub async fn quiesced(&self) {
        while !self.running.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
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
            let (deleted, previous) = (shared.manifest.deliver_deleted, shared.manifest.deliver_previous);
            // Only what this version is served: its namespace and selector were reviewed, the
            // predecessor's may have been wider.
            let served = shared.served_namespaces();
            let serves = |key: &Key, entry: &informer::Entry| {
                (served.is_empty() || key.namespace.as_deref().is_some_and(|ns| served.contains(&ns)))
                    && entry.selected()
                    && entry.selected_by(&shared.selector)
            };
            for key in shared.memory.take_over(handover.remembered, (deleted, previous), serves) {
                shared.queue.add(Work::Reconcile(key));
            }
        }
        self.start(handover.running)
    }

    fn start(mut self, running: Arc<RunningKeys>) -> Controller {
        let _ = self.shared.running.set(running);
        self.shared.serving.store(true, Ordering::Relaxed);
        self.shared.plugin_metrics.queue_depth(self.shared.queue.len());
        for _ in 0..self.concurrency {
            self.tasks.push(tokio::spawn(worker::work(self.shared.clone())));
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

/// The informers a plugin reads, acquired and synced.
struct Acquired {
    primaries: Vec<Arc<Informer>>,
    owned: Vec<Arc<Informer>>,
    watched: Vec<Arc<Informer>>,
    by_kind: HashMap<Gvk, Vec<Arc<Informer>>>,
}

/// A running plugin controller.
pub struct Controller {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Controller {
    /// Acquires the plugin's informers (shared ones keep their warm caches), waits for them to
    /// sync and starts queueing keys, every primary among them, without reconciling yet. A
    /// new plugin version is prepared while the old one still serves; it runs once the old
    /// one has finished its reconciles in flight. Whatever shadow sits in `shadow` (its
    /// realm's seat for the plugin) is called beside it.
    ///
    /// # Errors
    /// When a declared kind is not served or its cache does not sync.
    pub async fn prepare(
        plugin: Plugin,
        context: &Context,
        config: ControllerConfig,
        shadow: Arc<ShadowSeat>,
    ) -> Result<Prepared, StartError> {
        let manifest = plugin.manifest().clone();
        let (scopes, client, reads) = Self::admitted(&manifest, context, &config).await?;
        let acquired = Self::acquired(&manifest, context, &scopes).await?;
        let Acquired { primaries, owned, watched, by_kind } = acquired;
        // Built off the async workers: a new index parses every object its informer holds.
        let (declared, informers_by_kind) = (manifest.indexes.clone(), by_kind.clone());
        let indexed = tokio::task::spawn_blocking(move || cache_view::indexed(&declared, &informers_by_kind))
            .await
            .expect("building indexes does not panic");
        for refused in &indexed.refused {
            tracing::warn!(plugin = %manifest.id(), "{refused}");
        }
        let selector = manifest.primary.label_selector.as_ref().map(LabelSelector::selector).unwrap_or_default();
        let concurrency = config.concurrency_for(manifest.settings.max_concurrent_reconciles);
        let resync = config.resync_for(manifest.settings.resync_seconds);
        let plugin_metrics = context.metrics.plugin(manifest.id().as_str());
        let holder = match &config.identity {
            Identity::ServiceAccount(account) => account.user(),
            Identity::Host => format!("plugin {}", manifest.id()),
        };
        let bucket = context.write_buckets.bucket_of(manifest.id().as_str(), &holder, config.write_budget);
        let executor = Arc::new(
            context
                .executor
                .acting_as(client, config.identity.to_string())
                .with_write_bucket(bucket)
                .confined_to(config.namespace.clone()),
        );
        let (deny, denied) = tokio::sync::watch::channel(None);
        let cache = CacheView { by_kind, indexes: indexed.indexes, _holds: indexed.holds, denied: denied.clone() };
        let shared = Arc::new(Shared {
            queue: WorkQueue::new(config.queue),
            selector,
            cache: Arc::new(cache),
            primaries,
            owned,
            id: manifest.id(),
            plugin,
            manifest,
            executor,
            host_executor: context.executor.clone(),
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
            memory: Memory::default(),
            reasons: Mutex::default(),
            record: context.record.clone(),
            shadow,
        });
        let watches = watched.into_iter().zip(scopes.watched.into_iter().map(|(_, selector)| selector)).collect();
        let tasks = Self::spawned(&shared, context, watches, reads, deny, resync);
        Ok(Prepared { shared, tasks, concurrency })
    }

    /// The plugin's declarations held to the operator's confinement, and its identity checked
    /// before any request is made for it: its ServiceAccount is checked, its kinds are
    /// discovered as that account, and its reads are reviewed, before any informer lists or
    /// watches on its behalf with the host's credentials.
    async fn admitted(
        manifest: &Manifest,
        context: &Context,
        config: &ControllerConfig,
    ) -> Result<(scopes::Scopes, kube::Client, Vec<Access>), StartError> {
        let confined = |(what, reason): scopes::Confined| StartError::Confined { plugin: manifest.id(), what, reason };
        if let Some(operator) = config.namespace.as_ref() {
            grants_within(manifest, operator).map_err(confined)?;
        }
        let scopes = scopes::scopes(manifest, config.namespace.as_ref()).map_err(confined)?;
        let identity_error = |source| StartError::Identity { plugin: manifest.id(), source };
        if let Identity::ServiceAccount(account) = &config.identity {
            context.identities.ensure_usable(account).await.map_err(identity_error)?;
        }
        let client = context.identities.client_for(&config.identity).map_err(identity_error)?;
        let discovery = |source| StartError::Discovery { plugin: manifest.id(), source };
        let reads = access::reads_needed(&context.kinds, &client, scopes.all()).await.map_err(discovery)?;
        if let Identity::ServiceAccount(account) = &config.identity {
            context.identities.review(account, &reads).await.map_err(identity_error)?;
        }
        Ok((scopes, client, reads))
    }

    /// The informers of every scope, shared ones with their warm caches, once all have synced.
    async fn acquired(manifest: &Manifest, context: &Context, scopes: &scopes::Scopes) -> Result<Acquired, StartError> {
        let discovery = |source| StartError::Discovery { plugin: manifest.id(), source };
        let acquire = async |list: &[InformerScope]| -> Result<Vec<Arc<Informer>>, StartError> {
            let mut acquired = Vec::new();
            for scope in list {
                acquired.push(context.informers.acquire(scope).await.map_err(discovery)?);
            }
            Ok(acquired)
        };
        let primaries = acquire(&scopes.primaries).await?;
        let owned = acquire(&scopes.owned).await?;
        let watch_scopes: Vec<InformerScope> = scopes.watched.iter().map(|(s, _)| s.clone()).collect();
        let watched = acquire(&watch_scopes).await?;
        let read = acquire(&scopes.read).await?;
        let mut by_kind: HashMap<Gvk, Vec<Arc<Informer>>> = HashMap::new();
        for informer in primaries.iter().chain(&owned).chain(&watched).chain(&read) {
            by_kind.entry(informer.scope().kind.clone()).or_default().push(informer.clone());
        }
        let every: Vec<Arc<Informer>> = by_kind.values().flatten().cloned().collect();
        if let Err(late) = informer::all_synced(&every, SYNC_TIMEOUT).await {
            return Err(StartError::NotSynced { plugin: manifest.id(), kind: late.scope().kind.to_string() });
        }
        Ok(Acquired { primaries, owned, watched, by_kind })
    }

    /// The controller's tasks: the change streams (subscribed before the first full enqueue,
    /// so no change falls between the two), the first enqueue, the lead, the review of the
    /// plugin's reads and the resync.
    fn spawned(
        shared: &Arc<Shared>,
        context: &Context,
        watches: Vec<(Arc<Informer>, Selector)>,
        reads: Vec<Access>,
        deny: tokio::sync::watch::Sender<Option<String>>,
        resync: Option<Duration>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut tasks = Vec::new();
        for informer in &shared.primaries {
            // Seeded now, beside the first enqueue below: what the plugin is queued for.
            let (changes, seen) = (informer.subscribe(), triggers::Generations::seeded(shared, informer));
            tasks.push(tokio::spawn(triggers::primary(shared.clone(), seen, changes)));
        }
        for informer in shared.owned.clone() {
            tasks.push(tokio::spawn(triggers::owned(shared.clone(), informer.subscribe())));
        }
        for (informer, selector) in watches {
            // Unselected watches of one kind share an informer; each applies its own selector.
            tasks.push(tokio::spawn(triggers::watched(shared.clone(), informer.subscribe(), selector)));
        }
        // New to this controller: each primary as first seen.
        shared.enqueue_all(first_seen);
        {
            // Taking over the lead: every primary, from the warm cache.
            let (shared, mut leading) = (shared.clone(), shared.leading.clone());
            tasks.push(tokio::spawn(async move {
                while leading.changed().await.is_ok() {
                    if *leading.borrow_and_update() {
                        shared.enqueue_all(first_seen);
                    }
                }
            }));
        }
        if let Identity::ServiceAccount(account) = &shared.config.identity {
            let review = access::review_again(shared.clone(), context.identities.clone(), account.clone(), reads, deny);
            tasks.push(tokio::spawn(review));
        }
        if let Some(every) = resync {
            let shared = shared.clone();
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    shared.enqueue_all(|_| Trigger::Resync);
                }
            }));
        }
        tasks
    }

    /// What the host knows the plugin by ([`Manifest::id`]).
    pub fn id(&self) -> &PluginId {
        &self.shared.id
    }

    /// The plugin version this controller runs.
    pub fn plugin(&self) -> &Plugin {
        &self.shared.plugin
    }

    /// Stops taking keys, waits up to `timeout` for reconciles in flight, then stops. Returns
    /// what a successor version needs to carry on.
    pub async fn shut_down(self, timeout: Duration) -> Handover {
        let shared = &self.shared;
        shared.queue.shut_down();
        if tokio::time::timeout(timeout, shared.queue.drained()).await.is_err() {
            let running = self.running_keys();
            tracing::warn!(
                plugin = %shared.id,
                objects = ?running,
                "reconciles still running after {timeout:?}; they finish in the background, and a successor version waits for them (raise shutdownTimeoutSeconds if this repeats)"
            );
        }
        // A version that stops takes its quarantine with it; its successor starts healthy.
        if shared.health.lock().expect("lock").quarantined().is_some() {
            shared.quarantines.set(shared.id.as_str(), None);
            shared.metrics.quarantined(shared.id.as_str(), false);
        }
        // Dropping `self` aborts the pumps and workers, which releases the informers.
        Handover {
            running: shared.running.get().cloned().unwrap_or_default(),
            primary: shared.manifest.primary.kind.clone(),
            remembered: shared.memory.hand_over(),
        }
    }

    fn running_keys(&self) -> Vec<String> {
        self.shared.running.get().map(|running| running.held_by(self.shared.generation)).unwrap_or_default()
    }
}

/// The trigger of a primary a controller takes over: new to it, at its generation now.
fn first_seen(entry: &informer::Entry) -> Trigger {
    Trigger::PrimaryChanged(GenerationChange { old: None, new: entry.generation() })
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.shared.queue.shut_down();
        for task in &self.tasks {
            task.abort();
        }
    }
}
