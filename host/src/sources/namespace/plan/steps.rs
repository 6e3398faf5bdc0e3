//! What goes in and out of the plan: what an object offers ([`Offer`], or [`Unread`]), what
//! the plan asks of the registry ([`World`]), what a pull and a load report, and the
//! [`Step`]s the shell carries out.

use std::time::Duration;

use wasmloop_runtime::identity::AccountChoice;
use wasmloop_runtime::registry::reports::Reported;
use wasmloop_runtime::registry::{Loaded, RegistryError};
use wasmloop_sandbox::{PluginId, SourceId};

use super::{Key, Shipper};
use crate::oci::PluginRef;
use crate::plugin_configmap::{PluginPayload, Track};

/// What an object offers: the plugin it ships, and how the source is to handle it.
#[derive(Debug, Clone)]
pub(in crate::sources::namespace) struct Offer {
    pub(in crate::sources::namespace) payload: PluginPayload,
    /// The ServiceAccount it names (a ConfigMap's annotation, a `WasmPlugin`'s
    /// `serviceAccountName`), unparsed until the plugin's account is chosen.
    pub(in crate::sources::namespace) account: Option<String>,
    /// The key that must have signed the component (`signature.keyRef`).
    pub(in crate::sources::namespace) signer: Option<String>,
    /// `failurePolicy: Stop`.
    pub(in crate::sources::namespace) stop: bool,
    /// `suspend: true`.
    pub(in crate::sources::namespace) suspend: bool,
    /// What the status says already, for a superseded object.
    pub(in crate::sources::namespace) said: Option<String>,
    /// A `WasmPlugin`'s `settings`.
    pub(in crate::sources::namespace) settings: Option<wasmloop_sandbox::Settings>,
    /// The ConfigMap holding the component, `NAMESPACE/NAME`, for what its bytes may be
    /// refused for.
    pub(in crate::sources::namespace) stored_in: String,
}

impl Offer {
    /// What `payload` offers, and nothing else: no account, no signer, no stop or suspension.
    pub(in crate::sources::namespace) fn of(payload: PluginPayload) -> Offer {
        Offer {
            payload,
            account: None,
            signer: None,
            stop: false,
            suspend: false,
            said: None,
            settings: None,
            stored_in: String::new(),
        }
    }
}

/// Why an object offers nothing usable.
#[derive(Debug, Clone)]
pub(in crate::sources::namespace) struct Unread {
    /// The refusal's CamelCase word.
    pub(in crate::sources::namespace) reason: &'static str,
    pub(in crate::sources::namespace) message: String,
    /// The spec's `failurePolicy: Stop`, when the spec itself was read.
    pub(in crate::sources::namespace) stop: bool,
    /// The host failed, not the object (a ConfigMap it names could not be read): tried again,
    /// and never a reason to stop what serves.
    pub(in crate::sources::namespace) ours: bool,
}

impl Unread {
    pub(in crate::sources::namespace) fn invalid(reason: &'static str, message: String, stop: bool) -> Unread {
        Unread { reason, message, stop, ours: false }
    }
}

/// What the plan asks of the registry, as it is now.
pub(in crate::sources::namespace) trait World {
    /// The plugin, and its version, that `source` serves, if any.
    fn serving(&self, source: &SourceId) -> Option<(PluginId, String)>;
    /// Whether the host may pull `reference` at all (pinned, and allowed by the registry
    /// policy): why not, if not.
    fn admissible(&self, reference: &PluginRef) -> Result<(), crate::oci::OciError>;
}

