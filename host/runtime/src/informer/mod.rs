//! Shared informers: one watch and one cache per kind and namespace scope, shared by every
//! plugin that reads that kind.
//!
//! A kind a plugin declares only under `watches`, with label selectors, is watched through
//! them ([`InformerScope::selector`]): the API server sends only the selected objects, so the
//! cache holds nothing else (the rule is `wasmloop_contract::cache::Visible`). Every other
//! declared kind is watched whole and shared: two plugins that read Pods open one watch,
//! whatever Pods their own look-ups select. An informer lives while anyone holds it
//! ([`Informers::acquire`] hands out `Arc`s); the last drop stops its watch.
//!
//! What reconcile logic does not read is dropped before anything is kept: `managedFields` and
//! the `kubectl.kubernetes.io/last-applied-configuration` annotation (controller-runtime's
//! `TransformStripManagedFields` convention), unless the scope keeps them for a plugin that
//! asked ([`InformerScope::kept`]); such a plugin gets an informer of its own.
//!
//! Each cached object is kept once, as the contract's envelope (routing fields plus JSON
//! text) serialized once when the object changes, so handing it to a plugin costs a copy, not
//! a serialization; beside it only the few metadata fields the host itself reads (labels,
//! owners, finalizers, deletion, resourceVersion). The decoded object is dropped: a
//! `DynamicObject` is a `serde_json::Value` tree several times the size of its text. An
//! index on owner UID finds a primary's children without scanning.
//!
//! A kind a plugin declares metadata-only is watched as `PartialObjectMetadata`
//! ([`InformerScope::metadata`]): the API server sends no spec or status, so none is decoded,
//! kept or stripped per call; a plugin reading the same kind whole has a full watch beside it.
//! Selectors that go to the API server are held to its rules first
//! (`wasmloop_contract::selector::for_server`), so a manifest cannot put anything else into a
//! watch URL. Metrics label each watch with its view and what narrows it.
//!
//! The initial list streams (`sendInitialEvents`) on a server of 1.34 or newer, where
//! `WatchList` is on by default, and is paged (500 a page) otherwise ([`initial_list`], asked
//! of the server once; a newer server that refuses the stream makes that informer page from
//! then on). `wasmloop run --initial-list paged` pages everywhere, for a proxy that mishandles
//! streaming lists; `host/tests/run_plugins.rs` proves both from the test server's audit log.
//! During a relist the new list is buffered until it ends, so for that moment two copies
//! exist.
//!
//! # Guarantees
//! - Watch errors back off (kube-runtime's default backoff) and resume; a `410 Gone` relists.
//! - After a relist, objects that disappeared meanwhile are reported as deleted, once.
//! - Subscribers that fall behind (4,096 changes, `CHANGES`) get `Lagged` from the broadcast
//!   channel and must resync from the cache: a controller then requeues every primary.

mod cache;
mod entry;
mod field_index;
mod indexes;
mod scope;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{broadcast, watch};
#[cfg(test)]
use wasmloop_contract::names::LabelSelector;
use wasmloop_sandbox::Selector;

use crate::api::dynamic_api;
use crate::discovery::{DiscoveryError, Kinds};
use crate::metrics::Metrics;

pub use entry::Entry;
pub use field_index::IndexSpec;
pub use indexes::{IndexHold, IndexRefused, MAX_INDEXES_PER_INFORMER};

pub use scope::{Filter, InformerScope};

/// Capacity of each informer's change channel.
const CHANGES: usize = 4096;

/// A change seen by an informer.
#[derive(Debug, Clone)]
pub enum Change {
    /// Created or updated.
    Applied(Arc<Entry>),
    /// Deleted; the entry is its last known state.
    Deleted(Arc<Entry>),
    /// Still there, but no longer kept: the informer's [`Filter`] stopped selecting it. The
    /// entry is its new state.
    Left(Arc<Entry>),
}

/// What a relist has seen so far: the objects the cache keeps, and those it no longer does.
#[derive(Default)]
struct Relist {
    listed: HashMap<Key, Arc<Entry>>,
    left: HashMap<Key, Arc<Entry>>,
}

