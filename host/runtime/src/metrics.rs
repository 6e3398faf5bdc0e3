//! The host's Prometheus metrics, every name prefixed `wasmloop_`.
//!
//! One [`Metrics`] per process, shared by the informers, the controllers and the executor;
//! the binary serves [`Metrics::encode`] on `/metrics`. Labels stay bounded: plugin, kind,
//! verb, result and reason, never an object name.
//!
//! A controller resolves its plugin's series once ([`Metrics::plugin`]) and counts into the
//! handles, so a reconcile allocates no label sets and takes no family locks. A plugin's
//! series are created at zero when it starts, so a first increment shows as a change; `map`
//! calls count apart from reconciles ([`PluginMetrics::mapped`]). The reason label of a failed
//! reconcile comes from a fixed set ([`Metrics::reconcile_failed`], given the sandbox's
//! `CallFailure::metric_reason`), never from the plugin.
//!
//! The overlap counter turns "never two reconciles of one key at once" into a number a test
//! reads from a running binary: a controller keeps its own set of keys in flight
//! (`RunningKeys`), apart from the queue's book-keeping, and counts a reconcile that starts
//! while its key is in that set.
//!
//! ```
//! use wasmloop_runtime::metrics::{Metrics, Outcome};
//! let metrics = Metrics::new();
//! let plugin = metrics.plugin("foo-deployment");
//! plugin.reconciled(Outcome::Success, std::time::Duration::from_millis(3));
//! assert!(metrics.encode().contains(r#"wasmloop_reconciles_total{plugin="foo-deployment",result="success"} 1"#));
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use wasmloop_sandbox::{CpuBudget, MemoryBudget};

/// A plugin.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The plugin's name.
    pub plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    plugin: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    plugin: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    plugin: String,
    kind: String,
    verb: String,
}

/// One watch: a kind in a namespace ("" for all namespaces or a cluster-scoped kind), of whole
/// objects or their metadata only.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    /// The kind, as `group/version/Kind`.
    pub kind: String,
    /// The namespace, empty for all.
    pub namespace: String,
    /// `full`, or `metadata` for a `PartialObjectMetadata` watch.
    pub view: String,
    /// The watch's label selector, empty when it selects everything.
    pub selector: String,
}

/// A plugin and the replica that runs it (`--shard`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShardLabels {
    plugin: String,
    replica: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds_histogram() -> Histogram {
    // 100 µs to ~13 s: an instantiation is tens of µs, a slow reconcile seconds.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// The host's metrics and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ReasonLabels, Counter>,
    reconcile_duration: HistogramFamily<PluginLabels>,
    maps: Family<ResultLabels, Counter>,
    map_duration: HistogramFamily<PluginLabels>,
    in_flight: Family<PluginLabels, Gauge>,
    overlaps: Family<PluginLabels, Counter>,
    queue_depth: Family<PluginLabels, Gauge>,
    queue_retries: Family<PluginLabels, Counter>,
    watches_active: Family<WatchLabels, Gauge>,
    watches_started: Family<WatchLabels, Counter>,
    watch_relists: Family<WatchLabels, Counter>,
    actions: Family<ActionLabels, Counter>,
    plugin_loads: Family<PluginLabels, Counter>,
    plugin_rejections: Family<ReasonLabels, Counter>,
    plugins_active: Gauge,
    plugins_preparing: Gauge,
    writes_throttled: Family<PluginLabels, Counter>,
    quarantined: Family<PluginLabels, Gauge>,
    instantiate: HistogramFamily<PluginLabels>,
    shadow_reconciles: Family<ResultLabels, Counter>,
    leader: Gauge,
    shard_members: Gauge,
    shard_running: Family<ShardLabels, Gauge>,
    shard_moves: Family<ResultLabels, Counter>,
    memory_waits: Family<PluginLabels, Counter>,
    /// The label values each plugin's series were made with beyond the fixed ones, so that
    /// [`Metrics::forget_plugin`] can remove every one of them.
    seen: Mutex<HashMap<String, Seen>>,
}

