//! Sandbox configuration: the one place the wasmtime `Config` is decided.
//!
//! - **One Engine** (`SandboxConfig::wasmtime_config`): the component model, epoch
//!   interruption, and a pooling allocator sized from `max_instances` (`host.yaml`
//!   `sandbox.maxInstances`) and the largest memory a plugin may get. No guest uses
//!   component-model async, so its bookkeeping is off; calls are futures all the same.
//! - **A freed memory is reset page by page**: the kernel reports the pages that hold data,
//!   present or swapped, other than the zero page and the image's own file pages
//!   (`PAGEMAP_SCAN`, Linux 6.7 and later): the pages the call dirtied, and those an earlier
//!   reset kept resident. The first `keep_resident_bytes` of them are copied back from the
//!   memory image in place, and only the rest go back to the kernel, so pages never touched
//!   cost nothing: a Rust reconcile took 54 µs with the memory returned whole, 29 µs with
//!   the scan (`docs/benchmarks.md`). wasmtime 48's scan skipped written pages that were
//!   swapped out or being migrated, leaving the last call's bytes to the next instance in the
//!   slot (wasmtime#14357); the workspace builds 48.0.8 with 50.0.1's scan, asking for pages
//!   present or swapped rather than "written" (`host/vendor/wasmtime/WASMLOOP-PATCH.md`), and
//!   `tests/isolation.rs` pages a guest out mid-call to check it. Before Linux 6.7 a freed
//!   memory is reset whole.
//! - **Keeping more resident is the operator's trade** (`--keep-resident-bytes`, at most
//!   [`MAX_KEEP_RESIDENT_BYTES`]): every slot a call has used keeps that much, copied back on
//!   every reset, and the host logs that worst case at start. With the whole-memory reset
//!   16 MiB took a Python reconcile from 2.5 to 1.1 ms; with the scan, 1 and 4 MiB were no
//!   faster for Rust than 64 KiB (`docs/benchmarks.md`).
//! - **Settings win in this order**: the operator's explicit setting (the command line's
//!   limits, for every plugin), then the plugin's proposal held to the operator's ceilings
//!   (`SandboxConfig::ceilings`: 10 s, 256 MiB, 16 MiB of response), then the default.

use std::path::PathBuf;
use std::time::Duration;

/// Per-call limits. A plugin's manifest may propose values; the operator's settings win.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one guest call, host calls included.
    pub deadline: Duration,
    /// Linear-memory ceiling of one instance, in bytes.
    pub memory_bytes: usize,
    /// Largest response, summed over every string in it (counted each time it is used), in
    /// bytes.
    pub response_bytes: usize,
    /// Most actions in one response (and references in one `map` result).
    pub max_actions: usize,
    /// Instances of this plugin alive at once: one per worker of its controller. Calls past it
    /// wait for a slot of their own plugin.
    pub instances: usize,
    /// The plugin's weight in the host's CPU budget: running beside others, it gets this many
    /// parts of the guests' CPU for each part a plugin of weight 1 gets.
    pub cpu_weight: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            response_bytes: 4 << 20,
            max_actions: 10_000,
            instances: 5,
            cpu_weight: 1,
        }
    }
}

impl Limits {
    /// Sets the deadline.
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the memory ceiling.
    #[must_use]
    pub fn memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Sets the response cap.
    #[must_use]
    pub fn response_bytes(mut self, bytes: usize) -> Self {
        self.response_bytes = bytes;
        self
    }

    /// Sets the action limit.
    #[must_use]
    pub fn max_actions(mut self, n: usize) -> Self {
        self.max_actions = n;
        self
    }

    /// Sets the instance quota.
    #[must_use]
    pub fn instances(mut self, n: usize) -> Self {
        self.instances = n;
        self
    }

    /// Sets the CPU weight (at least 1).
    #[must_use]
    pub fn cpu_weight(mut self, weight: u32) -> Self {
        self.cpu_weight = weight.max(1);
        self
    }

