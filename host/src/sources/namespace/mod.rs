//! The plugins a namespace ships (`run --plugin-namespace NS`), as ConfigMaps labelled
//! `wasmloop.dev/plugin` (the drop-in) and as `WasmPlugin`s (`crate::wasmplugin`): created ones
//! load, updated ones swap, deleted ones unload, with no restart. What happens is reported on
//! the registry's stream (the registry's outcomes by the registry, this source's refusals,
//! stops and deletions by the source), and the status writer (`crate::status`) shows it where
//! users look: a ConfigMap's `wasmloop.dev/status` annotation, a `WasmPlugin`'s status
//! conditions, and Events on either. This source writes no status.
//!
//! Both kinds share one loop, one state per object ([`plan::Seen`]) and one registry realm, the
//! namespace: a `WasmPlugin` takes its plugin from the plugin ConfigMaps that serve it, which
//! are refused (`NameTaken`) and load again once it is deleted; that is how a plugin moves from
//! one kind to the other.
//!
//! A `WasmPlugin`'s component may live in a ConfigMap it names (`spec.configMapRef`); the
//! source follows those ConfigMaps' metadata (a metadata-only watch of the namespace's
//! ConfigMaps that are not plugin ConfigMaps) and offers the `WasmPlugin` again when the one it
//! names changes.
//!
//! A ConfigMap annotated `wasmloop.dev/track: shadow`, or a `WasmPlugin` with `track.mode:
//! shadow`, is a candidate: the registry seats it beside its plugin's serving version, and
//! reports what it finds. Making it serve promotes it: it replaces the serving version,
//! whichever object of this namespace served, and the host marks that one superseded (a
//! ConfigMap's `wasmloop.dev/track: superseded` annotation, a `WasmPlugin`'s `Ready` condition
//! for its generation), which loads nothing, so that a restart or another replica does not
//! bring the old version back.
//!
//! A `WasmPlugin` with `suspend: true` serves nothing; under `failurePolicy: Stop`, a version
//! that is refused stops the one that served (both reported as [`Reported::Stopped`]).
//!
//! How the loop ([`NamespaceSource::run`]) keeps its promises:
//! - **One stream.** Three kube `watcher`s merged (`watches`): the plugin ConfigMaps, the
//!   `WasmPlugin`s, and the metadata of the namespace's other ConfigMaps. The kind not
//!   installed, or not listable, holds up neither readiness nor the ConfigMaps: its watch
//!   retries with backoff (`watch_failed`). After a relist, objects of that kind that went
//!   while its watch was down are unloaded.
//! - **Content, not events.** The source remembers what it handled per object (`content_of`:
//!   component digest, configuration, account, pin, signature, track, pull secret, signer), so
//!   an update of anything else (the status writer's, a relist) loads nothing, and changing a
//!   pin or a signature alone offers again. A `WasmPlugin` whose UID and generation were
//!   handled already offers nothing (`arrived`). `suspend` and a superseded mark act before
//!   the component is read, so a broken spec does not keep a suspended plugin serving.
//! - **What needs no bytes is checked first** (`offer`): a superseded object is retired, a
//!   registry the operator did not allow is `PullRefused`, a malformed pin `DigestMismatch`,
//!   a missing or untrusted signature under `--trusted-keys` `SignatureRejected`; then the
//!   component is pinned and its signature verified (`crate::pinning`), a `signature.keyRef`
//!   naming a trusted key that signed it (`signed_by`).
//! - **Each pull and each load runs in a task of its own** (`start_pull`, `start_load`) and
//!   reports back (`pulled`, `finished`), so an object whose plugin cannot sync for two
//!   minutes holds up no other. Reports are taken only from the work under way for that
//!   object; its newest edit or deletion meanwhile waits, so one object's events keep their
//!   order and a deletion never overtakes its own load. Until its kind's first list is handled, each pull
//!   and load holds `/readyz`, so a starting replica is ready once it serves what its objects
//!   name.
//! - **Retries.** A start failure retries after 15 s (`START_RETRY`: a CRD often arrives after
//!   the plugin), a failed pull after 30 s (`PULL_RETRY`), one at a time, backing off to 5 min
//!   while the content stays the same. A `configMapRef` is read with a GET of at most 10 s
//!   (`READ_TIMEOUT`); failing is the host's fault, not the object's (`ConfigMapUnreadable`),
//!   so it is retried and stops nothing whatever the failure policy.
//! - **One name per realm.** Of two objects of one kind offering one plugin name, the first to
//!   reach the registry keeps it (`NameTaken` for the other); a `WasmPlugin` wins over a
//!   plugin ConfigMap whichever came first (`plan::claimant`, `take_name`), so every replica
//!   and every restart end alike. Once the one serving goes, what it blocked is offered again
//!   (`retry_blocked`).
//! - **What the status shows.** Before an offer's outcome the source reports
//!   `Reported::Observed` (the generation it handles, what pins it, whether it is settled
//!   already), so `observedGeneration` is written with that generation's outcome, never
//!   before it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_runtime::api;
use wasmloop_runtime::identity::{AccountChoice, SERVICE_ACCOUNT_ANNOTATION, ServiceAccount};
use wasmloop_runtime::registry::reports::{Report, Reported, Reporter};
use wasmloop_runtime::registry::{Candidate, Loaded, Registry, RegistryError};
use wasmloop_sandbox::{LoadError, PluginId, SourceId, SourceKind as Kind};

use crate::endpoints::Readiness;

mod plan;

use crate::oci::{self, OciError, PluginRef, Puller, RegistryPolicy};
use crate::pinning::{self, TrustedKeys};
use crate::plugin_configmap::{self, PLUGIN_LABEL, PluginPayload, STATUS_ANNOTATION, Stored, TRACK_ANNOTATION, Track};
use crate::wasmplugin::{self, WasmPlugin};
use plan::{Arrival, Content, DeleteStep, Key, OfferStep, RetryStep, Seen, Shipper, Waiting};

/// How long before a plugin that failed to start (a kind not served yet, a cache that did
/// not sync) is tried again with the same object.
const START_RETRY: Duration = Duration::from_secs(15);

/// How long before a reference that could not be pulled is pulled again.
const PULL_RETRY: Duration = Duration::from_secs(30);

/// How long a `WasmPlugin`'s ConfigMap may take to read before the offer is refused and tried
/// again: the loop waits for the read.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The annotation `kubectl apply` keeps the whole object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The longest refusal logged and reported.
const MAX_REFUSAL: usize = 4096;

/// What an object offers: the plugin it ships, and how the source is to handle it.
struct Offer {
    payload: PluginPayload,
    /// The ServiceAccount it names (a ConfigMap's annotation, a `WasmPlugin`'s
    /// `serviceAccountName`), unparsed until the plugin's account is chosen.
    account: Option<String>,
    /// The key that must have signed the component (`signature.keyRef`).
    signer: Option<String>,
    /// `failurePolicy: Stop`.
    stop: bool,
    /// `suspend: true`.
    suspend: bool,
    /// What the status says already, for a superseded object.
    said: Option<String>,
    /// A `WasmPlugin`'s `settings`.
    settings: Option<wasmloop_sandbox::Settings>,
    /// The ConfigMap holding the component, `NAMESPACE/NAME`, for what its bytes may be
    /// refused for.
    stored_in: String,
}

