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
    /// The plugins' field indexes, by their paths, each with the number of plugins holding it.
    pub(super) indexes: HashMap<IndexSpec, (FieldIndex, usize)>,
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
            let value = parsed(&entry);
            for (index, _) in self.indexes.values_mut() {
                index.insert(&key, &value);
            }
        }
        old
    }

    /// One more holder of the index over `paths`, when it exists.
    pub(super) fn hold_index(&mut self, paths: &IndexSpec) -> bool {
        self.indexes.get_mut(paths).map(|(_, holders)| *holders += 1).is_some()
    }

    /// Adds `index`, built from `snapshot` (what the cache held when its build began; `before`
    /// is it by key, made outside the lock too), with one holder: first brought up to what the
    /// cache holds now, by the objects that changed or went since, the only ones parsed under
    /// the lock.
    pub(super) fn add_index(
        &mut self,
        mut index: FieldIndex,
        snapshot: &[(Key, Arc<Entry>)],
        before: &HashMap<&Key, &Arc<Entry>>,
    ) {
        for (key, entry) in &self.objects {
            if before.get(key).is_none_or(|old| !Arc::ptr_eq(old, entry)) {
                index.insert(key, &parsed(entry));
            }
        }
        for (key, _) in snapshot {
            if !self.objects.contains_key(key) {
                index.remove(key);
            }
        }
        self.indexes.insert(index.paths().clone(), (index, 1));
    }

    /// One holder fewer of the index over `paths`; the last one drops it.
    pub(super) fn release_index(&mut self, paths: &IndexSpec) {
        if let Some((_, holders)) = self.indexes.get_mut(paths) {
            *holders -= 1;
            if *holders == 0 {
                self.indexes.remove(paths);
            }
        }
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
        for (index, _) in self.indexes.values_mut() {
            index.remove(key);
        }
        Some(old)
    }
}

/// An entry's object as JSON, for the indexes' paths (nothing when it does not parse).
pub(super) fn parsed(entry: &Entry) -> serde_json::Value {
    serde_json::from_str(&entry.envelope.json).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, DynamicObject};
    use serde_json::json;

    use super::*;
    use crate::informer::field_index::IndexSpec;

    fn entry(name: &str, mounts: &str) -> (Key, Arc<Entry>) {
        let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("apps", "v1", "Deployment"));
        let value = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "s"},
                           "spec": {"template": {"spec": {"volumes": [{"configMap": {"name": mounts}}]}}}});
        let object: DynamicObject = serde_json::from_value(value).unwrap();
        (("s".to_owned(), name.to_owned()), Arc::new(Entry::new(object, &resource, Default::default()).unwrap()))
    }

    fn filed(cache: &Cache, paths: &IndexSpec, key: &str) -> Vec<String> {
        cache.indexes[paths].0.page(key, None, None, 10).0.into_iter().map(|k| k.1).collect()
    }

    #[test]
    fn an_index_built_from_a_snapshot_catches_up_with_what_changed_meanwhile() {
        let paths: IndexSpec = vec!["spec.template.spec.volumes[*].configMap.name".parse().unwrap()].into();
        let mut cache = Cache::default();
        for (name, mounts) in [("kept", "a"), ("changed", "a"), ("gone", "a")] {
            let (key, entry) = entry(name, mounts);
            cache.insert(key, entry);
        }
        let snapshot: Vec<(Key, Arc<Entry>)> = cache.objects.iter().map(|(k, e)| (k.clone(), e.clone())).collect();
        let mut index = FieldIndex::new(paths.clone());
        for (key, entry) in &snapshot {
            index.insert(key, &parsed(entry));
        }
        // While it was built, outside the lock:
        let (key, changed) = entry("changed", "b");
        cache.insert(key, changed);
        let (key, new) = entry("new", "a");
        cache.insert(key, new);
        cache.remove(&("s".to_owned(), "gone".to_owned()));
        cache.add_index(index, &snapshot, &snapshot.iter().map(|(k, e)| (k, e)).collect());
        assert_eq!(filed(&cache, &paths, "a"), ["kept", "new"]);
        assert_eq!(filed(&cache, &paths, "b"), ["changed"]);
    }

    #[test]
    fn the_last_holder_released_drops_the_index() {
        let paths: IndexSpec = vec!["metadata.name".parse().unwrap()].into();
        let mut cache = Cache::default();
        cache.add_index(FieldIndex::new(paths.clone()), &[], &HashMap::new());
        assert!(cache.hold_index(&paths));
        cache.release_index(&paths);
        assert!(cache.indexes.contains_key(&paths));
        cache.release_index(&paths);
        assert!(cache.indexes.is_empty() && !cache.hold_index(&paths));
    }
}