/// A plugin's label values that are not from a fixed set.
#[derive(Default)]
struct Seen {
    errors: HashSet<String>,
    rejections: HashSet<String>,
    actions: HashSet<(String, String)>,
    shadows: HashSet<String>,
    replicas: HashSet<String>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Reconciles of plugin `plugin` that failed so far, retried or given up (the `retry` and
    /// `failed` series of `wasmloop_reconciles_total`); none when it has neither series (not
    /// loaded). Reading makes no series.
    ///
    /// ```
    /// use wasmloop_runtime::metrics::{Metrics, Outcome};
    /// let metrics = Metrics::new();
    /// assert_eq!(metrics.failures("hello"), None);
    /// metrics.plugin("hello").reconciled(Outcome::Retry, std::time::Duration::ZERO);
    /// assert_eq!(metrics.failures("hello"), Some(1));
    /// ```
    pub fn failures(&self, plugin: &str) -> Option<u64> {
        let count = |result: &str| {
            let labels = ResultLabels { plugin: plugin.to_owned(), result: result.to_owned() };
            self.reconciles.get(&labels).map(|counter| counter.get())
        };
        match (count("retry"), count("failed")) {
            (None, None) => None,
            (retried, failed) => Some(retried.unwrap_or(0) + failed.unwrap_or(0)),
        }
    }

    /// Every family, registered and at zero.
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("wasmloop"),
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: HistogramFamily::new_with_constructor(seconds_histogram),
            maps: Family::default(),
            map_duration: HistogramFamily::new_with_constructor(seconds_histogram),
            in_flight: Family::default(),
            overlaps: Family::default(),
            queue_depth: Family::default(),
            queue_retries: Family::default(),
            watches_active: Family::default(),
            watches_started: Family::default(),
            watch_relists: Family::default(),
            actions: Family::default(),
            plugin_loads: Family::default(),
            plugin_rejections: Family::default(),
            plugins_active: Gauge::default(),
            plugins_preparing: Gauge::default(),
            writes_throttled: Family::default(),
            quarantined: Family::default(),
            instantiate: HistogramFamily::new_with_constructor(seconds_histogram),
            shadow_reconciles: Family::default(),
            leader: Gauge::default(),
            shard_members: Gauge::default(),
            shard_running: Family::default(),
            shard_moves: Family::default(),
            memory_waits: Family::default(),
            seen: Mutex::default(),
        };
        m.register_reconciles();
        m.register_watches();
        m.register_plugins();
        m.register_host();
        m
    }

    /// Registers the families of reconciles, maps and the work queue.
    fn register_reconciles(&mut self) {
        let r = &mut self.registry;
        r.register(
            "reconciles",
            "Reconciles by plugin and result (success, retry, failed, and deferred: the host's budgets had no room, not counted against the plugin)",
            self.reconciles.clone(),
        );
        r.register(
            "reconcile_errors",
            "Failed reconciles by plugin and reason (the Warning Event's reason)",
            self.reconcile_errors.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Whole reconciles: cache read, plugin call, actions",
            self.reconcile_duration.clone(),
        );
        r.register(
            "maps",
            "Calls of a plugin's map (which primaries a watched object's change concerns), by plugin and result",
            self.maps.clone(),
        );
        r.register("map_duration_seconds", "Calls of a plugin's map", self.map_duration.clone());
        r.register("reconciles_in_flight", "Reconciles running now", self.in_flight.clone());
        r.register(
            "reconcile_overlaps",
            "Reconciles that started while another of the same object ran; the queue guarantees 0",
            self.overlaps.clone(),
        );
        r.register("queue_depth", "Keys waiting in a plugin's work queue", self.queue_depth.clone());
        r.register("queue_retries", "Keys requeued with backoff after a failure", self.queue_retries.clone());
    }

    /// Registers the families of the informers' watches.
    fn register_watches(&mut self) {
        let r = &mut self.registry;
        r.register(
            "watches_active",
            "Watches open now, by kind, namespace, view and label selector",
            self.watches_active.clone(),
        );
        r.register(
            "watches_started",
            "Watches started (shared informers start one per kind)",
            self.watches_started.clone(),
        );
        r.register(
            "watch_relists",
            "Full lists of a watch: the first, then after 410 Gone or errors",
            self.watch_relists.clone(),
        );
    }

    /// Registers the families of what plugins do and how they load.
    fn register_plugins(&mut self) {
        let r = &mut self.registry;
        r.register("actions", "Actions carried out, by plugin, kind and verb", self.actions.clone());
        r.register("plugin_loads", "Plugin versions loaded", self.plugin_loads.clone());
        r.register(
            "plugin_rejections",
            "Plugin versions refused, by plugin and reason",
            self.plugin_rejections.clone(),
        );
        r.register("plugins_active", "Plugins serving now", self.plugins_active.clone());
        r.register(
            "plugins_preparing",
            "Plugin versions compiled and preparing now: their caches syncing before they serve",
            self.plugins_preparing.clone(),
        );
        r.register(
            "writes_throttled",
            "API writes a plugin made wait for its write budget (token bucket)",
            self.writes_throttled.clone(),
        );
        r.register(
            "plugin_quarantined",
            "1 while a plugin is quarantined: its calls all failed for a sustained time",
            self.quarantined.clone(),
        );
        r.register(
            "instantiate_duration_seconds",
            "Creating a fresh guest instance for one call",
            self.instantiate.clone(),
        );
        r.register(
            "shadow_reconciles",
            "Calls of a shadow version compared with its serving version's, by plugin and result (same, differing, failed, skipped)",
            self.shadow_reconciles.clone(),
        );
    }

    /// Registers the families of the host itself: leadership, sharding, guest memory.
    fn register_host(&mut self) {
        let r = &mut self.registry;
        r.register(
            "leader",
            "1 while this host holds the leader lease (or runs without election)",
            self.leader.clone(),
        );
        r.register(
            "shard_members",
            "Live replicas this replica counts, itself included (--shard)",
            self.shard_members.clone(),
        );
        r.register(
            "shard_running",
            "1 while this replica holds the plugin's fence and runs it (--shard), by plugin and replica",
            self.shard_running.clone(),
        );
        r.register(
            "shard_moves",
            "Plugins this replica took (result=in) or handed over (result=out) (--shard)",
            self.shard_moves.clone(),
        );
        r.register(
            "guest_memory_waits",
            "Growths of a plugin's guest memory that waited for room in the host's guest memory budget",
            self.memory_waits.clone(),
        );
    }

    /// These metrics with the host's guest budgets, read at each scrape: the memory budget
    /// (`wasmloop_guest_memory_budget_bytes`, `_used_bytes`, `_waiting_calls`), when there
    /// is one, and the CPU budget (`wasmloop_guest_cpu_budget_cores`).
    #[must_use]
    pub fn budgets(mut self, memory: Option<MemoryBudget>, cpu: Arc<CpuBudget>) -> Metrics {
        self.registry.register_collector(Box::new(Budgets { memory, cpu }));
        self
    }

    /// The OpenMetrics text of every series.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }

    fn plugin_labels(plugin: &str) -> PluginLabels {
        PluginLabels { plugin: plugin.to_owned() }
    }

    /// The series of one plugin, created at zero (so that dashboards and alerts see them
    /// before the first event: a counter that appears only on its first increment hides that
    /// increment) and resolved once.
    pub fn plugin(&self, plugin: &str) -> PluginMetrics {
        let labels = Self::plugin_labels(plugin);
        let labelled = |result: Outcome| ResultLabels { plugin: plugin.into(), result: result.label().into() };
        let result = |result: Outcome| self.reconciles.get_or_create(&labelled(result)).clone();
        let map = |result: Outcome| self.maps.get_or_create(&labelled(result)).clone();
        PluginMetrics {
            queue_depth: self.queue_depth.get_or_create(&labels).clone(),
            queue_retries: self.queue_retries.get_or_create(&labels).clone(),
            in_flight: self.in_flight.get_or_create(&labels).clone(),
            overlaps: self.overlaps.get_or_create(&labels).clone(),
            duration: self.reconcile_duration.get_or_create(&labels).clone(),
            instantiate: self.instantiate.get_or_create(&labels).clone(),
            success: result(Outcome::Success),
            retry: result(Outcome::Retry),
            failed: result(Outcome::Failed),
            deferred: result(Outcome::Deferred),
            map_duration: self.map_duration.get_or_create(&labels).clone(),
            map_success: map(Outcome::Success),
            map_retry: map(Outcome::Retry),
            map_failed: map(Outcome::Failed),
            map_deferred: map(Outcome::Deferred),
            memory_waits: self.memory_waits.get_or_create(&labels).clone(),
        }
    }

    /// Removes a plugin's gauges when it stops serving, so they do not report a last value
    /// forever (counters stay: they are totals).
    pub fn plugin_stopped(&self, plugin: &str) {
        let labels = Self::plugin_labels(plugin);
        self.queue_depth.remove(&labels);
        self.in_flight.remove(&labels);
    }

    /// A reconcile failed for `reason`.
    pub fn reconcile_failed(&self, plugin: &str, reason: &str) {
        self.note(plugin, |seen| &mut seen.errors, reason);
        self.reconcile_errors.get_or_create(&ReasonLabels { plugin: plugin.into(), reason: reason.into() }).inc();
    }

    /// Remembers label value `value` of `plugin`'s series in the set `which` picks.
    fn note(&self, plugin: &str, which: impl FnOnce(&mut Seen) -> &mut HashSet<String>, value: &str) {
        let mut seen = self.seen.lock().expect("lock");
        let set = which(seen.entry(plugin.to_owned()).or_default());
        if !set.contains(value) {
            set.insert(value.to_owned());
        }
    }

    /// Removes every series of `plugin`, counters included: a plugin removed from the host (or
    /// only ever refused) leaves no series behind, so names a ConfigMap writer makes up cannot
    /// grow `/metrics` without bound. A plugin of the name loaded later starts from zero.
    pub fn forget_plugin(&self, plugin: &str) {
        let seen = self.seen.lock().expect("lock").remove(plugin).unwrap_or_default();
        let labels = Self::plugin_labels(plugin);
        for family in [&self.in_flight, &self.queue_depth, &self.quarantined] {
            family.remove(&labels);
        }
        for family in
            [&self.overlaps, &self.queue_retries, &self.plugin_loads, &self.writes_throttled, &self.memory_waits]
        {
            family.remove(&labels);
        }
        for family in [&self.reconcile_duration, &self.map_duration, &self.instantiate] {
            family.remove(&labels);
        }
        let result = |result: &str| ResultLabels { plugin: plugin.to_owned(), result: result.to_owned() };
        for outcome in [Outcome::Success, Outcome::Retry, Outcome::Failed, Outcome::Deferred] {
            self.reconciles.remove(&result(outcome.label()));
            self.maps.remove(&result(outcome.label()));
        }
        for moved in ["in", "out"] {
            self.shard_moves.remove(&result(moved));
        }
        for shadow in &seen.shadows {
            self.shadow_reconciles.remove(&result(shadow));
        }
        let reason = |reason: &String| ReasonLabels { plugin: plugin.to_owned(), reason: reason.clone() };
        for error in &seen.errors {
            self.reconcile_errors.remove(&reason(error));
        }
        for rejection in &seen.rejections {
            self.plugin_rejections.remove(&reason(rejection));
        }
        for (kind, verb) in seen.actions {
            self.actions.remove(&ActionLabels { plugin: plugin.to_owned(), kind, verb });
        }
        for replica in seen.replicas {
            self.shard_running.remove(&ShardLabels { plugin: plugin.to_owned(), replica });
        }
    }

    /// How many plugins have series now.
    pub fn plugins_seen(&self) -> usize {
        self.seen.lock().expect("lock").len()
    }

    /// A watch started.
    pub fn watch_started(&self, watch: &WatchLabels) {
        self.watches_started.get_or_create(watch).inc();
        self.watches_active.get_or_create(watch).inc();
    }

    /// A watch stopped (its last holder released it).
    pub fn watch_stopped(&self, watch: &WatchLabels) {
        self.watches_active.get_or_create(watch).dec();
    }

    /// A watch listed every object.
    pub fn relisted(&self, watch: &WatchLabels) {
        self.watch_relists.get_or_create(watch).inc();
    }

    /// An action succeeded.
    pub fn action(&self, plugin: &str, kind: &str, verb: &str) {
        {
            let mut seen = self.seen.lock().expect("lock");
            let actions = &mut seen.entry(plugin.to_owned()).or_default().actions;
            if !actions.iter().any(|(k, v)| k == kind && v == verb) {
                actions.insert((kind.to_owned(), verb.to_owned()));
            }
        }
        self.actions.get_or_create(&ActionLabels { plugin: plugin.into(), kind: kind.into(), verb: verb.into() }).inc();
    }

    /// A plugin version was loaded and now serves.
    pub fn plugin_loaded(&self, plugin: &str) {
        self.plugin_loads.get_or_create(&Self::plugin_labels(plugin)).inc();
    }

    /// A plugin version was refused.
    pub fn plugin_rejected(&self, plugin: &str, reason: &str) {
        self.note(plugin, |seen| &mut seen.rejections, reason);
        self.plugin_rejections.get_or_create(&ReasonLabels { plugin: plugin.into(), reason: reason.into() }).inc();
    }

    /// A write of `plugin` waited for its write budget.
    pub fn write_throttled(&self, plugin: &str) {
        self.writes_throttled.get_or_create(&Self::plugin_labels(plugin)).inc();
    }

    /// Whether `plugin` is quarantined.
    pub fn quarantined(&self, plugin: &str, quarantined: bool) {
        self.quarantined.get_or_create(&Self::plugin_labels(plugin)).set(i64::from(quarantined));
    }

    /// A shadow of `plugin` was compared with its serving version: `result` is `same`,
    /// `differing`, `failed` or `skipped`.
    pub fn shadow_reconciled(&self, plugin: &str, result: &str) {
        self.note(plugin, |seen| &mut seen.shadows, result);
        self.shadow_reconciles.get_or_create(&ResultLabels { plugin: plugin.into(), result: result.into() }).inc();
    }

    /// Plugins serving now.
    pub fn plugins_active(&self, count: usize) {
        self.plugins_active.set(count as i64);
    }

    /// Plugin versions preparing now.
    pub fn plugins_preparing(&self, count: usize) {
        self.plugins_preparing.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Whether this host leads.
    pub fn leader(&self, leads: bool) {
        self.leader.set(i64::from(leads));
    }

    /// The live replicas a sharded host counts.
    pub fn shard_members(&self, count: usize) {
        self.shard_members.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Whether `replica` runs `plugin` now; a move in or out is counted.
    pub fn shard_running(&self, plugin: &str, replica: &str, running: bool) {
        self.note(plugin, |seen| &mut seen.replicas, replica);
        let labels = ShardLabels { plugin: plugin.to_owned(), replica: replica.to_owned() };
        self.shard_running.get_or_create(&labels).set(i64::from(running));
        let result = if running { "in" } else { "out" };
        self.shard_moves.get_or_create(&ResultLabels { plugin: plugin.to_owned(), result: result.into() }).inc();
    }
}

/// How a reconcile ended, as the `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done; the key is forgotten.
    Success,
    /// Failed transiently; the key goes back with backoff.
    Retry,
    /// Failed permanently; the key waits for a change.
    Failed,
    /// The host's budgets had no room for the call: the key comes back shortly, and nothing
    /// is counted against the plugin.
    Deferred,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Retry => "retry",
            Outcome::Failed => "failed",
            Outcome::Deferred => "deferred",
        }
    }
}

