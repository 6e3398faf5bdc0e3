//! A loaded plugin and the calls into it: a fresh Store and instance per call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Store;

use crate::action::{self, Response};
use crate::bindings::{Object, Reconciler, ReconcilerPre, Request, wit};
use crate::config::Limits;
use crate::error::{CallError, CallFailure};
use crate::host_services::HostServices;
use crate::manifest::Manifest;
use crate::sandbox::SandboxInner;
use crate::state::State;

/// What it takes to make one call: the pre-linked component and the limits.
pub(crate) struct CallSetup {
    pub(crate) sandbox: Arc<SandboxInner>,
    pub(crate) pre: ReconcilerPre<State>,
    pub(crate) limits: Limits,
    pub(crate) name: Arc<str>,
}

/// Where the host's time went in one reconcile, for benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct StageTimings {
    /// New Store and instance.
    pub instantiate: Duration,
    /// The guest call: lowering the request, the guest's work, lifting the response.
    pub call: Duration,
    /// Checking and parsing the response on the host.
    pub host_decode: Duration,
}

impl CallSetup {
    fn ticks(&self) -> u64 {
        let tick = self.sandbox.config.epoch_tick.as_nanos().max(1);
        // Round up, plus one: the first tick may come right after the deadline is set.
        (self.limits.deadline.as_nanos().div_ceil(tick) as u64).saturating_add(1)
    }

    fn store(&self, manifest: Option<Arc<Manifest>>, services: Arc<dyn HostServices>) -> Store<State> {
        let state = State::new(self.name.clone(), manifest, services, self.limits.memory_bytes);
        let mut store = Store::new(&self.sandbox.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(self.ticks());
        store.epoch_deadline_trap();
        store
    }

    fn classify(&self, store: &Store<State>, error: wasmtime::Error) -> CallFailure {
        let state = store.data();
        // The deadline first: a guest may have survived a refused growth and then looped.
        if error.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) {
            return CallFailure::Deadline { deadline: self.limits.deadline };
        }
        if let Some(requested) = state.limiter.refused {
            return CallFailure::MemoryLimit { limit: self.limits.memory_bytes, requested };
        }
        let output = String::from_utf8_lossy(&state.stderr.contents()).into_owned();
        let trap = match error.downcast_ref::<wasmtime::Trap>() {
            Some(trap) => trap.to_string(),
            None => error.to_string(),
        };
        CallFailure::Trap { trap, panic: crate::error::panic_message(&output), backtrace: format!("{error:?}") }
    }

    /// Instantiates in a fresh Store and runs `f`; traps, deadlines and memory limits become
    /// [`CallFailure`]s.
    pub(crate) fn call<T>(
        &self,
        manifest: Option<Arc<Manifest>>,
        services: Arc<dyn HostServices>,
        f: impl FnOnce(&Reconciler, &mut Store<State>) -> wasmtime::Result<T>,
    ) -> Result<T, CallFailure> {
        self.call_timed(manifest, services, f).0
    }

    fn call_timed<T>(
        &self,
        manifest: Option<Arc<Manifest>>,
        services: Arc<dyn HostServices>,
        f: impl FnOnce(&Reconciler, &mut Store<State>) -> wasmtime::Result<T>,
    ) -> (Result<T, CallFailure>, StageTimings) {
        let mut timings = StageTimings::default();
        let start = Instant::now();
        let mut store = self.store(manifest, services);
        let bindings = match self.pre.instantiate(&mut store) {
            Ok(b) => b,
            // A start function can trap or run out of memory; anything else (an exhausted
            // pool) keeps wasmtime's own error.
            Err(e) if e.downcast_ref::<wasmtime::Trap>().is_some() => return (Err(self.classify(&store, e)), timings),
            Err(e) => return (Err(CallFailure::Instantiate(e)), timings),
        };
        timings.instantiate = start.elapsed();
        let start = Instant::now();
        let out = f(&bindings, &mut store);
        timings.call = start.elapsed();
        let out = match out {
            Ok(v) => match store.data_mut().undeclared.take() {
                Some((verb, kind)) => Err(CallFailure::UndeclaredKind { verb, kind }),
                None => Ok(v),
            },
            Err(e) => Err(self.classify(&store, e)),
        };
        (out, timings)
    }
}

