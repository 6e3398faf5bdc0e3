//! What a sandbox shares with the plugins it loaded: the Engine, the configuration, the
//! instance pool and the host-wide budgets of guest memory and CPU. Kept apart from `sandbox` so that a plugin holds only this, not the linker
//! and the compile cache, and `plugin` need not reach back into `sandbox`.

use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use wasmtime::Engine;

use crate::config::SandboxConfig;
use crate::cpu_budget::CpuBudget;
use crate::guest_threads::GuestThreads;
use crate::memory_budget::MemoryBudget;

/// The Engine and the instance pool, shared by a sandbox and every plugin it loaded.
pub(crate) struct Pool {
    pub(crate) engine: Engine,
    pub(crate) config: SandboxConfig,
    /// Slots for loads and for plugins without a quota of their own.
    pub(crate) loading: Arc<Semaphore>,
    /// Instances of the pool that no plugin has reserved.
    free: Mutex<usize>,
    /// What all instances' memories together may hold, when bounded.
    pub(crate) memory: Option<MemoryBudget>,
    /// What all guest code together may run.
    pub(crate) cpu: Arc<CpuBudget>,
    /// Where computing guests run, when apart from the caller's runtime.
    pub(crate) guests: Option<GuestThreads>,
}

impl Pool {
    /// Sets aside the loading slots (at least one, at most the whole pool); the rest is free
    /// for plugins to reserve.
    pub(crate) fn new(engine: Engine, config: SandboxConfig) -> std::io::Result<Pool> {
        let loading = config.loading_instances.clamp(1, config.max_instances);
        let threads = config.guest_cpus.ceil().clamp(1.0, 1024.0) as usize;
        let guests = config.guest_threads.then(|| GuestThreads::new(threads)).transpose()?;
        Ok(Pool {
            engine,
            free: Mutex::new((config.max_instances - loading) as usize),
            loading: Arc::new(Semaphore::new(loading as usize)),
            memory: config.guest_memory_bytes.map(|bytes| MemoryBudget::new(bytes, config.guest_memory_wait)),
            cpu: Arc::new(CpuBudget::new(config.guest_cpus, config.epoch_tick)),
            guests,
            config,
        })
    }

    /// Takes `wanted` instances from the free ones.
    ///
    /// # Errors
    /// How many are free, when fewer than `wanted`; nothing is taken then.
    pub(crate) fn reserve(self: &Arc<Pool>, wanted: usize) -> Result<Reservation, usize> {
        let mut free = self.free.lock().expect("lock");
        if *free < wanted {
            return Err(*free);
        }
        *free -= wanted;
        drop(free);
        Ok(Reservation { pool: self.clone(), instances: wanted })
    }
}

/// A plugin's share of the instance pool, given back when the plugin is dropped.
pub(crate) struct Reservation {
    pool: Arc<Pool>,
    instances: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        *self.pool.free.lock().expect("lock") += self.instances;
    }
}
