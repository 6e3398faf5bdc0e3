//! The plugins a host serves, and how a new version replaces a running one.
//!
//! Sources (files, a watched path, ConfigMaps) hand the registry [`Candidate`]s; the registry
//! compiles and validates each one **before** it touches the running version, prepares the
//! new version's controller (its informers are shared and reference-counted, so kinds both
//! versions declare keep their warm caches), lets the old version finish its reconciles in
//! flight, and only then starts the new one, which requeues every primary. Any failure on the
//! way leaves the old version serving and comes back as a [`RegistryError`] naming the source,
//! the plugin and what to do.
//!
//! A candidate's steps ([`Registry::upsert`]; `run`'s files, compiled before the host
//! connects, enter at the third through [`Registry::install`]):
//! 1. the same digest (component, configuration, settings) and identity the source serves:
//!    nothing to do;
//! 2. compile and validate (`Registry::compile`, through the sandbox's on-disk cache);
//! 3. decide, as a pure function of what serves, what is parked and what shadows
//!    ([`plan::decide`]): unchanged, refused, parked (`--shard`), or installed;
//! 4. resolve the identity and reserve the plugin's instances (its concurrency: the workers
//!    make the `map` calls too);
//! 5. prepare the new version's controller (`Controller::prepare`): informers acquired and
//!    synced, every primary queued, no worker started;
//! 6. shut the old version down: stop taking work, let reconciles in flight finish within the
//!    drain timeout (one still running after it finishes in the background, keeping its key);
//! 7. start the new version's workers from the old one's `Handover`.
//!
//! No lock is held across an await. Work waits in **lanes** instead (`lanes`): one per source,
//! so a source's offers and removal happen one at a time, and one per plugin, so installs,
//! stops, parks and hand-overs of a plugin do; steps 3 to 7 hold the lanes of the plugin
//! offered and of the one the source serves. Lanes are taken in order, sources before
//! plugins, so two loads never wait on each other. A load whose caches cannot sync holds only
//! its own lanes while every other plugin loads ([`Registry::preparing`] lists it). What the
//! registry knows (what serves, prepares, is parked, shadows, was refused) is one `State`
//! under one short synchronous lock, so [`Registry::known`] and [`Registry::names`] never wait
//! for a load, reconciles of every plugin go on throughout, and there is no lock order to
//! keep. The decisions are [`plan`]'s.
//!
//! ```no_run
//! # async fn demo(registry: &wasmloop_runtime::registry::Registry, bytes: Vec<u8>) {
//! use wasmloop_runtime::registry::Candidate;
//! use wasmloop_runtime::identity::AccountChoice;
//! let account = AccountChoice::Operator { namespace: "wasmloop-system".into() };
//! let candidate = Candidate { source: wasmloop_sandbox::SourceId::file("labeler.wasm"), realm: None, expected_name: None, bytes: bytes.into(), held: None, config: None, account, settings: None };
//! match registry.upsert(candidate).await {
//!     Ok(loaded) => println!("{loaded}"),
//!     Err(error) => eprintln!("{error}"), // the previous version, if any, still serves
//! }
//! # }
//! ```

pub mod plan;
pub mod reports;

mod error;
mod gate;
mod install;
mod lanes;
mod shadows;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use wasmloop_contract::names::Namespace;
use wasmloop_sandbox::{LoadError, Plugin, PluginId, Sandbox, SourceId};

use crate::context::Context;
use crate::controller::{Controller, ControllerConfig};
use crate::identity::AccountChoice;
use crate::shadow::ShadowSeat;
pub use error::RegistryError;
use gate::Gate;
use install::Offer;
use lanes::{Lane, Lanes};
use plan::{Again, Refusals};
pub use reports::Loaded;
use reports::{Report, Reported, Reporter};
pub use shadows::{FINDINGS_EVERY, Shadowed};

/// Compiles and validates a component (its bytes, its source): the sandbox with the
/// operator's limits applied.
pub type Loader = Arc<
    dyn Fn(Bytes, String, Option<wasmloop_sandbox::Settings>) -> BoxFuture<'static, Result<Plugin, LoadError>>
        + Send
        + Sync,
>;