/// Why an object offers nothing usable.
struct Unread {
    /// The refusal's CamelCase word.
    reason: &'static str,
    message: String,
    /// The spec's `failurePolicy: Stop`, when the spec itself was read.
    stop: bool,
    /// The host failed, not the object (a ConfigMap it names could not be read): tried again,
    /// and never a reason to stop what serves.
    ours: bool,
}

impl Unread {
    fn invalid(reason: &'static str, message: String, stop: bool) -> Unread {
        Unread { reason, message, stop, ours: false }
    }
}

/// A finished pull: the object it was for, which pull it was, and the component or why not.
struct Pulled {
    shipper: Shipper,
    /// The pull's id: a report of any other than the one under way for its object is stale.
    id: u64,
    offer: Offer,
    /// Holds its share of the pulls' memory until the component is loaded.
    result: Result<oci::Component, OciError>,
}

/// A load finished: what the registry did with an object's version.
struct Finished {
    shipper: Shipper,
    /// The load's id: a report of any other than the one under way for its object is stale.
    id: u64,
    result: Result<Done, Failed>,
}

/// What a load did.
enum Done {
    /// The version serves (or is parked, or is what served already).
    Loaded(Loaded),
    /// The candidate shadows its plugin.
    Seated,
}

/// Why a load did not.
enum Failed {
    /// Its bytes: a broken stream, a pin or a signature they do not match.
    Bytes {
        /// The plugin the object names.
        plugin: String,
        /// The refusal's CamelCase word.
        reason: &'static str,
        /// What is wrong, and what to do.
        message: String,
    },
    /// The registry refused it.
    Registry(RegistryError),
}

/// One object's version, checked as far as it can be without its bytes: what a load task
/// expands, checks and offers the registry.
struct Load {
    /// The object, as the registry knows it.
    source: SourceId,
    realm: Namespace,
    payload: PluginPayload,
    /// The ConfigMap holding the component, for what its bytes may be refused for.
    stored_in: String,
    account: AccountChoice,
    settings: Option<wasmloop_sandbox::Settings>,
    trusted: Option<Arc<TrustedKeys>>,
    /// The reason of a refusal of what the object holds (`InvalidConfigMap`, `InvalidWasmPlugin`).
    invalid: &'static str,
}

impl Load {
    /// Takes the component's share of the load memory (unless a pull brought one), expands and
    /// checks its bytes off the runtime's threads, and offers it to the registry, which
    /// compiles it and then lets go of the bytes and their share.
    async fn run(self, registry: &Registry, puller: &Puller, memory: Option<oci::Memory>) -> Result<Done, Failed> {
        let Load { source, realm, payload, stored_in, account, settings, trusted, invalid } = self;
        // Whom it acts as is checked before anything is read or compiled for it: an object
        // naming an account it may not use costs one look-up, not a load.
        let shadow = payload.track == Track::Shadow;
        if !shadow && let Err(source) = registry.may_act(Some(&realm), &payload.name, &account).await {
            return Err(Failed::Registry(RegistryError::Start { source, running: None }));
        }
        let memory = match memory {
            Some(memory) => memory,
            None => puller.load_memory(&realm, payload.component.expanded_size()).await,
        };
        let plugin = payload.name.clone();
        let (stored, pin, signature) = (payload.component, payload.pin.clone(), payload.signature.clone());
        let checked = tokio::task::spawn_blocking(move || {
            let bytes = stored.unpack(&stored_in).map_err(|e| (invalid, e.to_string()))?;
            pinning::check(&bytes, pin.as_deref(), signature.as_deref(), trusted.as_deref())
                .map_err(|e| (e.reason(), e.to_string()))?;
            Ok::<_, (&'static str, String)>(bytes)
        })
        .await
        .expect("expanding and checking a component does not panic");
        let bytes = checked.map_err(|(reason, message)| Failed::Bytes { plugin: plugin.clone(), reason, message })?;
        let candidate = Candidate {
            settings,
            source,
            realm: Some(realm),
            expected_name: Some(plugin),
            bytes,
            held: Some(Arc::new(memory)),
            config: payload.config,
            account,
        };
        if shadow {
            return registry.shadow(candidate).await.map(|_| Done::Seated).map_err(Failed::Registry);
        }
        registry.upsert(candidate).await.map(Done::Loaded).map_err(Failed::Registry)
    }
}

/// The Secret types a pull secret may have: those `kubectl create secret docker-registry`
/// writes. Any other Secret of the namespace (a token, a TLS key) is not read as credentials.
const PULL_SECRET_TYPES: [&str; 2] = ["kubernetes.io/dockerconfigjson", "kubernetes.io/dockercfg"];

/// The component `reference` names, for a plugin of `secrets`' namespace, with the credentials
/// of pull secret `secret`; the Secret's read counts against the pull's time.
async fn pull(
    puller: &Puller,
    secrets: &Api<Secret>,
    reference: &PluginRef,
    secret: Option<&Name>,
) -> Result<oci::Component, OciError> {
    let deadline = tokio::time::Instant::now() + puller.timeout();
    let namespace = secrets.namespace().unwrap_or_default();
    let auth = match secret {
        None => oci_client::secrets::RegistryAuth::Anonymous,
        Some(name) => {
            let at = format!("{namespace}/{name}");
            let read = tokio::time::timeout_at(deadline, secrets.get_opt(name)).await.map_err(|_| {
                OciError::Credentials(format!(
                    "pull secret {at}: reading it took longer than {:?}; check the API server",
                    puller.timeout()
                ))
            })?;
            let secret = read
                .map_err(|e| OciError::Credentials(unreadable_secret(&at, name, &namespace, &e)))?
                .ok_or_else(|| {
                    OciError::Credentials(format!(
                        "pull secret {at} does not exist; create it with `kubectl create secret docker-registry`"
                    ))
                })?;
            let type_ = secret.type_.as_deref().unwrap_or("Opaque");
            if !PULL_SECRET_TYPES.contains(&type_) {
                return Err(OciError::Credentials(format!(
                    "pull secret {at} is of type {type_}, not {}; create it with `kubectl create secret docker-registry`",
                    PULL_SECRET_TYPES[0]
                )));
            }
            let data = secret.data.unwrap_or_default();
            let document = data.get(".dockerconfigjson").or_else(|| data.get(".dockercfg")).ok_or_else(|| {
                OciError::Credentials(format!(
                    "pull secret {at} has no .dockerconfigjson; create it with `kubectl create secret docker-registry`"
                ))
            })?;
            oci::credentials(&document.0, reference.registry(), &at)?
        }
    };
    puller.pull_by(deadline, &namespace, reference, &auth).await
}

/// Why pull secret `at` could not be read, and what to do: `deploy/` lets the host get only the
/// Secrets its Role names, so a forbidden read most likely wants the name added there.
fn unreadable_secret(at: &str, name: &str, namespace: &str, error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.is_forbidden() => format!(
            "pull secret {at}: the host may not read it ({}); add {name} to the resourceNames of Role wasmloop's rule on Secrets in {namespace} (deploy/base/rbac.yaml)",
            wasmloop_contract::validate::cut(status.message.clone(), 512)
        ),
        other => format!(
            "pull secret {at}: cannot read it ({}); the host needs get on Secrets in {namespace}",
            wasmloop_contract::validate::cut(other.to_string(), 512)
        ),
    }
}

/// A watch event of either kind, or of a ConfigMap a `WasmPlugin` may name.
enum Watched {
    /// A plugin ConfigMap's or a `WasmPlugin`'s.
    Shipper(Kind, Result<watcher::Event<Shipper>, watcher::Error>),
    /// Another ConfigMap of the namespace changed or went.
    Named(Result<Option<Named>, watcher::Error>),
}

