//! What a namespace's plugin source decides, without the API server, the registry or a
//! registry of images: a [`State`] takes each thing that happens (an object arrives, is read,
//! pulled, loaded, deleted or due for a retry; what serves from it stopped) and returns the
//! [`Step`]s to carry out. The shell (`super::NamespaceSource`) reads, pulls, loads and
//! reports, and hands each outcome back.
//!
//! The state is one [`Seen`] per object ([`Key`]): the content it last handled, whether it was
//! refused, and the [`Work`] under way for it, which is nothing, a pull or a load (with the one
//! event that came meanwhile, [`Waiting`]). Events of an object are handled in order: while
//! its load runs, what comes for it waits. Besides, the newest spec of each `WasmPlugin`, the
//! generation handled last (an update of only its status or metadata offers nothing new), and
//! which `WasmPlugin`s name which ConfigMap (`spec.configMapRef`).
//!
//! The decisions, in the order they are taken for an offer ([`State::on_offer`]):
//! - the same content again is nothing new (a ConfigMap's fingerprint says so before it is
//!   read: the status writer's own annotation costs no read, [`State::arrive`]);
//! - content that cannot be read is refused, or, when the host failed to read it (a ConfigMap
//!   a `WasmPlugin` names), refused and tried again, whatever its failure policy;
//! - a suspended `WasmPlugin` stops what served; a superseded object loads nothing;
//! - a reference is checked before a connection is made (allowed, pinned, signed when keys
//!   are trusted, and acting as an account it may use), then pulled;
//! - a version is refused when a keyRef names a key it was not signed by, when it shadows
//!   while it serves, when a `WasmPlugin` claims its name, or when it names an account
//!   that is no ServiceAccount of the namespace; otherwise it is loaded, or seated as a shadow.
//!
//! A refusal under `failurePolicy: Stop` stops what served first ([`Why::Refused`]); whatever
//! stops may unblock an object refused because another held its plugin ([`State::unblocked`]).
//!
//! Retries: a start failure is tried again after 15 s (a CRD often arrives after the plugin),
//! a failed pull after 30 s, one retry at a time, doubling while the content stays the same,
//! up to five minutes. Before an offer's outcome, a `WasmPlugin`'s generation is reported
//! (`Reported::Observed`: what pins it, whether it is settled already), so the status writer
//! writes `observedGeneration` with that generation's outcome, never before it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_contract::validate::cut;
use wasmloop_runtime::registry::reports::Reported;
use wasmloop_runtime::registry::{Loaded, RegistryError};
use wasmloop_sandbox::{SourceId, SourceKind};

use crate::oci::PluginRef;
use crate::pinning::{self, TrustedKeys};
use crate::plugin_configmap::{PluginPayload, TRACK_ANNOTATION, Track};
use crate::wasmplugin::WasmPlugin;

mod rules;
mod seen;
mod steps;
mod watched;

pub(super) use seen::{Arrival, Content, Seen, Waiting};
pub(super) use steps::{LoadDone, LoadFailure, LoadSpec, Offer, PullFailure, Step, Stopped, Unread, Why, World};

/// How long before a plugin that failed to start (a kind not served yet, a cache that did
/// not sync) is tried again with the same object.
pub(super) const START_RETRY: Duration = Duration::from_secs(15);

/// How long before a reference that could not be pulled is pulled again.
pub(super) const PULL_RETRY: Duration = Duration::from_secs(30);

/// The longest refusal logged and reported.
pub(super) const MAX_REFUSAL: usize = 4096;

/// One object that ships a plugin: its kind and name (its namespace is the source's).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    /// Its kind.
    pub(super) kind: SourceKind,
    /// Its name.
    pub(super) name: Name,
}

/// An object that ships a plugin, as the watch brought it.
#[derive(Debug, Clone)]
pub(super) enum Shipper {
    /// A plugin ConfigMap.
    ConfigMap(ConfigMap),
    /// A `WasmPlugin`.
    WasmPlugin(WasmPlugin),
}

