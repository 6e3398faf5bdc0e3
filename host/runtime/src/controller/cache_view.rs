//! The cache a plugin reads through its imports: the informers of every kind it declared,
//! seen through its scope and its grant.
//!
//! A page looks at no more than 10,000 cache entries (`PAGE_SCAN`) under an informer's lock,
//! and its continue token is the last key looked at, so an object that stays in the cache is
//! returned exactly once however the cache changes between pages. Pages of several informers
//! of one kind (scopes may overlap) are merged by a pure function (`merge_pages`). While the
//! plugin's access is revoked it is served nothing (`access-revoked`); a namespace it is not
//! served is `out-of-scope`, and a kind it holds no informer for is refused by name (a
//! shadow may declare more than the version it reads beside).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use wasmloop_contract::names::{Name, Namespace};
use wasmloop_sandbox::{CacheDenied, Gvk, HostServices, Index, ListKey, ListPage, Object, Selector};

use crate::informer::{Entry, IndexHold, IndexRefused, IndexSpec, Informer};

/// The cache a plugin reads through its imports: every informer of the kinds it declared.
pub(super) struct CacheView {
    pub(super) by_kind: HashMap<Gvk, Vec<Arc<Informer>>>,
    /// The manifest's indexes, by kind and name: the paths every informer of the kind keeps
    /// an index over.
    pub(super) indexes: HashMap<(Gvk, String), IndexSpec>,
    /// This plugin's holds on those indexes: they live as long as the plugin's cache does.
    pub(super) _holds: Vec<IndexHold>,
    /// Set while the plugin's grant is revoked: a call already running is served nothing more.
    pub(super) denied: tokio::sync::watch::Receiver<Option<String>>,
}

impl CacheView {
    fn serves(&self) -> bool {
        self.denied.borrow().is_none()
    }
}

impl CacheView {
    /// The object `entry` names as one of the plugin's informers holds it now, if any does.
    pub(super) fn held(&self, entry: &Entry) -> Option<Arc<Entry>> {
        let envelope = &entry.envelope;
        let kind = envelope.gvk().ok()?;
        self.by_kind.get(&kind)?.iter().find_map(|i| i.get(envelope.namespace.as_deref(), &envelope.name))
    }
}

impl HostServices for CacheView {
    fn get(&self, kind: &Gvk, namespace: Option<&Namespace>, name: &Name) -> Option<Object> {
        if !self.serves() {
            return None;
        }
        // Scopes may overlap: without a namespace, the smallest one holding `name` answers.
        let found = self.by_kind.get(kind)?.iter().filter_map(|i| i.get(namespace.map(Namespace::as_str), name));
        found.min_by(|a, b| a.envelope.namespace.cmp(&b.envelope.namespace)).map(|e| e.envelope.clone())
    }

    fn list(&self, kind: &Gvk, namespace: Option<&Namespace>, selector: &Selector) -> Vec<Object> {
        if !self.serves() {
            return Vec::new();
        }
        // Scopes may overlap: in (namespace, name) order, each object once.
        let mut merged: BTreeMap<ListKey, Object> = BTreeMap::new();
        for entry in self
            .by_kind
            .get(kind)
            .into_iter()
            .flatten()
            .flat_map(|i| i.list(namespace.map(Namespace::as_str), selector))
        {
            let key = (entry.envelope.namespace.clone().unwrap_or_default(), entry.envelope.name.clone());
            merged.entry(key).or_insert_with(|| entry.envelope.clone());
        }
        merged.into_values().collect()
    }

    fn list_page(
        &self,
        kind: &Gvk,
        namespace: Option<&Namespace>,
        selector: &Selector,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        if !self.serves() {
            return ListPage::default();
        }
        let pages = self.by_kind.get(kind).into_iter().flatten().map(|informer| {
            let (entries, resume) =
                informer.list_after(namespace.map(Namespace::as_str), selector, after, limit, PAGE_SCAN);
            (keyed(&entries), resume)
        });
        merge_pages(pages, limit)
    }

    fn list_by_index(
        &self,
        index: &Index,
        key: &str,
        namespace: Option<&Namespace>,
        after: Option<&ListKey>,
        limit: usize,
    ) -> ListPage {
        let Some(paths) = self.serves().then(|| self.indexes.get(&(index.kind.clone(), index.name.clone()))).flatten()
        else {
            return ListPage::default();
        };
        let namespace = namespace.map(Namespace::as_str);
        let pages = self.by_kind.get(&index.kind).into_iter().flatten().map(|informer| {
            // An informer that could not keep the index (past its limit) answers by reading.
            let (entries, resume) = informer
                .list_by_index(paths, key, namespace, after, limit)
                .unwrap_or_else(|| informer.list_filed_after(paths, key, namespace, after, limit, PAGE_SCAN));
            (keyed(&entries), resume)
        });
        merge_pages(pages, limit)
    }

