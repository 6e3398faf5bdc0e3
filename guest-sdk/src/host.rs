//! The host imports, behind one set of functions: the WIT imports in a component, a
//! thread-local test host in native builds, which [`crate::testing`] installs around each run.
//! The test host lives here rather than in `testing` so that `log` and `cache` reach it
//! without `testing` and `host` depending on each other.

use crate::abi::{CacheError, Level, Page};
use crate::kind::Gvk;
use crate::request::Object;

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use crate::bindings::wasmloop::plugin::types as wit;
    use crate::bindings::wasmloop::plugin::{cache, log};

    fn wit_gvk(kind: &Gvk) -> wit::Gvk {
        wit::Gvk { group: kind.group.clone(), version: kind.version.clone(), kind: kind.kind.clone() }
    }

    fn error(e: cache::CacheError) -> CacheError {
        match e {
            cache::CacheError::UndeclaredKind(m) => CacheError::UndeclaredKind(m),
            cache::CacheError::InvalidSelector(m) => CacheError::InvalidSelector(m),
            cache::CacheError::OutOfScope(m) => CacheError::OutOfScope(m),
            cache::CacheError::AccessRevoked(m) => CacheError::AccessRevoked(m),
            cache::CacheError::InvalidContinue(m) => CacheError::InvalidContinue(m),
            cache::CacheError::UnknownIndex(m) => CacheError::UnknownIndex(m),
        }
    }

    /// Also used by the export glue in [`crate::__private`], for the objects of a request.
    pub(crate) fn object_from_wit(o: wit::Object) -> Object {
        Object::from_parts(o.api_version, o.kind, o.name, o.namespace, o.uid, o.json)
    }

    pub(crate) fn log(level: Level, message: &str) {
        let level = match level {
            Level::Trace => wit::LogLevel::Trace,
            Level::Debug => wit::LogLevel::Debug,
            Level::Info => wit::LogLevel::Info,
            Level::Warn => wit::LogLevel::Warn,
            Level::Error => wit::LogLevel::Error,
        };
        log::log(level, message);
    }

    pub(crate) fn get(kind: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<Object>, CacheError> {
        cache::get_object(&wit_gvk(kind), namespace, name).map(|o| o.map(object_from_wit)).map_err(error)
    }

    pub(crate) fn list_page(
        kind: &Gvk,
        namespace: Option<&str>,
        selector: Option<&str>,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, CacheError> {
        let page = cache::list_objects(&wit_gvk(kind), namespace, selector, limit, token).map_err(error)?;
        Ok(Page { items: page.items.into_iter().map(object_from_wit).collect(), continue_token: page.continue_token })
    }

    pub(crate) fn list_by_index(query: &IndexQuery<'_>) -> Result<Page, CacheError> {
        let IndexQuery { kind, index, key, namespace, limit, token } = *query;
        let page = cache::list_by_index(&wit_gvk(kind), index, key, namespace, limit, token).map_err(error)?;
        Ok(Page { items: page.items.into_iter().map(object_from_wit).collect(), continue_token: page.continue_token })
    }
}

/// One `list-by-index` look-up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexQuery<'a> {
    pub(crate) kind: &'a Gvk,
    pub(crate) index: &'a str,
    pub(crate) key: &'a str,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) limit: u32,
    pub(crate) token: Option<&'a str>,
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use std::cell::RefCell;

    use serde_json::Value;

    use super::*;
    use crate::manifest::Manifest;
    use crate::selector::Selector;

    struct NativeHost {
        manifest: Manifest,
        cache: Vec<Object>,
        logs: Vec<(Level, String)>,
        /// A look-up of an undeclared kind: the host fails the whole call for it, so does this.
        undeclared: Option<String>,
    }

    thread_local! {
        static HOST: RefCell<Option<NativeHost>> = const { RefCell::new(None) };
    }

    fn undeclared(manifest: &Manifest, kind: &Gvk) -> Option<String> {
        (!manifest.declared_kinds().any(|k| k == kind)).then(|| {
            format!(
                "plugin {:?} read kind {kind}, which its manifest does not declare; add it to owns, watches or reads",
                manifest.name
            )
        })
    }

    pub(crate) fn log(level: Level, message: &str) {
        HOST.with(|h| match h.borrow_mut().as_mut() {
            Some(host) => host.logs.push((level, message.to_owned())),
            None => eprintln!("[{level:?}] {message}"),
        });
    }

    /// Without a namespace, the first in list order: the smallest namespace holding `name`, as
    /// the host's informers answer.
    pub(crate) fn get(kind: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<Object>, CacheError> {
        let named = list(kind, namespace, None)?.into_iter().filter(|o| o.name == name);
        Ok(named.min_by(|a, b| a.namespace.cmp(&b.namespace)))
    }

    /// The host's page size: the test host pages like the host, so a plugin's paging runs in
    /// `cargo test` too.
    pub use wasmloop_contract::cache::PAGE_SIZE;

    pub(crate) fn list_page(
        kind: &Gvk,
        namespace: Option<&str>,
        selector: Option<&str>,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, CacheError> {
        page_of(list(kind, namespace, selector)?, limit, token)
    }

    /// The objects the manifest's index files under the key, by the index's own paths: the
    /// host keeps the index as objects change, the test host evaluates it over its small cache.
    pub(crate) fn list_by_index(query: &IndexQuery<'_>) -> Result<Page, CacheError> {
        let index = HOST.with(|h| {
            let host = h.borrow();
            let manifest = host.as_ref().map(|host| &host.manifest)?;
            manifest.indexes.iter().find(|i| i.kind == *query.kind && i.name == query.index).cloned()
        });
        let Some(index) = index else {
            return Err(CacheError::UnknownIndex(format!(
                "the manifest declares no index {:?} on {}; declare it under `indexes`",
                query.index, query.kind
            )));
        };
        let paths: Vec<wasmloop_contract::fields::FieldPath> =
            index.fields.iter().filter_map(|f| f.parse().ok()).collect();
        let filed = |o: &Object| {
            serde_json::from_str::<Value>(o.json())
                .is_ok_and(|v| wasmloop_contract::fields::index_keys(&paths, &v).iter().any(|k| k == query.key))
        };
        let all: Vec<Object> = list(query.kind, query.namespace, None)?.into_iter().filter(filed).collect();
        page_of(all, query.limit, query.token)
    }

    fn page_of(mut all: Vec<Object>, limit: u32, token: Option<&str>) -> Result<Page, CacheError> {
        let key = |o: &Object| (o.namespace.clone().unwrap_or_default(), o.name.clone());
        all.sort_by_key(key);
        let after =
            token.map(wasmloop_contract::cache::parse_token).transpose().map_err(CacheError::InvalidContinue)?;
        let limit = if limit == 0 { PAGE_SIZE } else { (limit as usize).min(PAGE_SIZE) };
        let rest: Vec<Object> = all.into_iter().filter(|o| after.as_ref().is_none_or(|a| &key(o) > a)).collect();
        let more = rest.len() > limit;
        let items: Vec<Object> = rest.into_iter().take(limit).collect();
        let continue_token =
            if more { items.last().map(|o| wasmloop_contract::cache::token_of(&key(o))) } else { None };
        Ok(Page { items, continue_token })
    }

    fn list(kind: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<Object>, CacheError> {
        let selector: Selector =
            selector.unwrap_or_default().parse().map_err(|e| CacheError::InvalidSelector(format!("{e}")))?;
        HOST.with(|h| {
            let mut host = h.borrow_mut();
            let Some(host) = host.as_mut() else { return Ok(Vec::new()) };
            if let Some(message) = undeclared(&host.manifest, kind) {
                host.undeclared = Some(message.clone());
                return Err(CacheError::UndeclaredKind(message));
            }
            let lean = host.manifest.metadata_only.contains(kind);
            Ok(host
                .cache
                .iter()
                .filter(|o| kind.matches(&o.api_version, &o.kind))
                .filter(|o| wasmloop_contract::cache::in_namespace(namespace, o.namespace.as_deref()))
                .filter(|o| {
                    selector.0.is_empty()
                        || selector.matches_object(&serde_json::from_str(o.json()).unwrap_or(Value::Null))
                })
                .map(|o| if lean { served_as_metadata(o) } else { o.clone() })
                .collect())
        })
    }

    /// A metadata-only kind's object as the host serves it.
    fn served_as_metadata(o: &Object) -> Object {
        let Ok(full) = serde_json::from_str::<Value>(o.json()) else { return o.clone() };
        let lean = wasmloop_contract::cache::metadata_only(full).to_string();
        Object::from_parts(
            o.api_version.clone(),
            o.kind.clone(),
            o.name.clone(),
            o.namespace.clone(),
            o.uid.clone(),
            lean,
        )
    }

    /// `o` as the host's cache holds it for a plugin with `manifest`: without `managedFields`
    /// and the last-applied annotation, unless the plugin keeps them for its kind.
    pub(crate) fn as_cached(manifest: &Manifest, o: Object) -> Object {
        let kept = manifest.keeps.iter().find(|(k, _)| k.matches(&o.api_version, &o.kind)).map(|(_, kept)| *kept);
        let Ok(mut value) = serde_json::from_str::<Value>(o.json()) else { return o };
        if !wasmloop_contract::cache::strip(&mut value, kept.unwrap_or_default()) {
            return o;
        }
        let (api_version, kind, name, namespace, uid) = (o.api_version, o.kind, o.name, o.namespace, o.uid);
        Object::from_parts(api_version, kind, name, namespace, uid, value.to_string())
    }

    /// False for an object of a kind the plugin declares only under selected watches that no
    /// selector selects: the host watches such a kind through the selectors, so never holds it.
    fn held(manifest: &Manifest, o: &Object) -> bool {
        let Some(kind) = manifest.declared_kinds().find(|k| k.matches(&o.api_version, &o.kind)) else { return true };
        let visible = manifest.visible(kind);
        visible == wasmloop_contract::cache::Visible::All
            || serde_json::from_str::<Value>(o.json()).is_ok_and(|value| visible.admits(&value))
    }

    /// One object per kind, namespace and name, the last given: a cache holds each object once,
    /// at its latest state, however often a test seeds it (owned and cached, say).
    fn last_of_each(cache: Vec<Object>) -> Vec<Object> {
        let mut seen = std::collections::HashSet::new();
        let mut kept: Vec<Object> = cache
            .into_iter()
            .rev()
            .filter(|o| seen.insert((o.api_version.clone(), o.kind.clone(), o.namespace.clone(), o.name.clone())))
            .collect();
        kept.reverse();
        kept
    }

    /// Runs `f` with `manifest` and `cache` installed as the host. Returns its result, the
    /// lines logged and, if it read an undeclared kind, the host's refusal.
    pub(crate) fn with_host<T>(
        manifest: Manifest,
        cache: Vec<Object>,
        f: impl FnOnce() -> T,
    ) -> (T, Vec<(Level, String)>, Option<String>) {
        let cache =
            last_of_each(cache).into_iter().filter(|o| held(&manifest, o)).map(|o| as_cached(&manifest, o)).collect();
        HOST.with(|h| *h.borrow_mut() = Some(NativeHost { manifest, cache, logs: Vec::new(), undeclared: None }));
        let out = f();
        let host = HOST.with(|h| h.borrow_mut().take());
        let (logs, undeclared) = host.map(|host| (host.logs, host.undeclared)).unwrap_or_default();
        (out, logs, undeclared)
    }
}

pub(crate) use imp::*;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod conformance {
    use serde_json::Value;
    use wasmloop_contract::cache::ListKey;
    use wasmloop_contract::conformance::{
        CacheUnderTest, KEEPS, KINDS, Kind, METADATA_ONLY, Page, Refused, WATCHED, run,
    };

    use super::imp;
    use crate::abi::CacheError;
    use crate::kind::Gvk;
    use crate::manifest::{KindSelector, Manifest};
    use crate::request::Object;

    /// The test host, installed around each question as `TestCase` installs it around a run.
    struct TestHost {
        manifest: Manifest,
        cache: Vec<Object>,
    }

    fn gvk(kind: Kind) -> Gvk {
        Gvk::from_api_version(kind.api_version, kind.kind)
    }

    fn key(o: &Object) -> ListKey {
        (o.namespace.clone().unwrap_or_default(), o.name.clone())
    }

    fn refused(e: CacheError) -> Refused {
        match e {
            CacheError::InvalidSelector(_) => Refused::InvalidSelector,
            CacheError::InvalidContinue(_) => Refused::InvalidContinue,
            other => Refused::Other(format!("{other:?}")),
        }
    }

    impl TestHost {
        fn ask<T>(&self, f: impl FnOnce() -> T) -> T {
            imp::with_host(self.manifest.clone(), self.cache.clone(), f).0
        }
    }

    impl CacheUnderTest for TestHost {
        fn get(&mut self, kind: Kind, namespace: Option<&str>, name: &str) -> Result<Option<Value>, Refused> {
            let found = self.ask(|| imp::get(&gvk(kind), namespace, name)).map_err(refused)?;
            Ok(found.map(|o| serde_json::from_str(o.json()).expect("the test host serves JSON")))
        }

        fn list_page(
            &mut self,
            kind: Kind,
            namespace: Option<&str>,
            selector: Option<&str>,
            limit: u32,
            token: Option<&str>,
        ) -> Result<Page, Refused> {
            let page = self.ask(|| imp::list_page(&gvk(kind), namespace, selector, limit, token)).map_err(refused)?;
            Ok(Page { keys: page.items.iter().map(key).collect(), token: page.continue_token })
        }
    }

    #[test]
    fn the_test_host_passes_the_cache_conformance_suite() {
        let mut manifest = Manifest::new("conformance", "0.0.0");
        manifest.primary.kind = gvk(KINDS[0]);
        manifest.reads = KINDS[1..].iter().map(|k| KindSelector::of_gvk(gvk(*k))).collect();
        manifest.metadata_only = METADATA_ONLY.iter().map(|k| gvk(*k)).collect();
        manifest.keeps = KEEPS.iter().map(|(k, kept)| (gvk(*k), *kept)).collect();
        manifest.watches = WATCHED
            .iter()
            .map(|(k, namespace, selector)| KindSelector {
                namespaces: namespace.iter().map(|ns| (*ns).to_owned()).collect(),
                label_selector: Some((*selector).into()),
                ..KindSelector::of_gvk(gvk(*k))
            })
            .collect();
        run(|seed| TestHost {
            manifest: manifest.clone(),
            cache: seed
                .iter()
                .flat_map(|(_, objects)| objects)
                .map(|v| Object::from_value(v).unwrap_or_else(|e| panic!("{}", e.message)))
                .collect(),
        });
    }
}
// Public through `testing::PAGE_SIZE`, which the crate-wide glob above cannot carry.
#[cfg(not(target_arch = "wasm32"))]
pub use imp::PAGE_SIZE;