/// A change of a ConfigMap that is no plugin ConfigMap: one a `WasmPlugin` may name.
struct Named {
    name: String,
    /// Its resourceVersion; none when it went.
    version: Option<String>,
}

/// `event` with its object made a [`Shipper`] by `make`.
fn shipped<K>(event: watcher::Event<K>, make: fn(K) -> Shipper) -> watcher::Event<Shipper> {
    match event {
        watcher::Event::Apply(k) => watcher::Event::Apply(make(k)),
        watcher::Event::Delete(k) => watcher::Event::Delete(make(k)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(k) => watcher::Event::InitApply(make(k)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Watches one namespace for plugin ConfigMaps and `WasmPlugin`s until the registry's host
/// stops.
pub struct NamespaceSource {
    client: kube::Client,
    configmaps: Api<ConfigMap>,
    wasmplugins: Api<WasmPlugin>,
    namespace: Namespace,
    registry: Arc<Registry>,
    /// The registry's stream, for this source's own refusals, stops and deletions.
    reporter: Reporter,
    readiness: Arc<Readiness>,
    seen: HashMap<Key, Seen>,
    /// The newest of each `WasmPlugin` (without its managed fields), offered again when the
    /// ConfigMap it names changes.
    latest: HashMap<Name, WasmPlugin>,
    /// The UID and generation of each `WasmPlugin` handled last: an update that changes only
    /// its status or metadata offers nothing new; one recreated under its name does.
    generations: HashMap<Name, (Option<String>, i64)>,
    /// The `WasmPlugin`s naming each ConfigMap (`spec.configMapRef`), and the ConfigMap's
    /// resourceVersion last seen: a relist of an unchanged one offers nothing again.
    naming: HashMap<String, (HashSet<Name>, Option<String>)>,
    /// Objects to offer again (a start failure's retry, or one another object blocked).
    retry: mpsc::UnboundedSender<Key>,
    retries: Option<mpsc::UnboundedReceiver<Key>>,
    /// When set, only components signed by one of these keys load.
    trusted: Option<Arc<TrustedKeys>>,
    /// Pulls the components objects name by reference.
    puller: Arc<Puller>,
    /// The namespace's Secrets, for pull secrets.
    secrets: Api<Secret>,
    /// Pulls run beside the loop, so that a slow registry does not hold up the others' offers.
    pulls: mpsc::UnboundedSender<Pulled>,
    pulled: Option<mpsc::UnboundedReceiver<Pulled>>,
    /// The kinds whose first list is handled: pulls and loads started later do not hold
    /// readiness.
    listed: HashSet<Kind>,
    /// Pulls started so far: the next one's id.
    pulls_started: u64,
    /// Loads run beside the loop too: a plugin whose caches take minutes to sync (a kind the
    /// host may not list yet) holds up no other object's load.
    finish: mpsc::UnboundedSender<Finished>,
    finished: Option<mpsc::UnboundedReceiver<Finished>>,
    /// Loads started so far: the next one's id.
    loads_started: u64,
    /// Keys the ConfigMaps' fingerprints ([`plugin_configmap::fingerprint`]).
    keys: std::hash::RandomState,
}

impl NamespaceSource {
    /// A source for `namespace`; ready (for `/readyz`) once its first lists are handled.
    pub fn new(
        client: kube::Client,
        namespace: &Namespace,
        registry: Arc<Registry>,
        readiness: Arc<Readiness>,
        trusted: Option<Arc<TrustedKeys>>,
    ) -> Self {
        for kind in [Kind::ConfigMap, Kind::WasmPlugin] {
            readiness.pending(&Self::readiness_item(namespace, kind), "not listed yet");
        }
        let (retry, retries) = mpsc::unbounded_channel();
        let (pulls, pulled) = mpsc::unbounded_channel();
        let (finish, finished) = mpsc::unbounded_channel();
        NamespaceSource {
            pulls,
            pulled: Some(pulled),
            listed: HashSet::new(),
            pulls_started: 0,
            finish,
            finished: Some(finished),
            loads_started: 0,
            retry,
            retries: Some(retries),
            trusted,
            configmaps: api::typed_api(client.clone(), namespace),
            wasmplugins: api::typed_api(client.clone(), namespace),
            secrets: api::typed_api(client.clone(), namespace),
            client,
            puller: Arc::new(Puller::new(RegistryPolicy::default(), Duration::from_secs(120), None)),
            namespace: namespace.clone(),
            reporter: registry.reporter(),
            registry,
            readiness,
            seen: HashMap::new(),
            latest: HashMap::new(),
            generations: HashMap::new(),
            naming: HashMap::new(),
            keys: std::hash::RandomState::new(),
        }
    }

    /// Pulls referenced components with `puller` (its registry policy, timeout and cache).
    #[must_use]
    pub fn puller(mut self, puller: Arc<Puller>) -> Self {
        self.puller = puller;
        self
    }

    fn readiness_item(namespace: &Namespace, kind: Kind) -> String {
        match kind {
            Kind::ConfigMap => format!("plugin ConfigMaps in {namespace}"),
            Kind::WasmPlugin => format!("WasmPlugins in {namespace}"),
        }
    }

    fn source(&self, key: &Key) -> SourceId {
        key.source(&self.namespace)
    }

    /// The three watches, as one stream.
    fn watches(&self) -> impl Stream<Item = Watched> + Send + use<> {
        let configmaps = watcher(self.configmaps.clone(), watcher::Config::default().labels(PLUGIN_LABEL))
            .default_backoff()
            .map(|event| Watched::Shipper(Kind::ConfigMap, event.map(|e| shipped(e, Shipper::ConfigMap))));
        let wasmplugins = watcher(self.wasmplugins.clone(), watcher::Config::default())
            .default_backoff()
            .map(|event| Watched::Shipper(Kind::WasmPlugin, event.map(|e| shipped(e, Shipper::WasmPlugin))));
        // Metadata only: the namespace's other ConfigMaps are the tenant's, of any size.
        let metadata: Api<PartialObjectMeta<ConfigMap>> = api::typed_api(self.client.clone(), &self.namespace);
        let others = watcher(metadata, watcher::Config::default().labels(&format!("!{PLUGIN_LABEL}")))
            .default_backoff()
            .map(|event| {
                Watched::Named(event.map(|e| match e {
                    watcher::Event::Apply(meta) | watcher::Event::InitApply(meta) => {
                        Some(Named { name: meta.name_any(), version: meta.resource_version() })
                    }
                    watcher::Event::Delete(meta) => Some(Named { name: meta.name_any(), version: None }),
                    watcher::Event::Init | watcher::Event::InitDone => None,
                }))
            });
        futures::stream::select(futures::stream::select(configmaps, wasmplugins), others)
    }

    /// Runs until the watches end (never, short of the process stopping).
    pub async fn run(mut self) {
        let mut events = self.watches().boxed();
        let mut retries = self.retries.take().expect("run once");
        let mut pulled = self.pulled.take().expect("run once");
        let mut finished = self.finished.take().expect("run once");
        let mut listing: HashMap<Kind, HashSet<Name>> = HashMap::new();
        loop {
            tokio::select! {
                Some(done) = pulled.recv() => self.pulled(done).await,
                Some(done) = finished.recv() => self.finished(done).await,
                event = events.next() => match event {
                    Some(Watched::Shipper(kind, event)) => self.watched(kind, event, &mut listing).await,
                    Some(Watched::Named(Ok(Some(named)))) => self.named_changed(named).await,
                    Some(Watched::Named(Ok(None))) => {}
                    Some(Watched::Named(Err(error))) => tracing::warn!(namespace = %self.namespace, %error, "watching the ConfigMaps WasmPlugins name failed; retrying with backoff (check that the host may list and watch ConfigMaps here)"),
                    None => return,
                },
                Some(key) = retries.recv() => self.retried(key).await,
            }
        }
    }

    async fn watched(
        &mut self,
        kind: Kind,
        event: Result<watcher::Event<Shipper>, watcher::Error>,
        listing: &mut HashMap<Kind, HashSet<Name>>,
    ) {
        if let Ok(watcher::Event::Apply(shipper) | watcher::Event::InitApply(shipper) | watcher::Event::Delete(shipper)) =
            &event
            && !shipper.is_named()
        {
            tracing::warn!(namespace = %self.namespace, %kind, "an object whose name is not an object name was skipped");
            return;
        }
        match event {
            Ok(watcher::Event::Init) => {
                listing.insert(kind, HashSet::new());
            }
            Ok(watcher::Event::InitApply(shipper)) => {
                if let Some(names) = listing.get_mut(&kind) {
                    names.insert(shipper.key().name);
                }
                self.arrived(shipper).await;
            }
            Ok(watcher::Event::InitDone) => {
                // Objects deleted while the watch was down.
                let names = listing.remove(&kind).unwrap_or_default();
                let gone: Vec<Key> =
                    self.seen.keys().filter(|key| key.kind == kind && !names.contains(&key.name)).cloned().collect();
                for key in gone {
                    self.unload(&key).await;
                }
                self.listed.insert(kind);
                self.readiness.ready(&Self::readiness_item(&self.namespace, kind));
            }
            Ok(watcher::Event::Apply(shipper)) => self.arrived(shipper).await,
            Ok(watcher::Event::Delete(shipper)) => self.unload(&shipper.key()).await,
            Err(error) => self.watch_failed(kind, &error),
        }
    }

    /// A watch failed; it is retried with backoff. A `WasmPlugin` kind that is not installed,
    /// or that the host may not list, holds up neither readiness nor the ConfigMaps.
    fn watch_failed(&mut self, kind: Kind, error: &watcher::Error) {
        let what = match kind {
            Kind::ConfigMap => {
                "watching plugin ConfigMaps failed; retrying with backoff (check that the host may list and watch ConfigMaps here)"
            }
            Kind::WasmPlugin => {
                "watching WasmPlugins failed; retrying with backoff (install the kind from deploy/base/wasmplugin-crd.yaml, and check that the host may list and watch wasmplugins.wasmloop.dev)"
            }
        };
        if kind == Kind::WasmPlugin && self.listed.insert(kind) {
            self.readiness.ready(&Self::readiness_item(&self.namespace, kind));
            tracing::warn!(namespace = %self.namespace, %error, "{what}; plugin ConfigMaps load meanwhile");
            return;
        }
        tracing::warn!(namespace = %self.namespace, %error, "{what}");
    }

    /// An object came from a watch: a `WasmPlugin` whose generation was handled already changed
    /// only its status or metadata (the status writer's own writes among them).
    async fn arrived(&mut self, shipper: Shipper) {
        if let Shipper::WasmPlugin(plugin) = &shipper {
            let name = shipper.key().name;
            // Kept to offer again when its ConfigMap changes: without what the host never reads,
            // which can be as large as the spec.
            let mut kept = plugin.clone();
            kept.metadata.managed_fields = None;
            if let Some(annotations) = kept.metadata.annotations.as_mut() {
                annotations.remove(LAST_APPLIED);
            }
            // One whose configuration is past the limit is refused until edited, and the edit
            // comes through the watch: it is not kept.
            if plugin.spec["config"].to_string().len() > wasmplugin::MAX_CONFIG {
                self.latest.remove(&name);
            } else {
                self.latest.insert(name.clone(), kept);
            }
            let handled = self.generations.get(&name);
            let current = plugin.metadata.generation.map(|g| (plugin.metadata.uid.clone(), g));
            if current.is_some() && handled == current.as_ref() {
                return;
            }
            // Only a new spec can name another ConfigMap.
            self.index(&name, plugin);
        }
        self.offer(&shipper).await;
    }

    /// Notes which ConfigMap `WasmPlugin` `name` names, if any; one it named already keeps the
    /// resourceVersion seen.
    fn index(&mut self, name: &Name, plugin: &WasmPlugin) {
        let named = wasmplugin::Spec::parse(plugin).ok().and_then(|spec| spec.configmap().map(ToString::to_string));
        if named.as_ref().and_then(|c| self.naming.get(c)).is_some_and(|(plugins, _)| plugins.contains(name)) {
            return;
        }
        self.unindex(name);
        if let Some(configmap) = named {
            self.naming.entry(configmap).or_default().0.insert(name.clone());
        }
    }

    fn unindex(&mut self, name: &Name) {
        self.naming.retain(|_, (plugins, _)| {
            plugins.remove(name);
            !plugins.is_empty()
        });
    }

    /// ConfigMap `named` changed or went: the `WasmPlugin`s that name it offer it again,
    /// unless it is the version seen already (a relist).
    async fn named_changed(&mut self, named: Named) {
        let Some((plugins, seen)) = self.naming.get_mut(&named.name) else { return };
        if named.version.is_some() && *seen == named.version {
            return;
        }
        seen.clone_from(&named.version);
        let plugins: Vec<WasmPlugin> = plugins.iter().filter_map(|p| self.latest.get(p)).cloned().collect();
        for plugin in plugins {
            self.offer(&Shipper::WasmPlugin(plugin)).await;
        }
    }

    async fn retried(&mut self, key: Key) {
        if self.seen.get_mut(&key).is_some_and(|seen| seen.retry() == RetryStep::Skip) {
            return;
        }
        let read = match key.kind {
            Kind::ConfigMap => self.configmaps.get_opt(&key.name).await.map(|o| o.map(Shipper::ConfigMap)),
            Kind::WasmPlugin => self.wasmplugins.get_opt(&key.name).await.map(|o| o.map(Shipper::WasmPlugin)),
        };
        match read {
            Ok(Some(shipper)) => self.offer(&shipper).await,
            Ok(None) => {}
            Err(error) => {
                // The retry must not end with one failed read.
                tracing::warn!(source = %self.source(&key), %error, "cannot read the object to try it again; trying again in {} s", START_RETRY.as_secs());
                self.retry_after(&key, START_RETRY);
            }
        }
    }

    /// A plugin ConfigMap's fingerprint ([`plugin_configmap::fingerprint`]), hashed off the
    /// runtime's threads: its data may hold a megabyte. None for a `WasmPlugin`.
    async fn fingerprint(&self, shipper: &Shipper) -> Option<u64> {
        let Shipper::ConfigMap(cm) = shipper else { return None };
        let (cm, keys) = (cm.clone(), self.keys.clone());
        let hashed = tokio::task::spawn_blocking(move || plugin_configmap::fingerprint(&cm, &keys)).await;
        Some(hashed.expect("hashing does not panic"))
    }

    /// What `shipper` offers, or why it offers nothing usable.
    async fn read(&self, shipper: &Shipper) -> Result<Offer, Unread> {
        match shipper {
            Shipper::ConfigMap(cm) => {
                let payload = plugin_configmap::read(cm)
                    .map_err(|e| Unread::invalid("InvalidConfigMap", e.to_string(), false))?;
                let said = (payload.track == Track::Superseded).then(|| said_in_annotation(cm)).flatten();
                let account = cm.annotations().get(SERVICE_ACCOUNT_ANNOTATION).cloned();
                let stored_in = format!("{}/{}", self.namespace, cm.name_any());
                Ok(Offer {
                    payload,
                    account,
                    signer: None,
                    stop: false,
                    suspend: false,
                    said,
                    settings: None,
                    stored_in,
                })
            }
            Shipper::WasmPlugin(plugin) => {
                // An unreadable spec stops nothing (its failure policy is unknown), unless it
                // asks to be suspended: that it can always ask.
                let spec = match wasmplugin::Spec::parse(plugin) {
                    Ok(spec) => spec,
                    Err(_) if plugin.spec["suspend"] == true => return Ok(suspended(plugin)),
                    Err(message) => return Err(Unread::invalid("InvalidWasmPlugin", message, false)),
                };
                let mut offer = Offer {
                    payload: spec.bare_payload(),
                    account: spec.account.as_ref().map(ToString::to_string),
                    signer: spec.signature.as_ref().and_then(|s| s.key.as_ref()).map(|key| key.to_ascii_uppercase()),
                    stop: spec.stop_on_failure,
                    suspend: spec.suspend,
                    said: wasmplugin::superseded(plugin),
                    settings: spec.settings.clone(),
                    stored_in: spec.configmap().map(|name| format!("{}/{name}", self.namespace)).unwrap_or_default(),
                };
                // Suspended or superseded, it loads nothing, whatever its ConfigMap holds.
                if offer.said.is_some() {
                    offer.payload.track = Track::Superseded;
                    return Ok(offer);
                }
                if offer.suspend {
                    return Ok(offer);
                }
                let configmap = match spec.configmap() {
                    Some(name) => self.read_configmap(name).await?,
                    None => None,
                };
                // Nothing is expanded here: that waits until the content is known to be new.
                let payload = spec.payload(&self.namespace, configmap.as_ref());
                offer.payload = payload.map_err(|m| Unread::invalid("InvalidWasmPlugin", m, spec.stop_on_failure))?;
                Ok(offer)
            }
        }
    }

    /// ConfigMap `name` of this namespace, as a `WasmPlugin` names it; none when it does not
    /// exist.
    async fn read_configmap(&self, name: &Name) -> Result<Option<ConfigMap>, Unread> {
        let at = format!("{}/{name}", self.namespace);
        let message = match tokio::time::timeout(READ_TIMEOUT, self.configmaps.get_opt(name)).await {
            Ok(Ok(found)) => return Ok(found),
            Ok(Err(error)) => format!(
                "cannot read ConfigMap {at}, which spec.configMapRef names ({}); the host needs get on ConfigMaps in {}",
                wasmloop_contract::validate::cut(error.to_string(), 512),
                self.namespace
            ),
            Err(_) => format!(
                "reading ConfigMap {at}, which spec.configMapRef names, took longer than {READ_TIMEOUT:?}; check the API server"
            ),
        };
        let message = format!("{message}; trying again in {} s", START_RETRY.as_secs());
        Err(Unread { reason: "ConfigMapUnreadable", message, stop: false, ours: true })
    }

    async fn offer(&mut self, shipper: &Shipper) {
        let key = shipper.key();
        // Read (up to 64 MiB unzipped and hashed) only once it is its turn, and only when what
        // it offers may have changed: the echo of the status writer's annotation is not.
        let fingerprint = self.fingerprint(shipper).await;
        if let Some(Arrival::Wait | Arrival::Echo) =
            self.seen.get_mut(&key).map(|seen| seen.arrive(shipper, fingerprint))
        {
            return;
        }
        let generation = match shipper {
            Shipper::WasmPlugin(plugin) => plugin.metadata.generation.map(|g| (plugin.metadata.uid.clone(), g)),
            Shipper::ConfigMap(_) => None,
        };
        let read = self.read(shipper).await;
        // Hashing what is stored (up to a ConfigMap's size, never an expanded component) is
        // blocking work all the same: off the runtime's threads.
        let (read, content) = tokio::task::spawn_blocking(move || {
            let content = match &read {
                Ok(offer) => content_of(offer),
                Err(unread) => Content { config: Some(unread.message.clone()), ..Content::default() },
            };
            (read, content)
        })
        .await
        .expect("hashing does not panic");
        let seen = self.seen.entry(key.clone()).or_default();
        let step = seen.offer(shipper, content, fingerprint);
        seen.stop = match &read {
            Ok(offer) => offer.stop,
            Err(unread) => unread.stop,
        };
        // Nothing more comes for this generation only when nothing is under way for it.
        let settled = matches!(step, OfferStep::Same) && seen.idle();
        if let (Some((uid, generation)), false) = (generation, matches!(step, OfferStep::Wait)) {
            // The outcome about to be reported is this generation's (or, settled, the one shown).
            self.generations.insert(key.name.clone(), (uid, generation));
            let pin = read.as_ref().ok().and_then(|offer| pin_of(&offer.payload));
            self.reporter.publish(Report::new(self.source(&key), Reported::Observed { generation, pin, settled }));
        }
        match step {
            OfferStep::Wait | OfferStep::Same => return,
            OfferStep::New { abandoned } => self.abandoned(&key, abandoned),
        }
        let offer = match read {
            Ok(offer) => {
                self.seen.entry(key.clone()).or_default().plugin = Some(offer.payload.name.clone());
                offer
            }
            Err(unread) => {
                if unread.ours {
                    let message = format!("{}{}", unread.message, self.keeps_anyway(&key));
                    self.retry_after(&key, START_RETRY);
                    return self.refused(&key, unread.reason, &message);
                }
                let message = format!("{}{}", unread.message, self.keeps(&key));
                return self.rejected(&key, unread.reason, &message).await;
            }
        };
        if offer.suspend {
            return self.suspend(&key).await;
        }
        match offer.payload.reference.clone() {
            // A superseded object loads nothing: nothing to pull, or to refuse.
            Some(_) if offer.payload.track == Track::Superseded => self.retire(&key, offer.said).await,
            Some(reference) => {
                // What can be refused without the bytes is refused before a connection is made.
                if let Err((reason, message)) = self.before_pull(&offer, &reference) {
                    let message = format!("plugin {}: {message}{}", offer.payload.name, self.keeps(&key));
                    return self.rejected(&key, reason, &message).await;
                }
                // Whom it acts as, before a connection is made or memory taken for it.
                if offer.payload.track != Track::Shadow {
                    let account = match self.account_of(&key, false, offer.account.as_deref()) {
                        Ok(account) => account,
                        Err(message) => return self.rejected(&key, invalid(key.kind), &message).await,
                    };
                    if let Err(source) =
                        self.registry.may_act(Some(&self.namespace), &offer.payload.name, &account).await
                    {
                        self.retry_after(&key, START_RETRY);
                        let error = RegistryError::Start { source, running: None };
                        return self.rejected(&key, error.reason(), &error.to_string()).await;
                    }
                }
                self.start_pull(shipper.clone(), offer, reference);
            }
            None => self.admit(shipper, offer, None).await,
        }
    }

    /// The checks of a referenced component that need no pull: the reference is pinned and
    /// allowed, the pin well formed, and a signature there when keys are trusted.
    fn before_pull(&self, offer: &Offer, reference: &PluginRef) -> Result<(), (&'static str, String)> {
        self.puller.admissible(reference).map_err(|e| ("PullRefused", e.to_string()))?;
        let payload = &offer.payload;
        pinning::check_without_component(payload.pin.as_deref(), payload.signature.as_deref(), self.trusted.as_deref())
            .map_err(|e| (e.reason(), e.to_string()))
    }

    /// Pulls the component `reference` names in a task of its own, which reports to
    /// [`Self::pulled`].
    fn start_pull(&mut self, shipper: Shipper, offer: Offer, reference: PluginRef) {
        let key = shipper.key();
        let id = self.pulls_started;
        self.pulls_started += 1;
        if !self.listed.contains(&key.kind) {
            // A host that starts is ready once it serves what its objects name.
            self.readiness.pending(&self.pull_item(&key), "pulling the component it names");
        }
        tracing::info!(source = %self.source(&key), %reference, "pulling the plugin this object names");
        let (puller, secrets, pulls) = (self.puller.clone(), self.secrets.clone(), self.pulls.clone());
        let task = tokio::spawn(async move {
            let pulling = pull(&puller, &secrets, &reference, offer.payload.pull_secret.as_ref());
            // A panic must still report, or the object would wait for this pull forever.
            let result = std::panic::AssertUnwindSafe(pulling).catch_unwind().await.unwrap_or_else(|_| {
                Err(OciError::Registry {
                    registry: reference.registry().to_owned(),
                    message: "the pull panicked (a bug in the host; the log has it)".to_owned(),
                })
            });
            let _ = pulls.send(Pulled { shipper, id, offer, result });
        });
        self.seen.entry(key).or_default().pull_started(id, task.abort_handle());
    }

    fn pull_item(&self, key: &Key) -> String {
        format!("{}: pull", self.source(key))
    }

    /// Aborts the pull object `key` abandoned, if any: a newer offer replaces it.
    fn abandoned(&self, key: &Key, pull: Option<AbortHandle>) {
        if let Some(task) = pull {
            task.abort();
            // Its report will never come: readiness must not wait for it.
            self.readiness.ready(&self.pull_item(key));
        }
    }

    /// A pull finished: what it brought is offered, unless it is not the pull under way for its
    /// object (an abort came too late to stop its report: the object was deleted, edited or
    /// retried since, and a newer offer is under way).
    async fn pulled(&mut self, pulled: Pulled) {
        let Pulled { shipper, id, mut offer, result } = pulled;
        let key = shipper.key();
        if !self.seen.get_mut(&key).is_some_and(|seen| seen.pulled(id)) {
            return;
        }
        self.readiness.ready(&self.pull_item(&key));
        match result {
            Ok(component) => {
                // The pull's share of the load memory goes with the bytes, until compiled.
                let (bytes, memory) = component.into_parts();
                offer.payload.component = Stored::Plain(bytes.into());
                self.admit(&shipper, offer, Some(memory)).await;
            }
            Err(error) => {
                let payload = &offer.payload;
                let reference = payload.reference.as_ref().map(ToString::to_string).unwrap_or_default();
                let message = format!(
                    "plugin {}: cannot pull {reference}: {error}; trying again every {} s{}",
                    payload.name,
                    PULL_RETRY.as_secs(),
                    self.keeps(&key)
                );
                self.retry_after(&key, PULL_RETRY);
                self.rejected(&key, "PullFailed", &message).await;
            }
        }
    }

    /// Loads the component an object ships (its bytes pulled if it named a reference, then
    /// holding their share of the load memory), or seats it as a shadow, once what needs no
    /// bytes is checked: its bytes are expanded and checked in the load's own task.
    async fn admit(&mut self, shipper: &Shipper, offer: Offer, memory: Option<oci::Memory>) {
        let key = shipper.key();
        let source = self.source(&key);
        if offer.payload.track == Track::Superseded {
            // It loads nothing, so there is nothing to check.
            return self.retire(&key, offer.said).await;
        }
        if let Err(message) = self.signed_by(&offer) {
            let message = format!("plugin {}: {message}{}", offer.payload.name, self.keeps(&key));
            return self.rejected(&key, "SignatureRejected", &message).await;
        }
        let shadow = offer.payload.track == Track::Shadow;
        if shadow && let Some((serving, _)) = self.registry.serving(&source) {
            let how = match key.kind {
                Kind::ConfigMap => format!(
                    "a shadow is a second ConfigMap (`wasmloop bundle --shadow`): remove the {TRACK_ANNOTATION} annotation here"
                ),
                Kind::WasmPlugin => "a shadow is a second WasmPlugin: set track.mode back to serving here".to_owned(),
            };
            let message = format!("this {} serves plugin {}; {how}{}", key.kind, serving.name(), self.keeps(&key));
            return self.rejected(&key, invalid(key.kind), &message).await;
        }
        // A WasmPlugin of the name wins it; one that comes while this serves takes it over
        // once its own version has loaded (`finished`), so a bad one stops nothing.
        if !shadow
            && key.kind == Kind::ConfigMap
            && let Some(message) = self.claimed(&offer.payload.name)
        {
            return self.rejected(&key, "NameTaken", &message).await;
        }
        let account = match self.account_of(&key, shadow, offer.account.as_deref()) {
            Ok(account) => account,
            Err(message) => return self.rejected(&key, invalid(key.kind), &message).await,
        };
        let verb = if shadow { "seating the shadow" } else { "loading the plugin" };
        tracing::info!(%source, plugin = %offer.payload.name, "{verb} this object ships");
        let load = Load {
            source,
            realm: self.namespace.clone(),
            payload: offer.payload,
            stored_in: offer.stored_in,
            account,
            settings: offer.settings,
            trusted: self.trusted.clone(),
            invalid: invalid(key.kind),
        };
        self.start_load(shipper.clone(), load, memory);
    }

    /// Whom object `key`'s plugin acts as: the ServiceAccount it names, or the one named like
    /// the plugin; a shadow acts as nobody (it writes nothing).
    fn account_of(&self, key: &Key, shadow: bool, named: Option<&str>) -> Result<AccountChoice, String> {
        let Some(named) = named.filter(|_| !shadow) else {
            return Ok(AccountChoice::LikePlugin { namespace: self.namespace.to_string() });
        };
        // The ServiceAccount is always in the object's namespace: whoever may write plugins
        // there chooses among that namespace's accounts, as a pod's author chooses among its
        // namespace's.
        ServiceAccount::new(&self.namespace, named).map(AccountChoice::Named).map_err(|error| {
            let field = match key.kind {
                Kind::ConfigMap => format!("the {SERVICE_ACCOUNT_ANNOTATION} annotation"),
                Kind::WasmPlugin => "spec.serviceAccountName".to_owned(),
            };
            format!("{field}: {error}; name a ServiceAccount of namespace {}{}", self.namespace, self.keeps(key))
        })
    }

    /// `signature.keyRef`'s demand: the host trusts keys, that key among them, and it signed
    /// the component (whose signature [`pinning::check`] then verifies).
    fn signed_by(&self, offer: &Offer) -> Result<(), String> {
        let Some(wanted) = &offer.signer else { return Ok(()) };
        let Some(trusted) = &self.trusted else {
            return Err(format!(
                "spec.signature.keyRef asks for a signature by key {wanted}, and the host trusts no keys; start it with --trusted-keys"
            ));
        };
        if !trusted.ids().split(", ").any(|id| id == wanted) {
            return Err(format!(
                "spec.signature.keyRef names key {wanted}, which the host does not trust (trusted: {}); name one of them, or add the key to --trusted-keys",
                trusted.ids()
            ));
        }
        let signer = offer.payload.signature.as_deref().and_then(pinning::signature_key_id);
        match signer {
            Some(signer) if signer == *wanted => Ok(()),
            Some(signer) => Err(format!(
                "the component is signed by key {signer}, and spec.signature.keyRef asks for key {wanted}; sign it with that key, or name {signer}"
            )),
            None => Err(format!(
                "spec.signature.keyRef asks for a signature by key {wanted}, and the ConfigMap has none in data[\"{}\"]; bundle it with `--signature plugin.wasm.minisig`",
                pinning::SIGNATURE_KEY
            )),
        }
    }

    /// Carries out `load` in a task of its own, which reports to [`Self::finished`]; until
    /// then, the object's events wait. `memory` is a pull's share of the load memory; a
    /// ConfigMap's component takes its share in the task, before it is expanded.
    fn start_load(&mut self, shipper: Shipper, load: Load, memory: Option<oci::Memory>) {
        let key = shipper.key();
        let id = self.loads_started;
        self.loads_started += 1;
        if !self.listed.contains(&key.kind) {
            // A host that starts is ready once it serves what its objects name.
            self.readiness.pending(&self.load_item(&key), "loading the plugin it ships");
        }
        let (registry, puller, finish) = (self.registry.clone(), self.puller.clone(), self.finish.clone());
        let origin = load.source.to_string();
        tokio::spawn(async move {
            let loading = load.run(&registry, &puller, memory);
            // A panic must still report, or the object would wait for this load forever.
            let result = std::panic::AssertUnwindSafe(loading).catch_unwind().await.unwrap_or_else(|_| {
                let message = "the load panicked (a bug in the host; the log has it)".to_owned();
                Err(Failed::Registry(RegistryError::Load {
                    source: LoadError::Panicked { origin, message },
                    running: None,
                }))
            });
            let _ = finish.send(Finished { shipper, id, result });
        });
        self.seen.entry(key).or_default().load_started(id);
    }

    fn load_item(&self, key: &Key) -> String {
        format!("{}: load", self.source(key))
    }

    /// A load finished: what it did is carried on, then whatever came for its object meanwhile
    /// is handled.
    async fn finished(&mut self, finished: Finished) {
        let Finished { shipper, id, result } = finished;
        let key = shipper.key();
        let Some(waiting) = self.seen.get_mut(&key).and_then(|seen| seen.load_finished(id)) else { return };
        self.readiness.ready(&self.load_item(&key));
        match result {
            Ok(Done::Loaded(loaded)) => {
                self.loaded(&key, &loaded);
                // A WasmPlugin of the name came while this ConfigMap's version loaded: it wins.
                let plugin = loaded.name().name().to_owned();
                if key.kind == Kind::ConfigMap && self.claimed(&plugin).is_some() {
                    self.take_name(&plugin).await;
                    self.retry_blocked();
                }
            }
            Ok(Done::Seated) => self.seen.entry(key.clone()).or_default().refused = false,
            Err(Failed::Registry(RegistryError::NameTaken { name, .. }))
                if key.kind == Kind::WasmPlugin && self.yields_to_me(&name) =>
            {
                // A ConfigMap's version of the name loaded while this one did: it yields.
                self.take_name(name.name()).await;
                let _ = self.retry.send(key.clone());
            }
            Err(Failed::Registry(error)) => {
                // A kind that is not served yet may be soon (a CRD applied after the plugin);
                // a load the host's budgets had no room for may find room.
                let again = match &error {
                    RegistryError::Start { .. } => true,
                    RegistryError::Load { source, .. } => source.is_host_pressure(),
                    _ => false,
                };
                if again {
                    self.retry_after(&key, START_RETRY);
                }
                self.rejected(&key, error.reason(), &error.to_string()).await;
            }
            Err(Failed::Bytes { plugin, reason, message }) => {
                let message = format!("plugin {plugin}: {message}{}", self.keeps(&key));
                self.rejected(&key, reason, &message).await;
            }
        }
        match waiting {
            Some(Waiting::Offer(shipper)) => self.offer(&shipper).await,
            Some(Waiting::Delete) => self.unload(&key).await,
            None => {}
        }
    }

    /// Offers object `key` again after `first`, longer for each retry of the same content
    /// ([`Seen::schedule_retry`]): one retry at a time, whatever the watch brings meanwhile.
    fn retry_after(&mut self, key: &Key, first: Duration) {
        let Some(delay) = self.seen.entry(key.clone()).or_default().schedule_retry(first) else { return };
        let (retry, again) = (self.retry.clone(), key.clone());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = retry.send(again);
        });
    }

    /// What keeps serving from object `key` when its newest offer is refused, as the refusal's
    /// last words; under `failurePolicy: Stop`, nothing does ([`Self::rejected`] says so).
    fn keeps(&self, key: &Key) -> String {
        if self.seen.get(key).is_some_and(|seen| seen.stop) {
            return String::new();
        }
        self.keeps_anyway(key)
    }

    /// What keeps serving from object `key`, whatever its failure policy.
    fn keeps_anyway(&self, key: &Key) -> String {
        match self.registry.serving(&self.source(key)) {
            Some((id, version)) => format!(" (plugin {} {version} keeps serving)", id.name()),
            None => String::new(),
        }
    }

    /// Why plugin `plugin` may not load from a plugin ConfigMap here: a `WasmPlugin` of this
    /// namespace claims it ([`plan::claimant`]).
    fn claimed(&self, plugin: &str) -> Option<String> {
        let serving = self
            .latest
            .values()
            .filter(|p| p.spec["track"]["mode"] != "shadow")
            .map(|p| p.metadata.name.as_deref().unwrap_or_default());
        let claimant = plan::claimant(plugin, serving)?;
        Some(format!(
            "plugin {plugin} is claimed by WasmPlugin {}/{claimant}: a WasmPlugin wins over a plugin ConfigMap of the same plugin name, on every replica and after every restart; delete this ConfigMap, or that WasmPlugin",
            self.namespace
        ))
    }

    /// Whether plugin `id` (`NAMESPACE/NAME`) is served or offered by a plugin ConfigMap here,
    /// which a `WasmPlugin` of the name takes it from.
    fn yields_to_me(&self, id: &PluginId) -> bool {
        !plan::yielding(id.name(), &self.seen).is_empty()
    }

    /// Stops what the plugin ConfigMaps offering plugin `plugin` serve: a `WasmPlugin` of the
    /// name takes it. Each is refused, naming the `WasmPlugin`, and loads again once it goes.
    async fn take_name(&mut self, plugin: &str) {
        let Some(message) = self.claimed(plugin) else { return };
        let yielding: Vec<Key> = plan::yielding(plugin, &self.seen).into_iter().cloned().collect();
        for key in yielding {
            let source = self.source(&key);
            self.registry.unshadow(&source);
            let stopped = self.registry.remove(&source).await;
            self.seen.entry(key.clone()).or_default().refused = true;
            let (reason, message) =
                ("NameTaken".to_owned(), wasmloop_contract::validate::cut(message.clone(), MAX_REFUSAL));
            // What served from it stops, and its status says so; one that served nothing is
            // refused.
            let what = match stopped {
                Some(plugin) => {
                    tracing::info!(%source, %plugin, "a WasmPlugin of the same name takes the plugin");
                    Reported::Stopped { reason, message }
                }
                None => Reported::Refused { reason, message },
            };
            self.reporter.publish(Report::new(source, what));
        }
    }

    /// A version this object offered was taken (the registry reports it; the status writer
    /// shows it, and marks the object a promotion superseded).
    fn loaded(&mut self, key: &Key, loaded: &Loaded) {
        tracing::info!(source = %self.source(key), digest = loaded.digest(), "{loaded}");
        let seen = self.seen.entry(key.clone()).or_default();
        (seen.refused, seen.retries) = (false, 0);
    }

    /// Refuses object `key`'s newest offer: logged here, shown by the status writer. Under
    /// `failurePolicy: Stop` what served from it stops.
    async fn rejected(&mut self, key: &Key, reason: &str, message: &str) {
        let source = self.source(key);
        // Refusals quote what others wrote (a registry, a manifest, a compiler on a component).
        let message = wasmloop_contract::validate::cut(message.to_owned(), MAX_REFUSAL);
        tracing::error!(%source, reason, "{message}");
        let stop = self.seen.get(key).is_some_and(|seen| seen.stop);
        // Stopped before it counts as refused: what the stop unblocks is retried, not itself.
        let stopped = if stop { self.stop_serving(&source).await } else { None };
        self.seen.entry(key.clone()).or_default().refused = true;
        if let Some(plugin) = stopped {
            let message = wasmloop_contract::validate::cut(
                format!(
                    "{message} (failurePolicy Stop: plugin {plugin} stopped; fix the version, or set failurePolicy to KeepPrevious)"
                ),
                MAX_REFUSAL,
            );
            self.reporter.publish(Report::new(source, Reported::Stopped { reason: reason.to_owned(), message }));
            return;
        }
        self.reporter.publish(Report::new(source, Reported::Refused { reason: reason.to_owned(), message }));
    }

    /// Refuses object `key`'s newest offer for a failure of the host's, not the object's (a
    /// ConfigMap it names could not be read): what serves keeps serving, whatever the failure
    /// policy, and the offer is tried again.
    fn refused(&mut self, key: &Key, reason: &str, message: &str) {
        let source = self.source(key);
        let message = wasmloop_contract::validate::cut(message.to_owned(), MAX_REFUSAL);
        tracing::warn!(%source, reason, "{message}");
        self.reporter.publish(Report::new(source, Reported::Refused { reason: reason.to_owned(), message }));
    }

    /// Stops what serves or shadows from `source`: the plugin that stopped, if any did.
    async fn stop_serving(&mut self, source: &SourceId) -> Option<String> {
        let unshadowed = self.registry.unshadow(source);
        let removed = self.registry.remove(source).await;
        if removed.is_some() || !unshadowed.is_empty() {
            self.retry_blocked();
        }
        removed.map(|id| id.to_string()).or_else(|| unshadowed.into_iter().next())
    }

    /// A suspended `WasmPlugin` serves nothing until it is resumed.
    async fn suspend(&mut self, key: &Key) {
        let source = self.source(key);
        if let Some(plugin) = self.stop_serving(&source).await {
            tracing::info!(%source, plugin, "WasmPlugin suspended: plugin stopped");
        }
        self.seen.entry(key.clone()).or_default().refused = false;
        let message =
            "spec.suspend is true: the plugin is stopped; set it to false, or remove it, to resume".to_owned();
        self.reporter.publish(Report::new(source, Reported::Stopped { reason: "Suspended".to_owned(), message }));
    }

    async fn unload(&mut self, key: &Key) {
        match self.seen.get_mut(key).map(Seen::delete) {
            Some(DeleteStep::Wait) => return,
            Some(DeleteStep::Unload { abandoned }) => self.abandoned(key, abandoned),
            None => {}
        }
        self.seen.remove(key);
        if key.kind == Kind::WasmPlugin {
            self.latest.remove(&key.name);
            self.generations.remove(&key.name);
            self.unindex(&key.name);
        }
        let source = self.source(key);
        let unshadowed = self.registry.unshadow(&source);
        for plugin in &unshadowed {
            tracing::info!(%source, plugin, "deleted: shadow removed");
        }
        let removed = self.registry.remove(&source).await;
        if let Some(plugin) = &removed {
            tracing::info!(%source, %plugin, "deleted: plugin unloaded");
        }
        // Reported once what it served and shadowed is gone: nothing about it comes after.
        self.reporter.publish(Report::new(source, Reported::Removed));
        // A WasmPlugin gone frees its name, whether or not it served: a ConfigMap it claimed the
        // name from may load.
        if removed.is_some() || !unshadowed.is_empty() || key.kind == Kind::WasmPlugin {
            self.retry_blocked();
        }
    }

    /// Offers again every object refused while another held its plugin or its shadow seat (a
    /// rename, a second candidate, a promotion another replica saw first, a plugin moving from
    /// a ConfigMap to a `WasmPlugin`): it may load now.
    fn retry_blocked(&self) {
        for (other, seen) in &self.seen {
            // The registry is asked only about the refused: a deletion costs one pass.
            if seen.refused && seen.blocked(self.registry.serving(&self.source(other)).is_some()) {
                let _ = self.retry.send(other.clone());
            }
        }
    }

    /// An object marked superseded loads nothing: what it served or shadowed stops, and
    /// whatever waited for its plugin may load. `said`: what its status says already.
    async fn retire(&mut self, key: &Key, said: Option<String>) {
        let source = self.source(key);
        self.registry.unshadow(&source);
        if let Some(plugin) = self.registry.remove(&source).await {
            tracing::info!(%source, %plugin, "marked superseded: plugin unloaded");
            self.retry_blocked();
        }
        self.seen.entry(key.clone()).or_default().refused = false;
        self.reporter.publish(Report::new(source, Reported::Retired { said }));
    }
}

/// The reason of a refusal of what an object of `kind` says.
fn invalid(kind: Kind) -> &'static str {
    match kind {
        Kind::ConfigMap => "InvalidConfigMap",
        Kind::WasmPlugin => "InvalidWasmPlugin",
    }
}

/// What a superseded ConfigMap's status annotation says already: the promotion's own words,
/// after a restart.
fn said_in_annotation(cm: &ConfigMap) -> Option<String> {
    cm.annotations()
        .get(STATUS_ANNOTATION)
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|status| {
            status["lastError"].as_str().map(|said| wasmloop_contract::validate::cut(said.to_owned(), MAX_REFUSAL))
        })
}

/// What a `WasmPlugin` whose spec does not parse offers when it asks to be suspended: nothing.
fn suspended(plugin: &WasmPlugin) -> Offer {
    let payload = PluginPayload {
        name: wasmloop_contract::validate::cut(plugin.name_any(), 253),
        component: Stored::Nothing,
        reference: None,
        pull_secret: None,
        config: None,
        pin: None,
        signature: None,
        track: Track::Serving,
    };
    Offer {
        payload,
        account: None,
        signer: None,
        stop: false,
        suspend: true,
        said: None,
        settings: None,
        stored_in: String::new(),
    }
}

/// What pins a payload's component, as the `Pinned` condition says it: an image's digest, a
/// digest pin, or both.
fn pin_of(payload: &PluginPayload) -> Option<String> {
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
fn content_of(offer: &Offer) -> Content {
    let payload = &offer.payload;
    let digest = match &payload.reference {
        Some(reference) => reference.to_string(),
        None => payload.component.digest(),
    };
    Content {
        digest,
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
