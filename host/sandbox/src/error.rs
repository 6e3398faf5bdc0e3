//! Errors of loading and calling plugins. Each message names the plugin (or file) and the
//! object, says what happened, and what to do next.
//!
//! [`CallFailure::is_transient`] decides backoff: a trap, a deadline, a memory limit or a failed
//! instantiation may depend on load and on what the cache holds, so they back off and retry; an
//! invalid action, an undeclared kind or an oversized response is the same for the same input,
//! so it waits until the object changes or a new version loads (which requeues every primary).
//! [`CallFailure::event_reason`] names the Warning Event (the plugin's own reason for its own
//! errors); [`CallFailure::metric_reason`] labels the error metric from a fixed set, whatever the
//! plugin says. `anyhow` appears only in binaries.

use std::time::Duration;

/// Why a component could not be loaded. The previous version of a plugin, if any, keeps
/// running.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not WebAssembly at all.
    #[error(
        "{origin} is not a WebAssembly file; build the plugin with `cargo build --release --target wasm32-wasip2` and pass the .wasm under target/wasm32-wasip2/release"
    )]
    NotWasm {
        /// Where the bytes came from.
        origin: String,
    },
    /// A core module, not a component.
    #[error(
        "{origin} is a core WebAssembly module, not a component; wasmloop loads WASI 0.2 components: build with `--target wasm32-wasip2` (not wasm32-unknown-unknown or wasm32-wasip1), or wrap the module with `wasm-tools component new`"
    )]
    CoreModule {
        /// Where the bytes came from.
        origin: String,
    },
    /// wasmtime could not compile it.
    #[error("{origin} does not compile: {source:#}; rebuild the component with the wasmloop SDK")]
    Compile {
        /// Where the bytes came from.
        origin: String,
        /// The compiler's error.
        #[source]
        source: wasmtime::Error,
    },
    /// Built for a contract version this host does not serve.
    #[error("{origin} was built for contract {package}@{found}, but this host serves {package}@{supported} ({supported_minor}.x), and {package}@{v2} ({v2_minor}.x) and {package}@{v1} ({v1_minor}.x) through adapters; rebuild the plugin with an SDK for contract {supported} (this repository's wasmloop-sdk), or run a wasmloop host that serves {found}", package = crate::CONTRACT_PACKAGE, supported = crate::CONTRACT_VERSION, supported_minor = minor(crate::CONTRACT_VERSION), v2 = crate::contract::LEGACY_CONTRACT_VERSIONS[0], v2_minor = minor(crate::contract::LEGACY_CONTRACT_VERSIONS[0]), v1 = crate::contract::LEGACY_CONTRACT_VERSIONS[1], v1_minor = minor(crate::contract::LEGACY_CONTRACT_VERSIONS[1]))]
    IncompatibleContract {
        /// Where the bytes came from.
        origin: String,
        /// The version it was built for.
        found: String,
    },
    /// Built against two contract versions at once.
    #[error("{origin} names contract versions {} at once (its imports and exports must come from one version); rebuild the plugin with one SDK", found.join(" and "))]
    MixedContract {
        /// Where the bytes came from.
        origin: String,
        /// The versions it names.
        found: Vec<String>,
    },
    /// A component, but not a wasmloop plugin.
    #[error("{origin} is a component but exports no {package}/plugin interface (it exports: {exports}); implement wasmloop_sdk::Reconciler and call wasmloop_sdk::export_plugin!", package = crate::CONTRACT_PACKAGE, exports = if exports.is_empty() { "nothing".to_owned() } else { exports.join(", ") })]
    NotAPlugin {
        /// Where the bytes came from.
        origin: String,
        /// What it exports instead.
        exports: Vec<String>,
    },
    /// It imports something the sandbox does not provide.
    #[error(
        "{origin} imports something the sandbox does not provide: {source:#}; plugins get only the wasmloop host imports and WASI basics (no filesystem, network or environment): remove the dependency that needs it"
    )]
    Link {
        /// Where the bytes came from.
        origin: String,
        /// The linker's error.
        #[source]
        source: wasmtime::Error,
    },
    /// Compiling took longer than the sandbox allows.
    #[error("{origin} did not compile within {} s; a plugin that large or complex is refused (raise the compile timeout if it is genuine)", timeout.as_secs())]
    CompileTimeout {
        /// Where the bytes came from.
        origin: String,
        /// The limit.
        timeout: Duration,
    },
    /// The instance pool cannot hold the plugin's quota.
    #[error(
        "plugin {plugin} needs {wanted} instances (one per worker), but only {free} of the host's pool of {total} are free; lower the plugin's maxConcurrentReconciles, or raise sandbox.maxInstances in the host configuration"
    )]
    PoolFull {
        /// The plugin.
        plugin: crate::PluginId,
        /// Its quota.
        wanted: usize,
        /// Instances not reserved by other plugins.
        free: usize,
        /// The pool.
        total: usize,
    },
    /// Loading panicked: a wasmloop bug, contained to this candidate.
    #[error(
        "loading {origin} panicked ({message}); this is a wasmloop bug, please report it: the candidate is refused and the host carries on"
    )]
    Panicked {
        /// Where the bytes came from.
        origin: String,
        /// The panic's message.
        message: String,
    },
    /// Calling `manifest()` failed.
    #[error("calling manifest() of {origin} failed: {failure}")]
    ManifestCall {
        /// Where the bytes came from.
        origin: String,
        /// What went wrong.
        failure: CallFailure,
    },
    /// `reconcile` or `map` does not have the types of the contract version the component
    /// names: it was built against an earlier revision of that version's WIT.
    #[error(
        "{origin} names contract wasmloop:plugin@{version} but its {reason}; rebuild the plugin with the current wasmloop-sdk"
    )]
    StaleExports {
        /// Where the bytes came from.
        origin: String,
        /// The contract version its exports name.
        version: String,
        /// Which export, and wasmtime's account of the mismatch.
        reason: String,
    },
    /// `manifest()` returned something invalid.
    #[error("{origin} returned an invalid manifest: {reason}; fix the plugin's Reconciler::manifest")]
    InvalidManifest {
        /// Where the bytes came from.
        origin: String,
        /// The first invalid field.
        reason: String,
    },
}

