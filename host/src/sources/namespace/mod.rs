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
//! The loop ([`NamespaceSource::run`]) only carries out what [`plan::State`] decides, whose
//! docs give the rules. It merges three kube `watcher`s (`watch`): plugin ConfigMaps,
//! `WasmPlugin`s (a kind not installed holds up neither readiness nor the ConfigMaps), and the
//! metadata of the namespace's other ConfigMaps. It reads an object (`read`) only when its
//! fingerprint or generation says it may offer something new, so the status writer's own
//! writes cost no read. Each pull and each load runs in a task of its own (`tasks`) and
//! reports back, so an object whose plugin cannot sync for two minutes holds up no other;
//! until its kind's first list is handled, each holds `/readyz`, so a starting replica is
//! ready once it serves what its objects name. What stops, and what is refused or removed,
//! is reported before anything that follows it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use wasmloop_contract::names::Namespace;
use wasmloop_runtime::api;
use wasmloop_runtime::registry::reports::{Report, Reported, Reporter};
use wasmloop_runtime::registry::{Registry, RegistryError};
use wasmloop_sandbox::{LoadError, PluginId, SourceId, SourceKind};

use crate::endpoints::Readiness;
use crate::oci::{self, OciError, PluginRef, Puller, RegistryPolicy};
use crate::pinning::TrustedKeys;
use crate::plugin_configmap::{self, Stored};

mod plan;
mod read;
mod tasks;
mod watch;

use plan::{Arrival, Key, LoadDone, LoadFailure, PullFailure, Shipper, State, Step, Stopped, Why};
use tasks::{Finished, Pulled};
use watch::Watched;

/// The registry and the puller, as the plan asks about them.
struct Looking<'a> {
    registry: &'a Registry,
    puller: &'a Puller,
}

impl plan::World for Looking<'_> {
    fn serving(&self, source: &SourceId) -> Option<(PluginId, String)> {
        self.registry.serving(source)
    }

    fn admissible(&self, reference: &PluginRef) -> Result<(), OciError> {
        self.puller.admissible(reference)
    }
}

