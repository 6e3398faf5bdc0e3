//! Informer changes become work: a changed primary is its own key, a changed child requeues
//! its owner, and a changed watched object waits in the queue for the plugin's `map`, which a
//! worker calls. Each key queued carries why ([`super::reasons`]). Nothing here calls the
//! plugin or writes.
//!
//! - A primary its selector selects (or one being deleted that still carries the plugin's
//!   finalizer) is its own key; under `generation-changed`, only a new generation, a
//!   finalizer change or a deletion passes. A deleted one leaves a tombstone in `Memory` and a
//!   reconcile in phase `deleted` when the manifest sets `deliver-deleted` and this host leads
//!   (a standby's deletions were the leader's to deliver). One that only left its selection
//!   is forgotten, never reported deleted.
//! - A child requeues its controller owner when that is of the primary kind (`plan::owners_of`:
//!   group and kind compared, not version).
//! - A watched object its watch selects has its latest state kept in `Memory` and a
//!   `Work::Map` queued, on the leader only; one that left the selection is mapped too.
//! - A subscriber that lags requeues every primary. A deletion lost in the lag is not delivered
//!   as `deleted`, and a watched change lost in it is not passed to `map`.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};
use wasmloop_sandbox::{GenerationChange, Selector, Trigger, WitObjectRef};

use super::plan;
use super::shared::Shared;
use super::work::{Key, Related, Work, key_of};
use crate::informer::{Change, Entry, Informer};

/// The contract's reference to a cached object.
pub(super) fn reference(entry: &Entry) -> WitObjectRef {
    let o = &entry.envelope;
    WitObjectRef {
        api_version: o.api_version.clone(),
        kind: o.kind.clone(),
        name: o.name.clone(),
        namespace: o.namespace.clone(),
        uid: (!o.uid.is_empty()).then(|| o.uid.clone()),
    }
}

/// Every primary is requeued when a subscriber lagged: a resync from the cache.
fn resync(shared: &Shared) {
    shared.enqueue_all(|_| Trigger::Resync);
}

/// The next changed object of a related kind, and whether it went (deleted, or out of the
/// informer's selection); a lagging subscriber requeues every primary instead. None when the
/// informer is gone.
async fn next_related(shared: &Shared, changes: &mut broadcast::Receiver<Change>) -> Option<(Arc<Entry>, bool)> {
    loop {
        match changes.recv().await {
            Ok(Change::Applied(e)) => return Some((e, false)),
            Ok(Change::Deleted(e) | Change::Left(e)) => return Some((e, true)),
            Err(RecvError::Lagged(_)) => resync(shared),
            Err(RecvError::Closed) => return None,
        }
    }
}

/// The generations of the primaries one informer serves, as the plugin last had them
/// reported, and whether each held the plugin's finalizer: kube-runtime's `predicate_filter`
/// keeps the same, so that `generation-changed` can tell a spec change from a status-only one.
/// Putting the finalizer on does not change the generation, and the pass after it must run.
#[derive(Default)]
pub(super) struct Generations(HashMap<Key, (Option<i64>, bool)>);

impl Generations {
    /// What the plugin is queued for at start: the selected primaries `informer` holds now.
    pub(super) fn seeded(shared: &Shared, informer: &Informer) -> Generations {
        let finalizer = shared.manifest.finalizer.as_deref();
        let selected = informer.list(None, &shared.selector).into_iter().filter(|e| e.selected());
        Generations(selected.map(|e| (key_of(&e.envelope), (e.generation(), holds(&e, finalizer)))).collect())
    }

    /// The change this entry makes, or none when the plugin asked only for generation changes
    /// and this is none: an object it has seen, at the generation it saw, its finalizer as it
    /// was, not being deleted.
    fn change(&mut self, key: Key, entry: &Entry, finalizer: Option<&str>, only: bool) -> Option<GenerationChange> {
        let (new, finalized) = (entry.generation(), holds(entry, finalizer));
        let old = self.0.insert(key, (new, finalized));
        let unchanged = old == Some((new, finalized)) && new.is_some() && !entry.deleting();
        if only && unchanged {
            return None;
        }
        Some(GenerationChange { old: old.and_then(|(g, _)| g), new })
    }
}

fn holds(entry: &Entry, finalizer: Option<&str>) -> bool {
    finalizer.is_some_and(|f| entry.finalizers().iter().any(|x| x == f))
}

