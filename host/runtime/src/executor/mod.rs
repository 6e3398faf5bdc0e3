//! Carries out a plugin's checked actions against the API server.
//!
//! - `apply`: server-side apply with field manager `wasmloop/<plugin>` (forced: the plugin
//!   owns the fields it lists). Objects of owned kinds get the controller owner reference
//!   to the primary. A namespaced object without a namespace goes to the primary's.
//! - `status`: a merge patch of the primary's status subresource.
//! - `patch`: merge or JSON patch; a UID in the target becomes a precondition.
//! - `delete`: with the target's UID as a precondition; an object already gone, or whose
//!   name now belongs to another UID, counts as done.
//! - `event`: an `events.k8s.io/v1` Event on the primary, reported by `wasmloop/<plugin>`.
//! - finalizers: the host puts a plugin's finalizer on a primary before its first apply and
//!   takes it off after a successful cleanup, as the plugin, paid from its write budget.
//!
//! Where the writes go is the [`Writer`]'s business: live, or a dry run that reports.
//!
//! The kinds were checked against the manifest when the response was decoded (in the
//! sandbox). What each action writes is decided in [`plan`], a pure function with table
//! tests; this module resolves kinds to resources and sends the writes.
//!
//! One executor per controller version, acting as the plugin's identity
//! ([`Executor::acting_as`]), whose errors name it ("failed as ServiceAccount NS/NAME", and on
//! a 403 what to grant: `next_step`), and paying from the plugin's write budget
//! ([`Executor::with_write_bucket`]): a `governor` bucket each action, finalizer change and
//! plugin-error Event takes a token from, waiting when it is empty. The buckets live in the
//! context's [`WriteBuckets`], keyed by whom the plugin acts as, so versions and sibling
//! objects of one plugin share one. Finalizer changes are JSON patches that test the list as
//! read, the UID and (for an add) that no deletion began, so writers of other fields cannot
//! starve them; a release re-reads the live object (the cache lags behind the cleanup's own
//! writes) and retries up to five conflicts. Events go through [`crate::events::Recorders`].

pub mod conflicts;
pub mod plan;

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, Weak};
use wasmloop_sandbox::PluginId;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType as KubeEventType};
use kube::{Client, ResourceExt};
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_sandbox::capability::NotGranted;
use wasmloop_sandbox::validate;
use wasmloop_sandbox::{Action, EventType, Gvk, Manifest, Object};

use crate::discovery::{DiscoveryError, Kinds, Resolved};
use crate::events::Recorders;
use crate::metrics::Metrics;
pub use crate::writer::{DryRunReport, DryRunSink};
use crate::writer::{DryRunWriter, FinalizerChange, LiveWriter, Target, Writer};
use plan::{PatchBody, Write, label};

/// An action that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The API server refused or failed the request.
    #[error("plugin {plugin}: {verb} {target} failed as {actor}: {source}; {}", next_step(source, actor))]
    Api {
        /// The plugin.
        plugin: PluginId,
        /// Whom the request acted as ("ServiceAccount ns/name", or the host).
        actor: String,
        /// apply, status, patch, delete or event.
        verb: &'static str,
        /// The object acted on.
        target: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The kind is not served.
    #[error("plugin {plugin}: {source}")]
    Discovery {
        /// The plugin.
        plugin: PluginId,
        /// The discovery error.
        #[source]
        source: DiscoveryError,
    },
    /// The action cannot be carried out as given.
    #[error("plugin {plugin}: cannot {verb} {target}: {reason}; fix the plugin")]
    Invalid {
        /// The plugin.
        plugin: PluginId,
        /// The verb.
        verb: &'static str,
        /// The object.
        target: String,
        /// Why.
        reason: String,
    },
    /// The action writes into a plugin namespace, which no plugin writes into; refused before
    /// any API call.
    #[error(
        "plugin {plugin}: refused to {target}: namespace {namespace} ships plugins (run --plugin-namespace), and no plugin writes there, so that none can put a plugin, a component or a consent there for another to be loaded by; write elsewhere"
    )]
    PluginNamespace {
        /// The plugin.
        plugin: PluginId,
        /// The write, as `verb Kind namespace/name`.
        target: String,
        /// The plugin namespace.
        namespace: String,
    },
    /// No write grant of the plugin covers the action; refused before any API call.
    #[error("plugin {plugin}: refused to {target}: {refusal}")]
    NotGranted {
        /// The plugin.
        plugin: PluginId,
        /// The object, as `Kind namespace/name`.
        target: String,
        /// What was missing, and what to declare.
        refusal: NotGranted,
    },
    /// A non-forced apply met fields other managers own; nothing of it was written.
    #[error("plugin {plugin}: apply {target} wrote nothing: {}; the next reconcile is told, and may force the apply or leave the fields out", conflict.summary())]
    Conflict {
        /// The plugin.
        plugin: PluginId,
        /// The object, as `Kind namespace/name`.
        target: String,
        /// The fields and their managers.
        conflict: conflicts::Conflict,
    },
}