    fn denied(&self, kind: &Gvk, namespace: Option<&Namespace>) -> Option<CacheDenied> {
        if let Some(why) = self.denied.borrow().as_ref() {
            return Some(CacheDenied::Revoked(format!(
                "its read access was revoked ({why}); the call's answer is dropped"
            )));
        }
        let Some(informers) = self.by_kind.get(kind) else {
            // Never for the plugin these caches were made for (it reads only what it
            // declared); a shadow that declares more is told, rather than answered "not found".
            return Some(CacheDenied::OutOfScope(format!(
                "{kind} is not cached for this plugin: a shadow reads only the kinds its serving version declares"
            )));
        };
        let wanted = namespace?.as_str();
        let served: Vec<&str> = informers
            .iter()
            .filter(|i| i.namespaced())
            .map(|i| i.scope().namespace.as_deref())
            .collect::<Option<Vec<&str>>>()?;
        if served.is_empty() || served.contains(&wanted) {
            return None;
        }
        Some(CacheDenied::OutOfScope(format!(
            "{kind} is served to it from namespace {} only, not {wanted}",
            served.join(", ")
        )))
    }
}

/// Entries as a page holds them: each under its place in the list.
fn keyed(entries: &[Arc<Entry>]) -> Vec<(ListKey, Object)> {
    let key = |e: &Entry| (e.envelope.namespace.clone().unwrap_or_default(), e.envelope.name.clone());
    entries.iter().map(|e| (key(e), e.envelope.clone())).collect()
}

/// One page from the pages of several informers of a kind (scopes may overlap): merged in
/// order and deduplicated, and valid only up to the earliest place an informer stopped, since
/// past that one of them has not looked yet.
fn merge_pages(pages: impl Iterator<Item = (Vec<(ListKey, Object)>, Option<ListKey>)>, limit: usize) -> ListPage {
    let mut merged: BTreeMap<ListKey, Object> = BTreeMap::new();
    let mut bound: Option<ListKey> = None;
    for (entries, resume) in pages {
        for (key, object) in entries {
            merged.entry(key).or_insert(object);
        }
        if let Some(resume) = resume {
            bound = Some(bound.map_or(resume.clone(), |b| b.min(resume)));
        }
    }
    if let Some(bound) = &bound {
        merged.retain(|k, _| k <= bound);
    }
    let full = merged.len() > limit;
    let items: Vec<(ListKey, Object)> = merged.into_iter().take(limit).collect();
    let resume = if full { items.last().map(|(k, _)| k.clone()) } else { bound };
    ListPage { items: items.into_iter().map(|(_, o)| o).collect(), resume }
}

/// The manifest's indexes, by kind and name, each kept by every informer of its kind while
/// the holds live. An informer at its limit keeps none more, and says so (the look-ups by that
/// index read its objects instead): one tenant's indexes never stop another's plugin.
pub(super) struct Indexed {
    pub(super) indexes: HashMap<(Gvk, String), IndexSpec>,
    pub(super) holds: Vec<IndexHold>,
    pub(super) refused: Vec<IndexRefused>,
}

/// Builds [`Indexed`] for `indexes` (the manifest's) over the informers of their kinds.
pub(super) fn indexed(indexes: &[Index], by_kind: &HashMap<Gvk, Vec<Arc<Informer>>>) -> Indexed {
    let mut made = Indexed { indexes: HashMap::new(), holds: Vec::new(), refused: Vec::new() };
    for index in indexes {
        // In one order, once each: plugins that declare the same paths share one index.
        let mut fields = index.fields.clone();
        fields.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        fields.dedup();
        let paths: IndexSpec = fields.into();
        for informer in by_kind.get(&index.kind).into_iter().flatten() {
            match informer.index(&paths) {
                Ok(hold) => made.holds.push(hold),
                Err(refused) => made.refused.push(refused),
            }
        }
        made.indexes.insert((index.kind.clone(), index.name.clone()), paths);
    }
    made
}

