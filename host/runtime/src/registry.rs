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
//! ```no_run
//! # async fn demo(registry: &wasmloop_runtime::registry::Registry, bytes: Vec<u8>) {
//! use wasmloop_runtime::registry::Candidate;
//! use wasmloop_runtime::identity::AccountChoice;
//! let account = AccountChoice::Operator { namespace: "wasmloop-system".into() };
//! let candidate = Candidate { source: "file labeler.wasm".into(), realm: None, expected_name: None, bytes: bytes.into(), config: None, account };
//! match registry.upsert(candidate).await {
//!     Ok(loaded) => println!("{loaded}"),
//!     Err(error) => eprintln!("{error}"), // the previous version, if any, still serves
//! }
//! # }
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use wasmloop_contract::names::Namespace;
use wasmloop_sandbox::{LoadError, Plugin, Sandbox, plugin_id};

use crate::context::Context;
use crate::controller::{Controller, ControllerConfig, Handover, StartError};
use crate::identity::AccountChoice;
use crate::shadow::{Shadow, ShadowReport, ShadowSeat, fits};

/// Compiles and validates a component (its bytes, its source): the sandbox with the
/// operator's limits applied.
pub type Loader = Arc<dyn Fn(Arc<[u8]>, String) -> BoxFuture<'static, Result<Plugin, LoadError>> + Send + Sync>;

/// The operator's controller settings for a plugin, by its realm (empty for the operator's
/// files, the plugin namespace for ConfigMaps) and name: never by name alone, so a plugin
/// cannot take the settings of another realm's by taking its name.
pub type Settings = Arc<dyn Fn(&str, &str) -> ControllerConfig + Send + Sync>;

/// A plugin version offered by a source.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Where it comes from, as users would name it ("ConfigMap ns/name", "file x.wasm"); one
    /// source serves at most one plugin.
    pub source: String,
    /// Its realm: a plugin ConfigMap's namespace, none for the operator's files. Plugin names
    /// are unique within a realm ([`wasmloop_sandbox::Manifest::id`]); a version shadows and,
    /// promoted, replaces versions of its own realm only.
    pub realm: Option<Namespace>,
    /// The plugin name the source promises (a ConfigMap's label); the manifest must agree.
    pub expected_name: Option<String>,
    /// The component.
    pub bytes: Arc<[u8]>,
    /// The plugin's configuration as JSON text; none for the host configuration's.
    pub config: Option<String>,
    /// Which ServiceAccount the plugin acts as, when plugins act as their own.
    pub account: AccountChoice,
}

impl Candidate {
    /// What names this version: the component's digest with the config's. A pulled component
    /// may weigh 64 MiB, so it is hashed off the runtime's threads.
    async fn version_digest(&self) -> String {
        let bytes = self.bytes.clone();
        let component = tokio::task::spawn_blocking(move || wasmloop_sandbox::digest(&bytes))
            .await
            .expect("hashing does not panic");
        version_digest(&component, self.config.as_deref())
    }
}

