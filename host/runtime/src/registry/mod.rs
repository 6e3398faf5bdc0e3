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
//! its own lanes while every other plugin loads ([`Registry::preparing`] lists it). The maps
//! sit under short synchronous locks, so [`Registry::known`] and [`Registry::names`] never
//! wait for a load, and reconciles of every plugin go on throughout.
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

mod lanes;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use wasmloop_contract::names::Namespace;
use wasmloop_sandbox::{LoadError, Plugin, PluginId, Sandbox, SourceId};

use crate::context::Context;
use crate::controller::{Controller, ControllerConfig, Handover, StartError};
use crate::identity::AccountChoice;
use crate::shadow::{Shadow, ShadowReport, ShadowSeat, fits};
use lanes::{Lane, Lanes};
use plan::{Decision, Offered, Refusal, View};
pub use reports::Loaded;
use reports::{Report, Reported, Reporter};

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

/// A candidate was refused; whatever served before still does.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The component did not load.
    #[error("{source}{}", keeps(.running))]
    Load {
        /// Why.
        #[source]
        source: LoadError,
        /// The version still serving, if any.
        running: Option<String>,
    },
    /// The manifest names another plugin than the source promised.
    #[error("{origin} is labelled plugin {expected:?} but the component's manifest names plugin {found:?}; make the two agree (wasmloop bundle --name sets the label){}", keeps(.running))]
    NameMismatch {
        /// The source.
        origin: SourceId,
        /// What the source promised.
        expected: String,
        /// What the manifest says.
        found: String,
        /// The version still serving, if any.
        running: Option<String>,
    },
    /// Another source of the same realm already serves a plugin of this name.
    #[error(
        "{origin} offers plugin {name:?}, which {holder} already serves; a plugin name is unique within its plugin namespace (the operator's files are one): remove one of the two"
    )]
    NameTaken {
        /// The source.
        origin: SourceId,
        /// The plugin.
        name: PluginId,
        /// The source serving it.
        holder: SourceId,
    },
    /// Another source already offers a shadow of this plugin.
    #[error(
        "{origin} offers a shadow of plugin {name:?}, which already has one from {holder}; a plugin has one shadow at a time: remove one of the two"
    )]
    ShadowTaken {
        /// The source.
        origin: SourceId,
        /// The plugin.
        name: String,
        /// The source whose shadow is seated.
        holder: SourceId,
    },
    /// A shadow cannot stand beside the serving version.
    #[error("{origin}: the shadow of plugin {name:?} {reason}")]
    ShadowMismatch {
        /// The source.
        origin: SourceId,
        /// The plugin.
        name: String,
        /// What does not match, and what to do.
        reason: String,
    },
    /// The host shut down while the version prepared; it was stopped before it started.
    #[error("plugin {plugin}: not started, the host is shutting down")]
    ShuttingDown {
        /// The plugin.
        plugin: PluginId,
    },
    /// Its controller could not start (a kind not served, a cache that did not sync).
    #[error("{source}{}", keeps(.running))]
    Start {
        /// Why.
        #[source]
        source: StartError,
        /// The version still serving, if any.
        running: Option<String>,
    },
}

fn keeps(running: &Option<String>) -> String {
    running.as_ref().map(|v| format!(" (version {v} keeps serving)")).unwrap_or_default()
}

impl RegistryError {
    /// A short CamelCase reason, for Events and metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            RegistryError::Load { source, .. } => source.reason(),
            RegistryError::NameMismatch { .. } => "NameMismatch",
            RegistryError::NameTaken { .. } => "NameTaken",
            RegistryError::ShadowTaken { .. } => "ShadowTaken",
            RegistryError::ShadowMismatch { .. } => "ShadowMismatch",
            RegistryError::ShuttingDown { .. } => "ShuttingDown",
            RegistryError::Start { source: StartError::Identity { .. }, .. } => "IdentityRefused",
            RegistryError::Start { .. } => "StartFailed",
        }
    }
}

/// Where a version comes from, as an install needs it.
#[derive(Clone)]
struct Offer {
    source: SourceId,
    realm: Option<Namespace>,
    expected_name: Option<String>,
    account: AccountChoice,
}

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

/// A valid version this host does not run, because another replica runs its plugin.
struct Parked {
    offer: Offer,
    /// Compiled, holding no instances.
    plugin: Plugin,
    config: Option<String>,
}

/// Which plugins a sharded host may run (`--shard`): those whose fence it holds. A check and
/// the install it allows are one step: both happen within the plugin's lane.
#[derive(Default)]
struct Gate {
    admitted: HashSet<PluginId>,
    /// By source: each source's latest offer of a plugin not admitted.
    parked: HashMap<SourceId, Parked>,
    /// Versions stopped without a successor here (their source removed, or offering another
    /// plugin), by plugin: reconciles past the drain time may still run, and a hand-over to
    /// another replica, or a new start here, waits for them.
    retired: HashMap<PluginId, Vec<Handover>>,
}