/// What an API error means for the user, for the message; whether the key is retried is
/// said by the controller, which knows the error's class.
fn next_step(error: &kube::Error, actor: &str) -> String {
    match error {
        kube::Error::Api(status) => match status.code {
            403 => format!("grant {actor} this verb on this kind (RBAC; docs/security.md)"),
            404 => "the object or its namespace does not exist (yet)".into(),
            409 => "a concurrent write won".into(),
            400 | 422 => "the server rejected what the plugin asked for; fix the plugin".into(),
            _ => "the API server failed the request".into(),
        },
        _ => "the API server could not be reached".into(),
    }
}

impl ExecError {
    /// True when retrying with backoff may help: conflicts, throttling, server and transport
    /// errors, missing namespaces or permissions an administrator may still grant. A request
    /// the server rejects as invalid will be rejected again.
    pub fn is_transient(&self) -> bool {
        match self {
            // 415: a strategic merge patch of a custom resource, refused again on every retry.
            ExecError::Api { source: kube::Error::Api(status), .. } => !matches!(status.code, 400 | 415 | 422),
            ExecError::Api { .. } | ExecError::Discovery { .. } | ExecError::Conflict { .. } => true,
            ExecError::Invalid { .. } | ExecError::NotGranted { .. } | ExecError::PluginNamespace { .. } => false,
        }
    }

    /// The Warning Event reason for this failure.
    pub fn event_reason(&self) -> &'static str {
        match self {
            ExecError::Conflict { .. } => "ApplyConflict",
            ExecError::Api { source: kube::Error::Api(status), .. } if status.code == 409 => "Conflict",
            ExecError::Api { source: kube::Error::Api(status), .. } if status.code == 403 => "Forbidden",
            ExecError::Api { .. } => "ActionFailed",
            ExecError::Discovery { .. } => "UnknownKind",
            ExecError::Invalid { .. } => "InvalidAction",
            ExecError::NotGranted { .. } | ExecError::PluginNamespace { .. } => "NotGranted",
        }
    }
}

/// An object an `apply` created or updated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Its kind.
    pub kind: Gvk,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: Option<String>,
}

/// Runs actions. One per host; cheap to share.
pub struct Executor {
    client: Client,
    /// Whom `client` acts as, for messages.
    actor: String,
    kinds: Arc<Kinds>,
    recorders: Recorders,
    metrics: Arc<Metrics>,
    writer: Arc<dyn Writer>,
    /// The plugin's write budget: each write takes a token, and waits for one when the bucket
    /// is empty, so one plugin's storm slows itself and neither other plugins nor the API
    /// server.
    budget: Option<Arc<DefaultDirectRateLimiter>>,
    /// The namespace the operator confines the plugin's writes to.
    confined_to: Option<Namespace>,
    /// The plugin namespaces, which no plugin writes into.
    guarded: Arc<BTreeSet<Namespace>>,
}

/// A token bucket on a plugin's API writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteBudget {
    /// Writes per second, sustained.
    pub per_second: NonZeroU32,
    /// Writes at once before the rate applies.
    pub burst: NonZeroU32,
}