impl Shipper {
    /// Which object it is.
    pub(super) fn key(&self) -> Key {
        // The API server names objects more strictly than `Name` asks, and the watch lets
        // only parsed names through besides ([`Shipper::is_named`]).
        Key { kind: self.kind(), name: Name::parse(&self.name()).expect("a watched object's name parses") }
    }

    /// Its kind.
    pub(super) fn kind(&self) -> SourceKind {
        match self {
            Shipper::ConfigMap(_) => SourceKind::ConfigMap,
            Shipper::WasmPlugin(_) => SourceKind::WasmPlugin,
        }
    }

    fn name(&self) -> String {
        match self {
            Shipper::ConfigMap(cm) => cm.name_any(),
            Shipper::WasmPlugin(plugin) => plugin.name_any(),
        }
    }

    /// Its name is an object name ([`Name`]): the API server's always is; anything else is not
    /// let in.
    pub(super) fn is_named(&self) -> bool {
        Name::parse(&self.name()).is_ok()
    }
}

/// What a namespace's source knows of its objects.
pub(super) struct State {
    namespace: Namespace,
    /// When set, only components signed by one of these keys load.
    trusted: Option<Arc<TrustedKeys>>,
    seen: HashMap<Key, Seen>,
    /// The newest of each `WasmPlugin` (without what the host never reads), offered again when
    /// the ConfigMap it names changes.
    latest: HashMap<Name, WasmPlugin>,
    /// The UID and generation of each `WasmPlugin` handled last.
    generations: HashMap<Name, (Option<String>, i64)>,
    /// The `WasmPlugin`s naming each ConfigMap (`spec.configMapRef`), and the ConfigMap's
    /// resourceVersion last seen: a relist of an unchanged one offers nothing again.
    naming: HashMap<String, (HashSet<Name>, Option<String>)>,
    /// The names each kind's list in progress has brought.
    listing: HashMap<SourceKind, HashSet<Name>>,
    /// The kinds whose first list is handled: pulls and loads started later hold no readiness.
    listed: HashSet<SourceKind>,
    /// Ids of pulls and loads started so far.
    started: u64,
}

impl State {
    /// The state of namespace `namespace`'s source, trusting `trusted`.
    pub(super) fn new(namespace: Namespace, trusted: Option<Arc<TrustedKeys>>) -> State {
        State {
            namespace,
            trusted,
            seen: HashMap::new(),
            latest: HashMap::new(),
            generations: HashMap::new(),
            naming: HashMap::new(),
            listing: HashMap::new(),
            listed: HashSet::new(),
            started: 0,
        }
    }

    /// Object `key` as a source, as the registry and its reports know it.
    pub(super) fn source(&self, key: &Key) -> SourceId {
        SourceId::object(key.kind, self.namespace.clone(), key.name.clone())
    }

    /// Object `shipper` came, of `fingerprint`: whether it is to be read ([`Seen::arrive`]).
    pub(super) fn arrive(&mut self, shipper: &Shipper, fingerprint: Option<u64>) -> Arrival {
        match self.seen.get_mut(&shipper.key()) {
            Some(seen) => seen.arrive(shipper, fingerprint),
            None => Arrival::Read,
        }
    }

