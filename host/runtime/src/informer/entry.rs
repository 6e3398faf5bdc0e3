//! One cached object: the contract's envelope, serialized once, and the few metadata fields
//! the host itself reads.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ApiResource, DynamicObject};
use wasmloop_contract::cache::Kept;
use wasmloop_sandbox::{Object, Selector, object_from_value};

/// One cached object.
#[derive(Debug)]
pub struct Entry {
    /// The metadata the host reads; nothing else of it is kept.
    meta: ObjectMeta,
    /// The contract's envelope of the object, serialized once: the one full copy.
    pub envelope: Object,
    /// Whether its informer's filter selects it (always, without one): false for an object
    /// kept only for the finalizer it carries.
    pub(super) selected: bool,
}

impl Entry {
    /// An entry for `object`, whose `apiVersion` and `kind` are `resource`'s (the items of a
    /// list carry none), stripped of what `kept` does not keep; none when it does not serialize.
    pub fn new(object: DynamicObject, resource: &ApiResource, kept: Kept) -> Option<Entry> {
        let mut value = serde_json::to_value(&object).ok()?;
        value["apiVersion"] = resource.api_version.clone().into();
        value["kind"] = resource.kind.clone().into();
        wasmloop_contract::cache::strip(&mut value, kept);
        let envelope = object_from_value(&value).ok()?;
        let m = object.metadata;
        let meta = ObjectMeta {
            labels: m.labels,
            owner_references: m.owner_references,
            finalizers: m.finalizers,
            deletion_timestamp: m.deletion_timestamp,
            resource_version: m.resource_version,
            generation: m.generation,
            ..ObjectMeta::default()
        };
        Some(Entry { meta, envelope, selected: true })
    }

    /// Whether its informer's filter selects it, rather than keeping it for its finalizer.
    pub fn selected(&self) -> bool {
        self.selected
    }

    /// Its `metadata.generation`; none for kinds without one.
    pub fn generation(&self) -> Option<i64> {
        self.meta.generation
    }

    /// True when the object's labels satisfy `selector`.
    pub fn selected_by(&self, selector: &Selector) -> bool {
        let labels = self.meta.labels.as_ref();
        selector.matches(|k| labels.and_then(|l| l.get(k)).map(String::as_str))
    }

    /// Its owner references.
    pub fn owner_references(&self) -> &[OwnerReference] {
        self.meta.owner_references.as_deref().unwrap_or_default()
    }

    /// Its finalizers.
    pub fn finalizers(&self) -> &[String] {
        self.meta.finalizers.as_deref().unwrap_or_default()
    }

    /// Its resourceVersion.
    pub fn resource_version(&self) -> Option<String> {
        self.meta.resource_version.clone()
    }

    /// True once its deletion has begun.
    pub fn deleting(&self) -> bool {
        self.meta.deletion_timestamp.is_some()
    }
}