/// Changes of the primary kind, from one of its informers, from the moment `changes` was
/// subscribed; `seen` holds what the plugin was queued for at start (`enqueue_all`), so a
/// status update of one of those is no change for it.
pub(super) async fn primary(shared: Arc<Shared>, mut seen: Generations, mut changes: broadcast::Receiver<Change>) {
    let only_generations = shared.manifest.primary.generation_changed;
    let finalizer = shared.manifest.finalizer.clone();
    loop {
        match changes.recv().await {
            Ok(Change::Applied(entry)) => {
                let key = key_of(&entry.envelope);
                let selected = entry.selected() && entry.selected_by(&shared.selector);
                // One it keeps only for our finalizer runs its cleanup once deleted.
                let finalized = entry.deleting() && finalizer.as_ref().is_some_and(|f| entry.finalizers().contains(f));
                if !selected && !finalized {
                    seen.0.remove(&key);
                    continue;
                }
                if let Some(change) = seen.change(key.clone(), &entry, finalizer.as_deref(), only_generations) {
                    shared.enqueue_because(key, Trigger::PrimaryChanged(change));
                }
            }
            Ok(Change::Left(entry)) => {
                // Still there, no longer selected: not deleted, and not the plugin's any more.
                let key = key_of(&entry.envelope);
                seen.0.remove(&key);
                shared.memory.deleted(&key, None);
                shared.reasons.lock().expect("lock").forget(&key);
            }
            Ok(Change::Deleted(entry)) => {
                let key = key_of(&entry.envelope);
                let old = seen.0.remove(&key).and_then(|(g, _)| g);
                // Deletions seen as a standby were the leader's to deliver.
                let deliver = shared.manifest.deliver_deleted
                    && shared.leads()
                    && entry.selected()
                    && entry.selected_by(&shared.selector);
                shared.memory.deleted(&key, deliver.then_some(entry));
                if deliver {
                    shared.enqueue_because(key, Trigger::PrimaryChanged(GenerationChange { old, new: None }));
                } else {
                    shared.reasons.lock().expect("lock").forget(&key);
                }
            }
            Err(RecvError::Lagged(_)) => resync(&shared),
            Err(RecvError::Closed) => return,
        }
    }
}

/// Changes of an owned kind: each requeues its controller owner.
pub(super) async fn owned(shared: Arc<Shared>, mut changes: broadcast::Receiver<Change>) {
    while let Some((entry, _)) = next_related(&shared, &mut changes).await {
        let owners: Vec<(&str, &str, &str)> = entry
            .owner_references()
            .iter()
            .filter(|o| o.controller == Some(true))
            .map(|o| (o.api_version.as_str(), o.kind.as_str(), o.name.as_str()))
            .collect();
        let namespace = entry.envelope.namespace.as_deref();
        for key in plan::owners_of(&owners, namespace, &shared.manifest.primary.kind, shared.primary_namespaced()) {
            shared.enqueue_because(key, Trigger::OwnedChanged(reference(&entry)));
        }
    }
}

/// Changes of a watched kind that `selector` selects: each waits for `map` in the queue.
/// Unselected watches of one kind share an informer, so they map an object once.
pub(super) async fn watched(shared: Arc<Shared>, mut changes: broadcast::Receiver<Change>, selector: Selector) {
    loop {
        let (entry, went) = match changes.recv().await {
            Ok(Change::Applied(entry)) => (entry, false),
            // A selected watch reports an object that left its selection as deleted, at its
            // old state; another watch of the kind may hold it still, at a newer one, which is
            // the state `map` must see whichever of the two reports comes last.
            Ok(Change::Deleted(entry) | Change::Left(entry)) => match shared.cache.held(&entry) {
                Some(held) => (held, false),
                None => (entry, true),
            },
            Err(RecvError::Lagged(_)) => {
                resync(&shared);
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if !entry.selected_by(&selector) || !shared.leads() {
            continue;
        }
        // A kind an informer of this plugin holds parsed when it was declared.
        let Ok(kind) = entry.envelope.gvk() else { continue };
        let related = Related { kind, namespace: entry.envelope.namespace.clone(), name: entry.envelope.name.clone() };
        shared.memory.related_changed(related.clone(), entry, went);
        shared.enqueue(Work::Map(related));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{ApiResource, DynamicObject};

    use super::*;

    fn deployment(generation: i64, deleting: bool) -> Entry {
        let resource = ApiResource::erase::<Deployment>(&());
        let mut object = DynamicObject::new("web", &resource).within("shop");
        object.metadata.generation = Some(generation);
        if deleting {
            object.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        Entry::new(object, &resource, Default::default()).unwrap()
    }

    fn key() -> Key {
        Key { namespace: Some("shop".into()), name: "web".into() }
    }

    #[test]
    fn a_status_only_update_does_not_pass_a_generation_filter() {
        let mut seen = Generations::default();
        assert!(seen.change(key(), &deployment(1, false), None, true).is_some(), "first seen: passes");
        assert!(seen.change(key(), &deployment(1, false), None, true).is_none(), "same generation: filtered");
        let change = seen.change(key(), &deployment(2, false), None, true).expect("a spec change passes");
        assert_eq!((change.old, change.new), (Some(1), Some(2)));
    }

    #[test]
    fn a_deletion_passes_a_generation_filter_whatever_the_generation() {
        let mut seen = Generations::default();
        seen.change(key(), &deployment(3, false), None, true);
        assert!(seen.change(key(), &deployment(3, true), None, true).is_some());
    }

    #[test]
    fn without_the_filter_every_change_passes_with_its_generations() {
        let mut seen = Generations::default();
        seen.change(key(), &deployment(1, false), None, false);
        let change = seen.change(key(), &deployment(1, false), None, false).expect("passes");
        assert_eq!((change.old, change.new), (Some(1), Some(1)));
    }

    #[test]
    fn putting_the_plugins_finalizer_on_passes_a_generation_filter() {
        let mut seen = Generations::default();
        let f = Some("example.com/cleanup");
        seen.change(key(), &deployment(1, false), f, true);
        let resource = ApiResource::erase::<Deployment>(&());
        let mut object = DynamicObject::new("web", &resource).within("shop");
        object.metadata.generation = Some(1);
        object.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
        let finalized = Entry::new(object, &resource, Default::default()).unwrap();
        assert!(seen.change(key(), &finalized, f, true).is_some(), "the pass after the finalizer runs");
        assert!(seen.change(key(), &finalized, f, true).is_none());
    }
}