/// The operator's controller settings for a plugin, by its realm (empty for the operator's
/// files, the plugin namespace for ConfigMaps) and name: never by name alone, so a plugin
/// cannot take the settings of another realm's by taking its name.
pub type Settings = Arc<dyn Fn(&str, &str) -> ControllerConfig + Send + Sync>;

/// A plugin version offered by a source.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Where it comes from; one source serves at most one plugin.
    pub source: SourceId,
    /// Its realm: a plugin ConfigMap's namespace, none for the operator's files. Plugin names
    /// are unique within a realm ([`wasmloop_sandbox::Manifest::id`]); a version shadows and,
    /// promoted, replaces versions of its own realm only.
    pub realm: Option<Namespace>,
    /// The plugin name the source promises (a ConfigMap's label); the manifest must agree.
    pub expected_name: Option<String>,
    /// The component: dropped once compiled, so that a load waiting for its caches to sync
    /// holds none of it.
    pub bytes: Bytes,
    /// What holds the component's share of the sources' memory for loads (a pull's permits, a
    /// ConfigMap read's), given back with the bytes once the component is compiled.
    pub held: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// The plugin's configuration as JSON text; none for the host configuration's.
    pub config: Option<String>,
    /// Which ServiceAccount the plugin acts as, when plugins act as their own.
    pub account: AccountChoice,
    /// Its writer's settings over those the manifest proposes (a `WasmPlugin`'s), handed to the
    /// [`Loader`], which holds them to the operator's limits
    /// ([`wasmloop_sandbox::Plugin::overridden`]): other settings are another version.
    pub settings: Option<wasmloop_sandbox::Settings>,
}

impl Candidate {
    /// What names this version: the component's digest with the config's. A pulled component
    /// may weigh 64 MiB, so it is hashed off the runtime's threads.
    async fn version_digest(&self) -> String {
        let bytes = self.bytes.clone();
        let component = tokio::task::spawn_blocking(move || wasmloop_sandbox::digest(&bytes))
            .await
            .expect("hashing does not panic");
        with_overrides(version_digest(&component, self.config.as_deref()), self.settings.as_ref())
    }
}

/// A version serving.
struct Slot {
    source: SourceId,
    realm: Option<Namespace>,
    /// How the version serving picked its ServiceAccount: a new choice is a new version.
    account: AccountChoice,
    digest: String,
    /// Its configuration as the source gave it, to park it with.
    config: Option<String>,
    controller: Controller,
}

/// A seat's realm and plugin name.
type SeatKey = (Option<Namespace>, String);

/// What the registry knows, under its one lock: never held across an await.
#[derive(Default)]
struct State {
    /// The versions serving, by plugin.
    slots: HashMap<PluginId, Slot>,
    /// The plugins whose controllers are being prepared ([`Registry::preparing`]).
    preparing: BTreeSet<PluginId>,
    /// Shut down: no version starts any more.
    closed: bool,
    /// Each plugin's shadow seat, by realm and plugin name, whether or not a version serves:
    /// a shadow of one realm neither blocks nor stands in for another realm's.
    seats: HashMap<SeatKey, Arc<ShadowSeat>>,
    /// With `--shard`, what this replica may run; none runs everything.
    gate: Option<Gate>,
    /// The plugin each source was last refused as, whose metric series go with the source.
    refused: Refusals,
}

impl State {
    /// The plugin `source` serves, and its slot.
    fn serving(&self, source: &SourceId) -> Option<(&PluginId, &Slot)> {
        self.slots.iter().find(|(_, slot)| slot.source == *source)
    }

    /// The version `source` serves, to name in errors.
    fn running_version(&self, source: &SourceId) -> Option<String> {
        self.serving(source).map(|(_, slot)| version_of(&slot.controller))
    }

    /// Takes plugin `name`'s slot out, to stop it.
    fn take_slot(&mut self, name: &PluginId, metrics: &crate::metrics::Metrics) -> Option<Slot> {
        let slot = self.slots.remove(name)?;
        metrics.plugins_active(self.slots.len());
        Some(slot)
    }
}

/// The running plugins of one host, by name.
pub struct Registry {
    context: Context,
    sandbox: Sandbox,
    loader: Loader,
    settings: Settings,
    drain: Duration,
    lanes: Lanes,
    state: std::sync::Mutex<State>,
    /// Where what happens to each source's plugin is reported ([`reports`]).
    reporter: Reporter,
}

