//! The WIT glue behind [`crate::export_plugin!`]. Not a public API.

/// Bindings generated from `wit/plugin.wit`, at the path that `export_plugin!` and the
/// generated `export!` name (`default_bindings_module`).
pub mod bindings {
    pub use crate::bindings::*;
}

pub use crate::bindings::export;
pub use crate::bindings::exports::wasmloop::plugin::cache_options::Guest as CacheOptions;
pub use crate::bindings::exports::wasmloop::plugin::plugin::Guest;

use crate::action::{Action, EventType, PatchKind};
use crate::bindings::exports::wasmloop::plugin::plugin as wit;
use crate::bindings::wasmloop::plugin::types as wit_types;
use crate::host::object_from_wit;
use crate::kind::Gvk;
use crate::manifest::{Grant, Index, KindSelector, Manifest, WriteScope};
use crate::reconciler::Reconciler;
use crate::request::{ApplyConflict, Config, FieldConflict, ObjectRef, Phase, Related, Request, Trigger};
use crate::timing;

/// The manifest record.
pub type WitManifest = wit_types::PluginManifest;
/// The request record.
pub type WitRequest = wit::Request;
/// The response record.
pub type WitResponse = wit::Response;
/// The error record.
pub type WitReconcileError = wit::ReconcileError;
/// The object record.
pub type WitObject = wit_types::Object;
/// The object-ref record.
pub type WitObjectRef = wit_types::ObjectRef;
/// `map`'s argument.
pub type WitRelatedChange = wit::RelatedChange;
/// The keep record of `cache-options` (0.2.1).
pub type WitKeep = crate::bindings::exports::wasmloop::plugin::cache_options::Keep;

fn gvk_to_wit(g: Gvk) -> wit_types::Gvk {
    wit_types::Gvk { group: g.group, version: g.version, kind: g.kind }
}

fn selector_to_wit(s: KindSelector) -> wit_types::KindSelector {
    wit_types::KindSelector {
        kind: gvk_to_wit(s.kind),
        namespaces: s.namespaces,
        label_selector: s.label_selector,
        field_selector: s.field_selector,
        annotations: s.annotations.into_iter().map(|(key, value)| wit_types::AnnotationMatch { key, value }).collect(),
        generation_changed: s.generation_changed,
    }
}

fn index_to_wit(i: Index) -> wit_types::Index {
    wit_types::Index { name: i.name, kind: gvk_to_wit(i.kind), fields: i.fields }
}

fn grant_to_wit(g: Grant) -> wit_types::WriteGrant {
    let mut verbs = wit_types::WriteVerbs::empty();
    for (on, verb) in [
        (g.apply, wit_types::WriteVerbs::APPLY),
        (g.patch, wit_types::WriteVerbs::PATCH),
        (g.delete, wit_types::WriteVerbs::DELETE),
    ] {
        if on {
            verbs = verbs | verb;
        }
    }
    let scope = match g.scope {
        WriteScope::PrimaryNamespace => wit_types::WriteScope::PrimaryNamespace,
        WriteScope::Namespaces(list) => wit_types::WriteScope::Namespaces(list),
        WriteScope::Any => wit_types::WriteScope::Any,
    };
    wit_types::WriteGrant { kind: gvk_to_wit(g.kind), verbs, scope }
}

fn ref_to_wit(r: ObjectRef) -> WitObjectRef {
    WitObjectRef { api_version: r.api_version, kind: r.kind, name: r.name, namespace: r.namespace, uid: r.uid }
}

fn ref_from_wit(r: WitObjectRef) -> ObjectRef {
    ObjectRef { api_version: r.api_version, kind: r.kind, name: r.name, namespace: r.namespace, uid: r.uid }
}

fn trigger_from_wit(t: wit::Trigger) -> Trigger {
    match t {
        wit::Trigger::PrimaryChanged(g) => Trigger::PrimaryChanged { old: g.old, new: g.new },
        wit::Trigger::OwnedChanged(r) => Trigger::OwnedChanged(ref_from_wit(r)),
        wit::Trigger::RelatedChanged(r) => Trigger::RelatedChanged(ref_from_wit(r)),
        wit::Trigger::Resync => Trigger::Resync,
        wit::Trigger::Requeue => Trigger::Requeue,
        wit::Trigger::Retry => Trigger::Retry,
        wit::Trigger::Conflict(c) => Trigger::Conflict(ApplyConflict {
            target: ref_from_wit(c.target),
            fields: c.fields.into_iter().map(|f| FieldConflict { manager: f.manager, field: f.field }).collect(),
            more: c.more,
        }),
    }
}