    /// Object `shipper`, of `fingerprint`, was read: `read` is what it offers, `content` what
    /// of that counts for loading.
    pub(super) fn on_offer(
        &mut self,
        shipper: &Shipper,
        read: Result<Offer, Unread>,
        content: Content,
        fingerprint: Option<u64>,
        world: &dyn World,
    ) -> Vec<Step> {
        let key = shipper.key();
        let seen = self.seen.entry(key.clone()).or_default();
        let step = seen.offer(shipper, content, fingerprint);
        seen.stop = match &read {
            Ok(offer) => offer.stop,
            Err(unread) => unread.stop,
        };
        let mut steps = Vec::new();
        if let Some(observed) = self.observed(shipper, &read, &step) {
            steps.push(observed);
        }
        match step {
            seen::OfferStep::Wait | seen::OfferStep::Same => return steps,
            seen::OfferStep::New { abandoned } => steps.extend(abandoned.map(|id| Step::AbortPull(key.clone(), id))),
        }
        let offer = match read {
            Ok(offer) => offer,
            Err(unread) => {
                steps.extend(self.unreadable(&key, unread, world));
                return steps;
            }
        };
        self.seen_mut(&key).plugin = Some(offer.payload.name.clone());
        if offer.suspend {
            steps.push(Step::Stop(key, Why::Suspended));
            return steps;
        }
        match offer.payload.reference.clone() {
            // A superseded object loads nothing: nothing to pull, or to refuse.
            Some(_) if offer.payload.track == Track::Superseded => {
                steps.push(Step::Stop(key, Why::Retired { said: offer.said }));
            }
            Some(reference) => steps.extend(self.pull(shipper, offer, reference, world)),
            None => steps.extend(self.admit(shipper, offer, world)),
        }
        steps
    }

    /// A `WasmPlugin`'s generation, about to have its outcome reported (or, settled, the one
    /// shown already).
    fn observed(&mut self, shipper: &Shipper, read: &Result<Offer, Unread>, step: &seen::OfferStep) -> Option<Step> {
        let Shipper::WasmPlugin(plugin) = shipper else { return None };
        let (generation, key) = (plugin.metadata.generation?, shipper.key());
        if matches!(step, seen::OfferStep::Wait) {
            return None;
        }
        // Nothing more comes for this generation only when nothing is under way for it.
        let settled = matches!(step, seen::OfferStep::Same) && self.seen.get(&key).is_some_and(Seen::idle);
        self.generations.insert(key.name.clone(), (plugin.metadata.uid.clone(), generation));
        let pin = read.as_ref().ok().and_then(|offer| pin_of(&offer.payload));
        Some(Step::Report(key, Reported::Observed { generation, pin, settled }))
    }

    /// An object that offers nothing usable is refused; when the host failed to read it, it is
    /// tried again and what serves keeps serving, whatever its failure policy.
    fn unreadable(&mut self, key: &Key, unread: Unread, world: &dyn World) -> Vec<Step> {
        if !unread.ours {
            let message = format!("{}{}", unread.message, self.keeps(key, world));
            return self.reject(key, unread.reason, &message);
        }
        let message = format!("{}{}", unread.message, self.keeps_anyway(key, world));
        let mut steps: Vec<Step> = self.retry_after(key, START_RETRY).into_iter().collect();
        let (reason, message) = (unread.reason.to_owned(), cut(message, MAX_REFUSAL));
        steps.push(Step::Refuse { key: key.clone(), reason, message, ours: true });
        steps
    }

    /// A referenced component: refused before a connection is made when that can be told
    /// without its bytes (see the module's rules), else pulled.
    fn pull(&mut self, shipper: &Shipper, offer: Offer, reference: PluginRef, world: &dyn World) -> Vec<Step> {
        let key = shipper.key();
        if let Err((reason, message)) = self.before_pull(&offer, &reference, world) {
            let message = format!("plugin {}: {message}{}", offer.payload.name, self.keeps(&key, world));
            return self.reject(&key, reason, &message);
        }
        let account = if offer.payload.track == Track::Shadow {
            None
        } else {
            match self.account_of(&key, false, offer.account.as_deref(), world) {
                Ok(account) => Some(account),
                Err(message) => return self.reject(&key, invalid(key.kind), &message),
            }
        };
        let id = self.next_id();
        self.seen_mut(&key).pull_started(id);
        vec![Step::Pull { shipper: shipper.clone(), id, offer, reference, account }]
    }

    /// The checks of a referenced component that need no pull: the reference is pinned and
    /// allowed, the pin well formed, and a signature there when keys are trusted.
    fn before_pull(
        &self,
        offer: &Offer,
        reference: &PluginRef,
        world: &dyn World,
    ) -> Result<(), (&'static str, String)> {
        world.admissible(reference).map_err(|e| ("PullRefused", e.to_string()))?;
        let payload = &offer.payload;
        pinning::check_without_component(payload.pin.as_deref(), payload.signature.as_deref(), self.trusted.as_deref())
            .map_err(|e| (e.reason(), e.to_string()))
    }