impl Default for WriteBudget {
    /// 50 writes per second, bursts of 100: a plugin reconciling thousands of objects still
    /// converges in a minute, and a runaway one costs the API server a bounded rate.
    fn default() -> Self {
        WriteBudget {
            per_second: NonZeroU32::new(50).expect("non-zero"),
            burst: NonZeroU32::new(100).expect("non-zero"),
        }
    }
}

/// A token bucket of API writes (and of the Events written about a plugin).
pub type WriteBucket = DefaultDirectRateLimiter;

/// The write buckets of one host, one per holder (a ServiceAccount, or a plugin's name when
/// plugins act as the host) and budget. Every version of a plugin, and every plugin acting as
/// one ServiceAccount, draws from the same bucket: a new version, a renamed plugin or a second
/// ConfigMap does not start with a full one. A bucket lasts while a running plugin holds it.
///
/// ```
/// use wasmloop_runtime::executor::{WriteBudget, WriteBuckets};
/// let buckets = WriteBuckets::default();
/// let (a, b) = (buckets.bucket("system:serviceaccount:t:p", WriteBudget::default()), buckets.bucket("system:serviceaccount:t:p", WriteBudget::default()));
/// assert!(std::sync::Arc::ptr_eq(&a, &b));
/// ```
#[derive(Default)]
pub struct WriteBuckets {
    by_holder: Mutex<HashMap<(String, WriteBudget), Weak<DefaultDirectRateLimiter>>>,
    /// Each running plugin's bucket, by the plugin's id: what the Events the host records about
    /// a plugin outside its reconciles (the status writer's) are paid from.
    by_plugin: Mutex<HashMap<String, Weak<DefaultDirectRateLimiter>>>,
}

impl WriteBuckets {
    /// The bucket of `holder` with `budget`, shared with whoever else holds it now.
    pub fn bucket(&self, holder: &str, budget: WriteBudget) -> Arc<DefaultDirectRateLimiter> {
        let mut buckets = self.by_holder.lock().expect("lock");
        buckets.retain(|_, bucket| bucket.strong_count() > 0);
        let key = (holder.to_owned(), budget);
        if let Some(bucket) = buckets.get(&key).and_then(Weak::upgrade) {
            return bucket;
        }
        let quota = Quota::per_second(budget.per_second).allow_burst(budget.burst);
        let bucket = Arc::new(RateLimiter::direct(quota));
        buckets.insert(key, Arc::downgrade(&bucket));
        bucket
    }

    /// [`WriteBuckets::bucket`], noted as plugin `plugin`'s ([`WriteBuckets::of_plugin`]).
    pub fn bucket_of(&self, plugin: &str, holder: &str, budget: WriteBudget) -> Arc<DefaultDirectRateLimiter> {
        let bucket = self.bucket(holder, budget);
        let mut plugins = self.by_plugin.lock().expect("lock");
        plugins.retain(|_, bucket| bucket.strong_count() > 0);
        plugins.insert(plugin.to_owned(), Arc::downgrade(&bucket));
        bucket
    }

    /// The bucket plugin `plugin` (its id) writes from, while it runs.
    ///
    /// ```
    /// use wasmloop_runtime::executor::{WriteBudget, WriteBuckets};
    /// let buckets = WriteBuckets::default();
    /// let bucket = buckets.bucket_of("team-a/hello", "system:serviceaccount:team-a:hello", WriteBudget::default());
    /// // What the host writes about the plugin (its Events) is paid from the bucket its writes use.
    /// assert!(std::sync::Arc::ptr_eq(&buckets.of_plugin("team-a/hello").unwrap(), &bucket));
    /// drop(bucket);
    /// assert!(buckets.of_plugin("team-a/hello").is_none(), "gone with the plugin");
    /// ```
    pub fn of_plugin(&self, plugin: &str) -> Option<Arc<DefaultDirectRateLimiter>> {
        self.by_plugin.lock().expect("lock").get(plugin).and_then(Weak::upgrade)
    }
}

impl Executor {
    /// An executor writing with `client`.
    pub fn new(client: Client, kinds: Arc<Kinds>, metrics: Arc<Metrics>) -> Executor {
        let actor = "the host's own identity".to_owned();
        Executor {
            recorders: Recorders::new(client.clone()),
            client,
            actor,
            kinds,
            metrics,
            writer: Arc::new(LiveWriter),
            budget: None,
            confined_to: None,
            guarded: Arc::default(),
        }
    }