use cache::{Cache, Key};

/// How a watch fills its cache at first, and after each relist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialList {
    /// A paged list (kube-runtime's 500 per page), then a watch: what every server serves.
    Paged,
    /// A streaming list (`sendInitialEvents`): the objects arrive one by one on the watch, so
    /// no page of them is ever held at once. Only where the server serves it.
    Streaming,
}

/// The initial list a server of this version serves: streaming from 1.34, where the
/// `WatchList` feature is on by default (it was beta and on in 1.32, off again in 1.33;
/// managed clusters write the minor as `34+`), paged before. A server too old for it would
/// ignore `sendInitialEvents` and never end the initial list, so anything unreadable is
/// paged; a newer server with the feature turned off refuses the watch, and that informer
/// falls back to paged lists (see `Informer::start`).
pub fn initial_list(major: &str, minor: &str) -> InitialList {
    let minor = minor.trim_end_matches('+');
    match (major.parse::<u32>(), minor.parse::<u32>()) {
        (Ok(major), Ok(minor)) if (major, minor) >= (1, 34) => InitialList::Streaming,
        _ => InitialList::Paged,
    }
}

/// The registry of running informers.
pub struct Informers {
    client: Client,
    kinds: Arc<Kinds>,
    live: Mutex<HashMap<InformerScope, Weak<Informer>>>,
    metrics: Arc<Metrics>,
    /// Asked of the server once, at the first watch.
    initial_list: tokio::sync::OnceCell<InitialList>,
}

impl Informers {
    /// A registry that starts watches with `client`, resolving kinds through `kinds`.
    pub fn new(client: Client, kinds: Arc<Kinds>, metrics: Arc<Metrics>) -> Informers {
        Informers { client, kinds, live: Mutex::new(HashMap::new()), metrics, initial_list: Default::default() }
    }

    /// These informers listing as `list` says whatever the server's version: `Paged` for a
    /// server, or a proxy in front of it, that mishandles streaming lists.
    #[must_use]
    pub fn with_initial_list(self, list: InitialList) -> Informers {
        Informers { initial_list: tokio::sync::OnceCell::new_with(Some(list)), ..self }
    }

    /// How watches list, by the server's version (paged when it cannot be read).
    async fn initial_list(&self) -> InitialList {
        *self
            .initial_list
            .get_or_init(|| async {
                let chosen = match self.client.apiserver_version().await {
                    Ok(info) => initial_list(&info.major, &info.minor),
                    Err(_) => InitialList::Paged,
                };
                tracing::info!(?chosen, "initial lists of the informers");
                chosen
            })
            .await
    }

    /// The informer for `scope`, started if nobody holds it yet.
    ///
    /// # Errors
    /// When discovery does not know the kind.
    pub async fn acquire(&self, scope: &InformerScope) -> Result<Arc<Informer>, DiscoveryError> {
        if let Some(existing) = self.live.lock().expect("lock").get(scope).and_then(Weak::upgrade) {
            return Ok(existing);
        }
        let resolved = self.kinds.resolve(&scope.kind).await?;
        let (resource, namespaced) = (resolved.resource, resolved.namespaced);
        if !namespaced && scope.namespace.is_some() {
            // A cluster-scoped kind has one watch, whatever namespaces its declarations name.
            let whole = InformerScope { namespace: None, ..scope.clone() };
            return Box::pin(self.acquire(&whole)).await;
        }
        let list = self.initial_list().await;
        let mut live = self.live.lock().expect("lock");
        // Another caller may have started it while we ran discovery.
        if let Some(existing) = live.get(scope).and_then(Weak::upgrade) {
            return Ok(existing);
        }
        let informer =
            Informer::start(self.client.clone(), scope.clone(), (resource, namespaced), list, self.metrics.clone());
        live.insert(scope.clone(), Arc::downgrade(&informer));
        Ok(informer)
    }
}

/// A running watch and its cache.
pub struct Informer {
    scope: InformerScope,
    namespaced: bool,
    cache: RwLock<Cache>,
    changes: broadcast::Sender<Change>,
    synced: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
    metrics: Arc<Metrics>,
}