/// What identifies a serving version: the component's SHA-256 (as the sandbox computes it)
/// and the configuration it runs with, and its overrides'.
fn plugin_version_digest(plugin: &Plugin, config: Option<&str>) -> String {
    with_overrides(version_digest(plugin.digest(), config), plugin.overrides())
}

/// `digest` with `overrides` folded in, when there are any.
fn with_overrides(digest: String, overrides: Option<&wasmloop_sandbox::Settings>) -> String {
    match overrides.and_then(|o| serde_json::to_string(o).ok()) {
        None => digest,
        Some(settings) => wasmloop_sandbox::digest(format!("{digest}\0{settings}").as_bytes()),
    }
}

fn version_digest(component: &str, config: Option<&str>) -> String {
    match config {
        None => component.to_owned(),
        Some(config) => wasmloop_sandbox::digest(format!("{component}\0{config}").as_bytes()),
    }
}

fn version_of(controller: &Controller) -> String {
    controller.plugin().manifest().version.clone()
}

/// A realm as the operator's settings name it: empty for the operator's files.
fn realm_text(realm: Option<&Namespace>) -> &str {
    realm.map_or("", Namespace::as_str)
}

impl Registry {
    /// A registry starting controllers from `context`, compiling with `loader`, reserving each
    /// plugin's instances from `sandbox`, configuring each plugin with `settings`, and giving
    /// an old version up to `drain` to finish its reconciles in flight when it is replaced or
    /// removed.
    pub fn new(context: Context, sandbox: Sandbox, loader: Loader, settings: Settings, drain: Duration) -> Registry {
        Registry {
            context,
            sandbox,
            loader,
            settings,
            drain,
            lanes: Lanes::default(),
            state: std::sync::Mutex::default(),
            reporter: Reporter::none(),
        }
    }

    /// The registry of one replica of several sharing the plugins out: it runs only the
    /// plugins it is admitted to ([`Registry::admit`]) and parks every other valid version
    /// ([`Loaded::Parked`]).
    #[must_use]
    pub fn sharded(self) -> Registry {
        self.state().gate = Some(Gate::default());
        self
    }

    /// A registry that reports what happens to each source's plugin to `reporter`: every
    /// [`Loaded`] of an offer, of an admission and of an eviction, shadows seated and what
    /// they find ([`Report`]).
    #[must_use]
    pub fn reporting(mut self, reporter: Reporter) -> Registry {
        self.reporter = reporter;
        self
    }

    /// The reporter this registry reports to, for a source's own refusals: one stream, in order.
    pub fn reporter(&self) -> Reporter {
        self.reporter.clone()
    }

