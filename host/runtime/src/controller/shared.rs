//! What one version of a plugin's controller shares between its triggers and workers: the
//! plugin, its manifest, informers, cache view, queue, executors, health, memory and settings.
//! A standby keeps its caches warm but queues nothing (`Shared::enqueue`); on taking the lead
//! it enqueues every primary from its cache, so nothing stands between the Lease and a
//! reconcile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use wasmloop_sandbox::PluginId;

use wasmloop_sandbox::{Manifest, Plugin, Selector, Trigger};

use super::cache_view::CacheView;
use super::config::ControllerConfig;
use super::memory::{Memory, RunningKeys};
use super::reasons::Reasons;
use super::work::{Key, Work, key_of};
use crate::executor::Executor;
use crate::informer::{Entry, Informer};
use crate::metrics::{Metrics, PluginMetrics};
use crate::quarantine::{Board, Health};
use crate::queue::WorkQueue;
use crate::record::Recorder;
use crate::shadow::ShadowSeat;

/// One version of a plugin's controller, as its tasks see it.
pub(super) struct Shared {
    /// What the host knows the plugin by ([`Manifest::id`]): its metrics, quarantine and log
    /// lines say this.
    pub(super) id: PluginId,
    pub(super) plugin: Plugin,
    pub(super) manifest: Manifest,
    pub(super) selector: Selector,
    /// The primary kind's informers: one per namespace the plugin is served (one for all).
    pub(super) primaries: Vec<Arc<Informer>>,
    pub(super) owned: Vec<Arc<Informer>>,
    pub(super) cache: Arc<CacheView>,
    pub(super) queue: WorkQueue<Work>,
    /// Writes as the plugin's identity.
    pub(super) executor: Arc<Executor>,
    /// Writes as the host: Events about the plugin's failures, which its identity may not be
    /// allowed to write.
    pub(super) host_executor: Arc<Executor>,
    /// Why the plugin may not be served its caches now (a revoked grant); none while it may.
    pub(super) denied: tokio::sync::watch::Receiver<Option<String>>,
    /// Whether its guest calls keep failing, and its quarantine.
    pub(super) health: Mutex<Health>,
    /// The host's list of quarantined plugins.
    pub(super) quarantines: Arc<Board>,
    pub(super) metrics: Arc<Metrics>,
    /// This plugin's series, resolved once.
    pub(super) plugin_metrics: PluginMetrics,
    pub(super) leading: tokio::sync::watch::Receiver<bool>,
    pub(super) config: ControllerConfig,
    /// Tells this version's reconciles from its predecessors'.
    pub(super) generation: u64,
    /// Set when the workers start: fresh, or handed over by the previous version.
    pub(super) running: OnceLock<Arc<RunningKeys>>,
    /// True once the workers run; a prepared version's queue is not yet the plugin's.
    pub(super) serving: AtomicBool,
    pub(super) memory: Memory,
    /// Why each waiting key will run.
    pub(super) reasons: Mutex<Reasons<Key>>,
    /// Where each reconcile is recorded, if anywhere.
    pub(super) record: Option<Recorder>,
    /// The candidate version called beside this one, if any.
    pub(super) shadow: Arc<ShadowSeat>,
}

impl Shared {
    pub(super) fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    pub(super) fn enqueue(&self, work: Work) {
        // A standby keeps its cache, not a backlog: on taking over it enqueues every primary.
        if !self.leads() {
            return;
        }
        self.queue.add(work);
        if self.serving.load(Ordering::Relaxed) {
            self.plugin_metrics.queue_depth(self.queue.len());
        }
    }

    /// Queues the primary `key`, for `trigger`.
    pub(super) fn enqueue_because(&self, key: Key, trigger: Trigger) {
        if !self.leads() {
            return;
        }
        self.reasons.lock().expect("lock").add(key.clone(), trigger);
        self.enqueue(Work::Reconcile(key));
    }

    /// Every primary the plugin selects, from the cache, each for the trigger `why` gives it.
    pub(super) fn enqueue_all(&self, why: impl Fn(&Entry) -> Trigger) {
        for informer in &self.primaries {
            for entry in informer.list(None, &self.selector) {
                if entry.selected() {
                    self.enqueue_because(key_of(&entry.envelope), why(&entry));
                }
            }
        }
    }

    /// The primary at `key`, from whichever informer serves its namespace.
    pub(super) fn primary(&self, key: &Key) -> Option<Arc<Entry>> {
        self.primaries.iter().find_map(|i| i.get(key.namespace.as_deref(), &key.name))
    }

    /// True for a namespaced primary kind.
    pub(super) fn primary_namespaced(&self) -> bool {
        self.primaries.first().is_some_and(|i| i.namespaced())
    }

    /// The namespaces the plugin's primaries are served from; empty for every namespace.
    pub(super) fn served_namespaces(&self) -> Vec<&str> {
        if !self.primary_namespaced() {
            return Vec::new();
        }
        let namespaces: Option<Vec<&str>> = self.primaries.iter().map(|i| i.scope().namespace.as_deref()).collect();
        namespaces.unwrap_or_default()
    }
}