    /// Pull `id` of `shipper`'s offer ended: `offer` holds the component it brought, unless it
    /// `failed`. A pull that is not the one under way (aborted too late) is stale.
    pub(super) fn on_pulled(
        &mut self,
        shipper: &Shipper,
        id: u64,
        offer: Offer,
        failed: Option<PullFailure>,
        world: &dyn World,
    ) -> Vec<Step> {
        let key = shipper.key();
        if !self.seen.get_mut(&key).is_some_and(|seen| seen.pulled(id)) {
            return Vec::new();
        }
        match failed {
            None => self.admit(shipper, offer, world),
            Some(PullFailure::Fetch(error)) => {
                let payload = &offer.payload;
                let reference = payload.reference.as_ref().map(ToString::to_string).unwrap_or_default();
                let message = format!(
                    "plugin {}: cannot pull {reference}: {error}; trying again every {} s{}",
                    payload.name,
                    PULL_RETRY.as_secs(),
                    self.keeps(&key, world)
                );
                let mut steps: Vec<Step> = self.retry_after(&key, PULL_RETRY).into_iter().collect();
                steps.extend(self.reject(&key, "PullFailed", &message));
                steps
            }
            Some(PullFailure::Identity(error)) => {
                let mut steps: Vec<Step> = self.retry_after(&key, START_RETRY).into_iter().collect();
                steps.extend(self.reject(&key, error.reason(), &error.to_string()));
                steps
            }
        }
    }

    /// A version whose bytes are at hand (stored, or pulled): refused for what needs no bytes
    /// (see the module's rules), else loaded or seated; its bytes are checked in the load.
    fn admit(&mut self, shipper: &Shipper, offer: Offer, world: &dyn World) -> Vec<Step> {
        let key = shipper.key();
        let source = self.source(&key);
        let name = offer.payload.name.clone();
        if offer.payload.track == Track::Superseded {
            return vec![Step::Stop(key, Why::Retired { said: offer.said })];
        }
        if let Err(message) = self.signed_by(&offer) {
            let message = format!("plugin {name}: {message}{}", self.keeps(&key, world));
            return self.reject(&key, "SignatureRejected", &message);
        }
        let shadow = offer.payload.track == Track::Shadow;
        if shadow && let Some((serving, _)) = world.serving(&source) {
            let how = match key.kind {
                SourceKind::ConfigMap => format!(
                    "a shadow is a second ConfigMap (`wasmloop bundle --shadow`): remove the {TRACK_ANNOTATION} annotation here"
                ),
                SourceKind::WasmPlugin => {
                    "a shadow is a second WasmPlugin: set track.mode back to serving here".to_owned()
                }
            };
            let message =
                format!("this {} serves plugin {}; {how}{}", key.kind, serving.name(), self.keeps(&key, world));
            return self.reject(&key, invalid(key.kind), &message);
        }
        // A WasmPlugin of the name wins it; one that comes while this serves takes it over
        // once its own version has loaded ([`State::on_loaded`]), so a bad one stops nothing.
        if !shadow
            && key.kind == SourceKind::ConfigMap
            && let Some(message) = self.claimed(&name)
        {
            return self.reject(&key, "NameTaken", &message);
        }
        let account = match self.account_of(&key, shadow, offer.account.as_deref(), world) {
            Ok(account) => account,
            Err(message) => return self.reject(&key, invalid(key.kind), &message),
        };
        let id = self.next_id();
        self.seen_mut(&key).load_started(id);
        let spec = LoadSpec {
            source,
            payload: offer.payload,
            stored_in: offer.stored_in,
            account,
            settings: offer.settings,
            invalid: invalid(key.kind),
        };
        vec![Step::Load { shipper: shipper.clone(), id, spec }]
    }