    /// This executor refusing every write into `namespaces`, the plugin namespaces: a plugin
    /// writing there (a ConfigMap, a Secret, a ServiceAccount's consent) could have another
    /// plugin loaded, or acting as whom it should not. Executors made from it refuse them too.
    #[must_use]
    pub fn guarding(mut self, namespaces: BTreeSet<Namespace>) -> Executor {
        self.guarded = Arc::new(namespaces);
        self
    }

    /// This executor writing with `client`, which acts as `actor` (named in errors); a dry run
    /// stays one.
    pub fn acting_as(&self, client: Client, actor: String) -> Executor {
        Executor {
            recorders: Recorders::new(client.clone()),
            client,
            actor,
            kinds: self.kinds.clone(),
            metrics: self.metrics.clone(),
            writer: self.writer.clone(),
            budget: None,
            confined_to: None,
            guarded: self.guarded.clone(),
        }
    }

    /// This executor, refusing every apply, patch and delete outside `namespace` (the
    /// operator's `plugins.<name>.namespace`), whatever the plugin declares.
    pub fn confined_to(mut self, namespace: Option<Namespace>) -> Executor {
        self.confined_to = namespace;
        self
    }

    /// This executor, its writes paid from `bucket` (see [`WriteBuckets`]).
    pub fn with_write_bucket(mut self, bucket: Arc<DefaultDirectRateLimiter>) -> Executor {
        self.budget = Some(bucket);
        self
    }

    /// Takes a write token for `plugin`, waiting for one when its budget is spent: every write
    /// made as the plugin pays, including those the host makes for it outside `execute`
    /// (finalizers, its failure Events).
    pub async fn charge(&self, plugin: &PluginId) {
        if let Some(budget) = &self.budget {
            if budget.check().is_err() {
                self.metrics.write_throttled(plugin.as_str());
                budget.until_ready().await;
            }
        }
    }

    /// The error of a request the API server refused or failed.
    fn api_error(&self, manifest: &Manifest, verb: &'static str, target: String, source: kube::Error) -> ExecError {
        ExecError::Api { plugin: manifest.id(), actor: self.actor.clone(), verb, target, source }
    }

    /// An executor that writes nothing: every write goes to the API server with
    /// `dryRun=All`, and what it would have done goes to `sink`.
    pub fn with_dry_run(mut self, sink: DryRunSink) -> Executor {
        self.writer = Arc::new(DryRunWriter::new(sink));
        self
    }

    /// True when writes change the cluster, and so come back as watch events that requeue
    /// the key (false in a dry run).
    pub fn writes_requeue(&self) -> bool {
        self.writer.persists()
    }

    fn patch_params(manager: wasmloop_contract::names::FieldManager) -> PatchParams {
        PatchParams { field_manager: Some(manager.to_string()), ..PatchParams::default() }
    }

    async fn resolve(&self, plugin: &PluginId, kind: &Gvk) -> Result<Resolved, ExecError> {
        self.kinds.resolve(kind).await.map_err(|source| ExecError::Discovery { plugin: plugin.clone(), source })
    }

    fn api(&self, resolved: &Resolved, namespace: Option<&Namespace>) -> Api<DynamicObject> {
        crate::api::dynamic_api(self.client.clone(), namespace.filter(|_| resolved.namespaced), &resolved.resource)
    }

