//! The one status writer: it reads the registry's report stream
//! ([`wasmloop_runtime::registry::reports`]) and the quarantine board, and writes what users
//! look at on each object that ships a plugin: a plugin ConfigMap's `wasmloop.dev/status`
//! annotation, a `WasmPlugin`'s status subresource with its conditions ([`conditions`]), and
//! Events on either (`PluginLoaded`, `PluginRejected`, `PluginStopped`, `Superseded`,
//! `ShadowStarted`, `ShadowDiffers`).
//!
//! The decisions are [`plan::Statuses`]'s; this shell only carries its effects out, on the
//! leader only, so replicas do not talk over each other, except the superseded mark, which
//! every replica writes (it is what a restart reads). Every replica follows the stream, so a
//! new leader shows the same state.
//!
//! Nothing flows back: a source learns nothing from what is written here. The status writes
//! reach the sources' watches as updates that change no content they load (a `WasmPlugin`'s
//! status leaves its generation as it was), as a relist's do; the superseded mark does change
//! it, and the loop closes through the cluster as an executor's writes do: the source retires
//! that object.
//!
//! - **Keeping pace.** The writer takes what came while it wrote as one batch (at most
//!   `BATCH`), writes each object's status once per batch and, of one reason's Events about
//!   it, the last (`plan::coalesced`), so it keeps up with any rate of reports.
//! - **One source's reports come in the order its changes happened**: its offers and
//!   deletions are one at a time, and each is reported where the registry makes it.
//! - **A `WasmPlugin`'s status** is written by a merge patch of its status subresource, field
//!   manager `wasmloop`, which replaces the conditions whole. A condition whose status did not
//!   change keeps its transition time, across restarts and leader changes too: before its
//!   first write of an object the writer reads the status it holds and adopts those times.
//! - **`status.errors`** counts the serving version's failed reconciles over the last five
//!   minutes: sampled every 10 s from the metrics ([`errors`]), a new version's window
//!   started at its counter when its load is reported; a replica that becomes leader forgets
//!   the counts shown, so each is written at its next sample.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use serde_json::json;
use tokio::sync::watch;
use wasmloop_contract::names::Namespace;
use wasmloop_runtime::api;
use wasmloop_runtime::events::Recorders;
use wasmloop_runtime::executor::{WriteBucket, WriteBuckets, WriteBudget};
use wasmloop_runtime::metrics::Metrics;
use wasmloop_runtime::quarantine::Board;
use wasmloop_runtime::registry::reports::Reports;

use crate::plugin_configmap::{STATUS_ANNOTATION, TRACK_ANNOTATION};
use crate::wasmplugin::WasmPlugin;

mod conditions;
pub mod errors;
mod plan;

use plan::{Effect, ObjectKey, Statuses, coalesced};
use wasmloop_sandbox::SourceKind;

/// Reports taken in one batch at most: what a burst says about one ConfigMap is written once.
const BATCH: usize = 256;

/// The field manager of the status annotation and the recorder of the Events.
const MANAGER: &str = "wasmloop";

/// Writes plugin ConfigMaps' statuses and Events from the registry's reports.
pub struct StatusWriter {
    client: kube::Client,
    reports: Reports,
    quarantines: Arc<Board>,
    leading: watch::Receiver<bool>,
    statuses: Statuses,
    recorders: Recorders,
    apis: HashMap<Namespace, Api<ConfigMap>>,
    wasmplugins: HashMap<Namespace, Api<WasmPlugin>>,
    /// `WasmPlugin`s whose status this process wrote, so their transition times are its own.
    seeded: HashSet<ObjectKey>,
    /// The counters the failures over the error window are sampled from.
    metrics: Option<Arc<Metrics>>,
    /// The plugins' write buckets: an Event about an object serving a plugin is paid from the
    /// plugin's.
    buckets: Arc<WriteBuckets>,
    /// The buckets of objects serving nothing (a refused ConfigMap, a shadow), by namespace:
    /// the Events about them are paid from their namespace's, at a plugin's default rate, so a
    /// tenant's many objects (or one recreated) share one.
    unserved: HashMap<Namespace, Arc<WriteBucket>>,
    window: errors::ErrorWindow,
}

impl StatusWriter {
    /// A writer of what `reports` say, and of `quarantines`, writing while `leading`.
    pub fn new(
        client: kube::Client,
        reports: Reports,
        quarantines: Arc<Board>,
        leading: watch::Receiver<bool>,
    ) -> Self {
        StatusWriter {
            recorders: Recorders::new(client.clone()),
            client,
            reports,
            quarantines,
            leading,
            statuses: Statuses::new(None),
            apis: HashMap::new(),
            wasmplugins: HashMap::new(),
            seeded: HashSet::new(),
            metrics: None,
            buckets: Arc::default(),
            unserved: HashMap::new(),
            window: errors::ErrorWindow::new(errors::WINDOW),
        }
    }