/// The running plugins of one host, by name.
pub struct Registry {
    context: Context,
    sandbox: Sandbox,
    loader: Loader,
    settings: Settings,
    drain: Duration,
    /// Held only to read or change the map, never across an await: a load waits on its
    /// lanes instead.
    slots: std::sync::Mutex<HashMap<PluginId, Slot>>,
    lanes: Lanes,
    /// The plugins whose controllers are being prepared ([`Registry::preparing`]).
    preparing: std::sync::Mutex<BTreeSet<PluginId>>,
    /// Shut down: no version starts any more. Set and read under the slots lock.
    closed: AtomicBool,
    /// Each plugin's shadow seat, by realm and plugin name, whether or not a version serves:
    /// a shadow of one realm neither blocks nor stands in for another realm's.
    seats: std::sync::Mutex<HashMap<SeatKey, Arc<ShadowSeat>>>,
    /// With `--shard`, what this replica may run; none runs everything.
    gate: Option<std::sync::Mutex<Gate>>,
    /// Where what happens to each source's plugin is reported ([`reports`]).
    reporter: Reporter,
    /// The plugin name each source was last refused for, whose metric series go with the
    /// source ([`Registry::remove`]).
    refused: std::sync::Mutex<HashMap<SourceId, PluginId>>,
}

/// A version to start, as [`plan::decide`] said.
struct Install {
    offer: Offer,
    plugin: Plugin,
    config: Option<String>,
    digest: String,
    promote: bool,
    replace: Option<PluginId>,
    /// The version its source serves now, to name in errors.
    running: Option<String>,
}

/// A plugin noted as preparing while this lives, and counted in `wasmloop_plugins_preparing`.
struct Preparing<'a> {
    set: &'a std::sync::Mutex<BTreeSet<PluginId>>,
    metrics: &'a crate::metrics::Metrics,
    id: PluginId,
}

impl<'a> Preparing<'a> {
    fn enter(
        set: &'a std::sync::Mutex<BTreeSet<PluginId>>,
        metrics: &'a crate::metrics::Metrics,
        id: &PluginId,
    ) -> Self {
        let mut preparing = set.lock().expect("lock");
        preparing.insert(id.clone());
        metrics.plugins_preparing(preparing.len());
        Preparing { set, metrics, id: id.clone() }
    }
}

impl Drop for Preparing<'_> {
    fn drop(&mut self) {
        let mut preparing = self.set.lock().expect("lock");
        preparing.remove(&self.id);
        self.metrics.plugins_preparing(preparing.len());
    }
}

/// How often a shadow's findings are reported, at most: a status written per call would be a
/// write per reconcile.
pub const FINDINGS_EVERY: Duration = Duration::from_secs(1);

/// A seat's realm and plugin name.
type SeatKey = (Option<Namespace>, String);

/// A realm as the operator's settings name it: empty for the operator's files.
fn realm_text(realm: Option<&Namespace>) -> &str {
    realm.map_or("", Namespace::as_str)
}

/// What an accepted shadow did.
#[derive(Debug)]
pub enum Shadowed {
    /// The candidate now shadows its plugin, replacing the source's earlier candidate.
    Seated {
        /// The plugin.
        name: String,
        /// The candidate's version.
        version: String,
        /// SHA-256 of component and configuration.
        digest: String,
        /// This seating's id ([`Shadow::id`]): findings of an earlier one are stale; what it
        /// finds is reported ([`Reported::ShadowFindings`]).
        id: u64,
    },
    /// The same candidate already shadows the plugin.
    Unchanged {
        /// The plugin.
        name: String,
    },
}

/// What identifies a serving version: the component's SHA-256 (as the sandbox computes it)
/// and the configuration it runs with.
/// What names the version `plugin` is, with `config`: its digest, its configuration's and its
/// overrides'.
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

impl Registry {
    /// A registry starting controllers from `context`, compiling with `loader`, reserving each
    /// plugin's instances from `sandbox`, configuring each plugin with `settings`, and giving
    /// an old version up to `drain` to finish its reconciles in flight when it is replaced or
    /// removed.
    pub fn new(context: Context, sandbox: Sandbox, loader: Loader, settings: Settings, drain: Duration) -> Registry {
        let (slots, seats) = (std::sync::Mutex::default(), std::sync::Mutex::default());
        Registry {
            context,
            sandbox,
            loader,
            settings,
            drain,
            slots,
            lanes: Lanes::default(),
            preparing: std::sync::Mutex::default(),
            closed: AtomicBool::new(false),
            seats,
            gate: None,
            reporter: Reporter::none(),
            refused: Default::default(),
        }
    }