pub(crate) struct PluginInner {
    pub(crate) setup: CallSetup,
    pub(crate) manifest: Arc<Manifest>,
    pub(crate) digest: String,
    pub(crate) origin: String,
    pub(crate) compiled: bool,
}

/// A loaded, validated plugin. Cheap to clone; calls may run concurrently.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

fn object_label(o: &Object) -> String {
    format!("{} {}", o.kind, o.display_name())
}

impl Plugin {
    pub(crate) fn new(inner: PluginInner) -> Plugin {
        Plugin { inner: Arc::new(inner) }
    }

    /// The validated manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.inner.manifest
    }

    /// Hex SHA-256 of the component.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// Where it was loaded from.
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }

    /// True when this load compiled the component, false when the compile cache had it.
    pub fn was_compiled(&self) -> bool {
        self.inner.compiled
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> Limits {
        self.inner.setup.limits
    }

    /// The same plugin with other limits (the operator's settings).
    #[must_use]
    pub fn with_limits(&self, limits: Limits) -> Plugin {
        let max = self.inner.setup.sandbox.config.max_memory_bytes;
        let setup = CallSetup {
            sandbox: self.inner.setup.sandbox.clone(),
            pre: self.inner.setup.pre.clone(),
            limits: limits.clamp_memory(max),
            name: self.inner.setup.name.clone(),
        };
        Plugin::new(PluginInner {
            setup,
            manifest: self.inner.manifest.clone(),
            digest: self.inner.digest.clone(),
            origin: self.inner.origin.clone(),
            compiled: self.inner.compiled,
        })
    }

    fn error(&self, object: &Object, failure: CallFailure) -> CallError {
        CallError { plugin: self.inner.manifest.name.clone(), object: object_label(object), failure }
    }

    /// Runs one reconcile in a fresh instance and decodes its response.
    ///
    /// # Errors
    /// A [`CallError`] naming the plugin and the object: the plugin's own error, a trap, a
    /// deadline, a memory limit, an oversized response or an invalid action.
    pub fn reconcile(&self, request: &Request, services: Arc<dyn HostServices>) -> Result<Response, CallError> {
        self.reconcile_timed(request, services).0
    }

    /// [`Plugin::reconcile`], also reporting where the time went.
    pub fn reconcile_timed(
        &self,
        request: &Request,
        services: Arc<dyn HostServices>,
    ) -> (Result<Response, CallError>, StageTimings) {
        let setup = &self.inner.setup;
        let (out, mut timings) = setup.call_timed(Some(self.inner.manifest.clone()), services, |b, store| {
            b.wasmloop_plugin_plugin().call_reconcile(store, request)
        });
        let start = Instant::now();
        let deleted = request.phase == crate::Phase::Deleted;
        let result = out.and_then(|r| self.decode(r, deleted));
        timings.host_decode = start.elapsed();
        (result.map_err(|f| self.error(&request.object, f)), timings)
    }

    fn decode(
        &self,
        result: Result<wit::Response, wit::ReconcileError>,
        deleted: bool,
    ) -> Result<Response, CallFailure> {
        let response =
            result.map_err(|e| CallFailure::Plugin { message: e.message, transient: e.transient, reason: e.reason })?;
        let size = action::response_size(&response);
        let limit = self.inner.setup.limits.response_bytes;
        if size > limit {
            return Err(CallFailure::ResponseTooLarge { size, limit });
        }
        action::decode(&self.inner.manifest, deleted, response)
    }

    /// Asks the plugin which primaries a changed related object affects.
    ///
    /// # Errors
    /// A [`CallError`] naming the plugin and the related object.
    pub fn map(
        &self,
        related: &Object,
        config: &str,
        services: Arc<dyn HostServices>,
    ) -> Result<Vec<crate::ObjectRef>, CallError> {
        let out = self.inner.setup.call(Some(self.inner.manifest.clone()), services, |b, store| {
            b.wasmloop_plugin_plugin().call_map(store, related, config)
        });
        let refs = out.map_err(|f| self.error(related, f))?;
        let primary = &self.inner.manifest.primary.kind;
        refs.into_iter()
            .map(action::object_ref)
            .map(|r| {
                if r.gvk() != *primary || r.name.is_empty() {
                    let failure = CallFailure::InvalidAction(format!(
                        "map returned {} {:?}, but it must name primaries ({primary}) by name",
                        r.gvk(),
                        r.name
                    ));
                    return Err(self.error(related, failure));
                }
                Ok(r)
            })
            .collect()
    }
}
