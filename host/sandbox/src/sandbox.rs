//! The sandbox: one Engine, its epoch ticker, the Linker, the compile cache, and loading.
//!
//! - **The ticker** (`start_ticker`, a thread) increments the epoch every tick (1 ms) while a
//!   call runs, parks while none does (a call's start wakes it), and stops when the Engine is
//!   dropped. Without it epoch deadlines never fire (astrid #633).
//! - **Load** ([`Sandbox::load`]): classify the preamble (component, core module, not wasm) →
//!   compile, or deserialize from the cache, on a blocking thread, one compile at a time,
//!   within `compile_timeout` (60 s) → check the contract version and find the plugin
//!   interface's exports → `instantiate_pre` (a missing import, such as `wasi:http`, fails
//!   here, with a message) → call `manifest` in a fresh instance (at most 256 kinds and 64 KiB
//!   of strings) and `keep-fields` when exported → validate both (`Manifest::from_wit`). Until
//!   [`Sandbox::reserve`] gives a plugin its quota of the instance pool, its calls share the
//!   `loading_instances` (4), as offline calls do.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::Reconciler;
use crate::compile_cache::{self, CompileCache};
use crate::config::{Limits, SandboxConfig};
use crate::contract::{self, Binary, Mismatch};
use crate::error::LoadError;
use crate::host_services::EmptyHost;
use crate::manifest::Manifest;
use crate::plugin::{CallSetup, Exports, Plugin, PluginInner};
use crate::pool::Pool;
use crate::state::State;

/// The plugin sandbox. Cheap to clone; all clones share one Engine.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<SandboxInner>,
}

struct SandboxInner {
    /// Shared with every plugin loaded here, which needs nothing else of the sandbox.
    pool: Arc<Pool>,
    linker: Linker<State>,
    cache: Arc<CompileCache>,
    /// One compile at a time: a flood of candidates queues instead of taking every core.
    compiling: Arc<Semaphore>,
}

/// Ticks the engine's epoch so deadlines fire even in a guest that never yields, while a call
/// runs: an idle host does not wake every millisecond. Stops when the engine is dropped.
fn start_ticker(engine: &Engine, tick: Duration, cpu: Arc<crate::CpuBudget>) -> std::io::Result<()> {
    let weak = engine.weak();
    let budget = cpu.clone();
    let ticker = std::thread::Builder::new().name("wasmloop-epoch".into()).spawn(move || {
        while let Some(engine) = weak.upgrade() {
            engine.increment_epoch();
            drop(engine);
            match budget.idle() {
                // Woken when a call starts; the second is for noticing the engine gone.
                true => std::thread::park_timeout(Duration::from_secs(1)),
                false => std::thread::sleep(tick),
            }
        }
    })?;
    cpu.ticked_by(ticker.thread().clone());
    Ok(())
}

