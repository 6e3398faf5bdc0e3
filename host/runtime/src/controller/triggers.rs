//! Informer changes become work: a changed primary is its own key, a changed child requeues
//! its owner, and a changed watched object waits in the queue for the plugin's `map`, which a
//! worker calls. Nothing here calls the plugin or writes.

use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError};
use wasmloop_sandbox::Selector;

use super::plan;
use super::shared::Shared;
use super::work::{Related, Work, key_of};
use crate::informer::{Change, Entry};

/// The next changed object of a related kind; a lagging subscriber requeues every primary
/// instead. None when the informer is gone.
async fn next_related(shared: &Shared, changes: &mut broadcast::Receiver<Change>) -> Option<Arc<Entry>> {
    loop {
        match changes.recv().await {
            Ok(Change::Applied(e) | Change::Deleted(e)) => return Some(e),
            Err(RecvError::Lagged(_)) => shared.enqueue_all(),
            Err(RecvError::Closed) => return None,
        }
    }
}

/// Changes of the primary kind.
pub(super) async fn primary(shared: Arc<Shared>, mut changes: broadcast::Receiver<Change>) {
    loop {
        match changes.recv().await {
            Ok(Change::Applied(entry)) if entry.selected_by(&shared.selector) => {
                shared.enqueue(Work::Reconcile(key_of(&entry.envelope)));
            }
            Ok(Change::Applied(_)) => {}
            Ok(Change::Deleted(entry)) => {
                let key = key_of(&entry.envelope);
                // Deletions seen as a standby were the leader's to deliver.
                let deliver = shared.manifest.deliver_deleted && shared.leads() && entry.selected_by(&shared.selector);
                shared.memory.deleted(&key, deliver.then_some(entry));
                if deliver {
                    shared.enqueue(Work::Reconcile(key));
                }
            }
            Err(RecvError::Lagged(_)) => shared.enqueue_all(),
            Err(RecvError::Closed) => return,
        }
    }
}

/// Changes of an owned kind: each requeues its controller owner.
pub(super) async fn owned(shared: Arc<Shared>, mut changes: broadcast::Receiver<Change>) {
    while let Some(entry) = next_related(&shared, &mut changes).await {
        let owners: Vec<(&str, &str, &str)> = entry
            .owner_references()
            .iter()
            .filter(|o| o.controller == Some(true))
            .map(|o| (o.api_version.as_str(), o.kind.as_str(), o.name.as_str()))
            .collect();
        let namespace = entry.envelope.namespace.as_deref();
        for key in plan::owners_of(&owners, namespace, &shared.manifest.primary.kind, shared.primary.namespaced()) {
            shared.enqueue(Work::Reconcile(key));
        }
    }
}

/// Changes of a watched kind that `selector` selects: each waits for `map` in the queue.
/// Unselected watches of one kind share an informer, so they map an object once.
pub(super) async fn watched(shared: Arc<Shared>, mut changes: broadcast::Receiver<Change>, selector: Selector) {
    loop {
        let entry = match changes.recv().await {
            Ok(Change::Applied(entry)) => entry,
            // A selected watch reports an object that left its selection as deleted, at its
            // old state; another watch of the kind may hold it still, at a newer one, which is
            // the state `map` must see whichever of the two reports comes last.
            Ok(Change::Deleted(entry)) => shared.cache.held(&entry).unwrap_or(entry),
            Err(RecvError::Lagged(_)) => {
                shared.enqueue_all();
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
        shared.memory.related_changed(related.clone(), entry);
        shared.enqueue(Work::Map(related));
    }
}