fn key_of(object: &DynamicObject) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

/// A metadata watch's object as the informer keeps any object: type and metadata, no data.
fn whole(partial: PartialObjectMeta<DynamicObject>) -> DynamicObject {
    DynamicObject { types: partial.types, metadata: partial.metadata, data: serde_json::json!({}) }
}

/// True when the server refused a watch's request as invalid (400, 422): what a server with
/// `WatchList` turned off answers `sendInitialEvents`.
fn refused(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => matches!(status.code, 400 | 422),
        watcher::Error::WatchError(status) => matches!(status.code, 400 | 422),
        _ => false,
    }
}

fn whole_event(event: watcher::Event<PartialObjectMeta<DynamicObject>>) -> watcher::Event<DynamicObject> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(whole(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(whole(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(whole(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

impl Informer {
    /// An empty informer with no watch yet.
    fn unstarted(scope: InformerScope, namespaced: bool, metrics: Arc<Metrics>) -> Informer {
        let (changes, _) = broadcast::channel(CHANGES);
        let (synced, _) = watch::channel(false);
        Informer { scope, namespaced, cache: RwLock::default(), changes, synced, task: Mutex::new(None), metrics }
    }

    fn start(
        client: Client,
        scope: InformerScope,
        (resource, namespaced): (ApiResource, bool),
        list: InitialList,
        metrics: Arc<Metrics>,
    ) -> Arc<Informer> {
        let namespace = scope.namespace.clone().filter(|_| namespaced);
        let (metadata, selector, fields) = (scope.metadata, scope.selector.clone(), scope.fields.clone());
        let watched = resource.clone();
        // A metadata-only scope asks for `PartialObjectMetadata` (kube sends the Accept header
        // for it); the events become objects with no data, as the cache keeps any object.
        let watch = move |list: InitialList| {
            let mut config = match list {
                InitialList::Paged => watcher::Config::default(),
                InitialList::Streaming => watcher::Config::default().streaming_lists(),
            };
            if let Some(selector) = &selector {
                config = config.labels(selector.as_str());
            }
            if let Some(fields) = &fields {
                config = config.fields(fields.as_str());
            }
            match metadata {
                true => {
                    let api: Api<PartialObjectMeta<DynamicObject>> =
                        dynamic_api(client.clone(), namespace.as_ref(), &watched);
                    watcher(api, config).map_ok(whole_event).default_backoff().boxed()
                }
                false => {
                    let api: Api<DynamicObject> = dynamic_api(client.clone(), namespace.as_ref(), &watched);
                    watcher(api, config).default_backoff().boxed()
                }
            }
        };
        let informer = Arc::new(Informer::unstarted(scope, namespaced, metrics.clone()));
        metrics.watch_started(&informer.scope.labels());
        let weak = Arc::downgrade(&informer);
        let task = tokio::spawn(async move {
            let (mut list, mut events) = (list, watch(list));
            let mut relist: Option<Relist> = None;
            while let Some(event) = events.next().await {
                let Some(informer) = weak.upgrade() else { return };
                match event {
                    Ok(event) => informer.apply(event, &resource, &mut relist),
                    // A server that turned `WatchList` off refuses `sendInitialEvents`: list
                    // in pages instead, for good.
                    Err(error) if list == InitialList::Streaming && refused(&error) => {
                        tracing::warn!(kind = %informer.scope.kind, %error, "the server refuses streaming lists; listing in pages");
                        (list, events) = (InitialList::Paged, watch(InitialList::Paged));
                    }
                    Err(error) => {
                        tracing::warn!(kind = %informer.scope.kind, %error, "watch failed; retrying with backoff")
                    }
                }
            }
        });
        *informer.task.lock().expect("lock") = Some(task.abort_handle());
        informer
    }

    /// The entry for `object`, and whether the cache keeps it (what the scope's filter says).
    fn entry(&self, object: DynamicObject, resource: &ApiResource) -> Option<(Arc<Entry>, bool)> {
        let (selected, keep) = match &self.scope.filter {
            None => (true, true),
            Some(filter) => {
                let m = &object.metadata;
                let selected = filter.selects(m.labels.as_ref(), m.annotations.as_ref());
                (selected, filter.keeps(selected, m.finalizers.as_deref()))
            }
        };
        let mut entry = Entry::new(object, resource, self.scope.kept)?;
        entry.selected = selected;
        Some((Arc::new(entry), keep))
    }

    fn apply(&self, event: watcher::Event<DynamicObject>, resource: &ApiResource, relist: &mut Option<Relist>) {
        match event {
            watcher::Event::Init => {
                self.metrics.relisted(&self.scope.labels());
                *relist = Some(Relist::default());
            }
            watcher::Event::InitApply(object) => {
                let key = key_of(&object);
                if let (Some(buffer), Some((entry, keep))) = (relist.as_mut(), self.entry(object, resource)) {
                    if keep {
                        buffer.listed.insert(key, entry)
                    } else {
                        buffer.left.insert(key, entry)
                    };
                }
            }
            watcher::Event::InitDone => self.relisted(relist.take().unwrap_or_default()),
            watcher::Event::Apply(object) => {
                let key = key_of(&object);
                let Some((entry, keep)) = self.entry(object, resource) else { return };
                let mut cache = self.cache.write().expect("lock");
                if keep {
                    cache.insert(key, entry.clone());
                    drop(cache);
                    let _ = self.changes.send(Change::Applied(entry));
                } else if cache.remove(&key).is_some() {
                    drop(cache);
                    let _ = self.changes.send(Change::Left(entry));
                }
            }
            watcher::Event::Delete(object) => {
                let key = key_of(&object);
                let last = self.entry(object, resource);
                let removed = self.cache.write().expect("lock").remove(&key);
                // Only what the cache held, or would have: a filtered-out object's deletion
                // is no change of the cache.
                let last = match (last, removed) {
                    (Some((last, keep)), removed) if keep || removed.is_some() => Some(last),
                    (_, removed) => removed,
                };
                if let Some(last) = last {
                    let _ = self.changes.send(Change::Deleted(last));
                }
            }
        }
    }

    /// The cache after a relist: objects gone meanwhile reported as deleted, those the filter
    /// no longer selects as left, changed ones as applied, each once.
    fn relisted(&self, relist: Relist) {
        let Relist { listed, mut left } = relist;
        let mut cache = self.cache.write().expect("lock");
        let gone: Vec<Key> = cache.objects.keys().filter(|k| !listed.contains_key(*k)).cloned().collect();
        for key in gone {
            if let Some(old) = cache.remove(&key) {
                let change = match left.remove(&key) {
                    Some(now) => Change::Left(now),
                    None => Change::Deleted(old),
                };
                let _ = self.changes.send(change);
            }
        }
        for (key, entry) in listed {
            let changed = cache.objects.get(&key).is_none_or(|old| old.resource_version() != entry.resource_version());
            if changed {
                cache.insert(key, entry.clone());
                let _ = self.changes.send(Change::Applied(entry));
            }
        }
        drop(cache);
        self.synced.send_replace(true);
    }

    /// The scope this informer watches.
    pub fn scope(&self) -> &InformerScope {
        &self.scope
    }

    /// True for namespaced kinds.
    pub fn namespaced(&self) -> bool {
        self.namespaced
    }

    /// Waits until the first full list has been cached.
    pub async fn synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|synced| *synced).await;
    }

    /// Changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// One object; `namespace` is ignored for cluster-scoped kinds. A look-up, not a request:
    /// keys are compared, never sent. Without a namespace, a namespaced
    /// kind's object of that name in the first namespace that has one, from the name index.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<Entry>> {
        let cache = self.cache.read().expect("lock");
        let namespace = match (self.namespaced, namespace) {
            (true, Some(ns)) => ns.to_owned(),
            (true, None) => cache.by_name.get(name)?.first()?.clone(),
            (false, _) => String::new(),
        };
        cache.objects.get(&(namespace, name.to_owned())).cloned()
    }

    /// Objects in `namespace` (all when none) matching `selector`.
    pub fn list(&self, namespace: Option<&str>, selector: &Selector) -> Vec<Arc<Entry>> {
        let cache = self.cache.read().expect("lock");
        let in_scope: Box<dyn Iterator<Item = (&Key, &Arc<Entry>)>> = match namespace {
            Some(ns) if self.namespaced => {
                Box::new(cache.objects.range((ns.to_owned(), String::new())..).take_while(move |((n, _), _)| n == ns))
            }
            _ => Box::new(cache.objects.iter()),
        };
        in_scope.filter(|(_, e)| e.selected_by(selector)).map(|(_, e)| e.clone()).collect()
    }

    /// At most `limit` objects of [`Informer::list`] that come after `after`, in (namespace,
    /// name) order, from a range of the ordered cache; and the key to resume after when more
    /// may follow. It looks at no more than `scan` entries, so a selector that matches little
    /// costs one call a bounded time under the lock; it then resumes after the last one seen.
    pub fn list_after(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
        after: Option<&Key>,
        limit: usize,
        scan: usize,
    ) -> (Vec<Arc<Entry>>, Option<Key>) {
        self.page_after(namespace, after, limit, scan, |entry| entry.selected_by(selector))
    }

    fn page_after(
        &self,
        namespace: Option<&str>,
        after: Option<&Key>,
        limit: usize,
        scan: usize,
        matches: impl Fn(&Entry) -> bool,
    ) -> (Vec<Arc<Entry>>, Option<Key>) {
        use std::ops::Bound;
        let cache = self.cache.read().expect("lock");
        let namespace = namespace.filter(|_| self.namespaced);
        // A token before the namespace asked for starts at the namespace, not nowhere.
        let first = namespace.map(|ns| (ns.to_owned(), String::new()));
        let start = match (after, first) {
            (Some(after), Some(first)) if *after < first => Bound::Included(first),
            (Some(after), _) => Bound::Excluded(after.clone()),
            (None, Some(first)) => Bound::Included(first),
            (None, None) => Bound::Unbounded,
        };
        let in_scope = cache
            .objects
            .range((start, Bound::Unbounded))
            .take_while(|((ns, _), _)| namespace.is_none_or(|wanted| ns == wanted));
        let mut items: Vec<Arc<Entry>> = Vec::new();
        let (mut seen, mut last_item): (Option<&Key>, Option<&Key>) = (None, None);
        for (scanned, (key, entry)) in in_scope.enumerate() {
            if scanned == scan {
                return (items, seen.cloned());
            }
            if matches(entry) {
                if items.len() == limit {
                    // One more matches: the page is full, and another follows.
                    return (items, last_item.cloned());
                }
                items.push(entry.clone());
                last_item = Some(key);
            }
            seen = Some(key);
        }
        (items, None)
    }

    /// Objects whose owner references include `uid`, from the index.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<Entry>> {
        let cache = self.cache.read().expect("lock");
        cache.by_owner.get(uid).into_iter().flatten().filter_map(|k| cache.objects.get(k).cloned()).collect()
    }
}

/// Waits until every one of `informers` has cached its first full list, all of them at once
/// under one deadline: a plugin of several kinds is ready when its slowest cache is, and gives
/// up `within` after it started waiting, however many kinds it has.
///
/// # Errors
/// The first informer not synced when the deadline passed.
pub async fn all_synced(informers: &[Arc<Informer>], within: std::time::Duration) -> Result<(), Arc<Informer>> {
    let all = futures::future::join_all(informers.iter().map(|i| i.synced()));
    if tokio::time::timeout(within, all).await.is_ok() {
        return Ok(());
    }
    let late = informers.iter().find(|i| !*i.synced.borrow()).or(informers.first());
    Err(late.expect("an informer timed out").clone())
}

impl Drop for Informer {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().expect("lock").take() {
            task.abort();
        }
        self.metrics.watch_stopped(&self.scope.labels());
    }
}

#[cfg(test)]
impl Informer {
    /// An informer with no watch, fed by tests as a watch would feed it.
    pub(crate) fn detached(scope: InformerScope, namespaced: bool) -> Arc<Informer> {
        Arc::new(Informer::unstarted(scope, namespaced, Arc::default()))
    }

    /// Delivers `objects` as one relist: those in the scope's namespace that its selector
    /// selects, as the API server serves such a watch.
    pub(crate) fn relist_json(&self, objects: &[serde_json::Value]) {
        let selector: Selector = self.scope.selector.as_ref().map(LabelSelector::selector).unwrap_or_default();
        let namespace = self.scope.namespace.as_deref().filter(|_| self.namespaced);
        let objects: Vec<&serde_json::Value> = objects
            .iter()
            .filter(|o| selector.matches_object(o))
            .filter(|o| self.scope.fields.as_ref().is_none_or(|f| f.matches_object(o)))
            .filter(|o| {
                namespace.is_none_or(|ns| o.pointer("/metadata/namespace").and_then(|n| n.as_str()) == Some(ns))
            })
            .collect();
        let kind = &self.scope.kind;
        let resource =
            ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(kind.group(), kind.version(), kind.kind()));
        let mut buffer = None;
        self.apply(watcher::Event::Init, &resource, &mut buffer);
        for value in objects {
            let object: DynamicObject = serde_json::from_value((*value).clone()).expect("a seeded object");
            self.apply(watcher::Event::InitApply(object), &resource, &mut buffer);
        }
        self.apply(watcher::Event::InitDone, &resource, &mut buffer);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use tokio::sync::broadcast::error::TryRecvError;
    use wasmloop_sandbox::Gvk;

    use super::*;

    /// A ConfigMap informer with no watch: the tests feed it the events a watch would.
    pub(super) fn detached() -> (Arc<Informer>, ApiResource) {
        let scope = InformerScope::new(Gvk::from_api_version("v1", "ConfigMap").unwrap(), None);
        (Informer::detached(scope, true), ApiResource::erase::<ConfigMap>(&()))
    }

    fn configmap(resource: &ApiResource, name: &str, version: &str) -> DynamicObject {
        let mut object = DynamicObject::new(name, resource).within("t");
        object.metadata.resource_version = Some(version.into());
        object
    }

    /// What subscribers were told, as `applied a`/`deleted b`, sorted: a relist reports in
    /// no particular order.
    fn told(changes: &mut broadcast::Receiver<Change>) -> Vec<String> {
        let mut told: Vec<String> = std::iter::from_fn(|| changes.try_recv().ok())
            .map(|c| match c {
                Change::Applied(e) => format!("applied {}", e.envelope.name),
                Change::Deleted(e) => format!("deleted {}", e.envelope.name),
                Change::Left(e) => format!("left {}", e.envelope.name),
            })
            .collect();
        told.sort();
        told
    }

    pub(super) fn relist(informer: &Informer, resource: &ApiResource, objects: &[(&str, &str)]) {
        let mut buffer = None;
        informer.apply(watcher::Event::Init, resource, &mut buffer);
        for (name, version) in objects {
            informer.apply(watcher::Event::InitApply(configmap(resource, name, version)), resource, &mut buffer);
        }
        informer.apply(watcher::Event::InitDone, resource, &mut buffer);
    }

    #[test]
    fn lists_stream_only_where_the_server_serves_it() {
        let cases = [
            ("1", "20", InitialList::Paged),
            ("1", "32", InitialList::Paged),
            ("1", "33", InitialList::Paged),
            ("1", "34", InitialList::Streaming),
            ("1", "35+", InitialList::Streaming),
            ("2", "0", InitialList::Streaming),
            ("1", "", InitialList::Paged),
            ("x", "40", InitialList::Paged),
        ];
        for (major, minor, want) in cases {
            assert_eq!(initial_list(major, minor), want, "{major}.{minor}");
        }
    }

    #[test]
    fn a_relist_reports_objects_gone_meanwhile_as_deleted_once_and_unchanged_ones_not_at_all() {
        let (informer, resource) = detached();
        let mut changes = informer.subscribe();
        relist(&informer, &resource, &[("a", "1"), ("b", "1")]);
        assert_eq!(told(&mut changes), ["applied a", "applied b"]);
        assert!(*informer.synced.borrow(), "the first list syncs the cache");
        // The watch broke, and b was deleted while nobody watched; a changed.
        relist(&informer, &resource, &[("a", "2")]);
        assert_eq!(told(&mut changes), ["applied a", "deleted b"]);
        assert!(informer.get(Some("t"), "b").is_none());
        relist(&informer, &resource, &[("a", "2")]);
        assert_eq!(told(&mut changes), Vec::<String>::new(), "an unchanged relist reports nothing");
    }

    #[test]
    fn a_look_up_by_name_alone_finds_the_first_namespace_from_the_index_and_forgets_deleted_objects() {
        let (informer, resource) = detached();
        let mut buffer = None;
        let named = |ns: &str, name: &str| {
            let mut object = DynamicObject::new(name, &resource).within(ns);
            object.metadata.resource_version = Some("1".into());
            object
        };
        for (ns, name) in [("b", "web"), ("a", "web"), ("a", "db")] {
            informer.apply(watcher::Event::Apply(named(ns, name)), &resource, &mut buffer);
        }
        let found = informer.get(None, "web").expect("web is cached");
        assert_eq!(found.envelope.namespace.as_deref(), Some("a"));
        informer.apply(watcher::Event::Delete(named("a", "web")), &resource, &mut buffer);
        assert_eq!(informer.get(None, "web").and_then(|e| e.envelope.namespace.clone()).as_deref(), Some("b"));
        informer.apply(watcher::Event::Delete(named("b", "web")), &resource, &mut buffer);
        assert!(informer.get(None, "web").is_none());
        assert!(informer.cache.read().unwrap().by_name.get("web").is_none(), "the index holds no empty entry");
    }

    #[test]
    fn a_subscriber_that_falls_behind_is_told_it_lagged_and_the_cache_still_holds_everything() {
        let (informer, resource) = detached();
        let mut changes = informer.subscribe();
        let mut buffer = None;
        for i in 0..=CHANGES {
            let object = configmap(&resource, &format!("cm-{i}"), "1");
            informer.apply(watcher::Event::Apply(object), &resource, &mut buffer);
        }
        assert!(matches!(changes.try_recv(), Err(TryRecvError::Lagged(_))), "a lag must be reported, not hidden");
        // What the lagging subscriber resyncs from: every object, none lost.
        assert_eq!(informer.list(Some("t"), &Selector::default()).len(), CHANGES + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn caches_that_sync_in_a_second_each_are_ready_together_in_a_second() {
        let informers: Vec<(Arc<Informer>, ApiResource)> = (0..3).map(|_| detached()).collect();
        for (informer, resource) in &informers {
            let (informer, resource) = (informer.clone(), resource.clone());
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                relist(&informer, &resource, &[("a", "1")]);
            });
        }
        let started = tokio::time::Instant::now();
        let all: Vec<Arc<Informer>> = informers.iter().map(|(i, _)| i.clone()).collect();
        assert!(all_synced(&all, std::time::Duration::from_secs(120)).await.is_ok());
        assert_eq!(started.elapsed(), std::time::Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn one_deadline_holds_for_every_cache_and_names_the_one_that_did_not_sync() {
        // Each would sync within 120 s of the one before: one deadline for all still ends at 120 s.
        let (first, second) = (detached(), detached());
        for ((informer, resource), at) in [(&first, 100), (&second, 200)] {
            let (informer, resource) = (informer.clone(), resource.clone());
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(at)).await;
                relist(&informer, &resource, &[("a", "1")]);
            });
        }
        let started = tokio::time::Instant::now();
        let late =
            all_synced(&[first.0.clone(), second.0.clone()], std::time::Duration::from_secs(120)).await.unwrap_err();
        assert!(Arc::ptr_eq(&late, &second.0), "the one not synced is named");
        assert_eq!(started.elapsed(), std::time::Duration::from_secs(120), "one deadline, not one per cache");
    }
}