/// The plugin's manifest in WIT form.
pub fn manifest<P: Reconciler>() -> WitManifest {
    let m: Manifest = P::manifest();
    WitManifest {
        name: m.name,
        version: m.version,
        primary: selector_to_wit(m.primary),
        owns: m.owns.into_iter().map(gvk_to_wit).collect(),
        watches: m.watches.into_iter().map(selector_to_wit).collect(),
        reads: m.reads.into_iter().map(selector_to_wit).collect(),
        metadata_only: m.metadata_only.into_iter().map(gvk_to_wit).collect(),
        writes: m.writes.into_iter().map(grant_to_wit).collect(),
        indexes: m.indexes.into_iter().map(index_to_wit).collect(),
        finalizer: m.finalizer,
        prune: m.prune,
        deliver_deleted: m.deliver_deleted,
        deliver_previous: m.deliver_previous,
        settings: wit_types::Settings {
            max_concurrent_reconciles: m.settings.max_concurrent_reconciles,
            deadline_ms: m.settings.deadline_ms,
            memory_limit_bytes: m.settings.memory_limit_bytes,
            response_limit_bytes: m.settings.response_limit_bytes,
            resync_seconds: m.settings.resync_seconds,
        },
    }
}

/// What the plugin keeps of the fields the host strips, in WIT form.
pub fn keep_fields<P: Reconciler>() -> Vec<WitKeep> {
    use crate::bindings::exports::wasmloop::plugin::cache_options::KeptFields;
    P::manifest()
        .keeps
        .into_iter()
        .map(|(kind, kept)| {
            let mut fields = KeptFields::empty();
            if kept.managed_fields {
                fields = fields | KeptFields::MANAGED_FIELDS;
            }
            if kept.last_applied {
                fields = fields | KeptFields::LAST_APPLIED;
            }
            WitKeep { kind: gvk_to_wit(kind), fields }
        })
        .collect()
}

fn request_from_wit(r: WitRequest) -> Request {
    Request {
        object: object_from_wit(r.object),
        owned: r.owned.into_iter().map(object_from_wit).collect(),
        phase: match r.phase {
            wit::Phase::Apply => Phase::Apply,
            wit::Phase::Cleanup => Phase::Cleanup,
            wit::Phase::Deleted => Phase::Deleted,
        },
        previous: r.previous.map(object_from_wit),
        attempt: r.attempt,
        config: Config::new(r.config),
        triggers: r.triggers.into_iter().map(trigger_from_wit).collect(),
        triggers_dropped: r.triggers_dropped,
    }
}

fn response_to_wit(actions: Vec<Action>) -> WitResponse {
    let mut requeue: Option<u64> = None;
    let actions = actions
        .into_iter()
        .filter_map(|a| match a {
            Action::Apply(a) => {
                Some(wit::Action::Apply(wit::ApplyObject { object: a.json, force: a.force, uid: a.uid }))
            }
            Action::Delete(r) => Some(wit::Action::Delete(ref_to_wit(r))),
            Action::Patch { target, kind, patch } => Some(wit::Action::Patch(wit::Patch {
                target: ref_to_wit(target),
                kind: match kind {
                    PatchKind::Merge => wit::PatchKind::Merge,
                    PatchKind::Json => wit::PatchKind::Json,
                    PatchKind::Strategic => wit::PatchKind::Strategic,
                },
                patch,
            })),
            Action::Status(json) => Some(wit::Action::Status(json)),
            Action::Event(e) => Some(wit::Action::Event(wit::Event {
                event_type: match e.event_type {
                    EventType::Normal => wit::EventType::Normal,
                    EventType::Warning => wit::EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
                action: e.action,
            })),
            Action::Prune => Some(wit::Action::Prune),
            Action::RequeueAfter(d) => {
                let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                requeue = Some(requeue.map_or(ms, |r| r.min(ms)));
                None
            }
        })
        .collect();
    WitResponse { actions, requeue_after_ms: requeue }
}

/// Runs one reconcile.
pub fn reconcile<P: Reconciler>(request: WitRequest) -> Result<WitResponse, WitReconcileError> {
    let request = request_from_wit(request);
    let (result, [decode, logic, encode]) = timing::phases(|| P::reconcile(&request));
    let start = timing::now();
    let out = result.map(response_to_wit).map_err(|e| WitReconcileError {
        message: e.message,
        transient: e.transient,
        reason: e.reason,
        retry_after_ms: e.retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        // A requeue-after among them means nothing on failure: retry-after-ms says when.
        actions: response_to_wit(e.actions).actions,
    });
    if let Some(start) = start {
        let encode = encode + start.elapsed().as_nanos() as u64;
        crate::log::write(
            crate::log::Level::Trace,
            &format!("wasmloop.phases decode_ns={decode} logic_ns={logic} encode_ns={encode}"),
        );
    }
    out
}

/// Runs `map`.
pub fn map<P: Reconciler>(change: WitRelatedChange, config: String) -> Vec<WitObjectRef> {
    let related = Related { object: object_from_wit(change.object), deleted: change.deleted };
    P::map_change(&related, &Config::new(config)).into_iter().map(ref_to_wit).collect()
}
