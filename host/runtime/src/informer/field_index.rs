//! An index over one informer's objects by the values of field paths (contract 0.3's
//! `indexes`): `list-by-index` answers from it in the time its answer takes, however many
//! objects the informer holds. Plugins that declare the same paths on one informer share it.
//!
//! ```ignore
//! // In the informer's cache: kept as objects change.
//! index.insert(&key, &object_json);
//! let (keys, resume) = index.page("settings", Some("shop"), None, 500);
//! ```

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;
use wasmloop_contract::fields::{FieldPath, index_keys};

use super::cache::Key;

/// The paths of an index: equal paths share one index, whichever plugin declared them.
pub type IndexSpec = Arc<[FieldPath]>;

#[cfg(test)]
use wasmloop_contract::fields::{MAX_KEY, MAX_KEYS_PER_OBJECT};

/// One index: each key's objects, in (namespace, name) order, and each object's keys.
pub(super) struct FieldIndex {
    paths: IndexSpec,
    by_key: HashMap<String, BTreeSet<Key>>,
    keys_of: HashMap<Key, Box<[String]>>,
}

impl FieldIndex {
    pub(super) fn new(paths: IndexSpec) -> FieldIndex {
        FieldIndex { paths, by_key: HashMap::new(), keys_of: HashMap::new() }
    }

    /// The paths it evaluates.
    pub(super) fn paths(&self) -> &IndexSpec {
        &self.paths
    }

    /// Files the object at `key` (new, or changed) under the keys its paths reach now.
    pub(super) fn insert(&mut self, key: &Key, object: &Value) {
        self.remove(key);
        let keys = index_keys(&self.paths, object);
        for k in &keys {
            self.by_key.entry(k.clone()).or_default().insert(key.clone());
        }
        if !keys.is_empty() {
            self.keys_of.insert(key.clone(), keys.into_boxed_slice());
        }
    }

    /// Takes the object at `key` out of the index.
    pub(super) fn remove(&mut self, key: &Key) {
        let Some(keys) = self.keys_of.remove(key) else { return };
        for k in keys.iter() {
            if let Some(filed) = self.by_key.get_mut(k) {
                filed.remove(key);
                if filed.is_empty() {
                    self.by_key.remove(k);
                }
            }
        }
    }

    /// At most `limit` objects filed under `value`, in `namespace` (all when none), after
    /// `after`; and where the next page starts when more follow.
    pub(super) fn page(
        &self,
        value: &str,
        namespace: Option<&str>,
        after: Option<&Key>,
        limit: usize,
    ) -> (Vec<Key>, Option<Key>) {
        let Some(filed) = self.by_key.get(value) else { return (Vec::new(), None) };
        let first = namespace.map(|ns| (ns.to_owned(), String::new()));
        let start = match (after, first) {
            (Some(after), Some(first)) if *after < first => Bound::Included(first),
            (Some(after), _) => Bound::Excluded(after.clone()),
            (None, Some(first)) => Bound::Included(first),
            (None, None) => Bound::Unbounded,
        };
        let mut in_scope =
            filed.range((start, Bound::Unbounded)).take_while(|(ns, _)| namespace.is_none_or(|wanted| ns == wanted));
        let keys: Vec<Key> = in_scope.by_ref().take(limit).cloned().collect();
        let more = in_scope.next().is_some();
        let resume = if more { keys.last().cloned() } else { None };
        (keys, resume)
    }

    /// Objects filed, for tests and metrics.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.keys_of.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn index(paths: &[&str]) -> FieldIndex {
        FieldIndex::new(paths.iter().map(|p| p.parse().unwrap()).collect::<Vec<_>>().into())
    }

    fn key(ns: &str, name: &str) -> Key {
        (ns.to_owned(), name.to_owned())
    }

    fn mounting(names: &[&str]) -> Value {
        let volumes: Vec<Value> = names.iter().map(|n| json!({"configMap": {"name": n}})).collect();
        json!({"spec": {"template": {"spec": {"volumes": volumes}}}})
    }

    const VOLUMES: &str = "spec.template.spec.volumes[*].configMap.name";

    #[test]
    fn an_object_is_found_under_every_value_its_paths_reach_and_no_other() {
        let mut i = index(&[VOLUMES]);
        i.insert(&key("shop", "web"), &mounting(&["a", "b"]));
        i.insert(&key("shop", "api"), &mounting(&["b"]));
        assert_eq!(i.page("a", None, None, 10).0, vec![key("shop", "web")]);
        assert_eq!(i.page("b", None, None, 10).0, vec![key("shop", "api"), key("shop", "web")]);
        assert!(i.page("c", None, None, 10).0.is_empty());
    }

    #[test]
    fn a_changed_object_is_filed_under_its_new_values_only() {
        let mut i = index(&[VOLUMES]);
        i.insert(&key("shop", "web"), &mounting(&["a"]));
        i.insert(&key("shop", "web"), &mounting(&["b"]));
        assert!(i.page("a", None, None, 10).0.is_empty());
        assert_eq!(i.page("b", None, None, 10).0, vec![key("shop", "web")]);
    }

    #[test]
    fn a_removed_object_leaves_no_trace() {
        let mut i = index(&[VOLUMES]);
        i.insert(&key("shop", "web"), &mounting(&["a"]));
        i.remove(&key("shop", "web"));
        assert!(i.by_key.is_empty() && i.keys_of.is_empty());
    }

    #[test]
    fn pages_keep_to_a_namespace_and_resume_after_the_last() {
        let mut i = index(&[VOLUMES]);
        for (ns, name) in [("a", "1"), ("b", "1"), ("b", "2"), ("b", "3"), ("c", "1")] {
            i.insert(&key(ns, name), &mounting(&["cm"]));
        }
        let (first, resume) = i.page("cm", Some("b"), None, 2);
        assert_eq!((first, resume.clone()), (vec![key("b", "1"), key("b", "2")], Some(key("b", "2"))));
        assert_eq!(i.page("cm", Some("b"), resume.as_ref(), 2), (vec![key("b", "3")], None));
        assert_eq!(i.page("cm", None, None, 10).0.len(), 5);
    }

    #[test]
    fn an_object_is_filed_under_a_bounded_number_of_short_values() {
        let mut i = index(&[VOLUMES, "metadata.annotations.doc"]);
        let many: Vec<String> = (0..200).map(|n| format!("cm-{n}")).collect();
        let mut object = mounting(&many.iter().map(String::as_str).collect::<Vec<_>>());
        object["metadata"] = json!({"annotations": {"doc": "x".repeat(MAX_KEY + 1)}});
        i.insert(&key("a", "x"), &object);
        assert_eq!(i.keys_of[&key("a", "x")].len(), MAX_KEYS_PER_OBJECT);
        assert_eq!(i.len(), 1);
    }

    #[test]
    fn several_paths_file_under_the_union_of_their_values() {
        let mut i = index(&[VOLUMES, "spec.template.spec.containers[*].envFrom[*].configMapRef.name"]);
        let mut object = mounting(&["a"]);
        object["spec"]["template"]["spec"]["containers"] = json!([{"envFrom": [{"configMapRef": {"name": "b"}}]}]);
        i.insert(&key("s", "w"), &object);
        assert_eq!(i.page("a", None, None, 1).0.len() + i.page("b", None, None, 1).0.len(), 2);
    }
}
