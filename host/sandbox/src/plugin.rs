//! A loaded plugin and the calls into it: a fresh Store and instance per call.
//!
//! # Guarantees
//! - **The deadline holds in every case.** Guests run on wasmtime's async support: each call
//!   is a future under [`tokio::time::timeout_at`], so a guest waiting in a host call (a WASI
//!   clock, a poll) is dropped at its deadline like one spinning in wasm code, and a guest
//!   that computes yields to the executor at every epoch tick, so it never holds a runtime
//!   thread for longer than a tick, or than its longest instruction (`guest_threads`).
//! - **A call waits for its own plugin's slot**, never for another plugin's: each plugin
//!   holds a quota of instances ([`Limits::instances`]).
//! - **The host's budgets hold across plugins.** Every growth of an instance's memory is
//!   charged to the host's guest memory budget ([`crate::MemoryBudget`]), every tick of guest
//!   code to its CPU budget ([`crate::CpuBudget`]). Waiting on either is the host's time: it
//!   moves the call's deadline out (`call_clock`), and a call the memory budget cannot fit
//!   fails as host pressure, never as the plugin's fault.
//! - **Responses are bounded** in entries and bytes (see `lift` for what is checked when).
//!   What a guest hands the host in an import call is bounded too: each Store's hostcall fuel
//!   is the response budget plus 512 bytes an entry plus 1 MiB (`hostcall_fuel`), not
//!   wasmtime's default of 128 MiB.
//!
//! Each call (`CallSetup::store`) gets a fresh Store, with its own WASI context (no preopens,
//! no environment, no network; stderr captured to 16 KiB), the memory limiter, an epoch
//! deadline and a new instance from the `InstancePre`: nothing leaks between reconciles, and a
//! trap poisons nothing. A plugin's calls run on the caller's task until one of them computes
//! past a tick; from then on on the guest threads (`guest_threads`), so the host's own tasks
//! never queue behind a computing guest.
//!
//! Failures are classified after the fact (`CallSetup::classify`): host pressure first, then an
//! `Interrupt` trap as the deadline, then a growth the limiter refused as the memory limit (the
//! guest aborts on it: reported as such, not as a mysterious `unreachable`), else a trap whose
//! Rust panic message is recovered from the captured stderr. A look-up of an undeclared kind
//! fails the call even if the guest swallowed the error.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use wasmloop_contract::names::Namespace;
use wasmtime::component::{Component, ComponentExportIndex, ComponentNamedList, Instance, Lift, Lower};
use wasmtime::{Store, UpdateDeadline};

use crate::action;
use crate::adapter::Request02;
use crate::bindings::{Object, Request, wit};
use crate::call_clock::{CallClock, Ended};
use crate::config::Limits;
use crate::error::{CallError, CallFailure};
use crate::host_services::HostServices;
use crate::lift::{self, Budget, IntoWit};
use crate::manifest::{Contract, Manifest};
use crate::memory_budget::Pressure;
use crate::pool::{Pool, Reservation};
use crate::response::{ObjectRef, Response};
use crate::state::{MemoryLimiter, State};

/// Manifest lists (owns, watches, reads together) hold at most this many kinds.
const MAX_MANIFEST_KINDS: usize = 256;
/// A manifest's strings add up to at most this many bytes.
const MAX_MANIFEST_BYTES: usize = 64 << 10;

/// Where the plugin's exports are, found once per component.
pub(crate) struct Exports {
    manifest: ComponentExportIndex,
    reconcile: ComponentExportIndex,
    map: ComponentExportIndex,
    /// `cache-options.keep-fields`, when the component exports it (since 0.2.1).
    keep_fields: Option<ComponentExportIndex>,
}

/// `map`'s argument in contract 0.3, borrowed: the related object and whether it went.
#[derive(wasmtime::component::ComponentType, Lower)]
#[component(record)]
struct RelatedChange<'a> {
    object: &'a Object,
    deleted: bool,
}