    /// Load `id` of `shipper` ended with `result`: what it did is carried on, then whatever came
    /// for the object meanwhile is handled. A load that is not the one under way is stale.
    pub(super) fn on_loaded(
        &mut self,
        shipper: &Shipper,
        id: u64,
        result: Result<LoadDone, LoadFailure>,
        world: &dyn World,
    ) -> Vec<Step> {
        let key = shipper.key();
        let Some(waiting) = self.seen.get_mut(&key).and_then(|seen| seen.load_finished(id)) else {
            return Vec::new();
        };
        let mut steps = match result {
            Ok(LoadDone::Loaded(loaded)) => self.loaded(&key, &loaded),
            Ok(LoadDone::Seated) => {
                self.seen_mut(&key).refused = false;
                Vec::new()
            }
            Err(LoadFailure::Registry(RegistryError::NameTaken { name, .. }))
                if key.kind == SourceKind::WasmPlugin && !self.yielding(name.name()).is_empty() =>
            {
                // A ConfigMap's version of the name loaded while this one did: it yields.
                let mut steps = self.take_name(name.name());
                steps.push(Step::RetryNow(key.clone()));
                steps
            }
            Err(LoadFailure::Registry(error)) => {
                // A kind that is not served yet may be soon (a CRD applied after the plugin);
                // a load the host's budgets had no room for may find room.
                let again = match &error {
                    RegistryError::Start { .. } => true,
                    RegistryError::Load { source, .. } => source.is_host_pressure(),
                    _ => false,
                };
                let mut steps: Vec<Step> =
                    if again { self.retry_after(&key, START_RETRY).into_iter().collect() } else { Vec::new() };
                steps.extend(self.reject(&key, error.reason(), &error.to_string()));
                steps
            }
            Err(LoadFailure::Bytes { plugin, reason, message }) => {
                let message = format!("plugin {plugin}: {message}{}", self.keeps(&key, world));
                self.reject(&key, reason, &message)
            }
        };
        match waiting {
            Some(Waiting::Offer(shipper)) => steps.push(Step::Offer(*shipper)),
            Some(Waiting::Delete) => steps.extend(self.on_deleted(&key)),
            None => {}
        }
        steps
    }

    /// A version this object offered was taken. A `WasmPlugin` of its name that came while
    /// this ConfigMap's version loaded wins it.
    fn loaded(&mut self, key: &Key, loaded: &Loaded) -> Vec<Step> {
        let seen = self.seen_mut(key);
        (seen.refused, seen.retries) = (false, 0);
        let plugin = loaded.name().name();
        if key.kind == SourceKind::ConfigMap && self.claimed(plugin).is_some() {
            let mut steps = self.take_name(plugin);
            steps.push(Step::RetryBlocked);
            return steps;
        }
        Vec::new()
    }

    /// The plugin ConfigMaps offering plugin `plugin` give it up: a `WasmPlugin` of the name
    /// takes it. Each is refused, naming the `WasmPlugin`, and loads again once it goes.
    fn take_name(&mut self, plugin: &str) -> Vec<Step> {
        let Some(message) = self.claimed(plugin) else { return Vec::new() };
        let message = cut(message, MAX_REFUSAL);
        let yielding = self.yielding(plugin);
        yielding.into_iter().map(|key| Step::Stop(key, Why::NameTaken { message: message.clone() })).collect()
    }