/// What an accepted candidate did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// A plugin that was not running now is.
    Started {
        /// The plugin.
        name: String,
        /// Its version.
        version: String,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// A new version replaced the running one.
    Replaced {
        /// The plugin.
        name: String,
        /// The new version.
        version: String,
        /// The version it replaced.
        previous: String,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// The source's shadow now serves, replacing what served from another source (the
    /// shadow was promoted: its source offered it as serving).
    Promoted {
        /// The plugin.
        name: String,
        /// The new version.
        version: String,
        /// The version it replaced, if one served.
        previous: Option<String>,
        /// The source that served it, and now serves nothing.
        superseded: Option<String>,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// Valid, but another replica runs this plugin (`--shard`): compiled and kept here, not
    /// started, until the plugin is admitted ([`Registry::admit`]).
    Parked {
        /// The plugin.
        name: String,
        /// SHA-256 of component and configuration.
        digest: String,
    },
    /// The same component and configuration already serve: nothing to do.
    Unchanged {
        /// The plugin.
        name: String,
        /// SHA-256 of component and configuration.
        digest: String,
    },
}

impl Loaded {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        match self {
            Loaded::Started { name, .. }
            | Loaded::Replaced { name, .. }
            | Loaded::Promoted { name, .. }
            | Loaded::Parked { name, .. }
            | Loaded::Unchanged { name, .. } => name,
        }
    }

    /// The digest now serving.
    pub fn digest(&self) -> &str {
        match self {
            Loaded::Started { digest, .. }
            | Loaded::Replaced { digest, .. }
            | Loaded::Promoted { digest, .. }
            | Loaded::Parked { digest, .. }
            | Loaded::Unchanged { digest, .. } => digest,
        }
    }
}

impl std::fmt::Display for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Loaded::Started { name, version, .. } => write!(f, "plugin {name} {version} serving"),
            Loaded::Replaced { name, version, previous, .. } => {
                write!(f, "plugin {name} {version} serving, replacing {previous}; every primary requeued")
            }
            Loaded::Promoted { name, version, previous, superseded, .. } => {
                write!(f, "plugin {name} {version} promoted from shadow to serving")?;
                if let Some(previous) = previous {
                    write!(f, ", replacing {previous}")?;
                }
                if let Some(source) = superseded {
                    write!(f, " from {source}, which now serves nothing")?;
                }
                Ok(())
            }
            Loaded::Parked { name, .. } => write!(f, "plugin {name} parked: another replica runs it"),
            Loaded::Unchanged { name, .. } => write!(f, "plugin {name} unchanged"),
        }
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
        origin: String,
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
        origin: String,
        /// The plugin.
        name: String,
        /// The source serving it.
        holder: String,
    },
    /// Another source already offers a shadow of this plugin.
    #[error(
        "{origin} offers a shadow of plugin {name:?}, which already has one from {holder}; a plugin has one shadow at a time: remove one of the two"
    )]
    ShadowTaken {
        /// The source.
        origin: String,
        /// The plugin.
        name: String,
        /// The source whose shadow is seated.
        holder: String,
    },
    /// A shadow cannot stand beside the serving version.
    #[error("{origin}: the shadow of plugin {name:?} {reason}")]
    ShadowMismatch {
        /// The source.
        origin: String,
        /// The plugin.
        name: String,
        /// What does not match, and what to do.
        reason: String,
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
            RegistryError::Start { source: StartError::Identity { .. }, .. } => "IdentityRefused",
            RegistryError::Start { .. } => "StartFailed",
        }
    }
}

/// Where a version comes from, as `install_locked` needs it.
#[derive(Clone)]
struct Offer {
    source: String,
    realm: Option<Namespace>,
    expected_name: Option<String>,
    account: AccountChoice,
}

struct Slot {
    source: String,
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

/// Which plugins a sharded host may run (`--shard`): those whose fence it holds. Touched only
/// under the slots lock, so a check and the install it allows are one step.
#[derive(Default)]
struct Gate {
    admitted: HashSet<String>,
    /// By source: each source's latest offer of a plugin not admitted.
    parked: HashMap<String, Parked>,
    /// The plugins serving at the last look at the slots ([`Registry::known`]).
    serving: Vec<String>,
    /// Versions stopped without a successor here (their source removed, or offering another
    /// plugin), by plugin: reconciles past the drain time may still run, and a hand-over to
    /// another replica, or a new start here, waits for them.
    retired: HashMap<String, Vec<Handover>>,
}

/// The running plugins of one host, by name.
pub struct Registry {
    context: Context,
    sandbox: Sandbox,
    loader: Loader,
    settings: Settings,
    drain: Duration,
    slots: tokio::sync::Mutex<HashMap<String, Slot>>,
    /// Each plugin's shadow seat, by realm and plugin name, whether or not a version serves:
    /// a shadow of one realm neither blocks nor stands in for another realm's.
    seats: std::sync::Mutex<HashMap<SeatKey, Arc<ShadowSeat>>>,
    /// With `--shard`, what this replica may run; none runs everything.
    gate: Option<std::sync::Mutex<Gate>>,
    /// Versions started by [`Registry::admit`] and parked by [`Registry::evict`], for the
    /// sources that offered them.
    moves: tokio::sync::broadcast::Sender<(String, Loaded)>,
    /// The plugin name each source was last refused for, whose metric series go with the
    /// source ([`Registry::remove`]).
    refused: std::sync::Mutex<HashMap<String, String>>,
}

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
        /// This seating's id ([`Shadow::id`]): findings of an earlier one are stale.
        id: u64,
        /// What it finds, as it finds it.
        findings: tokio::sync::watch::Receiver<ShadowReport>,
    },
    /// The same candidate already shadows the plugin.
    Unchanged {
        /// The plugin.
        name: String,
    },
}

