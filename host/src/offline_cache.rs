//! The cache a plugin sees in offline `wasmloop reconcile`: the objects given on the command
//! line, looked up the way the host's informer cache answers.

use serde_json::Value;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_sandbox::validate;
use wasmloop_sandbox::{Gvk, HostServices, Manifest, Object, Selector, object_from_value};

/// A value given as an object that lacks what routes it: the sandbox's sentence naming the
/// field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotAnObject(String);

/// Objects from files, searchable by kind, namespace, name and labels.
#[derive(Debug, Default)]
pub struct OfflineCache {
    objects: Vec<(Object, Value)>,
}

impl OfflineCache {
    /// Adds an object.
    ///
    /// # Errors
    /// [`NotAnObject`] when the object lacks apiVersion, kind or metadata.name.
    pub fn insert(&mut self, value: Value) -> Result<(), NotAnObject> {
        let object = object_from_value(&value).map_err(NotAnObject)?;
        self.insert_object(object, value);
        Ok(())
    }

    /// Adds an object whose envelope is already built; a later object of the same kind,
    /// namespace and name replaces an earlier one.
    pub fn insert_object(&mut self, object: Object, value: Value) {
        self.objects.retain(|(o, _)| {
            !(o.kind == object.kind
                && o.api_version == object.api_version
                && o.namespace == object.namespace
                && o.name == object.name)
        });
        self.objects.push((object, value));
    }

    /// Holds what the host's informers would hold for a plugin with `manifest`: objects of a
    /// kind it declares only under selected watches go unless a selector selects them
    /// (`wasmloop_contract::cache::Visible`), and every object is stripped of `managedFields`
    /// and the last-applied annotation unless it keeps them for the kind. Returns the objects
    /// dropped, as `kind namespace/name`, for the user who passed them.
    pub fn hold_for(&mut self, manifest: &Manifest) -> Vec<String> {
        let mut dropped = Vec::new();
        self.objects.retain(|(object, value)| {
            let Ok(kind) = object.gvk() else {
                dropped.push(format!(
                    "{} {} (not a kind)",
                    validate::quoted(&object.api_version),
                    validate::quoted(&object.kind)
                ));
                return false;
            };
            let held = manifest.visible(&kind).admits(value);
            if !held {
                let namespace = object.namespace.as_deref().map(|ns| format!("{ns}/")).unwrap_or_default();
                dropped.push(format!("{kind} {namespace}{}", object.name));
            }
            held
        });
        for (object, value) in &mut self.objects {
            if strip_for(manifest, object, value) {
                object.json = value.to_string();
            }
        }
        dropped
    }

    fn of_kind<'a>(&'a self, kind: &'a Gvk, namespace: Option<&'a str>) -> impl Iterator<Item = &'a (Object, Value)> {
        self.objects.iter().filter(move |(o, _)| {
            kind.matches(&o.api_version, &o.kind)
                && wasmloop_contract::cache::in_namespace(namespace, o.namespace.as_deref())
        })
    }
}

/// Strips `value` as the host's informers would for `manifest`; true when it removed anything.
fn strip_for(manifest: &Manifest, object: &Object, value: &mut Value) -> bool {
    let kept = object.gvk().map(|kind| manifest.kept(&kind)).unwrap_or_default();
    wasmloop_contract::cache::strip(value, kept)
}

/// `object` as the host's informers would hand it to a plugin with `manifest` (the request's
/// primary, children and previous state come from them too).
pub fn strip_object(manifest: &Manifest, object: &mut Object) {
    if let Ok(mut value) = serde_json::from_str::<Value>(&object.json)
        && strip_for(manifest, object, &mut value)
    {
        object.json = value.to_string();
    }
}

impl HostServices for OfflineCache {
    /// Without a namespace, the smallest namespace holding `name`, as the informers answer.
    fn get(&self, kind: &Gvk, namespace: Option<&Namespace>, name: &Name) -> Option<Object> {
        let named = self.of_kind(kind, namespace.map(Namespace::as_str)).filter(|(o, _)| *name == o.name.as_str());
        named.min_by(|(a, _), (b, _)| a.namespace.cmp(&b.namespace)).map(|(o, _)| o.clone())
    }

    /// In (namespace, name) order, as the informers list.
    fn list(&self, kind: &Gvk, namespace: Option<&Namespace>, selector: &Selector) -> Vec<Object> {
        let mut all: Vec<Object> = self
            .of_kind(kind, namespace.map(Namespace::as_str))
            .filter(|(_, v)| selector.matches_object(v))
            .map(|(o, _)| o.clone())
            .collect();
        all.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offline_cache_passes_the_cache_conformance_suite() {
        wasmloop_sandbox::conformance::run(|seed| {
            let mut cache = OfflineCache::default();
            seed.iter().flat_map(|(_, objects)| objects).for_each(|v| cache.insert(v.clone()).unwrap());
            cache.hold_for(&wasmloop_sandbox::conformance::manifest());
            wasmloop_sandbox::conformance::Imports::new(std::sync::Arc::new(cache))
        });
    }

    #[test]
    fn a_namespace_given_for_a_cluster_scoped_kind_is_ignored_as_in_the_host() {
        let mut cache = OfflineCache::default();
        let node = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
        cache.insert_object(wasmloop_sandbox::object_from_value(&node).unwrap(), node);
        let nodes = Gvk::new("", "v1", "Node").unwrap();
        let (default, n1) = ("default".parse().unwrap(), "n1".parse().unwrap());
        assert!(cache.get(&nodes, Some(&default), &n1).is_some());
        assert_eq!(cache.list(&nodes, Some(&default), &Selector::default()).len(), 1);
        assert!(cache.get(&nodes, None, &n1).is_some());
    }
}