/// The host's guest budgets, read at each scrape.
struct Budgets {
    memory: Option<MemoryBudget>,
    cpu: Arc<CpuBudget>,
}

impl std::fmt::Debug for Budgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budgets").field("cpus", &self.cpu.cores()).finish_non_exhaustive()
    }
}

impl Collector for Budgets {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut gauge = |name: &str, help: &str, value: f64| {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
        };
        if let Some(memory) = &self.memory {
            let bytes = |n: u64| n as f64;
            gauge(
                "guest_memory_budget_bytes",
                "What every guest instance's memory together may hold",
                bytes(memory.total()),
            )?;
            gauge("guest_memory_used_bytes", "Guest memory held now, all plugins", bytes(memory.used()))?;
            gauge(
                "guest_memory_waiting_calls",
                "Calls waiting now for room in the guest memory budget",
                memory.waiting() as f64,
            )?;
        }
        gauge("guest_cpu_budget_cores", "The CPUs guest code may use, all plugins together", self.cpu.cores())
    }
}

/// One plugin's series, resolved once: counting into them is an atomic operation.
#[derive(Debug, Clone)]
pub struct PluginMetrics {
    queue_depth: Gauge,
    queue_retries: Counter,
    in_flight: Gauge,
    overlaps: Counter,
    duration: Histogram,
    instantiate: Histogram,
    success: Counter,
    retry: Counter,
    failed: Counter,
    deferred: Counter,
    map_duration: Histogram,
    map_success: Counter,
    map_retry: Counter,
    map_failed: Counter,
    map_deferred: Counter,
    memory_waits: Counter,
}

