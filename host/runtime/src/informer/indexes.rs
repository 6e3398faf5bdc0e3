//! The plugins' field indexes on an informer: held while a plugin runs, shared between plugins
//! that declare the same paths, bounded per informer, and answered by reading past the bound.
//!
//! ```ignore
//! let hold = informer.index(&paths)?;            // kept while `hold` lives
//! let page = informer.list_by_index(&paths, "settings", Some("shop"), None, 500);
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use wasmloop_contract::fields::index_keys;

use super::cache::{self, Cache, Key};
use super::field_index::{FieldIndex, IndexSpec};
use super::{Entry, Informer};

/// Most distinct indexes one informer keeps, whatever plugins declare: each costs memory in
/// proportion to the objects it files, and time on every change.
pub const MAX_INDEXES_PER_INFORMER: usize = 32;

/// An informer already keeps [`MAX_INDEXES_PER_INFORMER`] indexes.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the host's cache of {kind} keeps {MAX_INDEXES_PER_INFORMER} indexes for other plugins already, its limit; declare the same field paths as one of them, or fewer indexes"
)]
pub struct IndexRefused {
    /// The kind.
    pub kind: String,
}

/// A plugin's hold on an informer's index: dropped, it releases the index, and the last hold
/// released drops it.
#[derive(Debug)]
pub struct IndexHold {
    informer: Weak<Informer>,
    paths: IndexSpec,
}

impl Drop for IndexHold {
    fn drop(&mut self) {
        if let Some(informer) = self.informer.upgrade() {
            informer.cache.write().expect("lock").release_index(&self.paths);
        }
    }
}

impl Informer {
    /// Keeps an index over `paths` for as long as the returned hold lives, shared by every
    /// plugin that declares the same paths on this informer (the last hold dropped drops it).
    /// A new index is built from a snapshot outside the cache's lock (parsing every object
    /// would stall the informer's events and every plugin's look-ups), then brought up to date
    /// under it with only what changed meanwhile.
    ///
    /// # Errors
    /// When the informer keeps [`MAX_INDEXES_PER_INFORMER`] other indexes already.
    pub fn index(self: &Arc<Self>, paths: &IndexSpec) -> Result<IndexHold, IndexRefused> {
        let hold = || IndexHold { informer: Arc::downgrade(self), paths: paths.clone() };
        let full = |cache: &Cache| cache.indexes.len() >= MAX_INDEXES_PER_INFORMER;
        {
            let mut cache = self.cache.write().expect("lock");
            if cache.hold_index(paths) {
                return Ok(hold());
            }
            if full(&cache) {
                return Err(IndexRefused { kind: self.scope.kind.to_string() });
            }
        }
        let snapshot: Vec<(Key, Arc<Entry>)> =
            self.cache.read().expect("lock").objects.iter().map(|(k, e)| (k.clone(), e.clone())).collect();
        let mut index = FieldIndex::new(paths.clone());
        for (key, entry) in &snapshot {
            index.insert(key, &cache::parsed(entry));
        }
        let before: HashMap<&Key, &Arc<Entry>> = snapshot.iter().map(|(k, e)| (k, e)).collect();
        let mut cache = self.cache.write().expect("lock");
        // Another plugin may have built the same index meanwhile.
        if cache.hold_index(paths) {
            return Ok(hold());
        }
        if full(&cache) {
            return Err(IndexRefused { kind: self.scope.kind.to_string() });
        }
        cache.add_index(index, &snapshot, &before);
        Ok(hold())
    }

    /// How many indexes this informer keeps now.
    pub fn index_count(&self) -> usize {
        self.cache.read().expect("lock").indexes.len()
    }

    /// At most `limit` objects the index over `paths` files under `value`, in `namespace`
    /// (all when none), after `after`; and where the next page starts when more follow. None
    /// when this informer keeps no such index.
    pub fn list_by_index(
        &self,
        paths: &IndexSpec,
        value: &str,
        namespace: Option<&str>,
        after: Option<&Key>,
        limit: usize,
    ) -> Option<(Vec<Arc<Entry>>, Option<Key>)> {
        let cache = self.cache.read().expect("lock");
        let (index, _) = cache.indexes.get(paths)?;
        let (keys, resume) = index.page(value, namespace.filter(|_| self.namespaced), after, limit);
        Some((keys.iter().filter_map(|k| cache.objects.get(k).cloned()).collect(), resume))
    }

    /// As [`Informer::list_after`], for the objects an index over `paths` would file under
    /// `value`, each object's paths evaluated as it is looked at: the answer for an index this
    /// informer could not keep (past [`MAX_INDEXES_PER_INFORMER`]), slower but the same.
    pub fn list_filed_after(
        &self,
        paths: &IndexSpec,
        value: &str,
        namespace: Option<&str>,
        after: Option<&Key>,
        limit: usize,
        scan: usize,
    ) -> (Vec<Arc<Entry>>, Option<Key>) {
        let filed = |entry: &Entry| index_keys(paths, &cache::parsed(entry)).iter().any(|k| k == value);
        self.page_after(namespace, after, limit, scan, filed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::tests::{detached, relist};

    fn paths(path: &str) -> IndexSpec {
        vec![path.parse().unwrap()].into()
    }

    #[test]
    fn an_index_is_shared_by_its_holders_and_goes_with_the_last() {
        let (informer, resource) = detached();
        relist(&informer, &resource, &[("a", "1"), ("b", "1")]);
        let first = informer.index(&paths("metadata.name")).unwrap();
        let second = informer.index(&paths("metadata.name")).unwrap();
        assert_eq!(informer.index_count(), 1);
        let found = informer.list_by_index(&paths("metadata.name"), "b", None, None, 10).unwrap().0;
        assert_eq!(found.iter().map(|e| e.envelope.name.as_str()).collect::<Vec<_>>(), ["b"]);
        drop(first);
        assert_eq!(informer.index_count(), 1);
        drop(second);
        assert_eq!(informer.index_count(), 0);
        assert!(informer.list_by_index(&paths("metadata.name"), "b", None, None, 10).is_none());
    }

    #[test]
    fn an_index_an_informer_could_not_keep_is_answered_by_reading_alike() {
        let (informer, resource) = detached();
        relist(&informer, &resource, &[("a", "1"), ("b", "1"), ("c", "1")]);
        let by_name = paths("metadata.name");
        assert!(informer.list_by_index(&by_name, "b", None, None, 10).is_none(), "no index kept");
        let (read, resume) = informer.list_filed_after(&by_name, "b", None, None, 10, 10_000);
        assert_eq!((read.iter().map(|e| e.envelope.name.as_str()).collect::<Vec<_>>(), resume), (vec!["b"], None));
        let _hold = informer.index(&by_name).unwrap();
        let (kept, _) = informer.list_by_index(&by_name, "b", None, None, 10).unwrap();
        assert_eq!(kept.len(), read.len());
    }

    #[test]
    fn an_informer_keeps_a_bounded_number_of_indexes() {
        let (informer, _) = detached();
        let holds: Vec<IndexHold> = (0..MAX_INDEXES_PER_INFORMER)
            .map(|i| informer.index(&paths(&format!("metadata.labels.l{i}"))).unwrap())
            .collect();
        let refused = informer.index(&paths("metadata.labels.more")).unwrap_err();
        assert!(refused.to_string().contains("keeps 32 indexes for other plugins"), "{refused}");
        assert!(informer.index(&paths("metadata.labels.l0")).is_ok(), "one held already is shared past the limit");
        drop(holds);
        assert_eq!(informer.index_count(), 0);
    }
}