    /// Carries out `actions` in order for `primary`, stopping at the first failure. Returns
    /// the objects applied (the executor's input to pruning). What each action writes is
    /// [`plan::plan`]'s decision; here its kind is resolved and the write sent.
    ///
    /// # Errors
    /// The first action that failed, naming the plugin, the verb and the object.
    pub async fn execute(
        &self,
        manifest: &Manifest,
        primary: &Object,
        actions: &[Action],
    ) -> Result<Vec<Applied>, ExecError> {
        let mut applied = Vec::new();
        for action in actions {
            self.charge(&manifest.id()).await;
            if let Action::Event { event_type, reason, message, action } = action {
                self.event(manifest, primary, *event_type, reason, message, action.as_deref()).await?;
                self.metrics.action(manifest.id().as_str(), "Event", "event");
                continue;
            }
            let kind = plan::kind_of(manifest, primary, action)?;
            let resolved = self.resolve(&manifest.id(), &kind).await?;
            let write = plan::plan(manifest, primary, action, resolved.namespaced, self.confined_to.as_ref())?;
            plan::outside(&write, &self.guarded).map_err(|namespace| ExecError::PluginNamespace {
                plugin: manifest.id(),
                target: format!("{} {}", write.verb(), write.shown()),
                namespace: namespace.to_string(),
            })?;
            let (kind, verb) = (write.kind().kind().to_owned(), write.verb());
            if let Some(done) = self.send(manifest, &resolved, write).await? {
                applied.push(done);
            }
            self.metrics.action(manifest.id().as_str(), &kind, verb);
        }
        Ok(applied)
    }

    /// Sends one planned write; an apply returns what it applied.
    async fn send(&self, manifest: &Manifest, resolved: &Resolved, write: Write) -> Result<Option<Applied>, ExecError> {
        let (verb, shown) = (write.verb(), write.shown());
        let api = self.api(resolved, write.namespace());
        let plugin = manifest.id();
        let error = |source| self.api_error(manifest, verb, shown.clone(), source);
        let params = Self::patch_params(manifest.field_manager());
        match write {
            Write::Apply { kind, namespace, name, body, force, uid } => {
                // Not applied for its precondition: still counted as applied, so a prune that
                // follows takes nothing the plugin named.
                let skipped = || {
                    let namespace = namespace.as_ref().map(|ns| ns.to_string());
                    Applied { kind: kind.clone(), namespace, name: name.to_string(), uid: None }
                };
                if let Some(uid) = &uid
                    && !self.still(&api, &name, uid).await.map_err(error)?
                {
                    tracing::debug!(%plugin, object = %shown, "not applied: gone, or no longer the object of its UID precondition");
                    return Ok(Some(skipped()));
                }
                let params = PatchParams::apply(manifest.field_manager().as_str());
                let params = if force { params.force() } else { params };
                let to = Target { api: &api, name: &name, plugin: &plugin, shown: &shown };
                let live = match self.writer.patch(to, verb, params, Patch::Apply(body)).await {
                    Ok(live) => live,
                    Err(kube::Error::Api(status)) => {
                        let fields = (!force).then(|| conflicts::fields_of(&status)).flatten();
                        if let Some((fields, more)) = fields {
                            let target = conflicts::target(&kind, namespace.as_ref(), &name);
                            let conflict = conflicts::Conflict { target, fields, more };
                            return Err(ExecError::Conflict { plugin, target: shown, conflict });
                        }
                        // Recreated since the check: the server refused to change its UID.
                        if uid.is_some() && conflicts::uid_refused(&status) {
                            return Ok(Some(skipped()));
                        }
                        return Err(error(kube::Error::Api(status)));
                    }
                    Err(e) => return Err(error(e)),
                };
                let namespace = namespace.map(|ns| ns.to_string());
                Ok(Some(Applied { kind, namespace, name: name.to_string(), uid: live.uid() }))
            }
            Write::Status { name, body, .. } => {
                let to = Target { api: &api, name: &name, plugin: &plugin, shown: &shown };
                self.writer.patch(to, verb, params, Patch::Merge(body)).await.map_err(error)?;
                Ok(None)
            }
            Write::Patch { name, patch, .. } => {
                let patch = match patch {
                    PatchBody::Merge(patch) => Patch::Merge(patch),
                    PatchBody::Json(operations) => Patch::Json(operations),
                    PatchBody::Strategic(patch) => Patch::Strategic(patch),
                };
                let to = Target { api: &api, name: &name, plugin: &plugin, shown: &shown };
                self.writer.patch(to, verb, params, patch).await.map_err(error)?;
                Ok(None)
            }
            Write::Delete { name, uid, .. } => {
                let preconditions = uid.map(|uid| Preconditions { uid: Some(uid), resource_version: None });
                let params = DeleteParams { preconditions, ..DeleteParams::background() };
                let to = Target { api: &api, name: &name, plugin: &plugin, shown: &shown };
                match self.writer.delete(to, params).await {
                    // Gone already, or the name now belongs to another object: nothing of ours
                    // to delete.
                    Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(None),
                    result => result.map(|()| None).map_err(error),
                }
            }
        }
    }