    /// What to report once what object `key` served or shadowed has `stopped` for `why`, and
    /// which refused objects that unblocks.
    pub(super) fn on_stopped(&mut self, key: &Key, why: Why, stopped: Stopped, world: &dyn World) -> Vec<Step> {
        let something = stopped.removed.is_some() || !stopped.unshadowed.is_empty();
        let unblocks = match &why {
            Why::Refused { .. } | Why::Suspended => something,
            Why::Retired { .. } => stopped.removed.is_some(),
            Why::NameTaken { .. } => false,
            // A WasmPlugin gone frees its name, whether or not it served: a ConfigMap it
            // claimed the name from may load.
            Why::Deleted => something || key.kind == SourceKind::WasmPlugin,
        };
        // What a stop unblocks is retried, not the object that stopped.
        let mut steps: Vec<Step> = if unblocks {
            self.unblocked(world).into_iter().filter(|other| other != key).map(Step::RetryNow).collect()
        } else {
            Vec::new()
        };
        let refused = matches!(why, Why::Refused { .. } | Why::NameTaken { .. });
        if let Some(seen) = self.seen.get_mut(key) {
            seen.refused = refused;
        }
        let what = match why {
            Why::Refused { reason, message } => {
                match stopped.removed.map(|id| id.to_string()).or_else(|| stopped.unshadowed.into_iter().next()) {
                    Some(plugin) => {
                        let message = cut(
                            format!(
                                "{message} (failurePolicy Stop: plugin {plugin} stopped; fix the version, or set failurePolicy to KeepPrevious)"
                            ),
                            MAX_REFUSAL,
                        );
                        Reported::Stopped { reason, message }
                    }
                    None => Reported::Refused { reason, message },
                }
            }
            Why::Suspended => {
                let message = "spec.suspend is true: the plugin is stopped; set it to false, or remove it, to resume";
                Reported::Stopped { reason: "Suspended".to_owned(), message: message.to_owned() }
            }
            Why::Retired { said } => Reported::Retired { said },
            Why::NameTaken { message } => {
                let reason = "NameTaken".to_owned();
                if stopped.removed.is_some() {
                    Reported::Stopped { reason, message }
                } else {
                    Reported::Refused { reason, message }
                }
            }
            Why::Deleted => Reported::Removed,
        };
        steps.insert(0, Step::Report(key.clone(), what));
        steps
    }

    /// Object `key` was deleted: unless a load under way is to report first, its pull is
    /// abandoned and what it served or shadowed stops.
    pub(super) fn on_deleted(&mut self, key: &Key) -> Vec<Step> {
        let mut steps = Vec::new();
        match self.seen.get_mut(key).map(Seen::delete) {
            Some(seen::DeleteStep::Wait) => return steps,
            Some(seen::DeleteStep::Unload { abandoned }) => {
                steps.extend(abandoned.map(|id| Step::AbortPull(key.clone(), id)));
            }
            None => {}
        }
        self.seen.remove(key);
        if key.kind == SourceKind::WasmPlugin {
            self.latest.remove(&key.name);
            self.generations.remove(&key.name);
            self.unindex(&key.name);
        }
        steps.push(Step::Stop(key.clone(), Why::Deleted));
        steps
    }

    /// Object `key`'s retry is due: skipped while a pull or a load will report anyway, else
    /// the object is read afresh, the content handled forgotten so the same is tried again.
    pub(super) fn on_retry(&mut self, key: &Key) -> Vec<Step> {
        match self.seen.get_mut(key).map(Seen::retry) {
            Some(seen::RetryStep::Skip) => Vec::new(),
            Some(seen::RetryStep::Offer) | None => vec![Step::Fetch(key.clone())],
        }
    }

    /// Object `key` could not be read for its retry: it is tried again later.
    pub(super) fn on_fetch_failed(&mut self, key: &Key) -> Vec<Step> {
        self.retry_after(key, START_RETRY).into_iter().collect()
    }

    /// The objects refused while another held their plugin or shadow seat, which serve
    /// nothing and pull nothing: they may load now.
    pub(super) fn unblocked(&self, world: &dyn World) -> Vec<Key> {
        let mut keys: Vec<Key> = self
            .seen
            .iter()
            // The registry is asked only about the refused: a deletion costs one pass.
            .filter(|(key, seen)| seen.refused && seen.blocked(world.serving(&self.source(key)).is_some()))
            .map(|(key, _)| key.clone())
            .collect();
        keys.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        keys
    }