    /// Shows `identity` in the status of the plugins this replica runs (`--shard`): the
    /// replicas that park a plugin write nothing about it, the one that runs it says so.
    #[must_use]
    pub fn replica(mut self, identity: String) -> Self {
        self.statuses = Statuses::new(Some(identity));
        self
    }

    /// Pays for the Events about a plugin from `buckets`, its writes' own.
    #[must_use]
    pub fn write_buckets(mut self, buckets: Arc<WriteBuckets>) -> Self {
        self.buckets = buckets;
        self
    }

    /// Shows each `WasmPlugin`'s failed reconciles over the error window, from `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Failures over the window of each version serving from a `WasmPlugin`, sampled now.
    fn sample_errors(&mut self) -> Vec<Effect> {
        let Some(metrics) = &self.metrics else { return Vec::new() };
        let serving = self.statuses.serving_wasmplugins();
        let totals =
            serving.into_iter().filter_map(|(id, version)| metrics.failures(&id).map(|n| (version, n))).collect();
        let counts = self.window.observe(std::time::Instant::now(), totals);
        self.statuses.errors(&counts, &Timestamp::now().to_string())
    }

    /// Starts the window of each version that loaded since the last sample at its counter now.
    fn prime_errors(&mut self) {
        let Some(metrics) = &self.metrics else { return };
        let serving = self.statuses.serving_wasmplugins();
        let fresh = serving.into_iter().filter(|(_, version)| !self.window.knows(version));
        let totals = fresh.filter_map(|(id, version)| metrics.failures(&id).map(|n| (version, n))).collect();
        self.window.prime(std::time::Instant::now(), totals);
    }

    /// Runs until the stream ends (the registry gone, the host stopping). Reports that came
    /// while it wrote are taken together, so a burst about one ConfigMap costs one status write.
    pub async fn run(mut self) {
        let mut quarantines = self.quarantines.subscribe();
        let mut sampling = tokio::time::interval(errors::SAMPLE_EVERY);
        sampling.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut leadership = self.leading.clone();
        loop {
            let effects = tokio::select! {
                report = self.reports.recv() => match report {
                    Some(report) => {
                        let now = Timestamp::now().to_string();
                        let mut effects = self.statuses.report(report, &now);
                        for _ in 1..BATCH {
                            let Ok(more) = self.reports.try_recv() else { break };
                            effects.extend(self.statuses.report(more, &now));
                        }
                        self.prime_errors();
                        // What shows nothing any more (its object gone) is not remembered either.
                        let statuses = &self.statuses;
                        self.seeded.retain(|object| statuses.shows(object));
                        self.unserved.retain(|namespace, _| statuses.shows_in(namespace));
                        coalesced(effects)
                    }
                    None => return,
                },
                _ = sampling.tick() => self.sample_errors(),
                Ok(()) = leadership.changed() => {
                    // A new leader's counts are its own: each is written at the next sample.
                    if *leadership.borrow_and_update() {
                        self.statuses.forget_errors();
                    }
                    Vec::new()
                }
                Ok(()) = quarantines.changed() => {
                    let board = quarantines.borrow_and_update().clone();
                    self.statuses.quarantines(&board, &Timestamp::now().to_string())
                }
            };
            for effect in effects {
                self.carry_out(effect).await;
            }
        }
    }

    fn api(&mut self, namespace: &Namespace) -> Api<ConfigMap> {
        let client = &self.client;
        self.apis.entry(namespace.clone()).or_insert_with(|| api::typed_api(client.clone(), namespace)).clone()
    }

    fn wasmplugins(&mut self, namespace: &Namespace) -> Api<WasmPlugin> {
        let client = &self.client;
        self.wasmplugins.entry(namespace.clone()).or_insert_with(|| api::typed_api(client.clone(), namespace)).clone()
    }

    async fn carry_out(&mut self, effect: Effect) {
        let leads = *self.leading.borrow();
        match effect {
            // A `WasmPlugin`'s mark is its status, the leader's to write as always.
            Effect::Supersede { object, status } if object.kind == SourceKind::ConfigMap => {
                self.supersede(&object, leads.then_some(&status)).await;
            }
            _ if !leads => {}
            Effect::Status { object, status } | Effect::Supersede { object, status } => match object.kind {
                SourceKind::ConfigMap => self.write_status(&object, &status).await,
                SourceKind::WasmPlugin => self.write_wasmplugin_status(&object, status).await,
            },
            Effect::Event { object, plugin, kind, reason, action, note } => {
                if self.pays(&object, plugin.as_deref()) {
                    self.event(&object, kind, reason, action, note).await;
                } else {
                    tracing::debug!(object = %object.source(), reason, "Event not recorded: its plugin's write budget is spent");
                }
            }
        }
    }

    async fn write_status(&mut self, object: &ObjectKey, status: &serde_json::Value) {
        let annotations = json!({STATUS_ANNOTATION: status.to_string()});
        let cannot = "cannot write the plugin status annotation; grant the host patch on ConfigMaps in this namespace";
        self.annotate(object, annotations, cannot).await;
    }

