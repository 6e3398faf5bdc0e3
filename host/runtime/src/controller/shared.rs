//! What one version of a plugin's controller shares between its triggers and workers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use wasmloop_sandbox::{Manifest, Plugin, Selector};

use super::cache_view::CacheView;
use super::config::ControllerConfig;
use super::memory::{Memory, RunningKeys};
use super::work::{Work, key_of};
use crate::executor::Executor;
use crate::informer::Informer;
use crate::metrics::{Metrics, PluginMetrics};
use crate::quarantine::{Board, Health};
use crate::queue::WorkQueue;
use crate::record::CaseSink;
use crate::shadow::ShadowSeat;

/// One version of a plugin's controller, as its tasks see it.
pub(super) struct Shared {
    /// What the host knows the plugin by ([`Manifest::id`]): its metrics, quarantine and log
    /// lines say this.
    pub(super) id: String,
    pub(super) plugin: Plugin,
    pub(super) manifest: Manifest,
    pub(super) selector: Selector,
    pub(super) primary: Arc<Informer>,
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
    /// Where each reconcile is recorded, if anywhere.
    pub(super) record: Option<CaseSink>,
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

    /// Every primary the plugin selects, from the cache.
    pub(super) fn enqueue_all(&self) {
        for entry in self.primary.list(self.primary.scope().namespace.as_deref(), &self.selector) {
            self.enqueue(Work::Reconcile(key_of(&entry.envelope)));
        }
    }
}