impl Exports {
    /// Finds the exports of the plugin interface `interface` (its full, versioned name) of a
    /// component built for `contract`.
    pub(crate) fn find(component: &Component, interface: &str, contract: Contract) -> Result<Exports, String> {
        let iface =
            component.get_export_index(None, interface).ok_or_else(|| format!("it does not export {interface}"))?;
        let func = |name: &str| {
            component
                .get_export_index(Some(&iface), name)
                .ok_or_else(|| format!("{interface} lacks the function {name}"))
        };
        let options = crate::contract::cache_options(contract);
        let keep_fields =
            match options.as_deref().and_then(|name| component.get_export_index(None, name)) {
                Some(found) => Some(component.get_export_index(Some(&found), "keep-fields").ok_or_else(|| {
                    format!("{} lacks the function keep-fields", options.as_deref().unwrap_or_default())
                })?),
                None => None,
            };
        Ok(Exports { manifest: func("manifest")?, reconcile: func("reconcile")?, map: func("map")?, keep_fields })
    }
}

/// What it takes to make one call: the pre-linked component, its exports and the limits.
pub(crate) struct CallSetup {
    pub(crate) pool: Arc<Pool>,
    pub(crate) pre: wasmtime::component::InstancePre<State>,
    pub(crate) exports: Arc<Exports>,
    pub(crate) limits: Limits,
    pub(crate) name: Arc<str>,
    /// The plugin's instance quota: one permit per instance alive at once.
    pub(crate) slots: Arc<Semaphore>,
    /// The contract the component was built for: which types its exports lift into.
    pub(crate) contract: Contract,
    /// The plugin's last call ran past an epoch tick (or it has made none yet): its next call
    /// runs on the guest threads (`guest_threads`), when the sandbox has them.
    pub(crate) computes: Arc<AtomicBool>,
}

/// What one guest-to-host transfer (an import call's arguments, or a call's results) may make
/// the host allocate, by wasmtime's own count ("hostcall fuel", 128 MiB by default). Results
/// are bounded more finely by `lift`'s budget; this is room for that budget (the response
/// bytes, each entry's host size, and slack for the envelope), so wasmtime's coarser limit never
/// fires first with an error the host cannot name, and it bounds what an import call (a log
/// line, a selector) can make the host copy.
fn hostcall_fuel(limits: &Limits) -> usize {
    const ENTRY: usize = 512;
    limits.response_bytes.saturating_add(limits.max_actions.saturating_mul(ENTRY)).saturating_add(1 << 20)
}

/// Where the host's time went in one reconcile, for benchmarks and metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct StageTimings {
    /// New Store and instance.
    pub instantiate: Duration,
    /// The guest call: lowering the request, the guest's work, lifting the response.
    pub call: Duration,
    /// Checking and parsing the response on the host.
    pub host_decode: Duration,
    /// Growths that waited for room in the host's guest memory budget.
    pub memory_waits: u32,
    /// How long the host made the guest wait (for memory, for its CPU share), in all: time
    /// not counted against the deadline.
    pub host_waited: Duration,
}

/// A failure inside a call, before it is classified against the Store's state.
enum Fail {
    Wasm(wasmtime::Error),
    Failure(CallFailure),
}

/// Calls the export at `index` with `params`, lifting its result into the counted mirror type
/// `R` under `budget` (see `lift`), then into the bindgen type the host works with.
async fn counted_call<P, R>(
    store: &mut Store<State>,
    instance: Instance,
    index: &ComponentExportIndex,
    params: P,
    budget: Budget,
) -> Result<R::Wit, Fail>
where
    P: ComponentNamedList + Lower + Send + Sync,
    R: IntoWit,
    (R,): ComponentNamedList + Lift + Send + Sync + 'static,
{
    let f = instance.get_typed_func::<P, (R,)>(&mut *store, index).map_err(Fail::Wasm)?;
    let (result,) = lift::counted(budget, f.call_async(&mut *store, params)).await.map_err(fail)?;
    Ok(result.into_wit())
}

