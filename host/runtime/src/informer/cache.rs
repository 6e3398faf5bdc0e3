//! The informer's store: objects in (namespace, name) order, and the indexes that find them
//! without a scan (by owner UID, by name, and by the field paths plugins declared).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::entry::Entry;
use super::field_index::{FieldIndex, IndexSpec};

/// Where an object lives: namespace (empty for cluster-scoped) and name.
pub(crate) type Key = wasmloop_sandbox::ListKey;

#[derive(Default)]
pub(super) struct Cache {
    /// Ordered by (namespace, name), so one namespace is a range, not a scan.
    pub(super) objects: BTreeMap<Key, Arc<Entry>>,
    pub(super) by_owner: HashMap<String, HashSet<Key>>,
    /// The namespaces holding an object of each name: a look-up by name alone is a plugin's
    /// cache call, and must not scan every object under the lock.
    pub(super) by_name: HashMap<String, BTreeSet<String>>,
    /// The plugins' field indexes, by their paths.
    pub(super) indexes: HashMap<IndexSpec, FieldIndex>,
}

impl Cache {
    fn owners(entry: &Entry) -> impl Iterator<Item = &str> {
        entry.owner_references().iter().map(|o| o.uid.as_str())
    }

    pub(super) fn insert(&mut self, key: Key, entry: Arc<Entry>) -> Option<Arc<Entry>> {
        let old = self.objects.insert(key.clone(), entry.clone());
        if let Some(old) = &old {
            for uid in Cache::owners(old) {
                if let Some(keys) = self.by_owner.get_mut(uid) {
                    keys.remove(&key);
                    if keys.is_empty() {
                        self.by_owner.remove(uid);
                    }
                }
            }
        }
        for uid in Cache::owners(&entry) {
            self.by_owner.entry(uid.to_owned()).or_default().insert(key.clone());
        }
        if old.is_none() {
            self.by_name.entry(key.1.clone()).or_default().insert(key.0.clone());
        }
        if !self.indexes.is_empty() {
            // Parsed once for every index, and only for informers that have one.
            let value: serde_json::Value = serde_json::from_str(&entry.envelope.json).unwrap_or_default();
            for index in self.indexes.values_mut() {
                index.insert(&key, &value);
            }
        }
        old
    }

    /// Adds an index over `paths`, filled from what the cache holds now; nothing when one
    /// exists already.
    pub(super) fn index(&mut self, paths: &IndexSpec) {
        if self.indexes.contains_key(paths) {
            return;
        }
        let mut index = FieldIndex::new(paths.clone());
        for (key, entry) in &self.objects {
            let value: serde_json::Value = serde_json::from_str(&entry.envelope.json).unwrap_or_default();
            index.insert(key, &value);
        }
        self.indexes.insert(paths.clone(), index);
    }

    pub(super) fn remove(&mut self, key: &Key) -> Option<Arc<Entry>> {
        let old = self.objects.remove(key)?;
        if let Some(namespaces) = self.by_name.get_mut(&key.1) {
            namespaces.remove(&key.0);
            if namespaces.is_empty() {
                self.by_name.remove(&key.1);
            }
        }
        for uid in Cache::owners(&old) {
            if let Some(keys) = self.by_owner.get_mut(uid) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_owner.remove(uid);
                }
            }
        }
        for index in self.indexes.values_mut() {
            index.remove(key);
        }
        Some(old)
    }
}