    /// Whether the object `name` exists with `uid`: an apply with a UID precondition writes
    /// nothing to one that is gone (it would create it) or has another.
    async fn still(&self, api: &Api<DynamicObject>, name: &Name, uid: &str) -> kube::Result<bool> {
        Ok(api.get_opt(name.as_str()).await?.is_some_and(|live| live.uid().as_deref() == Some(uid)))
    }

    /// Records an Event on `regarding` as the plugin. Also used by the host for failed
    /// reconciles.
    ///
    /// # Errors
    /// When the API server refuses the Event.
    pub async fn event(
        &self,
        manifest: &Manifest,
        regarding: &Object,
        event_type: EventType,
        reason: &str,
        message: &str,
        action: Option<&str>,
    ) -> Result<(), ExecError> {
        // The note, and the recorder it is keyed by, hold at most what the API accepts.
        let message = &validate::event_note(message.to_owned());
        let shown = label(&regarding.kind, regarding.namespace.as_deref(), &regarding.name);
        let reference = ObjectReference {
            api_version: Some(regarding.api_version.clone()),
            kind: Some(regarding.kind.clone()),
            name: Some(regarding.name.clone()),
            namespace: regarding.namespace.clone(),
            uid: (!regarding.uid.is_empty()).then(|| regarding.uid.clone()),
            ..ObjectReference::default()
        };
        let event = Event {
            type_: match event_type {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: reason.into(),
            note: Some(message.into()),
            action: action.unwrap_or("Reconcile").into(),
            secondary: None,
        };
        let recorder = self.recorders.get(&format!("wasmloop/{}", manifest.name), message, &reference);
        let id = manifest.id();
        let shown = (id.as_str(), shown.as_str());
        let result = self.writer.event(&recorder, &event, &reference, shown).await;
        result.map_err(|source| self.api_error(manifest, "event", shown.1.to_owned(), source))
    }

    /// Puts `finalizer` on `primary`, whose cached state holds `current`: a concurrent change of
    /// its finalizers is a conflict and a retry, never a lost finalizer.
    ///
    /// # Errors
    /// When the API server refuses the update (a 409 included).
    pub async fn add_finalizer(
        &self,
        manifest: &Manifest,
        primary: &Object,
        current: &[String],
        finalizer: &str,
    ) -> Result<(), ExecError> {
        let api = self.primary_api(manifest, primary).await?;
        let shown = label(&primary.kind, primary.namespace.as_deref(), &primary.name);
        let mut finalizers = current.to_vec();
        finalizers.push(finalizer.to_owned());
        let change = FinalizerChange {
            verb: "add finalizer",
            finalizer,
            uid: &primary.uid,
            before: current,
            finalizers: &finalizers,
        };
        let plugin = manifest.id();
        self.charge(&plugin).await;
        let to = Target { api: &api, name: &primary.name, plugin: &plugin, shown: &shown };
        let params = Self::patch_params(manifest.field_manager());
        self.writer
            .set_finalizers(to, change, params)
            .await
            .map_err(|source| self.finalizer_error(manifest, shown.clone(), source))
    }

    /// Takes `finalizer` off `primary` after a successful cleanup. The live object is re-read
    /// for its finalizers (the cache may lag behind the cleanup's own writes), and the removal
    /// retried when they change meanwhile, without running the cleanup again. An object that is gone, or
    /// whose name now belongs to another UID, holds nothing of ours.
    ///
    /// # Errors
    /// When the API server refuses the update, or it conflicts five times in a row.
    pub async fn release_finalizer(
        &self,
        manifest: &Manifest,
        primary: &Object,
        finalizer: &str,
    ) -> Result<(), ExecError> {
        let api = self.primary_api(manifest, primary).await?;
        let shown = label(&primary.kind, primary.namespace.as_deref(), &primary.name);
        let plugin = manifest.id();
        let to = Target { api: &api, name: &primary.name, plugin: &plugin, shown: &shown };
        let mut last = None;
        for _ in 0..FINALIZER_CONFLICTS {
            let live = match api.get_opt(&primary.name).await {
                Ok(Some(live)) if live.uid().as_deref() == Some(primary.uid.as_str()) => live,
                Ok(_) => return Ok(()),
                Err(source) => return Err(self.finalizer_error(manifest, shown.clone(), source)),
            };
            let rest: Vec<String> = live.finalizers().iter().filter(|x| *x != finalizer).cloned().collect();
            if rest.len() == live.finalizers().len() {
                return Ok(());
            }
            let change = FinalizerChange {
                verb: "remove finalizer",
                finalizer,
                uid: &primary.uid,
                before: live.finalizers(),
                finalizers: &rest,
            };
            self.charge(&plugin).await;
            let params = Self::patch_params(manifest.field_manager());
            match self.writer.set_finalizers(to, change, params).await {
                Ok(()) => return Ok(()),
                Err(kube::Error::Api(status)) if status.code == 409 => last = Some(kube::Error::Api(status)),
                Err(source) => return Err(self.finalizer_error(manifest, shown.clone(), source)),
            }
        }
        Err(self.finalizer_error(manifest, shown, last.expect("every attempt conflicted")))
    }

    fn finalizer_error(&self, manifest: &Manifest, shown: String, source: kube::Error) -> ExecError {
        self.api_error(manifest, "update finalizers of", shown, source)
    }

    async fn primary_api(&self, manifest: &Manifest, primary: &Object) -> Result<Api<DynamicObject>, ExecError> {
        let (kind, namespace) = plan::primary_place(manifest, primary)?;
        let resolved = self.resolve(&manifest.id(), &kind).await?;
        Ok(self.api(&resolved, namespace.as_ref()))
    }
}

/// How many conflicts in a row releasing a finalizer gets through before it is a failure
/// (and the key is retried with backoff).
const FINALIZER_CONFLICTS: usize = 5;

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn refused(code: u16) -> ExecError {
        let status = Status { code, message: "no".into(), ..Status::default() };
        ExecError::Api {
            plugin: PluginId::new(None, "p").unwrap(),
            actor: "ServiceAccount team-a/p".into(),
            verb: "apply",
            target: "ConfigMap team-a/x".into(),
            source: kube::Error::Api(Box::new(status)),
        }
    }