/// Watches one namespace for plugin ConfigMaps and `WasmPlugin`s until the registry's host
/// stops.
pub struct NamespaceSource {
    client: kube::Client,
    reader: read::Reader,
    wasmplugins: Api<crate::wasmplugin::WasmPlugin>,
    registry: Arc<Registry>,
    /// The registry's stream, for this source's own refusals, stops and deletions.
    reporter: Reporter,
    readiness: Arc<Readiness>,
    /// Every decision, and what it is taken on.
    state: State,
    /// Pulls the components objects name by reference.
    puller: Arc<Puller>,
    /// The namespace's Secrets, for pull secrets.
    secrets: Api<Secret>,
    /// When set, only components signed by one of these keys load.
    trusted: Option<Arc<TrustedKeys>>,
    /// What aborts each pull under way, by id.
    pulling: HashMap<u64, AbortHandle>,
    /// Objects to offer again (a retry that is due, one another object blocked).
    retry: mpsc::UnboundedSender<Key>,
    retries: Option<mpsc::UnboundedReceiver<Key>>,
    pulls: mpsc::UnboundedSender<Pulled>,
    pulled: Option<mpsc::UnboundedReceiver<Pulled>>,
    finish: mpsc::UnboundedSender<Finished>,
    finished: Option<mpsc::UnboundedReceiver<Finished>>,
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
        for kind in [SourceKind::ConfigMap, SourceKind::WasmPlugin] {
            readiness.pending(&readiness_item(namespace, kind), "not listed yet");
        }
        let (retry, retries) = mpsc::unbounded_channel();
        let (pulls, pulled) = mpsc::unbounded_channel();
        let (finish, finished) = mpsc::unbounded_channel();
        NamespaceSource {
            reader: read::Reader {
                namespace: namespace.clone(),
                configmaps: api::typed_api(client.clone(), namespace),
            },
            wasmplugins: api::typed_api(client.clone(), namespace),
            secrets: api::typed_api(client.clone(), namespace),
            client,
            reporter: registry.reporter(),
            registry,
            readiness,
            state: State::new(namespace.clone(), trusted.clone()),
            puller: Arc::new(Puller::new(RegistryPolicy::default(), Duration::from_secs(120), None)),
            trusted,
            pulling: HashMap::new(),
            retry,
            retries: Some(retries),
            pulls,
            pulled: Some(pulled),
            finish,
            finished: Some(finished),
            keys: std::hash::RandomState::new(),
        }
    }

    /// Pulls referenced components with `puller` (its registry policy, timeout and cache).
    #[must_use]
    pub fn puller(mut self, puller: Arc<Puller>) -> Self {
        self.puller = puller;
        self
    }

    fn namespace(&self) -> &Namespace {
        &self.reader.namespace
    }

    /// Runs until the watches end (never, short of the process stopping).
    pub async fn run(mut self) {
        let watches = watch::watches(&self.client, &self.reader.configmaps, &self.wasmplugins, self.namespace());
        let mut events = watches.boxed();
        let mut retries = self.retries.take().expect("run once");
        let mut pulled = self.pulled.take().expect("run once");
        let mut finished = self.finished.take().expect("run once");
        loop {
            let (steps, memory) = tokio::select! {
                Some(done) = pulled.recv() => self.pulled(done),
                Some(done) = finished.recv() => (self.finished(done), None),
                event = events.next() => match event {
                    Some(Watched::Shipper(kind, event)) => (self.watched(kind, event).await, None),
                    Some(Watched::Named(Ok(Some(named)))) => (self.state.on_named(&named.name, named.version), None),
                    Some(Watched::Named(Ok(None))) => continue,
                    Some(Watched::Named(Err(error))) => {
                        tracing::warn!(namespace = %self.namespace(), %error, "watching the ConfigMaps WasmPlugins name failed; retrying with backoff (check that the host may list and watch ConfigMaps here)");
                        continue;
                    }
                    None => return,
                },
                Some(key) = retries.recv() => (self.state.on_retry(&key), None),
            };
            self.carry_out(steps, memory).await;
        }
    }

    /// Carries out `steps` in order, each one's follow-ups before the next (what a stop
    /// reports comes before anything a later step reports), handing `memory` (a pull's share
    /// of the load memory) to the load the steps start, if any: dropped with them else.
    async fn carry_out(&mut self, steps: Vec<Step>, mut memory: Option<oci::Memory>) {
        let mut stack: Vec<Step> = steps.into_iter().rev().collect();
        while let Some(step) = stack.pop() {
            let more = self.carry(step, &mut memory).await;
            stack.extend(more.into_iter().rev());
        }
    }

    async fn carry(&mut self, step: Step, memory: &mut Option<oci::Memory>) -> Vec<Step> {
        match step {
            Step::Report(key, what) => self.reporter.publish(Report::new(self.state.source(&key), what)),
            Step::Refuse { key, reason, message, ours } => {
                let source = self.state.source(&key);
                if ours {
                    tracing::warn!(%source, reason, "{message}");
                } else {
                    tracing::error!(%source, reason, "{message}");
                }
                self.reporter.publish(Report::new(source, Reported::Refused { reason, message }));
            }
            Step::Stop(key, why) => return self.stop(key, why).await,
            Step::RetryAfter(key, delay) => {
                let retry = self.retry.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = retry.send(key);
                });
            }
            Step::RetryNow(key) => {
                let _ = self.retry.send(key);
            }
            Step::RetryBlocked => {
                let world = Looking { registry: &self.registry, puller: &self.puller };
                for key in self.state.unblocked(&world) {
                    let _ = self.retry.send(key);
                }
            }
            Step::AbortPull(key, id) => {
                if let Some(task) = self.pulling.remove(&id) {
                    task.abort();
                }
                // Its report will never come: readiness must not wait for it.
                self.readiness.ready(&self.item(&key, "pull"));
            }
            Step::Pull { shipper, id, offer, reference, account } => {
                self.start_pull(shipper, id, offer, reference, account)
            }
            Step::Load { shipper, id, spec } => self.start_load(shipper, id, spec, memory.take()),
            Step::Offer(shipper) => return self.offer(shipper).await,
            Step::Fetch(key) => return self.fetch(&key).await,
        }
        Vec::new()
    }

    async fn watched(&mut self, kind: SourceKind, event: Result<watcher::Event<Shipper>, watcher::Error>) -> Vec<Step> {
        if let Ok(watcher::Event::Apply(shipper) | watcher::Event::InitApply(shipper) | watcher::Event::Delete(shipper)) =
            &event
            && !shipper.is_named()
        {
            tracing::warn!(namespace = %self.namespace(), %kind, "an object whose name is not an object name was skipped");
            return Vec::new();
        }
        match event {
            Ok(watcher::Event::Init) => {
                self.state.on_list_started(kind);
                Vec::new()
            }
            Ok(watcher::Event::InitApply(shipper)) => {
                self.state.on_listed(&shipper.key());
                self.arrived(shipper).await
            }
            Ok(watcher::Event::InitDone) => {
                let steps = self.state.on_list_done(kind);
                self.readiness.ready(&readiness_item(self.namespace(), kind));
                steps
            }
            Ok(watcher::Event::Apply(shipper)) => self.arrived(shipper).await,
            Ok(watcher::Event::Delete(shipper)) => self.state.on_deleted(&shipper.key()),
            Err(error) => {
                self.watch_failed(kind, &error);
                Vec::new()
            }
        }
    }

    /// A watch failed; it is retried with backoff.
    fn watch_failed(&mut self, kind: SourceKind, error: &watcher::Error) {
        let what = match kind {
            SourceKind::ConfigMap => {
                "watching plugin ConfigMaps failed; retrying with backoff (check that the host may list and watch ConfigMaps here)"
            }
            SourceKind::WasmPlugin => {
                "watching WasmPlugins failed; retrying with backoff (install the kind from deploy/base/wasmplugin-crd.yaml, and check that the host may list and watch wasmplugins.wasmloop.dev)"
            }
        };
        if self.state.on_watch_failed(kind) {
            self.readiness.ready(&readiness_item(self.namespace(), kind));
            tracing::warn!(namespace = %self.namespace(), %error, "{what}; plugin ConfigMaps load meanwhile");
            return;
        }
        tracing::warn!(namespace = %self.namespace(), %error, "{what}");
    }

    async fn arrived(&mut self, shipper: Shipper) -> Vec<Step> {
        if !self.state.on_arrived(&shipper) {
            return Vec::new();
        }
        self.offer(shipper).await
    }

    /// Reads `shipper` (up to 64 MiB unzipped and hashed) only once it is its turn, and only
    /// when what it offers may have changed, and hands what it offers to the plan.
    async fn offer(&mut self, shipper: Shipper) -> Vec<Step> {
        let fingerprint = self.fingerprint(&shipper).await;
        if self.state.arrive(&shipper, fingerprint) != Arrival::Read {
            return Vec::new();
        }
        let read = self.reader.read(&shipper).await;
        // Hashing what is stored (up to a ConfigMap's size, never an expanded component) is
        // blocking work all the same: off the runtime's threads.
        let (read, content) = tokio::task::spawn_blocking(move || {
            let content = plan::content_of(&read);
            (read, content)
        })
        .await
        .expect("hashing does not panic");
        let world = Looking { registry: &self.registry, puller: &self.puller };
        self.state.on_offer(&shipper, read, content, fingerprint, &world)
    }

    /// A plugin ConfigMap's fingerprint ([`plugin_configmap::fingerprint`]), hashed off the
    /// runtime's threads: its data may hold a megabyte. None for a `WasmPlugin`.
    async fn fingerprint(&self, shipper: &Shipper) -> Option<u64> {
        let Shipper::ConfigMap(cm) = shipper else { return None };
        let (cm, keys) = (cm.clone(), self.keys.clone());
        let hashed = tokio::task::spawn_blocking(move || plugin_configmap::fingerprint(&cm, &keys)).await;
        Some(hashed.expect("hashing does not panic"))
    }

    /// Reads object `key` afresh for its retry, and offers it.
    async fn fetch(&mut self, key: &Key) -> Vec<Step> {
        let read = match key.kind {
            SourceKind::ConfigMap => self.reader.configmaps.get_opt(&key.name).await.map(|o| o.map(Shipper::ConfigMap)),
            SourceKind::WasmPlugin => self.wasmplugins.get_opt(&key.name).await.map(|o| o.map(Shipper::WasmPlugin)),
        };
        match read {
            Ok(Some(shipper)) => self.offer(shipper).await,
            Ok(None) => Vec::new(),
            Err(error) => {
                // The retry must not end with one failed read.
                let source = self.state.source(key);
                tracing::warn!(%source, %error, "cannot read the object to try it again; trying again in {} s", plan::START_RETRY.as_secs());
                self.state.on_fetch_failed(key)
            }
        }
    }

    /// Pulls in a task of its own, which reports to [`Self::pulled`].
    fn start_pull(
        &mut self,
        shipper: Shipper,
        id: u64,
        offer: plan::Offer,
        reference: PluginRef,
        account: Option<wasmloop_runtime::identity::AccountChoice>,
    ) {
        let key = shipper.key();
        if !self.state.listed(key.kind) {
            // A host that starts is ready once it serves what its objects name.
            self.readiness.pending(&self.item(&key, "pull"), "pulling the component it names");
        }
        tracing::info!(source = %self.state.source(&key), %reference, "pulling the plugin this object names");
        let (registry, puller, secrets) = (self.registry.clone(), self.puller.clone(), self.secrets.clone());
        let (pulls, realm) = (self.pulls.clone(), self.namespace().clone());
        let task = tokio::spawn(async move {
            let pulling = tasks::pull_checked(
                (&registry, &puller, &secrets),
                (&realm, &offer.payload.name, account.as_ref()),
                &reference,
                offer.payload.pull_secret.as_ref(),
            );
            // A panic must still report, or the object would wait for this pull forever.
            let result = std::panic::AssertUnwindSafe(pulling).catch_unwind().await.unwrap_or_else(|_| {
                let message = "the pull panicked (a bug in the host; the log has it)".to_owned();
                let error = OciError::Registry { registry: reference.registry().to_owned(), message };
                Err(PullFailure::Fetch(error.to_string()))
            });
            let _ = pulls.send(Pulled { shipper, id, offer, result });
        });
        self.pulling.insert(id, task.abort_handle());
    }

    /// A pull ended: the plan decides, unless it is stale; the component's share of the load
    /// memory comes with the steps.
    fn pulled(&mut self, pulled: Pulled) -> (Vec<Step>, Option<oci::Memory>) {
        let Pulled { shipper, id, mut offer, result } = pulled;
        // An aborted pull's readiness went with it; a newer pull may hold it now.
        if self.pulling.remove(&id).is_some() {
            self.readiness.ready(&self.item(&shipper.key(), "pull"));
        }
        let world = Looking { registry: &self.registry, puller: &self.puller };
        let (failed, memory) = match result {
            Ok(component) => {
                // The pull's share of the load memory goes with the bytes, until compiled.
                let (bytes, memory) = component.into_parts();
                offer.payload.component = Stored::Plain(bytes.into());
                (None, Some(memory))
            }
            Err(failure) => (Some(failure), None),
        };
        (self.state.on_pulled(&shipper, id, offer, failed, &world), memory)
    }

    /// Loads (or seats) in a task of its own, which reports to [`Self::finished`]; until then,
    /// the object's events wait.
    fn start_load(&mut self, shipper: Shipper, id: u64, spec: plan::LoadSpec, memory: Option<oci::Memory>) {
        let key = shipper.key();
        if !self.state.listed(key.kind) {
            // A host that starts is ready once it serves what its objects name.
            self.readiness.pending(&self.item(&key, "load"), "loading the plugin it ships");
        }
        let verb = if spec.shadow() { "seating the shadow" } else { "loading the plugin" };
        tracing::info!(source = %spec.source, plugin = %spec.payload.name, "{verb} this object ships");
        let (registry, puller, trusted) = (self.registry.clone(), self.puller.clone(), self.trusted.clone());
        let (finish, realm, origin) = (self.finish.clone(), self.namespace().clone(), spec.source.to_string());
        tokio::spawn(async move {
            let loading = tasks::load(spec, (&registry, &puller, trusted), realm, memory);
            // A panic must still report, or the object would wait for this load forever.
            let result = std::panic::AssertUnwindSafe(loading).catch_unwind().await.unwrap_or_else(|_| {
                let message = "the load panicked (a bug in the host; the log has it)".to_owned();
                let source = LoadError::Panicked { origin, message };
                Err(LoadFailure::Registry(RegistryError::Load { source, running: None }))
            });
            let _ = finish.send(Finished { shipper, id, result });
        });
    }

    /// A load ended: the plan decides, unless it is stale.
    fn finished(&mut self, finished: Finished) -> Vec<Step> {
        let Finished { shipper, id, result } = finished;
        let key = shipper.key();
        if let Ok(LoadDone::Loaded(loaded)) = &result {
            tracing::info!(source = %self.state.source(&key), digest = loaded.digest(), "{loaded}");
        }
        self.readiness.ready(&self.item(&key, "load"));
        let world = Looking { registry: &self.registry, puller: &self.puller };
        self.state.on_loaded(&shipper, id, result, &world)
    }

    /// Stops what object `key` serves or shadows, for `why`, and hands what stopped to the
    /// plan.
    async fn stop(&mut self, key: Key, why: Why) -> Vec<Step> {
        let source = self.state.source(&key);
        if let Why::Refused { reason, message } = &why {
            tracing::error!(%source, reason, "{message}");
        }
        let unshadowed = self.registry.unshadow(&source);
        let removed = self.registry.remove(&source).await;
        let what = match &why {
            Why::Refused { .. } => "failurePolicy Stop: plugin stopped",
            Why::Suspended => "WasmPlugin suspended: plugin stopped",
            Why::Retired { .. } => "marked superseded: plugin unloaded",
            Why::NameTaken { .. } => "a WasmPlugin of the same name takes the plugin",
            Why::Deleted => "deleted: plugin unloaded",
        };
        if let Some(plugin) = &removed {
            tracing::info!(%source, %plugin, "{what}");
        }
        if why == Why::Deleted {
            for plugin in &unshadowed {
                tracing::info!(%source, plugin, "deleted: shadow removed");
            }
        }
        let world = Looking { registry: &self.registry, puller: &self.puller };
        self.state.on_stopped(&key, why, Stopped { removed, unshadowed }, &world)
    }

    /// Object `key`'s readiness item for its `what` (a pull, a load) under way.
    fn item(&self, key: &Key, what: &str) -> String {
        format!("{}: {what}", self.state.source(key))
    }
}

fn readiness_item(namespace: &Namespace, kind: SourceKind) -> String {
    match kind {
        SourceKind::ConfigMap => format!("plugin ConfigMaps in {namespace}"),
        SourceKind::WasmPlugin => format!("WasmPlugins in {namespace}"),
    }
}
