//! How a cache look-up's namespace applies, for every cache a plugin reads through: the
//! host's informers, the offline cache of `wasmloop reconcile` and the SDK's test host.
//!
//! Every cache lists in [`ListKey`] order, holds each object once (the latest seen), and
//! answers a `get` without a namespace with the first object of that name in that order: the
//! one in the smallest namespace. The suite in `conformance` (feature `conformance`) holds
//! every cache to these rules.

/// True when an object in `object_namespace` (none for a cluster-scoped kind) answers a
/// look-up in `wanted` (none: every namespace). A namespace given for a cluster-scoped kind is
/// ignored, as the API server and the host's informers ignore it: such objects live in no
/// namespace, so no namespace excludes them.
///
/// ```
/// use wasmloop_contract::cache::in_namespace;
/// assert!(in_namespace(Some("a"), Some("a")));
/// assert!(!in_namespace(Some("a"), Some("b")));
/// assert!(in_namespace(Some("a"), None), "a Node is found whatever namespace is given");
/// assert!(in_namespace(None, Some("b")));
/// ```
pub fn in_namespace(wanted: Option<&str>, object_namespace: Option<&str>) -> bool {
    match (wanted, object_namespace) {
        (Some(wanted), Some(ns)) => wanted == ns,
        _ => true,
    }
}

use crate::annotations::AnnotationMatch;
use crate::fields::FieldSelector;
use crate::selector::Selector;

/// The host's page size, and the most a plugin may ask for in one page.
pub const PAGE_SIZE: usize = 500;

/// A place in a listing: namespace (empty for cluster-scoped objects) and name. Listings are
/// in this order.
pub type ListKey = (String, String);

/// A continue token is a position in the list: `namespace/name` of the last key the cache
/// looked at. Object names cannot hold a `/`, so the first one splits it; a token is not
/// checked further, because it is only ever a position in a list the plugin may read anyway.
///
/// ```
/// use wasmloop_contract::cache::{parse_token, token_of};
/// let key = ("shop".to_owned(), "web".to_owned());
/// assert_eq!(parse_token(&token_of(&key)), Ok(key));
/// assert!(parse_token("shop/").is_err() && parse_token("a/b/c").is_err() && parse_token("web").is_err());
/// ```
pub fn token_of(key: &ListKey) -> String {
    format!("{}/{}", key.0, key.1)
}

/// The position a token names.
///
/// # Errors
/// A sentence saying the token is no position the host produces, and what to pass instead.
pub fn parse_token(token: &str) -> Result<ListKey, String> {
    match token.split_once('/') {
        Some((namespace, name)) if !name.is_empty() && !name.contains('/') => {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(format!(
            "continue token {token:?} is not a position this host produces; pass back the token of the previous page"
        )),
    }
}

/// One narrowing of a kind: the objects in a namespace that a label selector, a field
/// selector and annotation filters all select. A primary's selection also keeps every object
/// that carries the plugin's finalizer, so its cleanup runs whatever became of its labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// The namespace; none for every namespace.
    pub namespace: Option<String>,
    /// Labels.
    pub labels: Selector,
    /// Fields, as the API server applies them to a watch.
    pub fields: Option<FieldSelector>,
    /// Annotations, which every cache applies itself.
    pub annotations: Vec<AnnotationMatch>,
    /// Objects carrying this finalizer are kept whatever the rest says (a primary's).
    pub finalizer: Option<String>,
}

impl Selection {
    /// True when it narrows nothing: every object of the kind, in every namespace.
    pub fn is_everything(&self) -> bool {
        self.namespace.is_none() && self.labels.0.is_empty() && self.fields.is_none() && self.annotations.is_empty()
    }

    /// True when it selects this JSON object.
    pub fn admits(&self, object: &serde_json::Value) -> bool {
        let namespace = object.pointer("/metadata/namespace").and_then(|n| n.as_str());
        if !in_namespace(self.namespace.as_deref(), namespace) {
            return false;
        }
        let finalized = self.finalizer.as_deref().is_some_and(|f| {
            object.pointer("/metadata/finalizers").and_then(|v| v.as_array()).is_some_and(|l| l.iter().any(|x| x == f))
        });
        finalized
            || (self.labels.matches_object(object)
                && self.fields.as_ref().is_none_or(|s| s.matches_object(object))
                && self.annotations.iter().all(|a| a.matches_object(object)))
    }
}

/// Which objects of one declared kind a plugin's cache holds ([`crate::manifest::ManifestView::visible`]).
///
/// A kind a plugin declares only under `watches` and `reads`, each time with a selector that
/// narrows it, is watched through them: the API server sends only what their namespaces,
/// labels and fields select, the cache drops what their annotation filters refuse, and every
/// cache (the host's informers, the offline cache, the SDK's test host) serves only that. A
/// primary's cache holds what its selector selects, and what carries its finalizer. Every
/// other declared kind is held whole.
///
/// ```
/// use serde_json::json;
/// use wasmloop_contract::cache::{Selection, Visible};
/// let web = Visible::Selected(vec![Selection { labels: "app=web".parse().unwrap(), ..Selection::default() }]);
/// assert!(web.admits(&json!({"metadata": {"labels": {"app": "web"}}})));
/// assert!(!web.admits(&json!({"metadata": {"name": "db"}})));
/// let in_a = Visible::Selected(vec![Selection { namespace: Some("a".into()), ..Selection::default() }]);
/// assert!(!in_a.admits(&json!({"metadata": {"namespace": "b"}})));
/// assert!(Visible::All.admits(&json!({})));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Visible {
    /// Every object of the kind.
    #[default]
    All,
    /// The objects one of these selections selects.
    Selected(Vec<Selection>),
}