impl LoadError {
    /// True when the host's budgets, not the component, failed the load (its `manifest()`
    /// found no room): the same component may load once they have room.
    pub fn is_host_pressure(&self) -> bool {
        matches!(self, LoadError::ManifestCall { failure, .. } if failure.is_host_pressure())
    }

    /// A short CamelCase reason, for Events and metric labels.
    pub fn reason(&self) -> &'static str {
        if self.is_host_pressure() {
            return "HostPressure";
        }
        match self {
            LoadError::NotWasm { .. } => "NotWasm",
            LoadError::CoreModule { .. } => "CoreModule",
            LoadError::Compile { .. } => "CompileFailed",
            LoadError::CompileTimeout { .. } => "CompileTimeout",
            LoadError::PoolFull { .. } => "PoolFull",
            LoadError::Panicked { .. } => "LoadPanicked",
            LoadError::IncompatibleContract { .. } | LoadError::MixedContract { .. } => "IncompatibleContract",
            LoadError::NotAPlugin { .. } => "NotAPlugin",
            LoadError::Link { .. } => "LinkFailed",
            LoadError::ManifestCall { .. } => "ManifestFailed",
            LoadError::InvalidManifest { .. } => "InvalidManifest",
            LoadError::StaleExports { .. } => "IncompatibleContract",
        }
    }
}

/// A failed call into a plugin, with the plugin and the object it was about.
#[derive(Debug, thiserror::Error)]
#[error("plugin {plugin} failed on {object}: {failure}")]
pub struct CallError {
    /// The plugin.
    pub plugin: crate::PluginId,
    /// The object (`Kind namespace/name`).
    pub object: String,
    /// What went wrong.
    pub failure: CallFailure,
}

