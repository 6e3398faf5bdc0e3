//! What the host lends a plugin during a call: cache look-ups and a log.

use crate::Selector;
use crate::bindings::{Gvk, Object};

/// Severity of a plugin's log line.
pub use crate::bindings::wit::LogLevel;

/// Where an object sits in a list: (namespace, name), the namespace empty for cluster-scoped
/// objects. Lists are ordered by it.
pub type ListKey = (String, String);

/// Why the host's cache refuses a look-up the manifest allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheDenied {
    /// The plugin's identity lost its read grant; a sentence saying so.
    Revoked(String),
    /// The namespace is outside what the plugin is served; a sentence saying which it is.
    OutOfScope(String),
}

/// The read side of the host that a guest may reach through its imports.
///
/// The sandbox has already checked that `kind` is declared by the plugin's manifest, that the
/// selector parses and that [`HostServices::denied`] says nothing before it calls the others.
pub trait HostServices: Send + Sync {
    /// One object from the cache.
    fn get(&self, kind: &Gvk, namespace: Option<&str>, name: &str) -> Option<Object>;

    /// Objects of a kind, optionally in one namespace, matching the selector.
    fn list(&self, kind: &Gvk, namespace: Option<&str>, selector: &Selector) -> Vec<Object>;

    /// At most `limit` objects of [`HostServices::list`] that come after `after` in
    /// (namespace, name) order. The default sorts the whole list; a cache kept in that order
    /// serves a page from a range instead.
    fn list_page(
        &self,
        kind: &Gvk,
        namespace: Option<&str>,
        selector: &Selector,
        after: Option<&ListKey>,
        limit: usize,
    ) -> Vec<Object> {
        let key = |o: &Object| (o.namespace.clone().unwrap_or_default(), o.name.clone());
        let mut all: Vec<(ListKey, Object)> =
            self.list(kind, namespace, selector).into_iter().map(|o| (key(&o), o)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.into_iter().filter(|(k, _)| after.is_none_or(|a| k > a)).take(limit).map(|(_, o)| o).collect()
    }

    /// Whether the cache refuses this look-up now (a revoked grant, a namespace outside the
    /// plugin's). The default refuses nothing.
    fn denied(&self, _kind: &Gvk, _namespace: Option<&str>) -> Option<CacheDenied> {
        None
    }

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
