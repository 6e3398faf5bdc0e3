//! What a contract 0.1 guest returns, lifted into 0.3's types with 0.1's meanings: no `prune`
//! action (its manifest's flag prunes after every successful apply; see `Plugin::decode`), no
//! error actions or retry delay, every apply forced, no grants (see `adapter/v0_1.rs`).

use wasmtime::component::{ComponentType, Lift};

use super::v0_2::{self, KindSelector, Patch, forced};
use super::{Event, IntoWit, Kind, List, ObjectRef, Text};
use crate::bindings::wit;

/// 0.1's `action`: no `prune`.
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
        }
    }
}

/// 0.1's `response`.
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

/// 0.1's `reconcile-error`: no actions, no retry delay.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct ReconcileError {
    message: Text,
    transient: bool,
    reason: Option<Text>,
}

impl IntoWit for ReconcileError {
    type Wit = wit::ReconcileError;
    fn into_wit(self) -> wit::ReconcileError {
        wit::ReconcileError {
            message: self.message.0,
            transient: self.transient,
            reason: self.reason.into_wit(),
            retry_after_ms: None,
            actions: Vec::new(),
        }
    }
}

/// 0.1's `plugin-manifest`: 0.2's without grants or metadata-only kinds (the 0.1 rights come
/// from the contract version; see `adapter/v0_1.rs`).
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Manifest {
    name: Text,
    version: Text,
    primary: KindSelector,
    owns: List<Kind>,
    watches: List<KindSelector>,
    reads: List<Kind>,
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
        v0_2::Manifest {
            name: self.name,
            version: self.version,
            primary: self.primary,
            owns: self.owns,
            watches: self.watches,
            reads: self.reads,
            metadata_only: List(Vec::new()),
            writes: List(Vec::new()),
            finalizer: self.finalizer,
            prune: self.prune,
            deliver_deleted: self.deliver_deleted,
            deliver_previous: self.deliver_previous,
            settings: self.settings,
        }
        .into_wit()
    }
}