    /// Writes a `WasmPlugin`'s status subresource, whole (a merge patch: the conditions list is
    /// replaced, the fields set to null removed).
    async fn write_wasmplugin_status(&mut self, object: &ObjectKey, mut status: serde_json::Value) {
        let api = self.wasmplugins(&object.namespace);
        if self.seeded.insert(object.clone()) {
            // The first write of this process: the conditions' transition times are those the
            // status holds already, where the status is the same.
            if let Ok(Some(written)) = api.get_opt(&object.name).await {
                let conditions = written.status.as_ref().map(|s| s["conditions"].clone()).unwrap_or_default();
                status = self.statuses.adopt_times(object, &conditions).unwrap_or(status);
            }
        }
        let patch = json!({"status": status});
        let params = PatchParams { field_manager: Some(MANAGER.into()), ..PatchParams::default() };
        match api.patch_status(&object.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                // Gone meanwhile, or a kind installed without its status subresource.
                if matches!(api.get_opt(&object.name).await, Ok(Some(_))) {
                    tracing::warn!(object = %object.source(), "cannot write the WasmPlugin's status: the kind has no status subresource; apply deploy/base/wasmplugin-crd.yaml");
                }
            }
            Err(error) => {
                tracing::warn!(object = %object.source(), %error, "cannot write the WasmPlugin's status; grant the host patch on wasmplugins/status in this namespace (deploy/base/rbac.yaml)")
            }
        }
    }

    /// Marks a ConfigMap superseded, with `status` in the same write when given (on the leader).
    async fn supersede(&mut self, object: &ObjectKey, status: Option<&serde_json::Value>) {
        let mut annotations = json!({TRACK_ANNOTATION: "superseded"});
        if let Some(status) = status {
            annotations[STATUS_ANNOTATION] = json!(status.to_string());
        }
        let cannot =
            "cannot mark the superseded ConfigMap; delete it, or a restart may load it instead of its successor";
        self.annotate(object, annotations, cannot).await;
    }

    /// Merges `annotations` into a ConfigMap's, saying `cannot` when that fails. One deleted
    /// meanwhile took its annotations with it: nothing to say.
    async fn annotate(&mut self, object: &ObjectKey, annotations: serde_json::Value, cannot: &str) {
        let patch = json!({"metadata": {"annotations": annotations}});
        let params = PatchParams { field_manager: Some(MANAGER.into()), ..PatchParams::default() };
        match self.api(&object.namespace).patch(&object.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(error) => tracing::warn!(object = %object.source(), %error, "{cannot}"),
        }
    }

    /// Takes a write token for an Event about `object`, from the bucket of `plugin` (the plugin
    /// serving from it) or, serving nothing, the object's own: false when it is spent. Events
    /// are the host's least urgent writes, so one over budget is not recorded rather than
    /// holding up every status behind it.
    fn pays(&mut self, object: &ObjectKey, plugin: Option<&str>) -> bool {
        let bucket = match plugin.and_then(|plugin| self.buckets.of_plugin(plugin)) {
            Some(bucket) => bucket,
            None => {
                let buckets = &self.buckets;
                let own = || buckets.bucket(&format!("namespace {}", object.namespace), WriteBudget::default());
                self.unserved.entry(object.namespace.clone()).or_insert_with(own).clone()
            }
        };
        bucket.check().is_ok()
    }

    async fn event(
        &mut self,
        object: &ObjectKey,
        kind: wasmloop_sandbox::EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        // The Event names the object by UID too, as `kubectl describe` looks it up: read now, it
        // is the object as it is, and none is recorded about one deleted meanwhile.
        let (namespace, name) = (&object.namespace, &object.name);
        let read = match object.kind {
            SourceKind::ConfigMap => self.api(namespace).get_opt(name).await.map(|o| o.map(|o| o.object_ref(&()))),
            SourceKind::WasmPlugin => {
                self.wasmplugins(namespace).get_opt(name).await.map(|o| o.map(|o| o.object_ref(&())))
            }
        };
        let regarding = match read {
            Ok(Some(regarding)) => regarding,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(object = %object.source(), %error, reason, "cannot read the object to record an Event about it");
                return;
            }
        };
        // A note over the API's limit would lose the whole Event.
        let note = wasmloop_contract::validate::event_note(note);
        let recorder = self.recorders.get(MANAGER, &note, &regarding);
        let type_ = match kind {
            wasmloop_sandbox::EventType::Normal => EventType::Normal,
            wasmloop_sandbox::EventType::Warning => EventType::Warning,
        };
        let event = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: None };
        if let Err(error) = recorder.publish(&event, &regarding).await {
            tracing::warn!(object = %object.source(), %error, "cannot record the Event; grant the host create on events.k8s.io Events");
        }
    }
}