/// What went wrong in a call.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    /// The plugin returned an error.
    #[error("{} error{}: {message}", if *transient { "transient" } else { "permanent" }, reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
    Plugin {
        /// The plugin's message.
        message: String,
        /// Whether a retry may help.
        transient: bool,
        /// The Event reason it asked for.
        reason: Option<String>,
        /// When to retry instead of the backoff, for a transient error.
        retry_after: Option<Duration>,
        /// Status and event actions to carry out despite the failure, checked.
        actions: Vec<crate::response::Action>,
    },
    /// The guest trapped (a panic, an abort, a bug).
    #[error("{}; fix the plugin, the object is retried with backoff meanwhile", describe_trap(trap, panic.as_ref()))]
    Trap {
        /// The trap itself, for example "wasm `unreachable` instruction executed".
        trap: String,
        /// The panic message and location, when the guest printed one (Rust panics do).
        panic: Option<String>,
        /// The wasm backtrace, for logs at debug level.
        backtrace: String,
    },
    /// The guest ran past its deadline, computing or waiting in a host call.
    #[error("the guest ran past its {} ms deadline and was stopped after {} ms; make the reconcile cheaper (and do not sleep in it: return requeue-after instead), or raise deadline-ms in the plugin's settings", deadline.as_millis(), elapsed.as_millis())]
    Deadline {
        /// The deadline.
        deadline: Duration,
        /// When the host stopped the guest, from the start of the call.
        elapsed: Duration,
    },
    /// The guest asked for more memory than allowed.
    #[error(
        "the guest hit its memory limit of {limit} bytes (it asked for {requested}); allocate less, or raise memory-limit-bytes in the plugin's settings"
    )]
    MemoryLimit {
        /// The ceiling.
        limit: usize,
        /// What it asked for.
        requested: usize,
    },
    /// The response was larger than the cap.
    #[error(
        "the response is at least {size} bytes, over the {limit}-byte cap (strings count each time they are used); return fewer or smaller actions, or raise response-limit-bytes in the plugin's settings"
    )]
    ResponseTooLarge {
        /// Its size.
        size: usize,
        /// The cap.
        limit: usize,
    },
    /// A response (or a manifest, or a map result) with more entries than allowed; refused
    /// before any entry was read.
    #[error(
        "it returned {count} {what}, over the limit of {limit}; return fewer, or raise max-actions in the operator's per-plugin settings"
    )]
    TooManyItems {
        /// What was counted.
        what: &'static str,
        /// How many the guest returned.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// An action the host cannot carry out.
    #[error("it returned an invalid action: {0}; fix the plugin")]
    InvalidAction(String),
    /// An action or look-up on a kind the manifest does not declare.
    #[error(
        "it tried to {verb} a {kind}, a kind its manifest does not declare; add the kind to owns, watches or reads to read it, or to owns or writes to write it"
    )]
    UndeclaredKind {
        /// apply, delete, patch, get or list.
        verb: String,
        /// The kind.
        kind: String,
    },
    /// A write no grant covers, refused before any API call.
    #[error("{0}")]
    NotGranted(crate::capability::NotGranted),
    /// The instance could not be created.
    #[error(
        "cannot instantiate the guest: {0:#}; if the instance pool is exhausted, lower concurrency or raise the sandbox's max instances"
    )]
    Instantiate(wasmtime::Error),
    /// The host had no room for the call: its guest memory budget, shared by every plugin,
    /// was full. The host's load, not the plugin's doing: never counted against the plugin.
    #[error(
        "{0}; other plugins' calls hold the host's memory, and the object is tried again shortly (if this persists, raise the host pod's memory limit or --guest-memory-budget, or lower the plugins' memory limits)"
    )]
    HostPressure(crate::memory_budget::Pressure),
}

