//! What the host lends a plugin during a call: cache look-ups and a log.

use crate::Selector;
use crate::bindings::{Gvk, Object};
use crate::manifest::Index;
use wasmloop_contract::fields::index_keys;
use wasmloop_contract::names::{Name, Namespace};

/// Severity of a plugin's log line.
pub use crate::bindings::wit::LogLevel;

/// Where an object sits in a list: (namespace, name), the namespace empty for cluster-scoped
/// objects. Lists are ordered by it.
pub type ListKey = (String, String);

/// One page of a list, as the host's cache serves it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPage {
    /// Objects in (namespace, name) order.
    pub items: Vec<Object>,
    /// The key after which the next page starts; none when the list is done.
    pub resume: Option<ListKey>,
}

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
/// Kind, namespace and name arrive parsed: the sandbox refused what a guest sent that is not
/// one. It has also checked that `kind` is declared by the plugin's manifest, that the
/// selector parses and that [`HostServices::denied`] says nothing before it calls the others.
pub trait HostServices: Send + Sync {
    /// One object from the cache.
    fn get(&self, kind: &Gvk, namespace: Option<&Namespace>, name: &Name) -> Option<Object>;

    /// Objects of a kind, optionally in one namespace, matching the selector.
    fn list(&self, kind: &Gvk, namespace: Option<&Namespace>, selector: &Selector) -> Vec<Object>;

    /// A page of [`HostServices::list`]: at most `limit` objects after `after`, in (namespace,
    /// name) order, and where the next page starts when more may follow. The default sorts the
    /// whole list; a cache kept in that order serves a page from a range instead, and may stop
    /// early (fewer objects, even none) to bound one call's work, as long as it says where to
    /// resume.
    fn list_page(
        &self,
        kind: &Gvk,
        namespace: Option<&Namespace>,
        selector: &Selector,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        page_of(self.list(kind, namespace, selector), after, limit)
    }

    /// A page of the objects of `index.kind` that `index` files under `key`, optionally in
    /// one namespace, in (namespace, name) order after `after`. The default evaluates the
    /// index's paths over [`HostServices::list`] (a cache as small as a test's); the host's
    /// informers keep the index as objects change and serve a page from it.
    fn list_by_index(
        &self,
        index: &Index,
        key: &str,
        namespace: Option<&Namespace>,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        let listed = |o: &Object| {
            serde_json::from_str::<serde_json::Value>(&o.json)
                .is_ok_and(|v| index_keys(&index.fields, &v).iter().any(|found| found == key))
        };
        let filed = self.list(&index.kind, namespace, &Selector::default()).into_iter().filter(listed);
        page_of(filed.collect(), after, limit)
    }

    /// Whether the cache refuses this look-up now (a revoked grant, a namespace outside the
    /// plugin's). The default refuses nothing.
    fn denied(&self, _kind: &Gvk, _namespace: Option<&Namespace>) -> Option<CacheDenied> {
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

/// At most `limit` of `objects` after `after`, in (namespace, name) order, and where the next
/// page starts when more follow.
fn page_of(objects: Vec<Object>, after: Option<&ListKey>, limit: usize) -> ListPage {
    let key = |o: &Object| (o.namespace.clone().unwrap_or_default(), o.name.clone());
    let mut rest: Vec<(ListKey, Object)> =
        objects.into_iter().map(|o| (key(&o), o)).filter(|(k, _)| after.is_none_or(|a| k > a)).collect();
    rest.sort_by(|a, b| a.0.cmp(&b.0));
    let more = rest.len() > limit;
    rest.truncate(limit);
    let resume = if more { rest.last().map(|(k, _)| k.clone()) } else { None };
    ListPage { items: rest.into_iter().map(|(_, o)| o).collect(), resume }
}

/// A host with an empty cache, for calls that need none (loading, tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptyHost;

impl HostServices for EmptyHost {
    fn get(&self, _: &Gvk, _: Option<&Namespace>, _: &Name) -> Option<Object> {
        None
    }

    fn list(&self, _: &Gvk, _: Option<&Namespace>, _: &Selector) -> Vec<Object> {
        Vec::new()
    }
}