    /// Refuses object `key`'s newest offer; under `failurePolicy: Stop`, what served from it
    /// stops first.
    fn reject(&mut self, key: &Key, reason: &str, message: &str) -> Vec<Step> {
        // Refusals quote what others wrote (a registry, a manifest, a compiler on a component).
        let (reason, message) = (reason.to_owned(), cut(message.to_owned(), MAX_REFUSAL));
        let seen = self.seen_mut(key);
        if seen.stop {
            return vec![Step::Stop(key.clone(), Why::Refused { reason, message })];
        }
        seen.refused = true;
        vec![Step::Refuse { key: key.clone(), reason, message, ours: false }]
    }

    /// A retry of object `key` after `first`, longer for each retry of the same content; none
    /// when one is pending already.
    fn retry_after(&mut self, key: &Key, first: Duration) -> Option<Step> {
        let delay = self.seen_mut(key).schedule_retry(first)?;
        Some(Step::RetryAfter(key.clone(), delay))
    }

    fn seen_mut(&mut self, key: &Key) -> &mut Seen {
        self.seen.entry(key.clone()).or_default()
    }

    fn next_id(&mut self) -> u64 {
        self.started += 1;
        self.started
    }
}

/// The reason of a refusal of what an object of `kind` says.
pub(super) fn invalid(kind: SourceKind) -> &'static str {
    match kind {
        SourceKind::ConfigMap => "InvalidConfigMap",
        SourceKind::WasmPlugin => "InvalidWasmPlugin",
    }
}

/// What pins a payload's component, as the `Pinned` condition says it: an image's digest, a
/// digest pin, or both.
pub(super) fn pin_of(payload: &PluginPayload) -> Option<String> {
    let image = payload.reference.as_ref().map(|r| format!("image {r}"));
    let pin = payload.pin.as_ref().map(|pin| format!("component {pin}"));
    match (image, pin) {
        (Some(image), Some(pin)) => Some(format!("{image}, {pin}")),
        (one, other) => one.or(other),
    }
}

/// What an object offers, as far as loading goes. A pinned reference names its content as
/// surely as a digest of the bytes would, so an echo of the host's own status write pulls
/// nothing.
pub(super) fn content_of(read: &Result<Offer, Unread>) -> Content {
    let offer = match read {
        Ok(offer) => offer,
        Err(unread) => return Content { unread: Some(unread.message.clone()), ..Content::default() },
    };
    let payload = &offer.payload;
    let digest = match &payload.reference {
        Some(reference) => reference.to_string(),
        None => payload.component.digest(),
    };
    Content {
        digest,
        unread: None,
        config: payload.config.clone(),
        account: offer.account.clone(),
        pin: payload.pin.clone(),
        signature: payload.signature.clone(),
        track: payload.track,
        pull_secret: payload.pull_secret.clone(),
        signer: offer.signer.clone(),
        suspend: offer.suspend,
        stop: offer.stop,
        settings: offer.settings.as_ref().and_then(|s| serde_json::to_string(s).ok()),
    }
}

/// Which `WasmPlugin` of the namespace claims plugin `plugin` over a plugin ConfigMap that
/// offers it, given the `WasmPlugin`s that serve (none shadows): the one of that name. A
/// `WasmPlugin` wins over a ConfigMap of the same plugin name whichever came first, so every
/// replica, and every restart, ends with the same one serving.
pub(super) fn claimant<'a>(plugin: &str, serving_wasmplugins: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    serving_wasmplugins.into_iter().find(|name| *name == plugin)
}

/// The plugin ConfigMaps of `seen` that a `WasmPlugin` serving `plugin` takes it from: those
/// whose last offer named it.
pub(super) fn yielding<'a>(plugin: &str, seen: impl IntoIterator<Item = (&'a Key, &'a Seen)>) -> Vec<&'a Key> {
    seen.into_iter()
        .filter(|(key, seen)| key.kind == SourceKind::ConfigMap && seen.plugin.as_deref() == Some(plugin))
        .map(|(key, _)| key)
        .collect()
}

#[cfg(test)]
mod tests;