/// A version to load (or seat as a shadow), checked as far as it can be without its bytes.
#[derive(Debug)]
pub(in crate::sources::namespace) struct LoadSpec {
    /// The object.
    pub(in crate::sources::namespace) source: SourceId,
    pub(in crate::sources::namespace) payload: PluginPayload,
    /// The ConfigMap holding the component, for what its bytes may be refused for.
    pub(in crate::sources::namespace) stored_in: String,
    /// Whom it acts as (nobody for a shadow, which writes nothing).
    pub(in crate::sources::namespace) account: AccountChoice,
    pub(in crate::sources::namespace) settings: Option<wasmloop_sandbox::Settings>,
    /// The reason of a refusal of what the object holds (`InvalidConfigMap`, `InvalidWasmPlugin`).
    pub(in crate::sources::namespace) invalid: &'static str,
}

impl LoadSpec {
    /// It is to shadow its plugin, not serve it.
    pub(in crate::sources::namespace) fn shadow(&self) -> bool {
        self.payload.track == Track::Shadow
    }
}

/// Why a pull brought no component.
#[derive(Debug)]
pub(in crate::sources::namespace) enum PullFailure {
    /// The registry of images: what went wrong.
    Fetch(String),
    /// The plugin may not act as whom it names: checked before a connection is made.
    Identity(RegistryError),
}

/// What a load did.
#[derive(Debug)]
pub(in crate::sources::namespace) enum LoadDone {
    /// The version serves (or is parked, or is what served already).
    Loaded(Loaded),
    /// The candidate shadows its plugin.
    Seated,
}

/// Why a load did not.
#[derive(Debug)]
pub(in crate::sources::namespace) enum LoadFailure {
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

/// Why what an object serves or shadows is to stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::sources::namespace) enum Why {
    /// Its newest version was refused, under `failurePolicy: Stop`.
    Refused {
        /// The refusal's CamelCase word.
        reason: String,
        /// What was wrong, cut.
        message: String,
    },
    /// A `WasmPlugin` with `suspend: true`.
    Suspended,
    /// It was marked superseded: `said` is what its status says already.
    Retired {
        /// What its status says.
        said: Option<String>,
    },
    /// A `WasmPlugin` of this plugin's name takes it from this ConfigMap.
    NameTaken {
        /// Which, and what to do.
        message: String,
    },
    /// It was deleted.
    Deleted,
}

/// What stopped when the shell carried out a [`Step::Stop`].
#[derive(Debug, Default)]
pub(in crate::sources::namespace) struct Stopped {
    /// The plugin that served from it, if one did.
    pub(in crate::sources::namespace) removed: Option<PluginId>,
    /// The plugins it shadowed.
    pub(in crate::sources::namespace) unshadowed: Vec<String>,
}

/// One thing to carry out.
#[derive(Debug)]
pub(in crate::sources::namespace) enum Step {
    /// Report `what` about the object.
    Report(Key, Reported),
    /// Refuse its newest offer: log it (a warning when the host failed, `ours`), and report it.
    Refuse { key: Key, reason: String, message: String, ours: bool },
    /// Stop what it serves and shadows, then hand what stopped to [`State::on_stopped`].
    Stop(Key, Why),
    /// Offer it again after this long ([`State::on_retry`] when it is due).
    RetryAfter(Key, Duration),
    /// Offer it again now: it may load now.
    RetryNow(Key),
    /// Offer again every object that [`State::unblocked`] names, as the registry is now.
    RetryBlocked,
    /// Abort pull `id`: a newer offer, or a deletion, replaces it; its report will be stale.
    AbortPull(Key, u64),
    /// Pull the component `reference` names, after checking that the plugin may act as
    /// `account` (none for a shadow); report to [`State::on_pulled`] with `id`.
    Pull { shipper: Shipper, id: u64, offer: Offer, reference: PluginRef, account: Option<AccountChoice> },
    /// Load, or seat as a shadow, and report to [`State::on_loaded`] with `id`.
    Load { shipper: Shipper, id: u64, spec: LoadSpec },
    /// Read this object and offer it (an event that waited for a load, or a `WasmPlugin` whose
    /// ConfigMap changed).
    Offer(Shipper),
    /// Read object `key` from the API server and offer it (a retry).
    Fetch(Key),
}
