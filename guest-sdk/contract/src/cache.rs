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
