//! The sandbox: one Engine, its epoch ticker, the Linker, the compile cache, and loading.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::{Reconciler, ReconcilerPre};
use crate::compile_cache::{self, CompileCache};
use crate::config::{Limits, SandboxConfig};
use crate::contract::{self, Binary, Mismatch};
use crate::error::LoadError;
use crate::host_services::EmptyHost;
use crate::manifest::Manifest;
use crate::plugin::{CallSetup, Plugin, PluginInner};
use crate::state::State;

/// The plugin sandbox. Cheap to clone; all clones share one Engine.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<SandboxInner>,
}

pub(crate) struct SandboxInner {
    pub(crate) engine: Engine,
    linker: Linker<State>,
    cache: CompileCache,
    pub(crate) config: SandboxConfig,
}

/// Ticks the engine's epoch so deadlines fire even in a guest that never yields. Stops when
/// the engine is dropped.
fn start_ticker(engine: &Engine, tick: Duration) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new().name("wasmloop-epoch".into()).spawn(move || {
        while let Some(engine) = weak.upgrade() {
            engine.increment_epoch();
            drop(engine);
            std::thread::sleep(tick);
        }
    })?;
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
        start_ticker(&engine, config.epoch_tick)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        Reconciler::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)?;
        let cache = CompileCache::new(config.cache_dir.clone());
        Ok(Sandbox { inner: Arc::new(SandboxInner { engine, linker, cache, config }) })
    }

    /// The shared Engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The compile cache.
    pub fn compile_cache(&self) -> &CompileCache {
        &self.inner.cache
    }

    /// Loads a component: checks it is a component for a compatible contract, compiles it
    /// (or takes it from the compile cache), links it and reads its manifest. `origin` names
    /// the source (a path, a ConfigMap) in errors.
    ///
    /// # Errors
    /// A [`LoadError`] naming `origin`, the problem and the fix.
    pub fn load(&self, bytes: &[u8], origin: &str) -> Result<Plugin, LoadError> {
        let started = Instant::now();
        let origin_owned = || origin.to_owned();
        match contract::classify(bytes) {
            Binary::Component => {}
            Binary::CoreModule => return Err(LoadError::CoreModule { origin: origin_owned() }),
            Binary::NotWasm => return Err(LoadError::NotWasm { origin: origin_owned() }),
        }
        let digest = compile_cache::digest(bytes);
        let (component, cached) = self
            .inner
            .cache
            .load(&self.inner.engine, bytes, &digest)
            .map_err(|source| LoadError::Compile { origin: origin_owned(), source })?;
        contract::check(&self.inner.engine, &component).map_err(|m| match m {
            Mismatch::Version { found } => LoadError::IncompatibleContract { origin: origin_owned(), found },
            Mismatch::NotAPlugin { exports } => LoadError::NotAPlugin { origin: origin_owned(), exports },
        })?;
        let instance_pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(|source| LoadError::Link { origin: origin_owned(), source })?;
        let pre =
            ReconcilerPre::new(instance_pre).map_err(|source| LoadError::Link { origin: origin_owned(), source })?;

        let limits = self.inner.config.default_limits;
        let setup = CallSetup { sandbox: self.inner.clone(), pre: pre.clone(), limits, name: Arc::from(origin) };
        let raw = setup
            .call(None, Arc::new(EmptyHost), |bindings, store| bindings.wasmloop_plugin_plugin().call_manifest(store))
            .map_err(|failure| LoadError::ManifestCall { origin: origin_owned(), failure })?;
        let manifest =
            Manifest::from_wit(raw).map_err(|reason| LoadError::InvalidManifest { origin: origin_owned(), reason })?;
        let limits = Limits::resolve(limits, &manifest.settings, self.inner.config.max_memory_bytes);
        tracing::debug!(plugin = %manifest.name, %origin, ?cached, elapsed = ?started.elapsed(), "loaded plugin");
        Ok(Plugin::new(PluginInner {
            setup: CallSetup { sandbox: self.inner.clone(), pre, limits, name: Arc::from(manifest.name.as_str()) },
            manifest: Arc::new(manifest),
            digest,
            origin: origin_owned(),
            compiled: cached == compile_cache::CacheOutcome::Compiled,
        }))
    }
}

impl Limits {
    /// The plugin's proposals over the host defaults, within what the sandbox can hold.
    pub(crate) fn resolve(defaults: Limits, settings: &crate::Settings, max_memory: usize) -> Limits {
        let mut limits = defaults;
        if let Some(ms) = settings.deadline_ms {
            limits.deadline = Duration::from_millis(ms.into());
        }
        if let Some(bytes) = settings.memory_limit_bytes {
            limits.memory_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        if let Some(bytes) = settings.response_limit_bytes {
            limits.response_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        limits.clamp_memory(max_memory)
    }

    /// Caps the memory ceiling at what the sandbox's pool can hold, saying so when it bites.
    pub(crate) fn clamp_memory(mut self, max_memory: usize) -> Limits {
        if self.memory_bytes > max_memory {
            tracing::warn!(
                requested = self.memory_bytes,
                max_memory,
                "memory limit above the sandbox maximum; using the maximum (raise SandboxConfig::max_memory_bytes to allow more)"
            );
            self.memory_bytes = max_memory;
        }
        self
    }
}