    /// Within what the sandbox can hold: memory within a pool slot, at least one instance and
    /// no more than the pool.
    pub(crate) fn clamp_to(mut self, config: &SandboxConfig) -> Limits {
        if self.memory_bytes > config.max_memory_bytes {
            tracing::warn!(
                requested = self.memory_bytes,
                max_memory = config.max_memory_bytes,
                "memory limit above the sandbox maximum; using the maximum"
            );
            self.memory_bytes = config.max_memory_bytes;
        }
        self.instances = self.instances.clamp(1, config.max_instances as usize);
        self
    }
}

/// The most of the host's guest memory budget one plugin may hold, its shadow included, in
/// quarters: the rest stays for every other plugin, so a tenant filling all it may still
/// leaves a quarter of the budget to the others.
pub const PLUGIN_SHARE_QUARTERS: u64 = 3;

/// What one plugin may hold of a guest memory budget of `budget` bytes
/// ([`PLUGIN_SHARE_QUARTERS`]).
pub fn plugin_room(budget: u64) -> u64 {
    budget / 4 * PLUGIN_SHARE_QUARTERS
}

/// How a plugin's limits were cut to fit the host's guest memory budget: its memory ceiling
/// and its response cap (the host's copy of what a call returns) times its instances must fit
/// in what one plugin may hold ([`plugin_room`]), or the plugin alone could fill the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capped {
    /// The budget, in bytes.
    pub budget: u64,
    /// The memory ceiling asked for, and given.
    pub memory_bytes: (usize, usize),
    /// The response cap, which each instance's call may make the host copy.
    pub response_bytes: usize,
    /// The instances (workers) asked for, and given.
    pub instances: (usize, usize),
}

impl std::fmt::Display for Capped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |bytes: usize| bytes >> 20;
        let ((memory, memory_given), (instances, instances_given)) = (self.memory_bytes, self.instances);
        write!(
            f,
            "its memory limit of {} MiB and response limit of {} MiB, times {instances} concurrent reconciles, exceed the {} MiB one plugin may hold of the host's guest memory budget of {} MiB, so it runs with ",
            mib(memory),
            mib(self.response_bytes),
            plugin_room(self.budget) >> 20,
            self.budget >> 20
        )?;
        if memory_given < memory {
            write!(f, "a memory limit of {} MiB and ", mib(memory_given))?;
        }
        write!(
            f,
            "{instances_given} concurrent reconcile{}; lower memoryLimitBytes, responseLimitBytes or maxConcurrentReconciles, or give the host more memory",
            if instances_given == 1 { "" } else { "s" }
        )
    }
}

impl Limits {
    /// These limits within a guest memory budget of `budget` bytes: the memory ceiling no
    /// more than what one plugin may hold of it ([`plugin_room`]), and no more instances than
    /// ceilings and response caps that fit there (at least one). Says what was cut, when
    /// anything was.
    pub fn fit(self, budget: u64) -> (Limits, Option<Capped>) {
        let room = usize::try_from(plugin_room(budget)).unwrap_or(usize::MAX).max(1);
        let memory = self.memory_bytes.min(room).max(1);
        let per_instance = memory.saturating_add(self.response_bytes).max(1);
        let instances = self.instances.min(room / per_instance).max(1);
        let fitted = Limits { memory_bytes: memory, instances, ..self };
        let capped = (fitted != self).then_some(Capped {
            budget,
            memory_bytes: (self.memory_bytes, memory),
            response_bytes: self.response_bytes,
            instances: (self.instances, instances),
        });
        (fitted, capped)
    }
}