/// A guest call's error: a response over its budget, stopped while being lifted, or anything
/// wasmtime reports (classified later against the Store).
fn fail(e: wasmtime::Error) -> Fail {
    match e.downcast::<CallFailure>() {
        Ok(failure) => Fail::Failure(failure),
        Err(e) => Fail::Wasm(e),
    }
}

impl CallSetup {
    fn store(
        &self,
        manifest: Option<Arc<Manifest>>,
        services: Arc<dyn HostServices>,
        clock: Arc<CallClock>,
    ) -> Store<State> {
        let charge = self.pool.memory.as_ref().map(|budget| budget.open(self.name.clone()));
        let limiter = MemoryLimiter {
            limit: self.limits.memory_bytes,
            refused: None,
            charge,
            pressure: None,
            clock: clock.clone(),
        };
        let state = State::new(self.name.clone(), manifest, services, limiter);
        let mut store = Store::new(&self.pool.engine, state);
        store.limiter_async(|s| &mut s.limiter);
        store.set_hostcall_fuel(hostcall_fuel(&self.limits));
        // Every tick, a guest in wasm code yields to the executor (so a loop cannot hold a
        // runtime thread), and stops once its deadline has passed.
        store.set_epoch_deadline(1);
        let (cpu, tick, account) = (self.pool.cpu.clone(), self.pool.config.epoch_tick, self.name.clone());
        store.call_hook(|mut store, hook| {
            let entering = matches!(hook, wasmtime::CallHook::CallingHost);
            if entering || matches!(hook, wasmtime::CallHook::ReturningFromHost) {
                store.data_mut().time.host_call(entering, Instant::now());
            }
            Ok(())
        });
        store.epoch_deadline_callback(move |mut store| {
            if clock.expired(tokio::time::Instant::now()) {
                return Ok(UpdateDeadline::Interrupt);
            }
            // The guest's time since the last charge, however long an instruction ran, not its
            // waits; and the host's time in its imports: work done for a plugin inside a host
            // call is the plugin's CPU too.
            let (guest, total) = store.data_mut().time.charge(Instant::now());
            if total >= tick {
                // It computes: its next call runs on the guest threads.
                store.data_mut().computed = true;
            }
            let host = store.data_mut().take_host_ticks(tick);
            let ticks = (guest.as_nanos() / tick.as_nanos().max(1)).max(1);
            let ticks = u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(u64::from(host));
            let Some(until) = cpu.charge(&account, ticks) else {
                return Ok(UpdateDeadline::Yield(1));
            };
            // Past its share while others run: it waits for its next window, on the host's
            // time, not the guest's.
            let clock = clock.clone();
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(async move {
                    let _held = clock.hold();
                    tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
                }),
            ))
        });
        store
    }

    fn classify(&self, store: &Store<State>, error: wasmtime::Error, elapsed: Duration) -> CallFailure {
        let state = store.data();
        // The host's budget first: whatever the guest did after, the host refused it room.
        if let Some(pressure) = state.limiter.pressure {
            return CallFailure::HostPressure(pressure);
        }
        // The deadline next: a guest may have survived a refused growth and then looped.
        if error.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) {
            return CallFailure::Deadline { deadline: self.limits.deadline, elapsed };
        }
        if let Some(requested) = state.limiter.refused {
            return CallFailure::MemoryLimit { limit: self.limits.memory_bytes, requested };
        }
        let output = String::from_utf8_lossy(&state.stderr.contents()).into_owned();
        let trap = match error.downcast_ref::<wasmtime::Trap>() {
            Some(trap) => trap.to_string(),
            None => error.to_string(),
        };
        // The panic text and the backtrace's symbol names are the guest's words: cut.
        CallFailure::Trap {
            trap: crate::validate::foreign(trap),
            panic: crate::error::panic_message(&output).map(crate::validate::foreign),
            backtrace: crate::validate::foreign(format!("{error:?}")),
        }
    }

    /// Waits for one of the plugin's slots, instantiates in a fresh Store and runs `body`,
    /// all under the deadline. Traps, deadlines and memory limits become [`CallFailure`]s.
    async fn call<T>(
        &self,
        manifest: Option<Arc<Manifest>>,
        services: Arc<dyn HostServices>,
        body: impl AsyncFnOnce(&mut Store<State>, Instance, &Exports) -> Result<T, Fail>,
    ) -> (Result<T, CallFailure>, StageTimings) {
        let mut timings = StageTimings::default();
        // Waiting for a slot is not the guest's time: the deadline starts once it has one.
        let _slot = self.slots.acquire().await.expect("the plugin's slots are never closed");
        let _running = self.pool.cpu.running(self.name.clone(), self.limits.cpu_weight);
        let started = Instant::now();
        let clock = Arc::new(CallClock::start(self.limits.deadline));
        let mut store = self.store(manifest, services, clock.clone());
        let work = async {
            let instance = self.pre.instantiate_async(&mut store).await.map_err(|e| {
                // A start function can trap or run out of memory; anything else (an exhausted
                // pool, or no room in the host's budget, told apart below) keeps wasmtime's
                // own error.
                if e.downcast_ref::<wasmtime::Trap>().is_some() {
                    Fail::Wasm(e)
                } else {
                    Fail::Failure(CallFailure::Instantiate(e))
                }
            })?;
            timings.instantiate = started.elapsed();
            body(&mut store, instance, &self.exports).await
        };
        let out = clock.within(work).await;
        let elapsed = started.elapsed();
        timings.call = elapsed.saturating_sub(timings.instantiate);
        timings.host_waited = clock.waited();
        let out = match out {
            Err(Ended::Deadline) => Err(CallFailure::Deadline { deadline: self.limits.deadline, elapsed }),
            Err(Ended::Held(waited)) => Err(CallFailure::HostPressure(Pressure::Held(waited))),
            Ok(Err(Fail::Wasm(e))) => Err(self.classify(&store, e, elapsed)),
            Ok(Err(Fail::Failure(f))) => Err(f),
            Ok(Ok(v)) => match store.data_mut().undeclared.take() {
                Some((verb, kind)) => Err(CallFailure::UndeclaredKind { verb, kind }),
                None => Ok(v),
            },
        };
        // The budget refused room while the instance was made: that is the host's, whatever
        // form the error took.
        let out = match (out, store.data().limiter.pressure) {
            (Err(_), Some(pressure)) => Err(CallFailure::HostPressure(pressure)),
            (out, _) => out,
        };
        timings.memory_waits = store.data().limiter.charge.as_ref().map_or(0, |c| c.waits().0);
        // Where its next call runs: beside the host's tasks while its calls stay under a tick,
        // on the guest threads once one runs longer (a long instruction, such as a memory fill
        // of hundreds of MiB, holds a thread without yielding).
        self.computes.store(store.data().computed, Ordering::Relaxed);
        // Giving the instance's memory back to the kernel is work done for the call (tens of
        // milliseconds for hundreds of MiB touched): the plugin's CPU, owed at its next tick.
        let released = Instant::now();
        drop(store);
        let tick = self.pool.config.epoch_tick;
        let owed = released.elapsed().as_nanos() / tick.as_nanos().max(1);
        if owed > 0 {
            self.pool.cpu.charge(&self.name, u64::try_from(owed).unwrap_or(u64::MAX));
        }
        (out, timings)
    }

    /// Checks that `reconcile` and `map` have the types of the contract the component names:
    /// a component built against another revision of the same WIT package links and answers
    /// `manifest()`, and would otherwise fail only on its first reconcile. Nothing is called.
    pub(crate) async fn check_exports(&self) -> Result<(), String> {
        type Reconcile03 = (Result<lift::v0_3::Response, lift::v0_3::ReconcileError>,);
        type Reconcile02 = (Result<lift::v0_2::Response, lift::v0_2::ReconcileError>,);
        type Reconcile01 = (Result<lift::v0_1::Response, lift::v0_1::ReconcileError>,);
        type Refs = (lift::List<lift::ObjectRef>,);
        let (out, _) = self
            .call(None, Arc::new(crate::host_services::EmptyHost), async |store, instance, exports| {
                let at = &exports.reconcile;
                let reconcile = match self.contract {
                    Contract::V0_3 => instance.get_typed_func::<(&Request,), Reconcile03>(&mut *store, at).map(drop),
                    Contract::V0_2 => {
                        instance.get_typed_func::<(Request02<'_>,), Reconcile02>(&mut *store, at).map(drop)
                    }
                    Contract::V0_1 => {
                        instance.get_typed_func::<(Request02<'_>,), Reconcile01>(&mut *store, at).map(drop)
                    }
                };
                let map = match self.contract {
                    Contract::V0_3 => {
                        instance.get_typed_func::<(RelatedChange<'_>, &str), Refs>(&mut *store, &exports.map).map(drop)
                    }
                    Contract::V0_2 | Contract::V0_1 => {
                        instance.get_typed_func::<(&Object, &str), Refs>(&mut *store, &exports.map).map(drop)
                    }
                };
                Ok(reconcile
                    .map_err(|e| format!("reconcile: {e:#}"))
                    .and_then(|()| map.map_err(|e| format!("map: {e:#}"))))
            })
            .await;
        out.map_err(|failure| failure.to_string())?
    }

    /// Calls `manifest()`.
    pub(crate) async fn manifest(&self, services: Arc<dyn HostServices>) -> Result<wit::PluginManifest, CallFailure> {
        let budget = Budget::new(MAX_MANIFEST_KINDS, MAX_MANIFEST_BYTES, "manifest kinds");
        let (out, _) = self
            .call(None, services, async |store, instance, exports| {
                let index = &exports.manifest;
                match self.contract {
                    Contract::V0_3 => {
                        counted_call::<(), lift::v0_3::Manifest>(store, instance, index, (), budget).await
                    }
                    Contract::V0_2 => {
                        counted_call::<(), lift::v0_2::Manifest>(store, instance, index, (), budget).await
                    }
                    Contract::V0_1 => {
                        counted_call::<(), lift::v0_1::Manifest>(store, instance, index, (), budget).await
                    }
                }
            })
            .await;
        out
    }
}

impl CallSetup {
    /// Calls `cache-options.keep-fields()` when the component exports it; none when it does
    /// not (every 0.1 and 0.2.0 component), which keeps nothing.
    pub(crate) async fn keep_fields(&self) -> Result<Option<Vec<wit::Keep>>, CallFailure> {
        let Some(index) = self.exports.keep_fields else { return Ok(None) };
        let budget = Budget::new(MAX_MANIFEST_KINDS, MAX_MANIFEST_BYTES, "kept kinds");
        let (out, _) = self
            .call(None, Arc::new(crate::host_services::EmptyHost), async |store, instance, _| {
                counted_call::<(), lift::v0_3::Keeps>(store, instance, &index, (), budget).await
            })
            .await;
        out.map(Some)
    }
}

pub(crate) struct PluginInner {
    pub(crate) setup: CallSetup,
    pub(crate) manifest: Arc<Manifest>,
    pub(crate) digest: String,
    pub(crate) origin: String,
    /// What [`Plugin::overridden`] put over its manifest's settings.
    pub(crate) overrides: Option<Arc<crate::Settings>>,
    /// The plugin's share of the pool, when it has one (see [`crate::Sandbox::reserve`]):
    /// held, never read, so that dropping the last version hands the share back.
    pub(crate) _reservation: Option<Reservation>,
}

/// A loaded, validated plugin. Cheap to clone; calls may run concurrently, up to its
/// instance quota.
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

    /// The limits every call runs under.
    pub fn limits(&self) -> Limits {
        self.inner.setup.limits
    }

    fn derive(&self, limits: Limits, slots: Arc<Semaphore>, reservation: Option<Reservation>) -> Plugin {
        let setup = &self.inner.setup;
        let setup = CallSetup {
            pool: setup.pool.clone(),
            pre: setup.pre.clone(),
            exports: setup.exports.clone(),
            slots,
            limits,
            name: setup.name.clone(),
            contract: setup.contract,
            computes: setup.computes.clone(),
        };
        Plugin::new(PluginInner {
            setup,
            manifest: self.inner.manifest.clone(),
            digest: self.inner.digest.clone(),
            origin: self.inner.origin.clone(),
            overrides: self.inner.overrides.clone(),
            _reservation: reservation,
        })
    }

    /// The same plugin with other limits (the operator's settings). It holds no instance
    /// quota: reserve one with [`crate::Sandbox::reserve`] after settling its limits.
    #[must_use]
    pub fn with_limits(&self, limits: Limits) -> Plugin {
        let pool = &self.inner.setup.pool;
        self.derive(limits.clamp_to(&pool.config), pool.loading.clone(), None)
    }

    /// The same plugin with `overrides` (a `WasmPlugin`'s `settings`: its writer's choices)
    /// over the settings its manifest proposes, each limit held to the pool's ceilings as a
    /// proposal is; [`Plugin::overrides`] says which. Holds no instance quota, as
    /// [`Plugin::with_limits`].
    #[must_use]
    pub fn overridden(&self, overrides: &crate::Settings) -> Plugin {
        let config = &self.inner.setup.pool.config;
        let limits = Limits::resolve(self.limits(), overrides, &config.ceilings);
        let mut manifest = Manifest::clone(&self.inner.manifest);
        let proposed = &mut manifest.settings;
        proposed.max_concurrent_reconciles = overrides.max_concurrent_reconciles.or(proposed.max_concurrent_reconciles);
        proposed.deadline_ms = overrides.deadline_ms.or(proposed.deadline_ms);
        proposed.memory_limit_bytes = overrides.memory_limit_bytes.or(proposed.memory_limit_bytes);
        proposed.response_limit_bytes = overrides.response_limit_bytes.or(proposed.response_limit_bytes);
        proposed.resync_seconds = overrides.resync_seconds.or(proposed.resync_seconds);
        let mut plugin = self.with_limits(limits);
        let inner = Arc::get_mut(&mut plugin.inner).expect("a plugin just derived has no other holder");
        inner.manifest = Arc::new(manifest);
        inner.overrides = Some(Arc::new(overrides.clone()));
        plugin
    }

    /// The settings [`Plugin::overridden`] put over its manifest's, if any.
    pub fn overrides(&self) -> Option<&crate::Settings> {
        self.inner.overrides.as_deref()
    }

    /// The same plugin as a source of `realm` offers it (a plugin ConfigMap's namespace; none
    /// for the operator's files): its [`Manifest::id`] says so. Holds no instance quota, as
    /// [`Plugin::with_limits`].
    #[must_use]
    pub fn in_realm(&self, realm: Option<Namespace>) -> Plugin {
        let mut manifest = Manifest::clone(&self.inner.manifest);
        manifest.realm = realm;
        let mut plugin = self.with_limits(self.limits());
        let inner = Arc::get_mut(&mut plugin.inner).expect("a plugin just derived has no other holder");
        // Its log lines, cache errors and pool refusals name it as the host knows it, so one
        // realm's plugin cannot write lines that read as another's.
        inner.setup.name = Arc::from(manifest.id().as_str());
        inner.manifest = Arc::new(manifest);
        plugin
    }

    pub(crate) fn with_reservation(&self, slots: Arc<Semaphore>, reservation: Reservation) -> Plugin {
        self.derive(self.limits(), slots, Some(reservation))
    }

    fn error(&self, object: &Object, failure: CallFailure) -> CallError {
        CallError { plugin: self.inner.manifest.id(), object: object_label(object), failure }
    }

    /// Runs one reconcile in a fresh instance and decodes its response.
    ///
    /// # Errors
    /// A [`CallError`] naming the plugin and the object: the plugin's own error, a trap, a
    /// deadline, a memory limit, an oversized response or an invalid action.
    pub async fn reconcile(&self, request: &Request, services: Arc<dyn HostServices>) -> Result<Response, CallError> {
        self.reconcile_timed(request, services).await.0
    }

    /// [`Plugin::reconcile`], also reporting where the time went.
    pub async fn reconcile_timed(
        &self,
        request: &Request,
        services: Arc<dyn HostServices>,
    ) -> (Result<Response, CallError>, StageTimings) {
        if let Some(guests) = self.apart() {
            let (plugin, request) = (self.clone(), request.clone());
            return guests.run(async move { plugin.reconcile_here(&request, services).await }).await;
        }
        self.reconcile_here(request, services).await
    }

    /// The guest threads, when this plugin's calls run there: it computes, and the sandbox has
    /// them.
    fn apart(&self) -> Option<&crate::guest_threads::GuestThreads> {
        let setup = &self.inner.setup;
        setup.pool.guests.as_ref().filter(|_| setup.computes.load(Ordering::Relaxed))
    }

    /// [`Plugin::reconcile_timed`] on the caller's runtime.
    async fn reconcile_here(
        &self,
        request: &Request,
        services: Arc<dyn HostServices>,
    ) -> (Result<Response, CallError>, StageTimings) {
        let setup = &self.inner.setup;
        let budget = Budget::new(setup.limits.max_actions, setup.limits.response_bytes, "actions");
        let lean = self.lean_request(request);
        let request = lean.as_ref().unwrap_or(request);
        let (out, mut timings) = setup
            .call(Some(self.inner.manifest.clone()), services, async |store, instance, exports| {
                let index = &exports.reconcile;
                match setup.contract {
                    Contract::V0_3 => {
                        type R = Result<lift::v0_3::Response, lift::v0_3::ReconcileError>;
                        counted_call::<_, R>(store, instance, index, (request,), budget).await
                    }
                    // 0.2's request is 0.3's without the triggers.
                    Contract::V0_2 => {
                        type R = Result<lift::v0_2::Response, lift::v0_2::ReconcileError>;
                        counted_call::<_, R>(store, instance, index, (Request02::of(request),), budget).await
                    }
                    // 0.1's request has 0.2's shape; its response lacks `prune` and its error
                    // actions and retry delay.
                    Contract::V0_1 => {
                        type R = Result<lift::v0_1::Response, lift::v0_1::ReconcileError>;
                        counted_call::<_, R>(store, instance, index, (Request02::of(request),), budget).await
                    }
                }
            })
            .await;
        let start = Instant::now();
        let result = out.and_then(|r| self.decode(r, request));
        timings.host_decode = start.elapsed();
        (result.map_err(|f| self.error(&request.object, f)), timings)
    }

    /// The request with the children of metadata-only kinds stripped to their metadata; none
    /// when nothing needs stripping (the common case costs no copy).
    fn lean_request(&self, request: &Request) -> Option<Request> {
        let manifest = &self.inner.manifest;
        // Most plugins declare none: then nothing here costs anything per call.
        let lean = |o: &Object| manifest.metadata_only.iter().any(|k| k.matches(&o.api_version, &o.kind));
        if manifest.metadata_only.is_empty() || !request.owned.iter().any(lean) {
            return None;
        }
        let owned =
            request.owned.iter().map(|o| if lean(o) { crate::object::metadata_only(o) } else { o.clone() }).collect();
        Some(Request {
            object: request.object.clone(),
            owned,
            phase: request.phase,
            previous: request.previous.clone(),
            attempt: request.attempt,
            config: request.config.clone(),
            triggers: request.triggers.clone(),
            triggers_dropped: request.triggers_dropped,
        })
    }

    fn decode(
        &self,
        result: Result<wit::Response, wit::ReconcileError>,
        request: &Request,
    ) -> Result<Response, CallFailure> {
        let manifest = &self.inner.manifest;
        let primary = &request.object;
        let deleted = request.phase == crate::Phase::Deleted;
        match result {
            Ok(response) => {
                let mut response = action::decode(manifest, primary, request.phase, response)?;
                // 0.1's flag pruned after every successful apply; a 0.1 plugin keeps that.
                if self.inner.setup.contract == Contract::V0_1 {
                    response.prune = manifest.prune && request.phase == crate::Phase::Apply;
                }
                Ok(response)
            }
            Err(e) => Err(action::decode_failure(manifest, primary, deleted, e)?),
        }
    }

    /// Asks the plugin which primaries a changed related object affects: `related` as it is
    /// now, or as it last was when `deleted` (it was deleted, or left the watch's selection).
    ///
    /// # Errors
    /// A [`CallError`] naming the plugin and the related object.
    pub async fn map(
        &self,
        related: &Object,
        deleted: bool,
        config: &str,
        services: Arc<dyn HostServices>,
    ) -> Result<Vec<ObjectRef>, CallError> {
        if let Some(guests) = self.apart() {
            let (plugin, related, config) = (self.clone(), related.clone(), config.to_owned());
            return guests.run(async move { plugin.map_here(&related, deleted, &config, services).await }).await;
        }
        self.map_here(related, deleted, config, services).await
    }

    /// [`Plugin::map`] on the caller's runtime.
    async fn map_here(
        &self,
        related: &Object,
        deleted: bool,
        config: &str,
        services: Arc<dyn HostServices>,
    ) -> Result<Vec<ObjectRef>, CallError> {
        let setup = &self.inner.setup;
        let budget = Budget::new(setup.limits.max_actions, setup.limits.response_bytes, "references");
        // A watched kind may be metadata-only: `map` sees what the cache look-ups see.
        let manifest = &self.inner.manifest;
        let lean = manifest
            .metadata_only
            .iter()
            .any(|k| k.matches(&related.api_version, &related.kind))
            .then(|| crate::object::metadata_only(related));
        let related = lean.as_ref().unwrap_or(related);
        let (out, _) = setup
            .call(Some(self.inner.manifest.clone()), services, async |store, instance, exports| {
                type Refs = lift::List<lift::ObjectRef>;
                match setup.contract {
                    Contract::V0_3 => {
                        let params = (RelatedChange { object: related, deleted }, config);
                        counted_call::<_, Refs>(store, instance, &exports.map, params, budget).await
                    }
                    Contract::V0_2 | Contract::V0_1 => {
                        counted_call::<_, Refs>(store, instance, &exports.map, (related, config), budget).await
                    }
                }
            })
            .await;
        let refs = out.map_err(|f| self.error(related, f))?;
        let primary = &self.inner.manifest.primary.kind;
        refs.into_iter()
            .enumerate()
            .map(|(i, r)| {
                action::object_ref(r).map_err(|failure| {
                    let failure = match failure {
                        CallFailure::InvalidAction(m) => CallFailure::InvalidAction(format!("map result [{i}]: {m}")),
                        other => other,
                    };
                    self.error(related, failure)
                })
            })
            .map(|r| {
                let r = r?;
                if !primary.matches(&r.api_version, &r.kind) {
                    let failure = CallFailure::InvalidAction(format!(
                        "map returned {} {} {:?}, but it must name primaries ({primary}) by name",
                        r.api_version, r.kind, r.name
                    ));
                    return Err(self.error(related, failure));
                }
                Ok(r)
            })
            .collect()
    }
}
