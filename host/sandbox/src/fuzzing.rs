//! Entry points for the coverage-guided fuzz targets (`host/fuzz`, feature `fuzzing`): the
//! host decode of a plugin's response, reached with any values a guest could return.
//!
//! The WIT records a guest returns are generated types the fuzzer cannot build, so
//! [`ResponseInput`] mirrors them field for field and is turned into them here, the same
//! values the canonical ABI would lift.

use arbitrary::Arbitrary;

use crate::action;
use crate::bindings::wasmloop::plugin::types::Settings;
use crate::bindings::{Object, Phase, wit};
use crate::error::CallFailure;
use crate::manifest::{Contract, Manifest};
use crate::response::Response;

/// An object reference, as a guest returns it.
#[derive(Debug, Arbitrary)]
#[allow(missing_docs)]
pub struct RefInput {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub uid: Option<String>,
}

/// One action, as a guest returns it.
#[derive(Debug, Arbitrary)]
#[allow(missing_docs)]
pub enum ActionInput {
    Apply { object: String, force: bool, uid: Option<String> },
    Delete(RefInput),
    Patch { target: RefInput, format: u8, patch: String },
    Status(String),
    Event { warning: bool, reason: String, message: String, action: Option<String> },
    Prune,
}

/// A response, or a failure, for a primary the manifest's grants are built around.
#[derive(Debug, Arbitrary)]
pub struct ResponseInput {
    /// The primary's namespace (the host hands a valid one; a fuzzed one tests the checks).
    pub primary_namespace: Option<String>,
    /// Namespaces of the manifest's Secret grant; a manifest refused at load ends the case.
    pub grant_namespaces: Vec<String>,
    /// `apply`, `cleanup` or `deleted`, by remainder.
    pub phase: u8,
    /// The actions.
    pub actions: Vec<ActionInput>,
    /// The requeue asked for.
    pub requeue_after_ms: Option<u64>,
    /// When set, the call failed with this message, `transient` and reason, and the actions are
    /// the failure's.
    pub failed: Option<(String, bool, Option<String>)>,
}

/// What the host made of a response.
#[derive(Debug)]
pub enum Decoded {
    /// The manifest the input built was refused at load.
    ManifestRefused(String),
    /// A successful response, or why it was refused.
    Response(Result<Response, CallFailure>),
    /// A failure as the worker sees it ([`CallFailure::Plugin`]), or why it was refused.
    Failure(Result<CallFailure, CallFailure>),
}

fn gvk(group: &str, version: &str, kind: &str) -> wit::Gvk {
    wit::Gvk { group: group.into(), version: version.into(), kind: kind.into() }
}

fn manifest(grant_namespaces: Vec<String>) -> Result<Manifest, String> {
    let verbs = wit::WriteVerbs::APPLY | wit::WriteVerbs::PATCH | wit::WriteVerbs::DELETE;
    let grant = |kind, scope| wit::WriteGrant { kind, verbs, scope };
    let manifest = wit::PluginManifest {
        name: "fuzzed".into(),
        version: "1".into(),
        primary: wit::KindSelector {
            kind: gvk("", "v1", "ConfigMap"),
            namespaces: Vec::new(),
            label_selector: None,
            field_selector: None,
            annotations: Vec::new(),
            generation_changed: false,
        },
        owns: vec![gvk("apps", "v1", "Deployment")],
        watches: Vec::new(),
        reads: Vec::new(),
        metadata_only: Vec::new(),
        writes: vec![
            grant(gvk("", "v1", "Secret"), wit::WriteScope::Namespaces(grant_namespaces)),
            grant(gvk("", "v1", "Node"), wit::WriteScope::Any),
        ],
        indexes: Vec::new(),
        finalizer: None,
        prune: true,
        deliver_deleted: true,
        deliver_previous: false,
        settings: Settings {
            max_concurrent_reconciles: None,
            deadline_ms: None,
            memory_limit_bytes: None,
            response_limit_bytes: None,
            resync_seconds: None,
        },
    };
    Manifest::from_wit(manifest, Vec::new(), Contract::V0_3)
}

fn object_ref(r: RefInput) -> wit::ObjectRef {
    wit::ObjectRef { api_version: r.api_version, kind: r.kind, name: r.name, namespace: r.namespace, uid: r.uid }
}

fn action(a: ActionInput) -> wit::Action {
    match a {
        ActionInput::Apply { object, force, uid } => wit::Action::Apply(wit::ApplyObject { object, force, uid }),
        ActionInput::Delete(target) => wit::Action::Delete(object_ref(target)),
        ActionInput::Patch { target, format, patch } => wit::Action::Patch(wit::Patch {
            target: object_ref(target),
            kind: match format % 3 {
                0 => wit::PatchKind::Merge,
                1 => wit::PatchKind::Json,
                _ => wit::PatchKind::Strategic,
            },
            patch,
        }),
        ActionInput::Status(json) => wit::Action::Status(json),
        ActionInput::Event { warning, reason, message, action } => wit::Action::Event(wit::Event {
            event_type: if warning { wit::EventType::Warning } else { wit::EventType::Normal },
            reason,
            message,
            action,
        }),
        ActionInput::Prune => wit::Action::Prune,
    }
}

/// Decodes `input` as the host decodes a guest's response.
pub fn decode(input: ResponseInput) -> Decoded {
    let manifest = match manifest(input.grant_namespaces) {
        Ok(manifest) => manifest,
        Err(why) => return Decoded::ManifestRefused(why),
    };
    let primary = Object {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "primary".into(),
        namespace: input.primary_namespace,
        uid: "0b7c6a52-5ad4-4a7e-9d0c-2f4f5f0c0d1e".into(),
        json: "{}".into(),
    };
    let phase = [Phase::Apply, Phase::Cleanup, Phase::Deleted][usize::from(input.phase % 3)];
    let actions = input.actions.into_iter().map(action).collect();
    match input.failed {
        None => {
            let response = wit::Response { actions, requeue_after_ms: input.requeue_after_ms };
            Decoded::Response(action::decode(&manifest, &primary, phase, response))
        }
        Some((message, transient, reason)) => {
            let error = wit::ReconcileError { message, transient, reason, retry_after_ms: None, actions };
            Decoded::Failure(action::decode_failure(&manifest, &primary, phase == Phase::Deleted, error))
        }
    }
}
