//! What a contract 0.2 guest returns, lifted into 0.3's types with 0.2's meanings: every apply
//! forced and without a UID precondition, selectors of one namespace and labels, reads of
//! whole kinds, no indexes.

use wasmtime::component::{ComponentType, Lift};

use super::{Event, IntoWit, Kind, List, ObjectRef, Text, WriteGrant};
use crate::bindings::wit;

/// 0.2's `patch-kind`: no strategic merge patch.
// Built only by the lift, from the guest's discriminant.
#[allow(dead_code)]
#[derive(ComponentType, Lift, Clone, Copy)]
#[component(enum)]
#[repr(u8)]
pub(crate) enum PatchKind {
    #[component(name = "merge")]
    Merge,
    #[component(name = "json")]
    Json,
}

/// 0.2's `patch` (and 0.1's).
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Patch {
    target: ObjectRef,
    kind: PatchKind,
    patch: Text,
}

impl IntoWit for Patch {
    type Wit = wit::Patch;
    fn into_wit(self) -> wit::Patch {
        let kind = match self.kind {
            PatchKind::Merge => wit::PatchKind::Merge,
            PatchKind::Json => wit::PatchKind::Json,
        };
        wit::Patch { target: self.target.into_wit(), kind, patch: self.patch.0 }
    }
}

/// A 0.2 (or 0.1) apply: the object alone, always forced.
pub(crate) fn forced(object: Text) -> wit::Action {
    wit::Action::Apply(wit::ApplyObject { object: object.0, force: true, uid: None })
}

/// 0.2's `action`: its apply is the object alone.
#[derive(ComponentType, Lift)]
#[component(variant)]
pub(crate) enum Action {
    #[component(name = "apply")]
    Apply(Text),
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
            Action::Apply(t) => forced(t),
            Action::Delete(r) => wit::Action::Delete(r.into_wit()),
            Action::Patch(p) => wit::Action::Patch(p.into_wit()),
            Action::Status(t) => wit::Action::Status(t.0),
            Action::Event(e) => wit::Action::Event(e.into_wit()),
            Action::Prune => wit::Action::Prune,
        }
    }
}

/// 0.2's `response`.
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

/// 0.2's `reconcile-error`.
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

/// 0.2's `kind-selector` (and 0.1's): one namespace at most, labels only.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct KindSelector {
    kind: Kind,
    namespace: Option<Text>,
    #[component(name = "label-selector")]
    label_selector: Option<Text>,
}

impl IntoWit for KindSelector {
    type Wit = wit::KindSelector;
    fn into_wit(self) -> wit::KindSelector {
        wit::KindSelector {
            kind: self.kind.into_wit(),
            namespaces: self.namespace.map(|ns| ns.0).into_iter().collect(),
            label_selector: self.label_selector.into_wit(),
            field_selector: None,
            annotations: Vec::new(),
            generation_changed: false,
        }
    }
}

/// A kind 0.2 (or 0.1) reads: all of it.
pub(crate) fn whole(kind: Kind) -> wit::KindSelector {
    KindSelector { kind, namespace: None, label_selector: None }.into_wit()
}

/// 0.2's `plugin-manifest`.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Manifest {
    pub(super) name: Text,
    pub(super) version: Text,
    pub(super) primary: KindSelector,
    pub(super) owns: List<Kind>,
    pub(super) watches: List<KindSelector>,
    pub(super) reads: List<Kind>,
    #[component(name = "metadata-only")]
    pub(super) metadata_only: List<Kind>,
    pub(super) writes: List<WriteGrant>,
    pub(super) finalizer: Option<Text>,
    pub(super) prune: bool,
    #[component(name = "deliver-deleted")]
    pub(super) deliver_deleted: bool,
    #[component(name = "deliver-previous")]
    pub(super) deliver_previous: bool,
    pub(super) settings: wit::Settings,
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
            reads: self.reads.0.into_iter().map(whole).collect(),
            metadata_only: self.metadata_only.into_wit(),
            writes: self.writes.into_wit(),
            indexes: Vec::new(),
            finalizer: self.finalizer.into_wit(),
            prune: self.prune,
            deliver_deleted: self.deliver_deleted,
            deliver_previous: self.deliver_previous,
            settings: self.settings,
        }
    }
}
