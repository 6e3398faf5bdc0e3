//! Where the executor's writes go. The executor decides *what* to write (grants, namespaces,
//! owner references, preconditions, the write budget); a [`Writer`] only sends it:
//! [`LiveWriter`] to the API server, [`DryRunWriter`] to the API server with `dryRun=All`
//! and a [`DryRunReport`] of what would change. Events and finalizers, which have no
//! server-side dry run, are reported and not sent.
//!
//! The verbs have no dry-run branches: `Executor::with_dry_run` swaps the writer, and
//! everything the executor decides stays the same. A dry write reports the live object (read
//! after it, so unchanged) and the one the server returned, none for a delete
//! (`DryRunWriter::report_write`). Since a dry write never comes back as a watch event,
//! [`Writer::persists`] tells the controller so (`Executor::writes_requeue`), and the plugin is
//! called in the same pass as the finalizer it would have added. The binary renders each
//! [`DryRunReport`] as a YAML diff (`host/src/dry_run.rs`).

use std::sync::Arc;
use wasmloop_sandbox::PluginId;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use serde_json::{Value, json};

/// One write to one object.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    /// The API of the object's resource, in its namespace.
    pub api: &'a Api<DynamicObject>,
    /// The object's name.
    pub name: &'a str,
    /// The plugin the write is for.
    pub plugin: &'a PluginId,
    /// The object as `Kind namespace/name`, for reports.
    pub shown: &'a str,
}

/// Sends the executor's writes. Implementations differ in where the writes go, never in what
/// they are.
pub trait Writer: Send + Sync {
    /// True when writes change the cluster, and so come back as watch events.
    fn persists(&self) -> bool;

    /// A patch of the object (`verb`: apply, patch), or of its status subresource (`status`).
    fn patch<'a>(
        &'a self,
        target: Target<'a>,
        verb: &'static str,
        params: PatchParams,
        patch: Patch<Value>,
    ) -> BoxFuture<'a, kube::Result<DynamicObject>>;

    /// Deletes the object.
    fn delete<'a>(&'a self, target: Target<'a>, params: DeleteParams) -> BoxFuture<'a, kube::Result<()>>;

    /// Sets the object's finalizers to `change.finalizers`, if they are still `change.before`
    /// and the object is still `change.uid` (a compare-and-swap on the finalizers alone, as
    /// kube-runtime's `finalizer` makes it: a concurrent change of them is a 409, never a lost
    /// finalizer, and writers of other fields cannot starve it). `verb` and `finalizer` say
    /// what changes, for reports.
    fn set_finalizers<'a>(
        &'a self,
        target: Target<'a>,
        change: FinalizerChange<'a>,
        params: PatchParams,
    ) -> BoxFuture<'a, kube::Result<()>>;

    /// Publishes an Event. `note` is what a report shows.
    fn event<'a>(
        &'a self,
        recorder: &'a Recorder,
        event: &'a Event,
        regarding: &'a ObjectReference,
        shown: (&'a str, &'a str),
    ) -> BoxFuture<'a, kube::Result<()>>;
}

/// A change to an object's finalizers.
#[derive(Debug, Clone, Copy)]
pub struct FinalizerChange<'a> {
    /// `add finalizer` or `remove finalizer`.
    pub verb: &'static str,
    /// The finalizer added or removed.
    pub finalizer: &'a str,
    /// The object's UID: the change reaches only this object, never one recreated under its
    /// name.
    pub uid: &'a str,
    /// The list the change was computed from.
    pub before: &'a [String],
    /// The whole list after the change.
    pub finalizers: &'a [String],
}

/// The JSON patch of a finalizer change: tests of the UID and of the list as it was (absent
/// when empty: the API server omits an empty list), then the new list. kube-runtime's
/// `finalizer` tests the list alone; the UID keeps a change off an object recreated under the
/// name. An add also tests that the object is not being deleted, which a cache that has not
/// seen the deletion yet cannot know: the server would refuse the new finalizer outright.
fn finalizers_patch(change: FinalizerChange<'_>) -> json_patch::Patch {
    let before = if change.before.is_empty() { Value::Null } else { json!(change.before) };
    let mut operations = vec![
        json!({"op": "test", "path": "/metadata/uid", "value": change.uid}),
        json!({"op": "test", "path": "/metadata/finalizers", "value": before}),
    ];
    if !change.before.iter().any(|f| f == change.finalizer) {
        operations.push(json!({"op": "test", "path": "/metadata/deletionTimestamp", "value": null}));
    }
    operations.push(json!({"op": "add", "path": "/metadata/finalizers", "value": change.finalizers}));
    serde_json::from_value(Value::Array(operations)).expect("well-formed JSON patch operations")
}

/// What kube-apiserver 1.37 says, and only says, when a JSON patch does not apply: a failed
/// `test` among them.
const PATCH_NOT_APPLIED: &str = "the server rejected our request due to an error in our request";

/// A failed `test` of a JSON patch is a 422 saying only [`PATCH_NOT_APPLIED`] (older servers:
/// "Testing value ... failed"), with no field causes. A value the server refuses names its
/// field, and an admission policy or webhook that denies says why, so neither is taken for
/// one. For a finalizer change, whose patch is well formed by construction, a failed test
/// means that the object changed under it: callers treat it as the conflict it is.
fn conflict_of_failed_test(error: kube::Error) -> kube::Error {
    let failed_test = |status: &kube::core::Status| {
        status.code == 422
            && (status.message == PATCH_NOT_APPLIED || status.message.contains("Testing value"))
            && status.details.as_ref().is_none_or(|details| details.causes.is_empty())
    };
    match error {
        kube::Error::Api(mut status) if failed_test(&status) => {
            status.code = 409;
            status.reason = "Conflict".to_owned();
            kube::Error::Api(status)
        }
        other => other,
    }
}

