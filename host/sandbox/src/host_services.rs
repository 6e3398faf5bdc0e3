//! What the host lends a plugin during a call: cache look-ups and a log.

use crate::Selector;
use crate::bindings::{Gvk, Object};

/// Severity of a plugin's log line.
pub use crate::bindings::wit::LogLevel;

/// The read side of the host that a guest may reach through its imports.
///
/// The sandbox has already checked that `kind` is declared by the plugin's manifest and that
/// the selector parses before it calls these.
pub trait HostServices: Send + Sync {
    /// One object from the cache.
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<Object>;

    /// Objects of a kind, optionally in one namespace, matching the selector.
    fn list(&self, kind: &Gvk, namespace: Option<&str>, selector: &Selector) -> Vec<Object>;

    /// A log line from the plugin. The default writes it to `tracing` in the current span.
    fn log(&self, plugin: &str, level: LogLevel, message: &str) {
        match level {
            LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

/// A host with an empty cache, for calls that need none (loading, tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptyHost;

impl HostServices for EmptyHost {
    fn get(&self, _: &Gvk, _: Option<&str>, _: &str) -> Option<Object> {
        None
    }

    fn list(&self, _: &Gvk, _: Option<&str>, _: &Selector) -> Vec<Object> {
        Vec::new()
    }
}