impl Sandbox {
    /// Builds the Engine, its ticker and the Linker.
    ///
    /// # Errors
    /// When wasmtime rejects the configuration (for example, a pool larger than the address
    /// space allows) or the ticker thread cannot start.
    pub fn new(config: SandboxConfig) -> wasmtime::Result<Sandbox> {
        let engine = Engine::new(&config.wasmtime_config())?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        Reconciler::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)?;
        crate::bindings::v0_2::Reconciler::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)?;
        crate::bindings::v0_1::Reconciler::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)?;
        let cache = Arc::new(CompileCache::new(config.cache_dir.clone()));
        let pool = Arc::new(Pool::new(engine, config)?);
        start_ticker(&pool.engine, pool.config.epoch_tick, pool.cpu.clone())?;
        let inner = SandboxInner { pool, linker, cache, compiling: Arc::new(Semaphore::new(1)) };
        Ok(Sandbox { inner: Arc::new(inner) })
    }

    /// The shared Engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.pool.engine
    }

    /// Compiles off the async workers, one component at a time, within the compile timeout.
    /// A compile that overruns keeps its thread until Cranelift is done (it cannot be
    /// interrupted) and holds the compile slot meanwhile, so overruns cannot pile up.
    /// Returns the component, how the cache served it, and the bytes' digest (hashed here too:
    /// a pulled component may weigh 64 MiB).
    async fn compile(
        &self,
        bytes: &Bytes,
        origin: &str,
    ) -> Result<(wasmtime::component::Component, compile_cache::CacheOutcome, String), LoadError> {
        let permit = self.inner.compiling.clone().acquire_owned().await.expect("never closed");
        let (engine, cache) = (self.inner.pool.engine.clone(), self.inner.cache.clone());
        let bytes = bytes.clone();
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let digest = compile_cache::digest(&bytes);
            cache.load(&engine, &bytes, &digest).map(|(component, cached)| (component, cached, digest))
        });
        let timeout = self.inner.pool.config.compile_timeout;
        match tokio::time::timeout(timeout, task).await {
            Ok(Ok(result)) => result.map_err(|source| LoadError::Compile { origin: origin.to_owned(), source }),
            Ok(Err(join)) => Err(LoadError::Compile {
                origin: origin.to_owned(),
                source: wasmtime::Error::msg(format!("the compiler panicked: {join}")),
            }),
            Err(_) => Err(LoadError::CompileTimeout { origin: origin.to_owned(), timeout }),
        }
    }

    /// Loads a component: checks it is a component for a compatible contract, compiles it
    /// (or takes it from the compile cache), links it and reads its manifest. `origin` names
    /// the source (a path, a ConfigMap) in errors. The plugin holds no instance quota yet:
    /// its calls share the sandbox's loading slots until [`Sandbox::reserve`] gives it one.
    ///
    /// # Errors
    /// A [`LoadError`] naming `origin`, the problem and the fix.
    pub async fn load(&self, bytes: &[u8], origin: &str) -> Result<Plugin, LoadError> {
        self.load_shared(Bytes::copy_from_slice(bytes), origin).await
    }

    /// [`Sandbox::load`] of bytes shared with the caller: nothing is copied, and the caller's
    /// bytes go when both let go of them (a host of many loads holds each component once).
    ///
    /// # Errors
    /// As [`Sandbox::load`].
    pub async fn load_shared(&self, bytes: Bytes, origin: &str) -> Result<Plugin, LoadError> {
        let started = Instant::now();
        let origin_owned = || origin.to_owned();
        match contract::classify(&bytes) {
            Binary::Component => {}
            Binary::CoreModule => return Err(LoadError::CoreModule { origin: origin_owned() }),
            Binary::NotWasm => return Err(LoadError::NotWasm { origin: origin_owned() }),
        }
        let (component, cached, digest) = self.compile(&bytes, origin).await?;
        // Compiled: the bytes are not needed any more, and a load that now waits (its manifest
        // call, a cache sync) must not hold them.
        drop(bytes);
        let (interface, contract) = contract::check(&self.inner.pool.engine, &component).map_err(|m| match m {
            Mismatch::Version { found } => LoadError::IncompatibleContract { origin: origin_owned(), found },
            Mismatch::Mixed { found } => LoadError::MixedContract { origin: origin_owned(), found },
            Mismatch::NotAPlugin { exports } => LoadError::NotAPlugin { origin: origin_owned(), exports },
        })?;
        let exports = Exports::find(&component, &interface, contract)
            .map_err(|reason| LoadError::NotAPlugin { origin: origin_owned(), exports: vec![reason] })?;
        let pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(|source| LoadError::Link { origin: origin_owned(), source })?;
        let config = &self.inner.pool.config;
        let setup = CallSetup {
            pool: self.inner.pool.clone(),
            pre,
            exports: Arc::new(exports),
            limits: config.default_limits,
            name: Arc::from(origin),
            slots: self.inner.pool.loading.clone(),
            contract,
            // A plugin's first calls run on the guest threads, until one shows it light: a
            // first call may fill hundreds of MiB in one instruction.
            computes: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        };
        let raw = setup
            .manifest(Arc::new(EmptyHost))
            .await
            .map_err(|failure| LoadError::ManifestCall { origin: origin_owned(), failure })?;
        let keeps =
            setup.keep_fields().await.map_err(|failure| LoadError::ManifestCall { origin: origin_owned(), failure })?;
        let manifest = Manifest::from_wit(raw, keeps.unwrap_or_default(), contract)
            .map_err(|reason| LoadError::InvalidManifest { origin: origin_owned(), reason })?;
        setup.check_exports().await.map_err(|reason| LoadError::StaleExports {
            origin: origin_owned(),
            version: interface.split_once('@').map(|(_, v)| v.to_owned()).unwrap_or_default(),
            reason,
        })?;
        if contract == crate::Contract::V0_1 {
            tracing::info!(
                plugin = %manifest.name, %origin,
                "plugin built for contract {} runs through the adapter: it may write every kind it declares, anywhere its identity's RBAC allows; rebuild it with an SDK for contract {} to declare its writes",
                contract::version_of(contract), contract::CONTRACT_VERSION
            );
        }
        let limits = Limits::resolve(config.default_limits, &manifest.settings, &config.ceilings).clamp_to(config);
        tracing::debug!(plugin = %manifest.name, %origin, ?cached, elapsed = ?started.elapsed(), "loaded plugin");
        Ok(Plugin::new(PluginInner {
            setup: CallSetup { limits, name: Arc::from(manifest.name.as_str()), ..setup },
            manifest: Arc::new(manifest),
            digest,
            origin: origin_owned(),
            overrides: None,
            _reservation: None,
        }))
    }

    /// `limits` within the host's guest memory budget ([`Limits::fit`]); unchanged when the
    /// sandbox has no budget.
    pub fn fit(&self, limits: Limits) -> (Limits, Option<crate::Capped>) {
        match &self.inner.pool.memory {
            Some(budget) => limits.fit(budget.total()),
            None => (limits, None),
        }
    }

    /// The host's guest memory budget, when it has one.
    pub fn memory_budget(&self) -> Option<&crate::MemoryBudget> {
        self.inner.pool.memory.as_ref()
    }

    /// The host's CPU budget for guest code.
    pub fn cpu_budget(&self) -> Arc<crate::CpuBudget> {
        self.inner.pool.cpu.clone()
    }

    /// Reserves `plugin`'s instance quota ([`Limits::instances`]) from the pool: calls of the
    /// returned plugin wait only for their own slots. The quota goes back to the pool when
    /// the last clone of the returned plugin is dropped.
    ///
    /// # Errors
    /// [`LoadError::PoolFull`] when the pool has fewer free instances than the quota.
    pub fn reserve(&self, plugin: &Plugin) -> Result<Plugin, LoadError> {
        let wanted = plugin.limits().instances;
        let pool = &self.inner.pool;
        let reservation = pool.reserve(wanted).map_err(|free| LoadError::PoolFull {
            plugin: plugin.manifest().id(),
            wanted,
            free,
            total: pool.config.max_instances as usize,
        })?;
        Ok(plugin.with_reservation(Arc::new(Semaphore::new(wanted)), reservation))
    }
}