impl PluginMetrics {
    /// The plugin's queue holds `depth` keys.
    pub fn queue_depth(&self, depth: usize) {
        self.queue_depth.set(depth as i64);
    }

    /// A key went back to the queue with backoff.
    pub fn retried(&self) {
        self.queue_retries.inc();
    }

    /// A reconcile started (`+1`) or ended (`-1`).
    pub fn in_flight(&self, delta: i64) {
        self.in_flight.inc_by(delta);
    }

    /// A reconcile started while another of the same key ran.
    pub fn overlapped(&self) {
        self.overlaps.inc();
    }

    /// A reconcile ended with `outcome` after `took`.
    pub fn reconciled(&self, outcome: Outcome, took: Duration) {
        match outcome {
            Outcome::Success => &self.success,
            Outcome::Retry => &self.retry,
            Outcome::Failed => &self.failed,
            Outcome::Deferred => &self.deferred,
        }
        .inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// A `map` call ended with `outcome` after `took`.
    pub fn mapped(&self, outcome: Outcome, took: Duration) {
        match outcome {
            Outcome::Success => &self.map_success,
            Outcome::Retry => &self.map_retry,
            Outcome::Failed => &self.map_failed,
            Outcome::Deferred => &self.map_deferred,
        }
        .inc();
        self.map_duration.observe(took.as_secs_f64());
    }

    /// A guest instance took `took` to create.
    pub fn instantiated(&self, took: Duration) {
        self.instantiate.observe(took.as_secs_f64());
    }

    /// A call's memory growths waited `waits` times for room in the guest memory budget.
    pub fn memory_waited(&self, waits: u32) {
        self.memory_waits.inc_by(u64::from(waits));
    }
}

#[cfg(test)]
mod tests;