/// How the [`crate::Sandbox`] is built.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where compiled components are cached by content hash; none disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// How often the epoch ticks; deadlines are rounded up to whole ticks. A guest in wasm code
    /// yields to the async runtime at every tick, so this is the longest slice a spinning guest
    /// holds a runtime thread: 1 ms, so that the host's own tasks (a watch event, a write's
    /// reply), queued behind a few spinning guests, wait a few milliseconds at most on a
    /// one-CPU pod (`docs/benchmarks.md`, fairness).
    pub epoch_tick: Duration,
    /// Guest instances that may be alive at once, across all plugins: the pool. Each plugin
    /// reserves its quota ([`Limits::instances`]) from it when it is given its limits, and
    /// [`SandboxConfig::loading_instances`] of it serve loads and offline calls.
    pub max_instances: u32,
    /// Instances kept for loading plugins (reading manifests) and for calls of plugins that
    /// hold no quota of their own.
    pub loading_instances: u32,
    /// The largest memory ceiling any plugin may get; sizes the pooling allocator's slots.
    pub max_memory_bytes: usize,
    /// Limits for plugins that neither propose nor are given their own.
    pub default_limits: Limits,
    /// The most a plugin may propose for itself; an operator's explicit per-plugin setting
    /// is not held to these.
    pub ceilings: Limits,
    /// How long compiling one component may take before the load is refused.
    pub compile_timeout: Duration,
    /// Bytes at the start of each freed instance memory that are reset in place (copied back
    /// from the memory image) instead of being returned to the kernel: the next instance then
    /// finds them without page faults, and the pool slot keeps them resident while idle. At
    /// most [`MAX_KEEP_RESIDENT_BYTES`]; 64 KiB by default (`docs/benchmarks.md` measures
    /// others).
    pub keep_resident_bytes: usize,
    /// The bytes of linear memory all instances alive together may hold (see
    /// [`crate::MemoryBudget`]); none sets no host-wide bound (offline commands, tests).
    pub guest_memory_bytes: Option<u64>,
    /// How long a growth waits for room in the guest memory budget before its call fails as
    /// host pressure.
    pub guest_memory_wait: Duration,
    /// The CPUs guest code may use, all plugins together (see [`crate::CpuBudget`]).
    pub guest_cpus: f64,
    /// Run the calls of plugins seen to compute past an epoch tick on threads of their own, one
    /// per CPU of [`SandboxConfig::guest_cpus`] (rounded up), apart from the caller's async
    /// runtime: a host serving a cluster, whose own tasks must not queue behind guests.
    pub guest_threads: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            cache_dir: dirs::cache_dir().map(|d| d.join("wasmloop").join("components")),
            epoch_tick: Duration::from_millis(1),
            max_instances: 256,
            loading_instances: 4,
            max_memory_bytes: 256 << 20,
            default_limits: Limits::default(),
            ceilings: Limits {
                deadline: Duration::from_secs(10),
                memory_bytes: 256 << 20,
                response_bytes: 16 << 20,
                max_actions: 10_000,
                instances: 17,
                cpu_weight: 1,
            },
            compile_timeout: Duration::from_secs(60),
            keep_resident_bytes: 64 << 10,
            guest_memory_bytes: None,
            guest_memory_wait: Duration::from_secs(30),
            guest_cpus: 1.0,
            guest_threads: false,
        }
    }
}

/// The most of each freed memory [`SandboxConfig::keep_resident_bytes`] may keep: every pool
/// slot a call has used keeps that much resident, so the worst case is this times
/// [`SandboxConfig::memory_slots`].
pub const MAX_KEEP_RESIDENT_BYTES: usize = 16 << 20;

impl SandboxConfig {
    /// Sets or disables the compile cache directory.
    #[must_use]
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Sets the ceilings of what plugins may propose.
    #[must_use]
    pub fn ceilings(mut self, limits: Limits) -> Self {
        self.ceilings = limits;
        self
    }

    /// Sets the compile timeout.
    #[must_use]
    pub fn compile_timeout(mut self, timeout: Duration) -> Self {
        self.compile_timeout = timeout;
        self
    }

    /// Sets the default limits.
    #[must_use]
    pub fn default_limits(mut self, limits: Limits) -> Self {
        self.default_limits = limits;
        self
    }

    /// Sets how much of each freed memory stays resident, at most
    /// [`MAX_KEEP_RESIDENT_BYTES`].
    #[must_use]
    pub fn keep_resident_bytes(mut self, bytes: usize) -> Self {
        self.keep_resident_bytes = bytes;
        self
    }

