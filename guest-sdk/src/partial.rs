//! Partial objects for server-side apply: only the fields a plugin manages.
//!
//! A server-side apply is the plugin's whole intent for the fields it manages. A k8s-openapi
//! `Deployment` serializes its required fields even when empty (`"selector": {}`,
//! `"template": {}`), so applying one to set `spec.replicas` would claim, and empty, fields
//! another manager owns. A [`Partial`] holds only what was set.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use serde_json::json;
//! use wasmloop_sdk::partial::Partial;
//! use wasmloop_sdk::prelude::*;
//!
//! let replicas = Partial::of::<Deployment>("web")
//!     .namespace("shop")
//!     .annotation("example.com/rolled-at", "2026-11-28T00:00:00Z")
//!     .set("spec.replicas", 3);
//! assert_eq!(
//!     replicas.to_value(),
//!     json!({"apiVersion": "apps/v1", "kind": "Deployment",
//!            "metadata": {"name": "web", "namespace": "shop",
//!                         "annotations": {"example.com/rolled-at": "2026-11-28T00:00:00Z"}},
//!            "spec": {"replicas": 3}})
//! );
//! let action = apply(&replicas);
//! # let _ = action;
//! ```

use serde::Serialize;
use serde_json::{Map, Value};

use crate::kind::Kind;

/// An object holding only the fields set on it, besides `apiVersion`, `kind` and
/// `metadata.name`.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    value: Value,
}

impl Partial {
    /// An object of kind `K` named `name`, with nothing else.
    pub fn of<K: Kind>(name: impl Into<String>) -> Partial {
        let mut value = Map::new();
        value.insert("apiVersion".into(), K::API_VERSION.into());
        value.insert("kind".into(), K::KIND.into());
        value.insert("metadata".into(), serde_json::json!({ "name": name.into() }));
        Partial { value: Value::Object(value) }
    }

    /// Sets `metadata.namespace`.
    #[must_use]
    pub fn namespace(self, namespace: impl Into<String>) -> Partial {
        self.set_at(&["metadata", "namespace"], namespace.into())
    }

    /// Sets one label.
    #[must_use]
    pub fn label(self, key: &str, value: impl Into<String>) -> Partial {
        self.set_at(&["metadata", "labels", key], value.into())
    }

    /// Sets one annotation.
    #[must_use]
    pub fn annotation(self, key: &str, value: impl Into<String>) -> Partial {
        self.set_at(&["metadata", "annotations", key], value.into())
    }

    /// Sets the field at the dotted `path` (`spec.template.metadata.labels`), making the
    /// objects on the way. A key holding a dot (an annotation's) needs [`Partial::set_at`].
    ///
    /// # Panics
    /// When `value` does not serialize (a map with non-string keys: a bug in the plugin's
    /// types), or when the path runs through a field set to something other than an object.
    #[must_use]
    pub fn set(self, path: &str, value: impl Serialize) -> Partial {
        let parts: Vec<&str> = path.split('.').collect();
        self.set_at(&parts, value)
    }

    /// Sets the field at `path`, one key per part.
    ///
    /// # Panics
    /// As [`Partial::set`].
    #[must_use]
    pub fn set_at(mut self, path: &[&str], value: impl Serialize) -> Partial {
        let value = serde_json::to_value(value).unwrap_or_else(|e| panic!("wasmloop-sdk: Partial::set: {e}"));
        let Some((last, parents)) = path.split_last() else { return self };
        let mut at = &mut self.value;
        for part in parents {
            let object =
                at.as_object_mut().unwrap_or_else(|| panic!("wasmloop-sdk: Partial::set: {part} is not in an object"));
            at = object.entry(*part).or_insert_with(|| Value::Object(Map::new()));
        }
        let object =
            at.as_object_mut().unwrap_or_else(|| panic!("wasmloop-sdk: Partial::set: {last} is not in an object"));
        object.insert((*last).to_owned(), value);
        self
    }

    /// The object as JSON.
    pub fn to_value(&self) -> Value {
        self.value.clone()
    }
}

impl Serialize for Partial {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_fields_set_are_in_the_object() {
        let p = Partial::of::<ConfigMap>("a").set("data.x", "1");
        assert_eq!(
            p.to_value(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1"}})
        );
    }

    #[test]
    fn a_later_set_of_the_same_field_wins() {
        let p = Partial::of::<ConfigMap>("a").set("data.x", "1").set("data.x", "2");
        assert_eq!(p.to_value()["data"]["x"], "2");
    }

    #[test]
    fn keys_with_dots_are_set_by_parts() {
        let p = Partial::of::<ConfigMap>("a").set_at(&["metadata", "annotations", "a.io/b"], "c");
        assert_eq!(p.to_value()["metadata"]["annotations"]["a.io/b"], "c");
    }
}