impl CallFailure {
    /// True when the key should back off and retry; false when only a change of the object
    /// (or of the plugin) can help.
    pub fn is_transient(&self) -> bool {
        match self {
            CallFailure::Plugin { transient, .. } => *transient,
            // The same input gives the same bad output: retrying cannot help until the object
            // changes or a new plugin version is loaded (which requeues every primary).
            CallFailure::InvalidAction(_)
            | CallFailure::UndeclaredKind { .. }
            | CallFailure::NotGranted(_)
            | CallFailure::ResponseTooLarge { .. }
            | CallFailure::TooManyItems { .. } => false,
            // A trap, a deadline or memory can depend on load and on what the cache holds.
            CallFailure::Trap { .. }
            | CallFailure::Deadline { .. }
            | CallFailure::MemoryLimit { .. }
            | CallFailure::Instantiate(_)
            | CallFailure::HostPressure(_) => true,
        }
    }

    /// True when the host, not the plugin, failed the call (its shared budgets were full): the
    /// failure counts toward neither the plugin's quarantine nor its error rate.
    pub fn is_host_pressure(&self) -> bool {
        matches!(self, CallFailure::HostPressure(_))
    }

    /// The reason label of `wasmloop_reconcile_errors_total` for this failure: one of a fixed
    /// set, whatever reason the plugin gave.
    pub fn metric_reason(&self) -> &'static str {
        match self {
            CallFailure::Plugin { .. } => "ReconcileError",
            CallFailure::Trap { .. } => "PluginTrapped",
            CallFailure::Deadline { .. } => "PluginDeadlineExceeded",
            CallFailure::MemoryLimit { .. } => "PluginMemoryLimit",
            CallFailure::ResponseTooLarge { .. } => "PluginResponseTooLarge",
            CallFailure::TooManyItems { .. } => "PluginTooManyActions",
            CallFailure::InvalidAction(_) => "PluginInvalidAction",
            CallFailure::UndeclaredKind { .. } => "PluginUndeclaredKind",
            CallFailure::NotGranted(_) => "PluginNotGranted",
            CallFailure::Instantiate(_) => "PluginInstantiateFailed",
            CallFailure::HostPressure(_) => "HostPressure",
        }
    }

    /// The reason of the Warning Event the host records for this failure.
    pub fn event_reason(&self) -> &str {
        match self {
            CallFailure::Plugin { reason: Some(r), .. } => r,
            other => other.metric_reason(),
        }
    }
}

fn minor(version: &str) -> &str {
    version.rsplit_once('.').map_or(version, |(m, _)| m)
}

fn describe_trap(trap: &str, panic: Option<&String>) -> String {
    match panic {
        // The guest's words, quoted as such: an Event written as the host carries them.
        Some(panic) => format!("the guest panicked, saying {panic:?}"),
        None => format!("the guest trapped: {trap}"),
    }
}

/// Finds a Rust panic message in what the guest wrote to stderr:
/// `thread '<unnamed>' panicked at src/lib.rs:3:5:\nmessage\nnote: ...`.
pub(crate) fn panic_message(guest_output: &str) -> Option<String> {
    let mut lines = guest_output.lines();
    let location = lines
        .by_ref()
        .find_map(|l| l.split_once(" panicked at ").map(|(_, at)| at.trim_end_matches(':').to_owned()))?;
    let message: Vec<&str> = lines.take_while(|l| !l.starts_with("note: ")).collect();
    Some(format!("{} (at {location})", message.join(" ").trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_panic_output_yields_message_and_location() {
        let out = "thread '<unnamed>' (1) panicked at src/lib.rs:24:24:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(panic_message(out).as_deref(), Some("boom (at src/lib.rs:24:24)"));
    }

    #[test]
    fn output_without_a_panic_yields_none() {
        assert_eq!(panic_message("memory allocation of 5 bytes failed\n"), None);
    }
}