/// Cache entries one page may look at: a selector that matches little costs a call a bounded
/// time under the informer's lock, and the page resumes where it stopped.
const PAGE_SCAN: usize = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// A CacheView over `seed`: per kind, one informer of every namespace, and, when
    /// `overlapping`, one more per namespace holding that namespace's objects, registered
    /// before it in reverse order, as a plugin whose primary, watches and reads of one kind
    /// are scoped differently has them.
    fn view(seed: &wasmloop_sandbox::conformance::Seed, overlapping: bool) -> CacheView {
        use crate::informer::InformerScope;
        // The suite's plugin keeps what `KEEPS` says; its informers hold that.
        let kept = |kind: wasmloop_contract::conformance::Kind| {
            wasmloop_contract::conformance::KEEPS
                .iter()
                .find(|(k, _)| *k == kind)
                .map(|(_, kept)| *kept)
                .unwrap_or_default()
        };
        let manifest = wasmloop_sandbox::conformance::manifest();
        let mut by_kind: HashMap<Gvk, Vec<Arc<Informer>>> = HashMap::new();
        for (kind, objects) in seed {
            let gvk = Gvk::from_api_version(kind.api_version, kind.kind).unwrap();
            let informers = by_kind.entry(gvk.clone()).or_default();
            // A watched kind gets the informers `Controller::prepare` acquires for its watches
            // (through their selectors, when the rule says so), each holding what the API
            // server sends such a watch.
            let scopes = super::super::scopes::scopes(&manifest, None).expect("the suite's manifest is served");
            let watches: Vec<_> = scopes.watched.iter().filter(|(w, _)| w.kind == gvk).collect();
            if !watches.is_empty() {
                for (scope, _) in watches {
                    let informer = Informer::detached(scope.clone(), kind.namespaced);
                    informer.relist_json(objects);
                    informers.push(informer);
                }
                continue;
            }
            fn namespace_of(o: &serde_json::Value) -> Option<&str> {
                o.pointer("/metadata/namespace").and_then(|n| n.as_str())
            }
            if overlapping && kind.namespaced {
                let mut namespaces: Vec<&str> = objects.iter().filter_map(namespace_of).collect();
                namespaces.sort_unstable();
                namespaces.dedup();
                for ns in namespaces.into_iter().rev() {
                    let scope = InformerScope {
                        kept: kept(*kind),
                        ..InformerScope::new(gvk.clone(), Some(Namespace::parse(ns).unwrap()))
                    };
                    let informer = Informer::detached(scope, true);
                    let mine: Vec<serde_json::Value> =
                        objects.iter().filter(|o| namespace_of(o) == Some(ns)).cloned().collect();
                    informer.relist_json(&mine);
                    informers.push(informer);
                }
            }
            let scope = InformerScope { kept: kept(*kind), ..InformerScope::new(gvk, None) };
            let informer = Informer::detached(scope, kind.namespaced);
            informer.relist_json(objects);
            informers.push(informer);
        }
        // The Receiver still reads the last value after its Sender is dropped.
        let (_, denied) = tokio::sync::watch::channel(None);
        CacheView { by_kind, indexes: HashMap::new(), _holds: Vec::new(), denied }
    }

    #[test]
    fn the_informer_view_passes_the_cache_conformance_suite() {
        use wasmloop_sandbox::conformance::{Imports, run};
        run(|seed| Imports::new(Arc::new(view(seed, false))));
    }

    #[test]
    fn the_informer_view_of_overlapping_scopes_passes_the_cache_conformance_suite() {
        use wasmloop_sandbox::conformance::{Imports, run};
        run(|seed| Imports::new(Arc::new(view(seed, true))));
    }

    #[test]
    fn pages_of_overlapping_informers_merge_in_order_once_each_up_to_where_one_stopped() {
        let obj = |n: &str| Object {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: n.into(),
            namespace: Some("a".into()),
            uid: String::new(),
            json: "{}".into(),
        };
        let key = |n: &str| ("a".to_owned(), n.to_owned());
        let page = |names: &[&str], resume: Option<&str>| {
            (names.iter().map(|n| (key(n), obj(n))).collect::<Vec<_>>(), resume.map(key))
        };
        let names = |p: &ListPage| p.items.iter().map(|o| o.name.clone()).collect::<Vec<_>>().join(",");
        #[rustfmt::skip]
        let cases: Vec<(Vec<(Vec<(ListKey, Object)>, Option<ListKey>)>, usize, &str, Option<&str>)> = vec![
            // Both informers done: everything, once, in order.
            (vec![page(&["b", "d"], None), page(&["a", "b", "c"], None)], 10, "a,b,c,d", None),
            // Over the limit: cut, resume after the last kept.
            (vec![page(&["b", "d"], None), page(&["a", "c"], None)], 3, "a,b,c", Some("c")),
            // One informer stopped at "b": nothing past it, resume there.
            (vec![page(&["a", "b"], Some("b")), page(&["a", "c", "d"], None)], 10, "a,b", Some("b")),
            // Stopped before finding any: an empty page that still says where to go on.
            (vec![page(&[], Some("m"))], 10, "", Some("m")),
        ];
        for (pages, limit, expected, resume) in cases {
            let got = merge_pages(pages.into_iter(), limit);
            assert_eq!((names(&got).as_str(), got.resume.clone()), (expected, resume.map(key)), "{expected}");
        }
    }
}