impl Limits {
    /// The plugin's proposals over the host defaults, each within the operator's ceiling.
    pub(crate) fn resolve(defaults: Limits, settings: &crate::Settings, ceilings: &Limits) -> Limits {
        let mut limits = defaults;
        if let Some(ms) = settings.deadline_ms {
            limits.deadline = Duration::from_millis(ms.into()).min(ceilings.deadline);
        }
        if let Some(bytes) = settings.memory_limit_bytes {
            limits.memory_bytes = usize::try_from(bytes).unwrap_or(usize::MAX).min(ceilings.memory_bytes);
        }
        if let Some(bytes) = settings.response_limit_bytes {
            limits.response_bytes = usize::try_from(bytes).unwrap_or(usize::MAX).min(ceilings.response_bytes);
        }
        if let Some(n) = settings.max_concurrent_reconciles {
            limits.instances = (n as usize).saturating_add(1).min(ceilings.instances);
        }
        limits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settings;

    #[test]
    fn plugin_proposals_are_clamped_to_the_ceilings() {
        let defaults = Limits::default();
        let ceilings = Limits::default().deadline(Duration::from_secs(10)).instances(17);
        let cases = [
            (Settings::default(), defaults),
            (
                Settings { deadline_ms: Some(u32::MAX), ..Settings::default() },
                defaults.deadline(Duration::from_secs(10)),
            ),
            (Settings { deadline_ms: Some(200), ..Settings::default() }, defaults.deadline(Duration::from_millis(200))),
            (Settings { max_concurrent_reconciles: Some(u32::MAX), ..Settings::default() }, defaults.instances(17)),
            (Settings { max_concurrent_reconciles: Some(2), ..Settings::default() }, defaults.instances(3)),
            (
                Settings {
                    memory_limit_bytes: Some(u64::MAX),
                    response_limit_bytes: Some(u64::MAX),
                    ..Settings::default()
                },
                defaults,
            ),
        ];
        for (settings, expected) in cases {
            assert_eq!(Limits::resolve(defaults, &settings, &ceilings), expected, "{settings:?}");
        }
    }
}