/// What identifies a serving version: the component's SHA-256 (as the sandbox computes it)
/// and the configuration it runs with.
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
        let (slots, seats) = (tokio::sync::Mutex::default(), std::sync::Mutex::default());
        let (moves, _) = tokio::sync::broadcast::channel(64);
        Registry {
            context,
            sandbox,
            loader,
            settings,
            drain,
            slots,
            seats,
            gate: None,
            moves,
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

    /// Versions that [`Registry::admit`] started ([`Loaded::Started`]) and that
    /// [`Registry::evict`] parked ([`Loaded::Parked`]), with the source that offered each: a
    /// source learns that its version serves here now, or no longer does.
    pub fn moves(&self) -> tokio::sync::broadcast::Receiver<(String, Loaded)> {
        self.moves.subscribe()
    }

    /// True while a version of plugin `id` ([`wasmloop_sandbox::Manifest::id`]) waits here,
    /// parked, for admission.
    pub fn is_parked(&self, id: &str) -> bool {
        self.gate
            .as_ref()
            .is_some_and(|g| g.lock().expect("lock").parked.values().any(|p| p.plugin.manifest().id() == id))
    }

    fn admits(&self, name: &str) -> bool {
        self.gate.as_ref().is_none_or(|g| g.lock().expect("lock").admitted.contains(name))
    }

    /// Lets this replica run plugin `name` (it holds the plugin's fence) and starts the
    /// versions parked for it. Returns what each source's version did.
    pub async fn admit(&self, name: &str) -> Vec<(String, Result<Loaded, RegistryError>)> {
        let mut slots = self.slots.lock().await;
        let waiting: Vec<Parked> = match &self.gate {
            None => return Vec::new(),
            Some(gate) => {
                let mut gate = gate.lock().expect("lock");
                gate.admitted.insert(name.to_owned());
                let sources: Vec<String> = gate
                    .parked
                    .iter()
                    .filter(|(_, p)| p.plugin.manifest().id() == name)
                    .map(|(s, _)| s.clone())
                    .collect();
                sources.into_iter().filter_map(|s| gate.parked.remove(&s)).collect()
            }
        };
        let mut results = Vec::new();
        for parked in waiting {
            let source = parked.offer.source.clone();
            let (offer, plugin, config) = (parked.offer.clone(), parked.plugin.clone(), parked.config.clone());
            let result = self.install_locked(&mut slots, offer, plugin, config).await;
            match &result {
                Ok(loaded) => {
                    let _ = self.moves.send((source.clone(), loaded.clone()));
                }
                // Kept for the next try (a full pool, a cache that did not sync): the plugin is
                // still assigned here, and nothing else would offer it again.
                Err(_) => {
                    if let Some(gate) = &self.gate {
                        gate.lock().expect("lock").parked.insert(source.clone(), parked);
                    }
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
    pub async fn evict(&self, name: &str) -> Vec<Handover> {
        let mut slots = self.slots.lock().await;
        let Some(gate) = self.gate.as_ref() else { return Vec::new() };
        gate.lock().expect("lock").admitted.remove(name);
        let mut handovers = self.take_retired(name);
        let Some(slot) = slots.remove(name) else { return handovers };
        self.context.metrics.plugins_active(slots.len());
        let plugin = slot.controller.plugin().with_limits(slot.controller.plugin().limits());
        let digest = slot.digest.clone();
        let handover = slot.controller.shut_down(self.drain).await;
        self.context.metrics.plugin_stopped(name);
        let offer =
            Offer { source: slot.source.clone(), realm: slot.realm, expected_name: None, account: slot.account };
        let parked = Parked { offer, plugin, config: slot.config };
        gate.lock().expect("lock").parked.insert(slot.source.clone(), parked);
        let _ = self.moves.send((slot.source, Loaded::Parked { name: name.to_owned(), digest }));
        handovers.push(handover);
        handovers
    }

    /// The hand-overs of versions of `name` stopped here without a successor (see
    /// [`Registry::evict`]); whoever takes them waits for them.
    pub fn take_retired(&self, name: &str) -> Vec<Handover> {
        self.gate.as_ref().and_then(|g| g.lock().expect("lock").retired.remove(name)).unwrap_or_default()
    }

    fn retire(&self, name: &str, handover: Handover) {
        if let Some(gate) = &self.gate {
            gate.lock().expect("lock").retired.entry(name.to_owned()).or_default().push(handover);
        }
    }

    /// Every plugin this replica knows a valid version of, running, admitted (perhaps starting)
    /// or parked, sorted. Never waits: while an install holds the slots (a cache sync takes up
    /// to two minutes) it answers from the serving plugins it last saw, so a caller that must
    /// keep renewing Leases is never held up.
    pub fn known(&self) -> Vec<String> {
        let Some(gate) = &self.gate else {
            return self.slots.try_lock().map(|slots| slots.keys().cloned().collect()).unwrap_or_default();
        };
        let serving: Option<Vec<String>> = self.slots.try_lock().ok().map(|slots| slots.keys().cloned().collect());
        let mut gate = gate.lock().expect("lock");
        if let Some(serving) = serving {
            gate.serving = serving;
        }
        let mut names = gate.serving.clone();
        names.extend(gate.admitted.iter().cloned());
        names.extend(gate.parked.values().map(|p| p.plugin.manifest().id()));
        names.sort();
        names.dedup();
        names
    }

    /// Loads, replaces or keeps the plugin `candidate` offers. Replacements and loads are one
    /// at a time; reconciles of every plugin go on meanwhile.
    ///
    /// # Errors
    /// When the candidate does not load, contradicts its source or cannot start; what served
    /// before still serves.
    pub async fn upsert(&self, candidate: Candidate) -> Result<Loaded, RegistryError> {
        let digest = candidate.version_digest().await;
        let (running, serving) = {
            let slots = self.slots.lock().await;
            let same = |s: &Slot| s.source == candidate.source && s.digest == digest && s.account == candidate.account;
            if let Some((name, _)) = slots.iter().find(|(_, s)| same(s)) {
                return Ok(Loaded::Unchanged { name: name.clone(), digest });
            }
            if let Some(gate) = &self.gate {
                let gate = gate.lock().expect("lock");
                let parked = gate.parked.get(&candidate.source).filter(|p| {
                    version_digest(p.plugin.digest(), p.config.as_deref()) == digest
                        && p.offer.account == candidate.account
                });
                if let Some(parked) = parked {
                    return Ok(Loaded::Parked { name: parked.plugin.manifest().id(), digest });
                }
            }
            let serving = slots.iter().find(|(_, s)| s.source == candidate.source).map(|(n, _)| n.clone());
            (running_version(&slots, &candidate.source), serving)
        };
        // Compiling takes seconds: outside the lock, so other sources' loads and removals go on.
        let plugin = match self.compile(&candidate).await {
            Ok(plugin) => plugin,
            Err(source) => {
                // Name the plugin by what the source promised or what it serves now.
                let promised = candidate.expected_name.as_deref().map(|n| plugin_id(candidate.realm.as_ref(), n));
                let name = promised.or(serving).unwrap_or_else(|| "unknown".to_owned());
                self.context.metrics.plugin_rejected(&name, source.reason());
                // Never waits for the slots: another install may hold them through a cache sync.
                let slots = self.slots.try_lock().ok();
                self.note_refusal(slots.as_deref(), &candidate.source, Some(name));
                return Err(RegistryError::Load { source, running });
            }
        };
        let mut slots = self.slots.lock().await;
        let (source, name) = (candidate.source.clone(), plugin_id(candidate.realm.as_ref(), &plugin.manifest().name));
        let offer = Offer {
            source: candidate.source,
            realm: candidate.realm,
            expected_name: candidate.expected_name,
            account: candidate.account,
        };
        let loaded = self.install_locked(&mut slots, offer, plugin, candidate.config).await;
        self.note_refusal(Some(&slots), &source, loaded.is_err().then_some(name));
        loaded
    }

    /// Notes the plugin `source` was last refused as (none: it loads now), and forgets the
    /// series of the one it was refused as before, unless that one serves or is the same: a
    /// source that keeps offering components of new names cannot grow `/metrics`. Without
    /// `slots` (busy) nothing is forgotten this time; the next refusal or load does it.
    fn note_refusal(&self, slots: Option<&HashMap<String, Slot>>, source: &str, refused_as: Option<String>) {
        let mut refused = self.refused.lock().expect("lock");
        let earlier = match refused_as {
            Some(id) => refused.insert(source.to_owned(), id.clone()).filter(|earlier| *earlier != id),
            None => refused.remove(source),
        };
        if let Some(earlier) = earlier.filter(|e| slots.is_some_and(|slots| !slots.contains_key(e))) {
            self.context.metrics.forget_plugin(&earlier);
        }
    }

    /// Serves an already compiled `plugin` for `source`, one of the operator's files (realm
    /// ""), as [`Registry::upsert`] does after compiling.
    ///
    /// # Errors
    /// As [`Registry::upsert`], compiling aside.
    pub async fn install(
        &self,
        source: &str,
        account: AccountChoice,
        plugin: Plugin,
        config: Option<String>,
    ) -> Result<Loaded, RegistryError> {
        let mut slots = self.slots.lock().await;
        let offer = Offer { source: source.to_owned(), realm: None, expected_name: None, account };
        self.install_locked(&mut slots, offer, plugin, config).await
    }

    async fn install_locked(
        &self,
        slots: &mut HashMap<String, Slot>,
        offer: Offer,
        plugin: Plugin,
        config: Option<String>,
    ) -> Result<Loaded, RegistryError> {
        let Offer { source, realm, expected_name, account } = offer;
        let plugin = plugin.in_realm(realm.clone());
        let digest = version_digest(plugin.digest(), config.as_deref());
        let mine = slots.iter().find(|(_, s)| s.source == source).map(|(n, _)| n.clone());
        if let Some(name) = mine.as_ref().filter(|n| slots[*n].digest == digest && slots[*n].account == account) {
            return Ok(Loaded::Unchanged { name: name.clone(), digest });
        }
        let running = running_version(slots, &source);
        // The plugin's own name (its ServiceAccount's, its seat's) and what the host knows it
        // by: names are unique within a realm, not across realms.
        let (name, id) = (plugin.manifest().name.clone(), plugin.manifest().id());
        let reject = |error: RegistryError| {
            self.context.metrics.plugin_rejected(&id, error.reason());
            error
        };
        if let Some(expected) = expected_name.clone().filter(|e| *e != name) {
            return Err(reject(RegistryError::NameMismatch { origin: source, expected, found: name.clone(), running }));
        }
        if !self.admits(&id) {
            // The first source of a name keeps it, as when every replica runs everything: a
            // later one is refused here too, not parked beside it.
            let parked_elsewhere = self.gate.as_ref().and_then(|g| {
                let gate = g.lock().expect("lock");
                gate.parked
                    .iter()
                    .find(|(s, p)| **s != source && p.plugin.manifest().id() == id)
                    .map(|(s, _)| s.clone())
            });
            let serving_elsewhere = slots.get(&id).filter(|s| s.source != source).map(|s| s.source.clone());
            if let Some(holder) = serving_elsewhere.or(parked_elsewhere) {
                return Err(reject(RegistryError::NameTaken { origin: source, name: id.clone(), holder }));
            }
            return Ok(self.park(slots, Offer { source, realm, expected_name, account }, plugin, config, mine).await);
        }
        // A source offering as serving, unchanged, the version it shadows promotes it: it
        // replaces what serves from another source of its realm.
        let seat = self.seat(realm.as_ref(), &name);
        let promoted = seat.current().filter(|shadow| {
            shadow.source() == source
                && version_digest(shadow.plugin().digest(), shadow.config()) == digest
                && mine.is_none()
        });
        if let Some(holder) = slots.get(&id).filter(|s| s.source != source && promoted.is_none()) {
            return Err(reject(RegistryError::NameTaken {
                origin: source.clone(),
                name: id.clone(),
                holder: holder.source.clone(),
            }));
        }
        let mut controller_config = (self.settings)(realm_text(realm.as_ref()), &name);
        if let Some(text) = &config {
            controller_config.plugin_config = text.clone();
        }
        controller_config.identity =
            self.context.identities.identity_for(&account, &name, controller_config.service_account.as_ref()).map_err(
                |source| {
                    let source = StartError::Identity { plugin: id.clone(), source };
                    reject(RegistryError::Start { source, running: running.clone() })
                },
            )?;
        // One instance per worker (workers make the `map` calls too): a call never waits for
        // another plugin. A promoted shadow keeps the instances it reserved, the same number:
        // a full pool does not stop a promotion.
        let concurrency = controller_config.concurrency_for(plugin.manifest().settings.max_concurrent_reconciles);
        let plugin = match &promoted {
            Some(shadow) => shadow.plugin().clone(),
            None => self
                .sandbox
                .reserve(&plugin.with_limits(plugin.limits().instances(concurrency)))
                .map_err(|source| reject(RegistryError::Load { source, running: running.clone() }))?,
        };
        let version = plugin.manifest().version.clone();
        let prepared = Controller::prepare(plugin, &self.context, controller_config, seat.clone())
            .await
            .map_err(|source| reject(RegistryError::Start { source, running: running.clone() }))?;
        // A source that now offers a plugin of another name gives up its old one; a promoted
        // shadow takes over from whichever source served.
        let old =
            if promoted.is_some() { slots.remove(&id) } else { mine.and_then(|old_name| slots.remove(&old_name)) };
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
        slots.insert(id.clone(), Slot { source, realm, account, digest: digest.clone(), config, controller });
        self.context.metrics.plugin_loaded(&id);
        self.context.metrics.plugins_active(slots.len());
        let name = id;
        Ok(match previous {
            _ if promoted.is_some() => Loaded::Promoted { name, version, previous, superseded, digest },
            Some(previous) => Loaded::Replaced { name, version, previous, digest },
            None => Loaded::Started { name, version, digest },
        })
    }

    /// Keeps `plugin` for when its name is admitted. What the source served before (a plugin
    /// of another name) stops: the source offers this one now.
    async fn park(
        &self,
        slots: &mut HashMap<String, Slot>,
        offer: Offer,
        plugin: Plugin,
        config: Option<String>,
        serving: Option<String>,
    ) -> Loaded {
        let (name, digest) = (plugin.manifest().id(), version_digest(plugin.digest(), config.as_deref()));
        if let Some((old_name, old)) = serving.and_then(|old| slots.remove(&old).map(|slot| (old, slot))) {
            self.context.metrics.plugins_active(slots.len());
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
    fn vacate(&self, source: &str) -> Vec<String> {
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
            if current.source() != origin {
                let holder = current.source().to_owned();
                return Err(RegistryError::ShadowTaken { origin, name, holder });
            }
            if version_digest(current.plugin().digest(), current.config()) == digest {
                return Ok(Shadowed::Unchanged { name });
            }
        }
        let plugin = self.compile(&candidate).await.map_err(|source| {
            self.context.metrics.plugin_rejected(&plugin_id(candidate.realm.as_ref(), &name), source.reason());
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
        (origin, realm): (&str, Option<&Namespace>),
        name: &str,
        plugin: Plugin,
        config: Option<String>,
    ) -> Result<Shadowed, RegistryError> {
        let (origin, name, plugin) = (origin.to_owned(), name.to_owned(), plugin.in_realm(realm.cloned()));
        // The serving version it stands beside is its own realm's: names are unique per realm.
        let id = plugin_id(realm, &name);
        let mismatch = |origin: String, name: String, reason: String| {
            self.context.metrics.plugin_rejected(&id, "ShadowMismatch");
            RegistryError::ShadowMismatch { origin, name, reason }
        };
        if let Some(holder) = self.seated(realm, &name).map(|s| s.source().to_owned()).filter(|h| *h != origin) {
            return Err(RegistryError::ShadowTaken { origin, name, holder });
        }
        let digest = version_digest(plugin.digest(), config.as_deref());
        let found = plugin.manifest().name.clone();
        if found != name {
            self.context.metrics.plugin_rejected(&id, "NameMismatch");
            return Err(RegistryError::NameMismatch { origin, expected: name, found, running: None });
        }
        {
            let slots = self.slots.lock().await;
            if let Some(serving) = slots.get(&id)
                && let Err(reason) = fits(serving.controller.plugin().manifest(), plugin.manifest())
            {
                return Err(mismatch(origin, name, reason));
            }
        }
        let concurrency = (self.settings)(realm_text(realm), &name)
            .concurrency_for(plugin.manifest().settings.max_concurrent_reconciles);
        let plugin =
            self.sandbox.reserve(&plugin.with_limits(plugin.limits().instances(concurrency))).map_err(|source| {
                self.context.metrics.plugin_rejected(&id, source.reason());
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
        Ok(Shadowed::Seated { name, version, digest, id: seating, findings })
    }

    /// Unseats the shadows `source` offered; their calls in flight finish unseen. Returns the
    /// plugins they shadowed.
    pub fn unshadow(&self, source: &str) -> Vec<String> {
        self.vacate(source)
    }

    async fn compile(&self, candidate: &Candidate) -> Result<Plugin, LoadError> {
        let load = (self.loader)(candidate.bytes.clone(), candidate.source.clone());
        // A panic while loading one candidate is that candidate's failure, not the source's end.
        match std::panic::AssertUnwindSafe(load).catch_unwind().await {
            Ok(result) => result,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Err(LoadError::Panicked { origin: candidate.source.clone(), message: what })
            }
        }
    }

    /// Stops the plugin `source` serves, letting its reconciles in flight finish; its informers
    /// are released when no other plugin holds them. Returns the plugin's name.
    pub async fn remove(&self, source: &str) -> Option<String> {
        let mut slots = self.slots.lock().await;
        let parked = self.gate.as_ref().and_then(|g| g.lock().expect("lock").parked.remove(source));
        // The series of names this source was refused for go with it, unless a plugin of the
        // name serves: a ConfigMap writer who makes up names cannot grow `/metrics`.
        let refused = self.refused.lock().expect("lock").remove(source);
        if let Some(refused) = refused.filter(|n| !slots.contains_key(n)) {
            self.context.metrics.forget_plugin(&refused);
        }
        let Some(name) = slots.iter().find(|(_, s)| s.source == source).map(|(n, _)| n.clone()) else {
            // Only parked here: gone all the same, and whatever waited for its name may load.
            return parked.map(|p| p.plugin.manifest().id());
        };
        let slot = slots.remove(&name).expect("found above");
        if let Some(gate) = &self.gate {
            // Gone, not moved: a later offer of the name is parked and assigned afresh.
            gate.lock().expect("lock").admitted.remove(&name);
        }
        self.context.metrics.plugins_active(slots.len());
        // Under the lock: a new version from the same source must not start before this
        // one's reconciles have finished.
        let handover = slot.controller.shut_down(self.drain).await;
        self.retire(&name, handover);
        self.context.metrics.plugin_stopped(&name);
        self.context.metrics.forget_plugin(&name);
        self.vacate(source);
        Some(name)
    }

    /// The names of the plugins serving, sorted.
    pub async fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.slots.lock().await.keys().cloned().collect();
        names.sort();
        names
    }

    /// Stops every plugin, each given up to `timeout` to finish its reconciles in flight.
    pub async fn shut_down(&self, timeout: Duration) {
        let slots: Vec<Slot> = self.slots.lock().await.drain().map(|(_, s)| s).collect();
        futures::future::join_all(slots.into_iter().map(|s| s.controller.shut_down(timeout))).await;
        self.context.metrics.plugins_active(0);
    }
}

/// Unseats every shadow of `source` but the one at `except`, returning the plugins they
/// shadowed, and forgets the seats nothing uses any more (a hostile source must not grow the
/// map name by name). A serving controller holds its seat, so only seats held by nothing else
/// go.
fn vacate_locked(seats: &mut HashMap<SeatKey, Arc<ShadowSeat>>, source: &str, except: Option<&SeatKey>) -> Vec<String> {
    let vacated = seats
        .iter()
        .filter(|(key, seat)| Some(*key) != except && seat.vacate(source).is_some())
        .map(|((_, name), _)| name.clone())
        .collect();
    seats.retain(|_, seat| seat.current().is_some() || Arc::strong_count(seat) > 1);
    vacated
}

fn running_version(slots: &HashMap<String, Slot>, source: &str) -> Option<String> {
    slots.values().find(|s| s.source == source).map(|s| version_of(&s.controller))
}

fn version_of(controller: &Controller) -> String {
    controller.plugin().manifest().version.clone()
}