impl Visible {
    /// True when the cache holds this JSON object.
    pub fn admits(&self, object: &serde_json::Value) -> bool {
        let Visible::Selected(selections) = self else { return true };
        selections.iter().any(|s| s.admits(object))
    }
}

/// The `kubectl.kubernetes.io/last-applied-configuration` annotation: `kubectl apply`'s copy of
/// the whole object it last applied, often the largest part of a small object.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Which of the fields every cache strips by default a plugin keeps, for one kind. The
/// default keeps neither: controller-runtime's `TransformStripManagedFields` convention, and
/// the last-applied annotation with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Kept {
    /// `metadata.managedFields`.
    pub managed_fields: bool,
    /// The [`LAST_APPLIED`] annotation.
    pub last_applied: bool,
}

impl Kept {
    /// Keeps neither.
    pub fn is_empty(&self) -> bool {
        !self.managed_fields && !self.last_applied
    }

    /// Both sets together.
    pub fn union(self, other: Kept) -> Kept {
        Kept {
            managed_fields: self.managed_fields || other.managed_fields,
            last_applied: self.last_applied || other.last_applied,
        }
    }
}

/// Removes from `object` what a cache strips unless `kept` says otherwise: `managedFields`,
/// and the last-applied annotation (and the annotations map, when that was all it held).
/// Returns true when it removed anything. Anything but an object with a `metadata` object is
/// left as it is.
///
/// ```
/// use serde_json::json;
/// use wasmloop_contract::cache::{Kept, strip};
/// let mut cm = json!({"metadata": {"name": "a", "managedFields": [{}],
///     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}});
/// assert!(strip(&mut cm, Kept::default()));
/// assert_eq!(cm, json!({"metadata": {"name": "a"}}));
/// ```
pub fn strip(object: &mut serde_json::Value, kept: Kept) -> bool {
    let Some(serde_json::Value::Object(metadata)) = object.get_mut("metadata") else { return false };
    let mut removed = false;
    if !kept.managed_fields {
        removed |= metadata.remove("managedFields").is_some();
    }
    if !kept.last_applied
        && let Some(serde_json::Value::Object(annotations)) = metadata.get_mut("annotations")
        && annotations.remove(LAST_APPLIED).is_some()
    {
        removed = true;
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
    removed
}

/// An object as a metadata-only kind reaches its plugin: `apiVersion`, `kind` and `metadata`
/// without `managedFields`, the shape of a `PartialObjectMetadata`. Anything but a JSON object
/// is kept as it is.
///
/// ```
/// use serde_json::json;
/// use wasmloop_contract::cache::metadata_only;
/// let full = json!({"apiVersion": "v1", "kind": "Pod", "spec": {},
///                   "metadata": {"name": "p", "managedFields": [{}]}});
/// assert_eq!(metadata_only(full), json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}));
/// ```
pub fn metadata_only(full: serde_json::Value) -> serde_json::Value {
    let serde_json::Value::Object(mut full) = full else { return full };
    let mut lean = serde_json::Map::new();
    for field in ["apiVersion", "kind", "metadata"] {
        if let Some(v) = full.remove(field) {
            lean.insert(field.to_owned(), v);
        }
    }
    if let Some(serde_json::Value::Object(metadata)) = lean.get_mut("metadata") {
        metadata.remove("managedFields");
    }
    serde_json::Value::Object(lean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object() -> serde_json::Value {
        json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}],
            "annotations": {LAST_APPLIED: "{}", "team": "x"}}})
    }

    #[test]
    fn strip_keeps_what_is_asked_and_only_that() {
        let keep = |managed_fields, last_applied| Kept { managed_fields, last_applied };
        let cases = [
            (keep(false, false), false, false),
            (keep(true, false), true, false),
            (keep(false, true), false, true),
            (keep(true, true), true, true),
        ];
        for (kept, managed, applied) in cases {
            let mut o = object();
            assert_eq!(strip(&mut o, kept), !(managed && applied), "{kept:?}");
            assert_eq!(o.pointer("/metadata/managedFields").is_some(), managed, "{kept:?}");
            assert_eq!(o["metadata"]["annotations"].get(LAST_APPLIED).is_some(), applied, "{kept:?}");
            assert_eq!(o["metadata"]["annotations"]["team"], "x", "other annotations stay");
        }
    }

    #[test]
    fn strip_leaves_what_is_not_an_object_with_metadata() {
        for mut v in [json!(1), json!({"metadata": 3}), json!({"kind": "X"})] {
            let before = v.clone();
            assert!(!strip(&mut v, Kept::default()));
            assert_eq!(v, before);
        }
    }
}