    /// What a freed memory keeps: [`SandboxConfig::keep_resident_bytes`], held to
    /// [`MAX_KEEP_RESIDENT_BYTES`] here, the one place, since the field is public.
    pub fn kept_resident_bytes(&self) -> usize {
        self.keep_resident_bytes.min(MAX_KEEP_RESIDENT_BYTES)
    }

    /// How many instance memories the pool holds: with [`SandboxConfig::keep_resident_bytes`],
    /// what freed memories may keep resident at most.
    pub fn memory_slots(&self) -> u32 {
        self.max_instances * 2
    }

    /// Sets the guest memory budget: none for no host-wide bound.
    #[must_use]
    pub fn guest_memory_bytes(mut self, bytes: Option<u64>) -> Self {
        self.guest_memory_bytes = bytes;
        self
    }

    /// Sets the CPUs guest code may use, all plugins together.
    #[must_use]
    pub fn guest_cpus(mut self, cpus: f64) -> Self {
        self.guest_cpus = cpus;
        self
    }

    /// Runs computing guests on threads of their own ([`SandboxConfig::guest_threads`]).
    #[must_use]
    pub fn guest_threads(mut self, apart: bool) -> Self {
        self.guest_threads = apart;
        self
    }

    /// Sets how many instances may be alive at once.
    #[must_use]
    pub fn max_instances(mut self, n: u32) -> Self {
        self.max_instances = n;
        self
    }

    pub(crate) fn wasmtime_config(&self) -> wasmtime::Config {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(self.max_instances)
            .total_stacks(self.max_instances)
            // A Rust component holds a few core instances and up to two memories and tables.
            .total_core_instances(self.max_instances * 8)
            .total_memories(self.memory_slots())
            .total_tables(self.max_instances * 4)
            .max_memory_size(self.max_memory_bytes)
            // Only pages holding data, present or swapped, are reset: see the module docs for
            // the patched scan.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(self.kept_resident_bytes())
            .table_keep_resident(self.kept_resident_bytes().min(64 << 10));
        let mut config = wasmtime::Config::new();
        config
            .wasm_component_model(true)
            // Calls are futures (see `plugin`), but no guest uses component-model async: leave
            // its per-call bookkeeping off.
            .concurrency_support(false)
            .epoch_interruption(true)
            .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn limits_are_cut_to_what_one_plugin_may_hold_of_the_guest_memory_budget() {
        // A 4 MiB response cap (the default) per instance, within 3/4 of the budget.
        let limits = |memory, instances| Limits::default().memory_bytes(memory).instances(instances);
        let cases = [
            // What fits is left alone: 4 × (64 + 4) = 272 of 288.
            (limits(64 * MIB, 4), 384, limits(64 * MIB, 4)),
            // Too many ceilings: fewer instances; 240 / (80 + 4) = 2.
            (limits(80 * MIB, 4), 320, limits(80 * MIB, 2)),
            (limits(256 * MIB, 4), 384, limits(256 * MIB, 1)),
            // One ceiling past what a plugin may hold: the ceiling is that, one instance.
            (limits(256 * MIB, 4), 320, limits(240 * MIB, 1)),
        ];
        for (asked, budget_mib, expected) in cases {
            let (fitted, capped) = asked.fit(budget_mib << 20);
            assert_eq!(fitted, expected, "{asked:?} in {budget_mib} MiB");
            assert_eq!(capped.is_some(), asked != expected, "{asked:?} in {budget_mib} MiB");
        }
    }

    #[test]
    fn a_cut_says_what_it_cut_and_what_to_do() {
        let (_, capped) = Limits::default().memory_bytes(256 * MIB).instances(4).fit(320 << 20);
        assert_eq!(
            capped.unwrap().to_string(),
            "its memory limit of 256 MiB and response limit of 4 MiB, times 4 concurrent reconciles, exceed the 240 MiB one plugin may hold of the host's guest memory budget of 320 MiB, so it runs with a memory limit of 240 MiB and 1 concurrent reconcile; lower memoryLimitBytes, responseLimitBytes or maxConcurrentReconciles, or give the host more memory"
        );
    }
}
