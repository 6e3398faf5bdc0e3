//! Sandbox configuration: the one place the wasmtime `Config` is decided.

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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Duration::from_secs(1),
            memory_bytes: 64 << 20,
            response_bytes: 4 << 20,
            max_actions: 10_000,
            instances: 5,
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

/// How the [`crate::Sandbox`] is built.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where compiled components are cached by content hash; none disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// How often the epoch ticks; deadlines are rounded up to whole ticks.
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
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            cache_dir: dirs::cache_dir().map(|d| d.join("wasmloop").join("components")),
            epoch_tick: Duration::from_millis(5),
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
            },
            compile_timeout: Duration::from_secs(60),
            keep_resident_bytes: 64 << 10,
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
            // Not the kernel's report of dirty pages (PAGEMAP_SCAN), though it halves a Rust
            // reconcile: wasmtime 48 resets only dirty pages that are present, so one swapped
            // out, or being migrated, keeps the last call's bytes for the next instance in the
            // slot, another plugin's included (wasmtime#14357, open). A freed memory is reset
            // whole: its first `keep_resident_bytes` copied back, the rest returned.
            .pagemap_scan(wasmtime::Enabled::No)
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