    /// The registry of one replica of several sharing the plugins out: it runs only the
    /// plugins it is admitted to ([`Registry::admit`]) and parks every other valid version
    /// ([`Loaded::Parked`]).
    #[must_use]
    pub fn sharded(mut self) -> Registry {
        self.gate = Some(std::sync::Mutex::default());
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

    /// Reports what `source`'s version did, when it did something.
    fn reported(&self, source: &SourceId, result: Result<Loaded, RegistryError>) -> Result<Loaded, RegistryError> {
        if let Ok(loaded) = &result {
            self.reporter.publish(Report::new(source.clone(), Reported::Loaded(loaded.clone())));
        }
        result
    }

    /// True while a version of plugin `id` ([`wasmloop_sandbox::Manifest::id`]) waits here,
    /// parked, for admission.
    pub fn is_parked(&self, id: &PluginId) -> bool {
        self.gate
            .as_ref()
            .is_some_and(|g| g.lock().expect("lock").parked.values().any(|p| p.plugin.manifest().id() == *id))
    }

    /// Lets this replica run plugin `name` (it holds the plugin's fence) and starts the
    /// versions parked for it. Returns what each source's version did.
    pub async fn admit(&self, name: &PluginId) -> Vec<(SourceId, Result<Loaded, RegistryError>)> {
        let Some(gate) = &self.gate else { return Vec::new() };
        let sources: Vec<SourceId> = {
            let mut gate = gate.lock().expect("lock");
            gate.admitted.insert(name.clone());
            gate.parked.iter().filter(|(_, p)| p.plugin.manifest().id() == *name).map(|(s, _)| s.clone()).collect()
        };
        let mut results = Vec::new();
        for source in sources {
            let _source = self.lanes.enter([Lane::Source(source.clone())]).await;
            // Taken under the source's lane: a newer offer from it, made meanwhile, wins.
            let parked = {
                let mut gate = gate.lock().expect("lock");
                let still = gate.parked.get(&source).is_some_and(|p| p.plugin.manifest().id() == *name);
                if !still {
                    continue;
                }
                gate.parked.remove(&source).expect("checked above")
            };
            let (offer, plugin, config) = (parked.offer.clone(), parked.plugin.clone(), parked.config.clone());
            let result = self.install_entered(offer, plugin, config).await;
            match &result {
                Ok(_) => {}
                // Kept for the next try (a full pool, a cache that did not sync): the plugin is
                // still assigned here, and nothing else would offer it again.
                Err(_) => {
                    gate.lock().expect("lock").parked.entry(source.clone()).or_insert(parked);
                }
            }
            results.push((source, result));
        }
        results
    }

    /// Stops running plugin `name` here and parks its version: another replica is to run it.
    /// Returns once it stopped taking work (its reconciles in flight given the drain time); the
    /// hand-overs it returns (of this version, and of any stopped here without a successor)
    /// say when the last of them has ended ([`Handover::quiesced`]), which a caller handing
    /// the plugin to another process waits for.
    pub async fn evict(&self, name: &PluginId) -> Vec<Handover> {
        let Some(gate) = self.gate.as_ref() else { return Vec::new() };
        let _plugin = self.lanes.enter([Lane::Plugin(name.clone())]).await;
        gate.lock().expect("lock").admitted.remove(name);
        let mut handovers = self.take_retired(name);
        // Taken from the slots and parked in one step under both locks (slots first, as
        // everywhere), and reported before the drain: a removal of the source sees it either
        // serving or parked, drops it, and its report comes after this one.
        let slot = {
            let mut slots = self.slots.lock().expect("lock");
            let Some(slot) = slots.remove(name) else { return handovers };
            self.context.metrics.plugins_active(slots.len());
            let offer = Offer {
                source: slot.source.clone(),
                realm: slot.realm.clone(),
                expected_name: None,
                account: slot.account.clone(),
            };
            let plugin = slot.controller.plugin().with_limits(slot.controller.plugin().limits());
            let parked = Parked { offer, plugin, config: slot.config.clone() };
            gate.lock().expect("lock").parked.insert(slot.source.clone(), parked);
            slot
        };
        let parked = Loaded::Parked { name: name.clone(), digest: slot.digest.clone() };
        self.reporter.publish(Report::new(slot.source.clone(), Reported::Loaded(parked)));
        let handover = slot.controller.shut_down(self.drain).await;
        self.context.metrics.plugin_stopped(name.as_str());
        handovers.push(handover);
        handovers
    }

    /// The hand-overs of versions of `name` stopped here without a successor (see
    /// [`Registry::evict`]); whoever takes them waits for them.
    pub fn take_retired(&self, name: &PluginId) -> Vec<Handover> {
        self.gate.as_ref().and_then(|g| g.lock().expect("lock").retired.remove(name)).unwrap_or_default()
    }

    fn retire(&self, name: &PluginId, handover: Handover) {
        if let Some(gate) = &self.gate {
            gate.lock().expect("lock").retired.entry(name.clone()).or_default().push(handover);
        }
    }

    /// Every plugin this replica knows a valid version of, running, admitted (perhaps starting)
    /// or parked, sorted. Never waits for a load: a caller that must keep renewing Leases is
    /// never held up by a cache sync (up to two minutes).
    pub fn known(&self) -> Vec<PluginId> {
        let mut names: Vec<PluginId> = self.slots.lock().expect("lock").keys().cloned().collect();
        if let Some(gate) = &self.gate {
            let gate = gate.lock().expect("lock");
            names.extend(gate.admitted.iter().cloned());
            names.extend(gate.parked.values().map(|p| p.plugin.manifest().id()));
        }
        names.sort();
        names.dedup();
        names
    }

    /// The plugins whose new version is being prepared (their caches syncing), sorted: loads
    /// in progress, each on its own, none waiting for another plugin's.
    pub fn preparing(&self) -> Vec<PluginId> {
        self.preparing.lock().expect("lock").iter().cloned().collect()
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
            let slots = self.slots.lock().expect("lock");
            let same = |s: &Slot| s.source == candidate.source && s.digest == digest && s.account == candidate.account;
            if let Some((name, _)) = slots.iter().find(|(_, s)| same(s)) {
                return self.reported(&candidate.source, Ok(Loaded::Unchanged { name: name.clone(), digest }));
            }
            if let Some(name) = self.parked_same(&candidate, &digest) {
                return self.reported(&candidate.source, Ok(Loaded::Parked { name, digest }));
            }
            let serving = slots.iter().find(|(_, s)| s.source == candidate.source).map(|(n, _)| n.clone());
            (running_version(&slots, &candidate.source), serving)
        };
        let compiled = self.compile(&candidate).await;
        // Compiled or refused, the bytes and their share of the load memory go: what follows
        // (a start waiting for its caches to sync) holds neither.
        let Candidate { bytes, held, .. } = &mut candidate;
        (*bytes, *held) = (Bytes::new(), None);
        let plugin = match compiled {
            Ok(plugin) => plugin,
            Err(source) => {
                // Name the plugin by what the source promised or what it serves now.
                let promised =
                    candidate.expected_name.as_deref().and_then(|n| PluginId::new(candidate.realm.clone(), n).ok());
                let name =
                    promised.or(serving).unwrap_or_else(|| PluginId::new(None, "unknown").expect("a plugin name"));
                self.context.metrics.plugin_rejected(name.as_str(), source.reason());
                self.note_refusal(&candidate.source, Some(name));
                return Err(RegistryError::Load { source, running });
            }
        };
        let (source, name) = (candidate.source.clone(), plugin.in_realm(candidate.realm.clone()).manifest().id());
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

    /// The plugin `candidate`'s very version is parked for, if it is.
    fn parked_same(&self, candidate: &Candidate, digest: &str) -> Option<PluginId> {
        let gate = self.gate.as_ref()?.lock().expect("lock");
        let parked = gate.parked.get(&candidate.source)?;
        let same = plugin_version_digest(&parked.plugin, parked.config.as_deref()) == digest
            && parked.offer.account == candidate.account;
        same.then(|| parked.plugin.manifest().id())
    }

    /// Notes the plugin `source` was last refused as (none: it loads now), and forgets the
    /// series of the one it was refused as before, unless that one serves or is the same: a
    /// source that keeps offering components of new names cannot grow `/metrics`.
    fn note_refusal(&self, source: &SourceId, refused_as: Option<PluginId>) {
        let earlier = {
            let mut refused = self.refused.lock().expect("lock");
            match refused_as {
                Some(id) => refused.insert(source.clone(), id.clone()).filter(|earlier| *earlier != id),
                None => refused.remove(source),
            }
        };
        if let Some(earlier) = earlier.filter(|e| !self.slots.lock().expect("lock").contains_key(e)) {
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

    /// Decides what `plugin` does ([`plan::decide`]) and carries it out. The caller holds the
    /// source's lane; this takes the lanes of the plugin offered and of the one the source
    /// serves, so what the decision saw holds until it is carried out.
    async fn install_entered(
        &self,
        offer: Offer,
        plugin: Plugin,
        config: Option<String>,
    ) -> Result<Loaded, RegistryError> {
        let plugin = plugin.in_realm(offer.realm.clone());
        let digest = plugin_version_digest(&plugin, config.as_deref());
        // The plugin's own name (its ServiceAccount's, its seat's) and what the host knows it
        // by: names are unique within a realm, not across realms.
        let (name, id) = (plugin.manifest().name.clone(), plugin.manifest().id());
        // Only this source's offers change what it serves, and its lane is held: this holds.
        let mine = self.serving_for(&offer.source);
        let _plugins = self.lanes.enter([Lane::Plugin(id.clone())].into_iter().chain(mine.map(Lane::Plugin))).await;
        let (view, running) = self.view(&offer, &name, &id, &digest);
        let reject = |error: RegistryError| {
            self.context.metrics.plugin_rejected(id.as_str(), error.reason());
            error
        };
        let (origin, source) = (offer.source.clone(), offer.source.clone());
        let decided =
            plan::decide(&view, &Offered { name: &name, id: &id, expected_name: offer.expected_name.as_deref() });
        // Reported while the lanes are held: what this source's plugin did reaches the stream
        // before anything a later change of the source or of the plugin does.
        let result = match decided {
            Decision::Unchanged { id } => Ok(Loaded::Unchanged { name: id, digest }),
            Decision::Refuse(Refusal::NameMismatch { expected }) => {
                Err(reject(RegistryError::NameMismatch { origin, expected, found: name, running }))
            }
            Decision::Refuse(Refusal::NameTaken { holder }) => {
                Err(reject(RegistryError::NameTaken { origin, name: id.clone(), holder }))
            }
            Decision::Park { stop } => match self.vouch(&offer, &plugin).await {
                Ok(()) => Ok(self.park(offer, plugin, config, stop).await),
                Err(source) => Err(reject(RegistryError::Start { source, running })),
            },
            Decision::Install { promote, replace } => {
                let install = Install { offer, plugin, config, digest, promote, replace, running };
                match self.start(install).await {
                    Ok((loaded, capped)) => {
                        let result = self.reported(&source, Ok(loaded));
                        if let Some(capped) = capped {
                            let message = capped.to_string();
                            tracing::warn!(%source, plugin = %id, "{message}");
                            self.reporter.publish(Report::new(source, Reported::Capped { message }));
                        }
                        return result;
                    }
                    Err(error) => Err(reject(error)),
                }
            }
        };
        self.reported(&source, result)
    }

    /// The plugin (`NAMESPACE/NAME` within a realm) and version `source` serves here, if any:
    /// what keeps serving when its newer offer is refused.
    pub fn serving(&self, source: &SourceId) -> Option<(PluginId, String)> {
        let slots = self.slots.lock().expect("lock");
        slots.iter().find(|(_, s)| s.source == *source).map(|(n, s)| (n.clone(), version_of(&s.controller)))
    }

    /// The plugin `source` serves.
    fn serving_for(&self, source: &SourceId) -> Option<PluginId> {
        self.serving(source).map(|(name, _)| name)
    }

    /// What the decision on an offer of plugin `name` (known as `id`) looks at, and the version
    /// its source serves now.
    fn view(&self, offer: &Offer, name: &str, id: &PluginId, digest: &str) -> (View, Option<String>) {
        let slots = self.slots.lock().expect("lock");
        let source = &offer.source;
        let mine = slots.iter().find(|(_, s)| s.source == *source);
        let gate = self.gate.as_ref().map(|g| g.lock().expect("lock"));
        let view = View {
            mine: mine.map(|(n, s)| (n.clone(), s.digest == digest && s.account == offer.account)),
            holder: slots.get(id).filter(|s| s.source != *source).map(|s| s.source.clone()),
            admitted: gate.as_ref().map(|g| g.admitted.contains(id)),
            parked_elsewhere: gate.as_ref().and_then(|g| {
                g.parked.iter().find(|(s, p)| *s != source && p.plugin.manifest().id() == *id).map(|(s, _)| s.clone())
            }),
            shadows_this: self.seated(offer.realm.as_ref(), name).is_some_and(|shadow| {
                shadow.source() == source && plugin_version_digest(shadow.plugin(), shadow.config()) == digest
            }),
        };
        (view, running_version(&slots, source))
    }

    /// Prepares the new version's controller while what it replaces still serves, with no
    /// registry-wide lock held (its caches may take two minutes to sync), then stops the old
    /// version and starts the new one. Says what of its limits the host's guest memory budget
    /// cut, if anything.
    async fn start(&self, install: Install) -> Result<(Loaded, Option<wasmloop_sandbox::Capped>), RegistryError> {
        let Install { offer, plugin, config, digest, promote, replace, running } = install;
        let Offer { source, realm, account, .. } = offer;
        let (name, id) = (plugin.manifest().name.clone(), plugin.manifest().id());
        let seat = self.seat(realm.as_ref(), &name);
        let promoted = seat.current().filter(|_| promote);
        let mut controller_config = (self.settings)(realm_text(realm.as_ref()), &name);
        if let Some(text) = &config {
            controller_config.plugin_config = text.clone();
        }
        controller_config.identity =
            self.context.identities.identity_for(&account, &name, controller_config.service_account.as_ref()).map_err(
                |source| {
                    let source = StartError::Identity { plugin: id.clone(), source };
                    RegistryError::Start { source, running: running.clone() }
                },
            )?;
        // One instance per worker (workers make the `map` calls too): a call never waits for
        // another plugin. Ceilings times workers must fit the host's guest memory budget, or
        // the plugin alone could fill the host: fewer workers if not. A promoted shadow keeps
        // the instances it reserved, fitted the same way: a full pool does not stop a promotion.
        let (plugin, capped) = match &promoted {
            Some(shadow) => (shadow.plugin().clone(), None),
            None => {
                let (limits, capped) = self.fitted(&plugin, &controller_config);
                let reserved = self
                    .sandbox
                    .reserve(&plugin.with_limits(limits))
                    .map_err(|source| RegistryError::Load { source, running: running.clone() })?;
                (reserved, capped)
            }
        };
        controller_config.concurrency_override = Some(plugin.limits().instances);
        let version = plugin.manifest().version.clone();
        let prepared = {
            let _preparing = Preparing::enter(&self.preparing, &self.context.metrics, &id);
            Controller::prepare(plugin, &self.context, controller_config, seat.clone())
                .await
                .map_err(|source| RegistryError::Start { source, running: running.clone() })?
        };
        if self.closed.load(Ordering::Relaxed) {
            return Err(RegistryError::ShuttingDown { plugin: id });
        }
        // A source that now offers a plugin of another name gives up its old one; a promoted
        // shadow takes over from whichever source served.
        let old = replace.and_then(|replaced| self.take_slot(&replaced));
        let previous = old.as_ref().map(|s| version_of(&s.controller));
        let superseded = old.as_ref().filter(|s| s.source != source).map(|s| s.source.clone());
        // A source serves or shadows, not both; and a promoted shadow must be gone before the
        // new version starts, or it would be compared with itself.
        self.vacate(&source);
        let controller = match old {
            Some(old) => prepared.run_after(old.controller.shut_down(self.drain).await),
            None => prepared.run(),
        };
        if let Some(gate) = &self.gate {
            gate.lock().expect("lock").parked.remove(&source);
        }
        let slot_of = |controller| Slot { source, realm, account, digest: digest.clone(), config, controller };
        {
            let mut slots = self.slots.lock().expect("lock");
            if self.closed.load(Ordering::Relaxed) {
                // Shut down while it prepared: it must not run past the host's drain.
                drop(slots);
                controller.shut_down(Duration::ZERO).await;
                return Err(RegistryError::ShuttingDown { plugin: id });
            }
            slots.insert(id.clone(), slot_of(controller));
            self.context.metrics.plugins_active(slots.len());
        }
        self.context.metrics.plugin_loaded(id.as_str());
        let name = id;
        let loaded = match previous {
            _ if promoted.is_some() => Loaded::Promoted { name, version, previous, superseded, digest },
            Some(previous) => Loaded::Replaced { name, version, previous, digest },
            None => Loaded::Started { name, version, digest },
        };
        Ok((loaded, capped))
    }

    /// `plugin`'s limits as it runs under `config`: one instance per worker, the operator's CPU
    /// weight, within the host's guest memory budget ([`Sandbox::fit`]).
    fn fitted(
        &self,
        plugin: &Plugin,
        config: &ControllerConfig,
    ) -> (wasmloop_sandbox::Limits, Option<wasmloop_sandbox::Capped>) {
        let concurrency = config.concurrency_for(plugin.manifest().settings.max_concurrent_reconciles);
        self.sandbox.fit(plugin.limits().instances(concurrency).cpu_weight(config.cpu_weight))
    }

    /// Takes plugin `name`'s slot out, to stop it.
    fn take_slot(&self, name: &PluginId) -> Option<Slot> {
        let mut slots = self.slots.lock().expect("lock");
        let slot = slots.remove(name)?;
        self.context.metrics.plugins_active(slots.len());
        Some(slot)
    }

    /// Checks that `plugin`, offered by `offer`, may act as whom it names, before it is parked: a
    /// sharded host takes a fence Lease for every plugin it knows, so one whose identity would
    /// be refused must not become one (two thousand such objects would be two thousand Leases
    /// to renew).
    async fn vouch(&self, offer: &Offer, plugin: &Plugin) -> Result<(), StartError> {
        self.may_act(offer.realm.as_ref(), &plugin.manifest().name, &offer.account).await
    }

    /// Checks that plugin `name` of `realm` may act as whom `account` names: with plugins
    /// acting as their own ServiceAccounts, that the account exists, its administrator opted it
    /// in, and it is not the host's. Sources ask before anything is compiled for an offer.
    ///
    /// # Errors
    /// [`StartError::Identity`], naming the plugin and what to do.
    pub async fn may_act(
        &self,
        realm: Option<&Namespace>,
        name: &str,
        account: &AccountChoice,
    ) -> Result<(), StartError> {
        let configured = (self.settings)(realm_text(realm), name).service_account;
        let identities = &self.context.identities;
        let id = PluginId::new(realm.cloned(), name).expect("a manifest's name");
        let refused = |source| StartError::Identity { plugin: id.clone(), source };
        let identity = identities.identity_for(account, name, configured.as_ref()).map_err(refused)?;
        if let crate::identity::Identity::ServiceAccount(account) = &identity {
            identities.ensure_usable(account).await.map_err(refused)?;
        }
        Ok(())
    }

    /// Keeps `plugin` for when its name is admitted. What the source served before (`stop`, a
    /// plugin of another name) stops: the source offers this one now.
    async fn park(&self, offer: Offer, plugin: Plugin, config: Option<String>, stop: Option<PluginId>) -> Loaded {
        let (name, digest) = (plugin.manifest().id(), plugin_version_digest(&plugin, config.as_deref()));
        if let Some((old_name, old)) = stop.and_then(|old| self.take_slot(&old).map(|slot| (old, slot))) {
            let handover = old.controller.shut_down(self.drain).await;
            self.retire(&old_name, handover);
        }
        let gate = self.gate.as_ref().expect("only a gated registry parks");
        gate.lock().expect("lock").parked.insert(offer.source.clone(), Parked { offer, plugin, config });
        Loaded::Parked { name, digest }
    }

    fn seat(&self, realm: Option<&Namespace>, name: &str) -> Arc<ShadowSeat> {
        let key = (realm.cloned(), name.to_owned());
        self.seats.lock().expect("lock").entry(key).or_default().clone()
    }

    /// The shadow seated for plugin `name` of `realm`, without making a seat never used.
    fn seated(&self, realm: Option<&Namespace>, name: &str) -> Option<Arc<Shadow>> {
        let key = (realm.cloned(), name.to_owned());
        self.seats.lock().expect("lock").get(&key).and_then(|seat| seat.current())
    }

    /// Unseats every shadow of `source`, returning the plugins they shadowed.
    fn vacate(&self, source: &SourceId) -> Vec<String> {
        vacate_locked(&mut self.seats.lock().expect("lock"), source, None)
    }

    /// Seats `candidate` as the shadow of the plugin it names (`expected_name`, which is
    /// required): called beside every version of that plugin from the same realm that serves,
    /// now or later, and compared with it. It is compiled and its instances reserved as for a
    /// serving version; the plugin's settings (concurrency, limits) apply. It acts as nobody:
    /// it writes nothing, and reads through the serving version's caches, so
    /// `candidate.account` is not used.
    ///
    /// # Errors
    /// When the candidate does not load, names another plugin, does not fit the serving
    /// version of its realm ([`crate::shadow::fits`]), or another source's shadow is seated;
    /// whatever shadowed before still does.
    pub async fn shadow(&self, candidate: Candidate) -> Result<Shadowed, RegistryError> {
        let origin = candidate.source.clone();
        let name = candidate.expected_name.clone().ok_or_else(|| RegistryError::ShadowMismatch {
            origin: origin.clone(),
            name: String::new(),
            reason: "names no plugin; say which plugin it shadows".to_owned(),
        })?;
        let digest = candidate.version_digest().await;
        if let Some(current) = self.seated(candidate.realm.as_ref(), &name) {
            if *current.source() != origin {
                let holder = current.source().to_owned();
                return Err(RegistryError::ShadowTaken { origin, name, holder });
            }
            if plugin_version_digest(current.plugin(), current.config()) == digest {
                self.reporter.publish(Report::new(origin, Reported::ShadowUnchanged));
                return Ok(Shadowed::Unchanged { name });
            }
        }
        let plugin = self.compile(&candidate).await.map_err(|source| {
            let id =
                PluginId::new(candidate.realm.clone(), &name).map(|id| id.to_string()).unwrap_or_else(|_| name.clone());
            self.context.metrics.plugin_rejected(id.as_str(), source.reason());
            RegistryError::Load { source, running: None }
        })?;
        self.seat_compiled((&origin, candidate.realm.as_ref()), &name, plugin, candidate.config).await
    }

    /// Seats an already compiled `plugin` from `(source, realm)` as the shadow of plugin
    /// `name`, as [`Registry::shadow`] does after compiling.
    ///
    /// # Errors
    /// As [`Registry::shadow`], compiling aside.
    pub async fn seat_compiled(
        &self,
        (origin, realm): (&SourceId, Option<&Namespace>),
        name: &str,
        plugin: Plugin,
        config: Option<String>,
    ) -> Result<Shadowed, RegistryError> {
        let (origin, name, plugin) = (origin.clone(), name.to_owned(), plugin.in_realm(realm.cloned()));
        // The serving version it stands beside is its own realm's: names are unique per realm.
        let id = PluginId::new(realm.cloned(), &name).map_err(|e| RegistryError::ShadowMismatch {
            origin: origin.clone(),
            name: String::new(),
            reason: format!("names no plugin: {e}"),
        })?;
        let mismatch = |origin: SourceId, name: String, reason: String| {
            self.context.metrics.plugin_rejected(id.as_str(), "ShadowMismatch");
            RegistryError::ShadowMismatch { origin, name, reason }
        };
        if let Some(holder) = self.seated(realm, &name).map(|s| s.source().clone()).filter(|h| *h != origin) {
            return Err(RegistryError::ShadowTaken { origin, name, holder });
        }
        let digest = plugin_version_digest(&plugin, config.as_deref());
        let found = plugin.manifest().name.clone();
        if found != name {
            self.context.metrics.plugin_rejected(id.as_str(), "NameMismatch");
            return Err(RegistryError::NameMismatch { origin, expected: name, found, running: None });
        }
        {
            let slots = self.slots.lock().expect("lock");
            if let Some(serving) = slots.get(&id)
                && let Err(reason) = fits(serving.controller.plugin().manifest(), plugin.manifest())
            {
                return Err(mismatch(origin, name, reason));
            }
        }
        let (limits, capped) = self.fitted(&plugin, &(self.settings)(realm_text(realm), &name));
        if let Some(capped) = capped {
            tracing::warn!(source = %origin, plugin = %id, "shadow: {capped}");
        }
        let concurrency = limits.instances;
        let plugin = self.sandbox.reserve(&plugin.with_limits(limits)).map_err(|source| {
            self.context.metrics.plugin_rejected(id.as_str(), source.reason());
            RegistryError::Load { source, running: None }
        })?;
        let version = plugin.manifest().version.clone();
        let metrics = self.context.metrics.clone();
        let (shadow, findings) = Shadow::new(plugin, origin.clone(), config, concurrency, metrics);
        let seating = shadow.id();
        // One step under the map's lock: seated here (replacing this source's earlier shadow),
        // then gone from every other seat (a relabelled ConfigMap shadows one plugin). Seating
        // fails before anything is vacated, so what shadowed before still does.
        let mut seats = self.seats.lock().expect("lock");
        let key = (realm.cloned(), name.clone());
        let seated = seats.entry(key.clone()).or_default().seat(shadow);
        if let Err(holder) = seated {
            return Err(RegistryError::ShadowTaken { origin, name, holder });
        }
        vacate_locked(&mut seats, &origin, Some(&key));
        drop(seats);
        let seated = Reported::ShadowSeated {
            id: seating,
            plugin: id.clone(),
            version: version.clone(),
            digest: digest.clone(),
        };
        self.reporter.publish(Report::new(origin.clone(), seated));
        self.forward_findings(origin, seating, findings);
        Ok(Shadowed::Seated { name, version, digest, id: seating })
    }

    /// Reports what shadow seating `id` of `source` finds as it changes, at most once per
    /// [`FINDINGS_EVERY`]; ends when the shadow is gone.
    fn forward_findings(&self, source: SourceId, id: u64, mut findings: tokio::sync::watch::Receiver<ShadowReport>) {
        let reporter = self.reporter.clone();
        tokio::spawn(async move {
            while findings.changed().await.is_ok() {
                let report = findings.borrow_and_update().clone();
                reporter.publish(Report::new(source.clone(), Reported::ShadowFindings { id, report }));
                tokio::time::sleep(FINDINGS_EVERY).await;
            }
        });
    }

    /// Unseats the shadows `source` offered; their calls in flight finish unseen. Returns the
    /// plugins they shadowed.
    pub fn unshadow(&self, source: &SourceId) -> Vec<String> {
        self.vacate(source)
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
    /// are released when no other plugin holds them. Returns the plugin's name.
    pub async fn remove(&self, source: &SourceId) -> Option<PluginId> {
        let _source = self.lanes.enter([Lane::Source(source.clone())]).await;
        let serving = self.serving_for(source);
        let _plugin = self.lanes.enter(serving.clone().map(Lane::Plugin)).await;
        let parked = self.gate.as_ref().and_then(|g| g.lock().expect("lock").parked.remove(source));
        // The series of names this source was refused for go with it, unless a plugin of the
        // name serves: a ConfigMap writer who makes up names cannot grow `/metrics`.
        let refused = self.refused.lock().expect("lock").remove(source);
        if let Some(refused) = refused.filter(|n| !self.slots.lock().expect("lock").contains_key(n)) {
            self.context.metrics.forget_plugin(refused.as_str());
        }
        // Read again within the lanes: a promotion may have taken the plugin over meanwhile,
        // and another source's version is not this source's to stop.
        let serving = serving.filter(|name| self.serving_for(source).as_ref() == Some(name));
        let Some(slot) = serving.as_ref().and_then(|name| self.take_slot(name)) else {
            // Only parked here: gone all the same, and whatever waited for its name may load.
            return parked.map(|p| p.plugin.manifest().id());
        };
        let name = serving.expect("a slot was taken");
        if let Some(gate) = &self.gate {
            // Gone, not moved: a later offer of the name is parked and assigned afresh.
            gate.lock().expect("lock").admitted.remove(&name);
        }
        // Within the source's lane: a new version from the same source must not start before
        // this one's reconciles have finished.
        let handover = slot.controller.shut_down(self.drain).await;
        self.retire(&name, handover);
        self.context.metrics.plugin_stopped(name.as_str());
        self.context.metrics.forget_plugin(name.as_str());
        self.vacate(source);
        Some(name)
    }

    /// The names of the plugins serving, sorted.
    pub fn names(&self) -> Vec<PluginId> {
        let mut names: Vec<PluginId> = self.slots.lock().expect("lock").keys().cloned().collect();
        names.sort();
        names
    }

    /// Stops every plugin, each given up to `timeout` to finish its reconciles in flight; a
    /// load still preparing is stopped when it is ready, never started.
    pub async fn shut_down(&self, timeout: Duration) {
        let slots: Vec<Slot> = {
            let mut slots = self.slots.lock().expect("lock");
            self.closed.store(true, Ordering::Relaxed);
            slots.drain().map(|(_, s)| s).collect()
        };
        futures::future::join_all(slots.into_iter().map(|s| s.controller.shut_down(timeout))).await;
        self.context.metrics.plugins_active(0);
    }
}

/// Unseats every shadow of `source` but the one at `except`, returning the plugins they
/// shadowed, and forgets the seats nothing uses any more (a hostile source must not grow the
/// map name by name). A serving controller holds its seat, so only seats held by nothing else
/// go.
fn vacate_locked(
    seats: &mut HashMap<SeatKey, Arc<ShadowSeat>>,
    source: &SourceId,
    except: Option<&SeatKey>,
) -> Vec<String> {
    let vacated = seats
        .iter()
        .filter(|(key, seat)| Some(*key) != except && seat.vacate(source).is_some())
        .map(|((_, name), _)| name.clone())
        .collect();
    seats.retain(|_, seat| seat.current().is_some() || Arc::strong_count(seat) > 1);
    vacated
}

fn running_version(slots: &HashMap<PluginId, Slot>, source: &SourceId) -> Option<String> {
    slots.values().find(|s| s.source == *source).map(|s| version_of(&s.controller))
}

fn version_of(controller: &Controller) -> String {
    controller.plugin().manifest().version.clone()
}
