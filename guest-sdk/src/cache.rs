//! Read-only look-ups in the host's informer cache. No API calls, no network.
//!
//! Only kinds the manifest declares are readable; anything else is an error naming the kind.

use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::kind::{Gvk, Kind};
use crate::request::Object;

fn cache_error(message: String) -> Error {
    // A kind missing from the manifest or a bad selector will not fix itself on retry.
    Error::permanent(message)
}

/// Reads one object of a declared kind, unparsed.
///
/// # Errors
/// A permanent error when the kind is not declared in the manifest.
pub fn get_object(kind: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<Object>, Error> {
    crate::host::get(kind, namespace, name).map_err(cache_error)
}

/// Lists objects of a declared kind, unparsed, optionally in one namespace and filtered by a
/// label selector (`app=web,tier!=cache`).
///
/// # Errors
/// A permanent error when the kind is not declared or the selector is malformed.
pub fn list_objects(kind: &Gvk, namespace: Option<&str>, label_selector: Option<&str>) -> Result<Vec<Object>, Error> {
    crate::host::list(kind, namespace, label_selector).map_err(cache_error)
}

/// Reads and parses one object of kind `K`.
///
/// # Errors
/// A permanent error when `K` is not declared or the object does not fit `K`.
pub fn get<K: Kind + DeserializeOwned>(namespace: Option<&str>, name: &str) -> Result<Option<K>, Error> {
    get_object(&K::gvk(), namespace, name)?.map(|o| o.parse()).transpose()
}

/// Lists and parses objects of kind `K`.
///
/// # Errors
/// A permanent error when `K` is not declared, the selector is malformed or an object does
/// not fit `K`.
pub fn list<K: Kind + DeserializeOwned>(
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<K>, Error> {
    list_objects(&K::gvk(), namespace, label_selector)?.iter().map(Object::parse).collect()
}
