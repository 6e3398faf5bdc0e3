//! What a contract 0.3 guest returns, counted as it is lifted.

use wasmtime::component::{ComponentType, Lift};

use super::{Event, IntoWit, Keep, Kind, List, ObjectRef, Text, WriteGrant};
use crate::bindings::wit;

/// `apply-object`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct ApplyObject {
    object: Text,
    force: bool,
    uid: Option<Text>,
}

impl IntoWit for ApplyObject {
    type Wit = wit::ApplyObject;
    fn into_wit(self) -> wit::ApplyObject {
        wit::ApplyObject { object: self.object.0, force: self.force, uid: self.uid.into_wit() }
    }
}

/// `patch`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Patch {
    target: ObjectRef,
    kind: wit::PatchKind,
    patch: Text,
}

impl IntoWit for Patch {
    type Wit = wit::Patch;
    fn into_wit(self) -> wit::Patch {
        wit::Patch { target: self.target.into_wit(), kind: self.kind, patch: self.patch.0 }
    }
}

/// `action`.
#[derive(ComponentType, Lift)]
#[component(variant)]
pub(crate) enum Action {
    #[component(name = "apply")]
    Apply(ApplyObject),
    #[component(name = "delete")]
    Delete(ObjectRef),
    #[component(name = "patch")]
    Patch(Patch),
    #[component(name = "status")]
    Status(Text),
    #[component(name = "event")]
    Event(Event),
    #[component(name = "prune")]
    Prune,
}

impl IntoWit for Action {
    type Wit = wit::Action;
    fn into_wit(self) -> wit::Action {
        match self {
            Action::Apply(a) => wit::Action::Apply(a.into_wit()),
            Action::Delete(r) => wit::Action::Delete(r.into_wit()),
            Action::Patch(p) => wit::Action::Patch(p.into_wit()),
            Action::Status(t) => wit::Action::Status(t.0),
            Action::Event(e) => wit::Action::Event(e.into_wit()),
            Action::Prune => wit::Action::Prune,
        }
    }
}

/// `response`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Response {
    actions: List<Action>,
    #[component(name = "requeue-after-ms")]
    requeue_after_ms: Option<u64>,
}

impl IntoWit for Response {
    type Wit = wit::Response;
    fn into_wit(self) -> wit::Response {
        wit::Response { actions: self.actions.into_wit(), requeue_after_ms: self.requeue_after_ms }
    }
}

/// `reconcile-error`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct ReconcileError {
    message: Text,
    transient: bool,
    reason: Option<Text>,
    #[component(name = "retry-after-ms")]
    retry_after_ms: Option<u64>,
    actions: List<Action>,
}

impl IntoWit for ReconcileError {
    type Wit = wit::ReconcileError;
    fn into_wit(self) -> wit::ReconcileError {
        wit::ReconcileError {
            message: self.message.0,
            transient: self.transient,
            reason: self.reason.into_wit(),
            retry_after_ms: self.retry_after_ms,
            actions: self.actions.into_wit(),
        }
    }
}

/// `annotation-match`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct AnnotationMatch {
    key: Text,
    value: Option<Text>,
}

impl IntoWit for AnnotationMatch {
    type Wit = wit::AnnotationMatch;
    fn into_wit(self) -> wit::AnnotationMatch {
        wit::AnnotationMatch { key: self.key.0, value: self.value.into_wit() }
    }
}

/// `kind-selector`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct KindSelector {
    kind: Kind,
    namespaces: List<Text>,
    #[component(name = "label-selector")]
    label_selector: Option<Text>,
    #[component(name = "field-selector")]
    field_selector: Option<Text>,
    annotations: List<AnnotationMatch>,
    #[component(name = "generation-changed")]
    generation_changed: bool,
}

impl IntoWit for KindSelector {
    type Wit = wit::KindSelector;
    fn into_wit(self) -> wit::KindSelector {
        wit::KindSelector {
            kind: self.kind.into_wit(),
            namespaces: self.namespaces.into_wit(),
            label_selector: self.label_selector.into_wit(),
            field_selector: self.field_selector.into_wit(),
            annotations: self.annotations.into_wit(),
            generation_changed: self.generation_changed,
        }
    }
}

/// `index`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Index {
    name: Text,
    kind: Kind,
    fields: List<Text>,
}

impl IntoWit for Index {
    type Wit = wit::Index;
    fn into_wit(self) -> wit::Index {
        wit::Index { name: self.name.0, kind: self.kind.into_wit(), fields: self.fields.into_wit() }
    }
}

/// `plugin-manifest`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Manifest {
    name: Text,
    version: Text,
    primary: KindSelector,
    owns: List<Kind>,
    watches: List<KindSelector>,
    reads: List<KindSelector>,
    #[component(name = "metadata-only")]
    metadata_only: List<Kind>,
    writes: List<WriteGrant>,
    indexes: List<Index>,
    finalizer: Option<Text>,
    prune: bool,
    #[component(name = "deliver-deleted")]
    deliver_deleted: bool,
    #[component(name = "deliver-previous")]
    deliver_previous: bool,
    settings: wit::Settings,
}

impl IntoWit for Manifest {
    type Wit = wit::PluginManifest;
    fn into_wit(self) -> wit::PluginManifest {
        wit::PluginManifest {
            name: self.name.0,
            version: self.version.0,
            primary: self.primary.into_wit(),
            owns: self.owns.into_wit(),
            watches: self.watches.into_wit(),
            reads: self.reads.into_wit(),
            metadata_only: self.metadata_only.into_wit(),
            writes: self.writes.into_wit(),
            indexes: self.indexes.into_wit(),
            finalizer: self.finalizer.into_wit(),
            prune: self.prune,
            deliver_deleted: self.deliver_deleted,
            deliver_previous: self.deliver_previous,
            settings: self.settings,
        }
    }
}

/// `keep-fields`' result: the same record since 0.2.1.
pub(crate) type Keeps = List<Keep>;