    #[test]
    fn a_request_the_server_rejects_as_invalid_is_not_retried() {
        for code in [400, 415, 422] {
            assert!(!refused(code).is_transient(), "{code}");
        }
    }

    #[test]
    fn a_conflict_a_refusal_or_a_server_failure_is_retried() {
        for code in [403, 404, 409, 429, 500, 503] {
            assert!(refused(code).is_transient(), "{code}");
        }
    }

    #[test]
    fn each_failure_has_its_event_reason() {
        let cases = [(409, "Conflict"), (403, "Forbidden"), (500, "ActionFailed"), (422, "ActionFailed")];
        for (code, reason) in cases {
            assert_eq!(refused(code).event_reason(), reason, "{code}");
        }
    }

    #[test]
    fn a_forbidden_write_names_whom_to_grant_what() {
        let message = refused(403).to_string();
        assert!(
            message.starts_with("plugin p: apply ConfigMap team-a/x failed as ServiceAccount team-a/p"),
            "{message}"
        );
        assert!(
            message.ends_with("grant ServiceAccount team-a/p this verb on this kind (RBAC; docs/security.md)"),
            "{message}"
        );
    }

    #[test]
    fn an_action_the_plugin_got_wrong_is_its_to_fix_and_not_retried() {
        let invalid = ExecError::Invalid {
            plugin: PluginId::new(None, "p").unwrap(),
            verb: "patch",
            target: "ConfigMap team-a/x".into(),
            reason: "a JSON patch must be a list".into(),
        };
        assert!(!invalid.is_transient());
        assert_eq!(invalid.event_reason(), "InvalidAction");
        assert!(invalid.to_string().ends_with("; fix the plugin"));
    }
}
