//! What a sandbox shares with the plugins it loaded: the Engine, the configuration and the
//! instance pool. Kept apart from `sandbox` so that a plugin holds only this, not the linker
//! and the compile cache, and `plugin` need not reach back into `sandbox`.

use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use wasmtime::Engine;

use crate::config::SandboxConfig;

/// The Engine and the instance pool, shared by a sandbox and every plugin it loaded.
pub(crate) struct Pool {
    pub(crate) engine: Engine,
    pub(crate) config: SandboxConfig,
    /// Slots for loads and for plugins without a quota of their own.
    pub(crate) loading: Arc<Semaphore>,
    /// Instances of the pool that no plugin has reserved.
    free: Mutex<usize>,
}

impl Pool {
    /// Sets aside the loading slots (at least one, at most the whole pool); the rest is free
    /// for plugins to reserve.
    pub(crate) fn new(engine: Engine, config: SandboxConfig) -> Pool {
        let loading = config.loading_instances.clamp(1, config.max_instances);
        Pool {
            engine,
            free: Mutex::new((config.max_instances - loading) as usize),
            loading: Arc::new(Semaphore::new(loading as usize)),
            config,
        }
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