/// Writes to the API server.
pub struct LiveWriter;

impl Writer for LiveWriter {
    fn persists(&self) -> bool {
        true
    }

    fn patch<'a>(
        &'a self,
        target: Target<'a>,
        verb: &'static str,
        params: PatchParams,
        patch: Patch<Value>,
    ) -> BoxFuture<'a, kube::Result<DynamicObject>> {
        Box::pin(async move {
            if verb == "status" {
                target.api.patch_status(target.name, &params, &patch).await
            } else {
                target.api.patch(target.name, &params, &patch).await
            }
        })
    }

    fn delete<'a>(&'a self, target: Target<'a>, params: DeleteParams) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(async move { target.api.delete(target.name, &params).await.map(drop) })
    }

    fn set_finalizers<'a>(
        &'a self,
        target: Target<'a>,
        change: FinalizerChange<'a>,
        params: PatchParams,
    ) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(async move {
            let patch = Patch::Json::<Value>(finalizers_patch(change));
            target.api.patch(target.name, &params, &patch).await.map(drop).map_err(conflict_of_failed_test)
        })
    }

    fn event<'a>(
        &'a self,
        recorder: &'a Recorder,
        event: &'a Event,
        regarding: &'a ObjectReference,
        _shown: (&'a str, &'a str),
    ) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(recorder.publish(event, regarding))
    }
}

/// What a write would have done, in a dry run.
#[derive(Debug, Clone)]
pub struct DryRunReport {
    /// The plugin.
    pub plugin: String,
    /// `apply`, `status`, `patch`, `delete`, `event`, `add finalizer`, `remove finalizer`.
    pub verb: &'static str,
    /// The object, as `Kind namespace/name`.
    pub target: String,
    /// The object as it is (none when it does not exist), without server bookkeeping.
    pub before: Option<Value>,
    /// The object as the API server says it would be (none after a delete).
    pub after: Option<Value>,
    /// For writes that are not objects (Events, finalizers): what would be recorded.
    pub note: Option<String>,
}

/// Receives dry-run reports.
pub type DryRunSink = Arc<dyn Fn(DryRunReport) + Send + Sync>;

/// Sends writes with `dryRun=All`, so the API server validates and computes them without
/// storing them, and reports each one to its sink.
pub struct DryRunWriter {
    sink: DryRunSink,
}

impl DryRunWriter {
    /// A writer reporting to `sink`.
    pub fn new(sink: DryRunSink) -> DryRunWriter {
        DryRunWriter { sink }
    }

    /// Reports a write whose result the server computed: the live object, read after the
    /// dry-run write, is the state before it.
    async fn report_write(&self, target: Target<'_>, verb: &'static str, after: Option<&DynamicObject>) {
        let before = target.api.get_opt(target.name).await.ok().flatten().map(|o| without_bookkeeping(&o));
        self.report(target, verb, before, after.map(without_bookkeeping), None);
    }

    fn report(
        &self,
        target: Target<'_>,
        verb: &'static str,
        before: Option<Value>,
        after: Option<Value>,
        note: Option<String>,
    ) {
        (self.sink)(DryRunReport {
            plugin: target.plugin.to_string(),
            verb,
            target: target.shown.to_owned(),
            before,
            after,
            note,
        });
    }
}

impl Writer for DryRunWriter {
    fn persists(&self) -> bool {
        false
    }

    fn patch<'a>(
        &'a self,
        target: Target<'a>,
        verb: &'static str,
        mut params: PatchParams,
        patch: Patch<Value>,
    ) -> BoxFuture<'a, kube::Result<DynamicObject>> {
        Box::pin(async move {
            params.dry_run = true;
            let after = LiveWriter.patch(target, verb, params, patch).await?;
            self.report_write(target, verb, Some(&after)).await;
            Ok(after)
        })
    }

    fn delete<'a>(&'a self, target: Target<'a>, mut params: DeleteParams) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(async move {
            params.dry_run = true;
            LiveWriter.delete(target, params).await?;
            self.report_write(target, "delete", None).await;
            Ok(())
        })
    }

    fn set_finalizers<'a>(
        &'a self,
        target: Target<'a>,
        change: FinalizerChange<'a>,
        _params: PatchParams,
    ) -> BoxFuture<'a, kube::Result<()>> {
        // Not sent: a finalizer added in a dry run would make the next delete of the primary
        // wait for a cleanup that only a live host carries out.
        Box::pin(async move {
            self.report(target, change.verb, None, None, Some(change.finalizer.to_owned()));
            Ok(())
        })
    }

    fn event<'a>(
        &'a self,
        _recorder: &'a Recorder,
        event: &'a Event,
        _regarding: &'a ObjectReference,
        (plugin, shown): (&'a str, &'a str),
    ) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(async move {
            let kind = if event.type_ == EventType::Warning { "Warning" } else { "Normal" };
            let note = format!("{kind} {}: {}", event.reason, event.note.as_deref().unwrap_or_default());
            let report = DryRunReport {
                plugin: plugin.to_owned(),
                verb: "event",
                target: shown.to_owned(),
                before: None,
                after: None,
                note: Some(note),
            };
            (self.sink)(report);
            Ok(())
        })
    }
}

/// Drops what the server maintains, so a diff shows what the plugin changes.
fn without_bookkeeping(object: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink"] {
            metadata.remove(field);
        }
    }
    value
}