    /// What the registry knows: held only to read or change it, never across an await.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("lock")
    }

    /// Reports what `source`'s version did, when it did something.
    fn reported(&self, source: &SourceId, result: Result<Loaded, RegistryError>) -> Result<Loaded, RegistryError> {
        if let Ok(loaded) = &result {
            self.reporter.publish(Report::new(source.clone(), Reported::Loaded(loaded.clone())));
        }
        result
    }

    /// Every plugin this replica knows a valid version of, running, admitted (perhaps starting)
    /// or parked, sorted. Never waits for a load: a caller that must keep renewing Leases is
    /// never held up by a cache sync (up to two minutes).
    pub fn known(&self) -> Vec<PluginId> {
        let state = self.state();
        let mut names: Vec<PluginId> = state.slots.keys().cloned().collect();
        if let Some(gate) = &state.gate {
            names.extend(gate.known());
        }
        names.sort();
        names.dedup();
        names
    }

    /// The plugins whose new version is being prepared (their caches syncing), sorted: loads
    /// in progress, each on its own, none waiting for another plugin's.
    pub fn preparing(&self) -> Vec<PluginId> {
        self.state().preparing.iter().cloned().collect()
    }

    /// The names of the plugins serving, sorted.
    pub fn names(&self) -> Vec<PluginId> {
        let mut names: Vec<PluginId> = self.state().slots.keys().cloned().collect();
        names.sort();
        names
    }

    /// The plugin (`NAMESPACE/NAME` within a realm) and version `source` serves here, if any:
    /// what keeps serving when its newer offer is refused.
    pub fn serving(&self, source: &SourceId) -> Option<(PluginId, String)> {
        let state = self.state();
        state.serving(source).map(|(id, slot)| (id.clone(), version_of(&slot.controller)))
    }

    /// Loads, replaces or keeps the plugin `candidate` offers. A source's offers are taken one
    /// at a time, and so are the installs of one plugin; loads of other plugins, and
    /// reconciles of every plugin, go on meanwhile.
    ///
    /// # Errors
    /// When the candidate does not load, contradicts its source or cannot start; what served
    /// before still serves.
    pub async fn upsert(&self, candidate: Candidate) -> Result<Loaded, RegistryError> {
        let _source = self.lanes.enter([Lane::Source(candidate.source.clone())]).await;
        self.upsert_entered(candidate).await
    }

    /// [`Registry::upsert`], its source's lane held.
    async fn upsert_entered(&self, mut candidate: Candidate) -> Result<Loaded, RegistryError> {
        let digest = candidate.version_digest().await;
        let (running, serving) = {
            let state = self.state();
            let same = |slot: &Slot| slot.digest == digest && slot.account == candidate.account;
            let mine = state.serving(&candidate.source);
            let parked = state.gate.as_ref().and_then(|gate| gate.parked_for(&candidate.source));
            let parked = parked.map(|p| (p.id(), p.digest() == digest && p.offer.account == candidate.account));
            let again =
                plan::again(mine.map(|(id, slot)| (id, same(slot))), parked.as_ref().map(|(id, same)| (id, *same)));
            match again {
                Some(Again::Unchanged(name)) => {
                    drop(state);
                    return self.reported(&candidate.source, Ok(Loaded::Unchanged { name, digest }));
                }
                Some(Again::Parked(name)) => {
                    drop(state);
                    return self.reported(&candidate.source, Ok(Loaded::Parked { name, digest }));
                }
                None => (state.running_version(&candidate.source), mine.map(|(id, _)| id.clone())),
            }
        };
        let compiled = self.compile(&candidate).await;
        // Compiled or refused, the bytes and their share of the load memory go: what follows
        // (a start waiting for its caches to sync) holds neither.
        let Candidate { bytes, held, .. } = &mut candidate;
        (*bytes, *held) = (Bytes::new(), None);
        let plugin = match compiled {
            Ok(plugin) => plugin,
            Err(source) => {
                // Named by what the source promised or what it serves now.
                let promised =
                    candidate.expected_name.as_deref().and_then(|n| PluginId::new(candidate.realm.clone(), n).ok());
                let name = plan::refused_as(promised, serving);
                self.context.metrics.plugin_rejected(name.as_str(), source.reason());
                self.note_refusal(&candidate.source, Some(name));
                return Err(RegistryError::Load { source, running });
            }
        };
        let name = PluginId::new(candidate.realm.clone(), &plugin.manifest().name)
            .expect("a manifest's name was checked at load");
        let source = candidate.source.clone();
        let offer = Offer {
            source: candidate.source,
            realm: candidate.realm,
            expected_name: candidate.expected_name,
            account: candidate.account,
        };
        let loaded = self.install_entered(offer, plugin, candidate.config).await;
        self.note_refusal(&source, loaded.is_err().then_some(name));
        loaded
    }

    /// Notes the plugin `source` was last refused as (none: it loads now), and forgets the
    /// series of the one it was refused as before ([`Refusals::note`]).
    fn note_refusal(&self, source: &SourceId, refused_as: Option<PluginId>) {
        let forget = {
            let state = &mut *self.state();
            let slots = &state.slots;
            state.refused.note(source, refused_as, |id| slots.contains_key(id))
        };
        if let Some(earlier) = forget {
            self.context.metrics.forget_plugin(earlier.as_str());
        }
    }

    /// Serves an already compiled `plugin` for `source`, one of the operator's files (realm
    /// ""), as [`Registry::upsert`] does after compiling.
    ///
    /// # Errors
    /// As [`Registry::upsert`], compiling aside.
    pub async fn install(
        &self,
        source: &SourceId,
        account: AccountChoice,
        plugin: Plugin,
        config: Option<String>,
    ) -> Result<Loaded, RegistryError> {
        let _source = self.lanes.enter([Lane::Source(source.clone())]).await;
        let offer = Offer { source: source.clone(), realm: None, expected_name: None, account };
        self.install_entered(offer, plugin, config).await
    }

    async fn compile(&self, candidate: &Candidate) -> Result<Plugin, LoadError> {
        let load = (self.loader)(candidate.bytes.clone(), candidate.source.to_string(), candidate.settings.clone());
        // A panic while loading one candidate is that candidate's failure, not the source's end.
        match std::panic::AssertUnwindSafe(load).catch_unwind().await {
            Ok(result) => result,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Err(LoadError::Panicked { origin: candidate.source.to_string(), message: what })
            }
        }
    }

    /// Stops the plugin `source` serves, letting its reconciles in flight finish; its informers
    /// are released when no other plugin holds them. Returns the plugin.
    pub async fn remove(&self, source: &SourceId) -> Option<PluginId> {
        let _source = self.lanes.enter([Lane::Source(source.clone())]).await;
        let before = self.serving(source).map(|(id, _)| id);
        let _plugin = self.lanes.enter(before.clone().map(Lane::Plugin)).await;
        let (removal, slot, forget) = {
            let state = &mut *self.state();
            let parked = state.gate.as_mut().and_then(|gate| gate.unpark(source)).map(|p| p.id());
            // The series of names this source was refused for go with it, unless a plugin of
            // the name serves: a ConfigMap writer who makes up names cannot grow `/metrics`.
            let slots = &state.slots;
            let forget = state.refused.forget(source, |id| slots.contains_key(id));
            let now = state.serving(source).map(|(id, _)| id.clone());
            let removal = plan::removal(before.as_ref(), now.as_ref(), parked);
            let slot = removal.stop.as_ref().and_then(|name| state.take_slot(name, &self.context.metrics));
            if let (Some(gate), Some(name)) = (state.gate.as_mut(), removal.stop.as_ref()) {
                // Gone, not moved: a later offer of the name is parked and assigned afresh.
                gate.admitted.remove(name);
            }
            (removal, slot, forget)
        };
        if let Some(refused) = forget {
            self.context.metrics.forget_plugin(refused.as_str());
        }
        let Some(slot) = slot else {
            // Only parked here: gone all the same, and whatever waited for its name may load.
            return removal.parked;
        };
        let name = removal.stop.expect("a slot was taken");
        // Within the source's lane: a new version from the same source must not start before
        // this one's reconciles have finished.
        let handover = slot.controller.shut_down(self.drain).await;
        self.retire(&name, handover);
        self.context.metrics.plugin_stopped(name.as_str());
        self.context.metrics.forget_plugin(name.as_str());
        self.vacate(source);
        Some(name)
    }

    /// Stops every plugin, each given up to `timeout` to finish its reconciles in flight; a
    /// load still preparing is stopped when it is ready, never started.
    pub async fn shut_down(&self, timeout: Duration) {
        let slots: Vec<Slot> = {
            let mut state = self.state();
            state.closed = true;
            state.slots.drain().map(|(_, s)| s).collect()
        };
        futures::future::join_all(slots.into_iter().map(|s| s.controller.shut_down(timeout))).await;
        self.context.metrics.plugins_active(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_without_configuration_is_named_by_its_own_digest() {
        assert_eq!(version_digest("abc", None), "abc");
    }

    #[test]
    fn another_configuration_is_another_version() {
        let (a, b) = (version_digest("abc", Some("{\"a\":1}")), version_digest("abc", Some("{\"a\":2}")));
        assert_ne!(a, b);
        assert_ne!(a, "abc");
        assert_eq!(a, version_digest("abc", Some("{\"a\":1}")), "the same configuration is the same version");
    }

    #[test]
    fn settings_over_the_manifest_s_are_another_version_and_none_change_nothing() {
        let settings = wasmloop_sandbox::Settings { deadline_ms: Some(100), ..wasmloop_sandbox::Settings::default() };
        assert_eq!(with_overrides("abc".into(), None), "abc");
        assert_ne!(with_overrides("abc".into(), Some(&settings)), "abc");
    }

    #[test]
    fn the_operator_s_files_are_the_realm_without_a_namespace() {
        assert_eq!(realm_text(None), "");
        assert_eq!(realm_text(Some(&Namespace::parse("team-a").unwrap())), "team-a");
    }
}
