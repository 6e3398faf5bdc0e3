//! Read-only look-ups in the host's informer cache. No API calls, no network.
//!
//! Only kinds the manifest declares (primary, owns, watches, reads) are readable. A refusal is
//! a [`CacheError`] saying why; `?` turns it into a reconcile [`Error`] (permanent, except a
//! revoked grant, which the host retries once the grant is back).
//!
//! Lists come from the host a page at a time ([`list_page`]); [`list_objects`] and [`list`]
//! walk the pages for you.

use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::kind::{Gvk, Kind};
use crate::request::Object;

pub use crate::abi::{CacheError, Page};

impl From<CacheError> for Error {
    fn from(e: CacheError) -> Error {
        match e {
            // Nothing the plugin can do; the host retries when access is back.
            CacheError::AccessRevoked(m) => Error::transient(m),
            // A kind missing from the manifest, a bad selector or namespace: the same call
            // fails the same way until the plugin or the object changes.
            other => Error::permanent(other.message()),
        }
    }
}

/// Reads one object of a declared kind, unparsed.
///
/// # Errors
/// A [`CacheError`] when the host refuses the look-up.
pub fn get_object(kind: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<Object>, CacheError> {
    crate::host::get(kind, namespace, name)
}

/// One page of objects of a declared kind, optionally in one namespace and filtered by a
/// label selector (`app=web,tier!=cache`). `limit` 0 asks for the host's page size (500),
/// which is also the most a page holds.
///
/// # Errors
/// A [`CacheError`] when the host refuses the look-up or the token.
pub fn list_page(
    kind: &Gvk,
    namespace: Option<&str>,
    label_selector: Option<&str>,
    limit: u32,
    continue_token: Option<&str>,
) -> Result<Page, CacheError> {
    crate::host::list_page(kind, namespace, label_selector, limit, continue_token)
}

/// Lists every object of a declared kind, unparsed, page by page.
///
/// # Errors
/// A [`CacheError`] when the host refuses the look-up.
pub fn list_objects(
    kind: &Gvk,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<Object>, CacheError> {
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = list_page(kind, namespace, label_selector, 0, token.as_deref())?;
        all.extend(page.items);
        match page.continue_token {
            Some(next) => token = Some(next),
            None => return Ok(all),
        }
    }
}

/// One page of the objects of a declared kind that the manifest's index `index` files under
/// `key` ([`crate::Manifest::index`]), optionally in one namespace.
///
/// # Errors
/// A [`CacheError`] when the host refuses the look-up (an index the manifest does not declare
/// on this kind among them) or the token.
pub fn list_by_index_page(
    kind: &Gvk,
    index: &str,
    key: &str,
    namespace: Option<&str>,
    limit: u32,
    continue_token: Option<&str>,
) -> Result<Page, CacheError> {
    crate::host::list_by_index(&crate::host::IndexQuery { kind, index, key, namespace, limit, token: continue_token })
}

/// Every object of a declared kind that the index `index` files under `key`, unparsed, page by
/// page. Costs what the answer holds, not what the kind holds: `map` for a changed ConfigMap
/// finds the Deployments that mount it without reading the others.
///
/// # Errors
/// A [`CacheError`] when the host refuses the look-up.
pub fn list_by_index_objects(
    kind: &Gvk,
    index: &str,
    key: &str,
    namespace: Option<&str>,
) -> Result<Vec<Object>, CacheError> {
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = list_by_index_page(kind, index, key, namespace, 0, token.as_deref())?;
        all.extend(page.items);
        match page.continue_token {
            Some(next) => token = Some(next),
            None => return Ok(all),
        }
    }
}

/// Lists and parses the objects of kind `K` that the index `index` files under `key`.
///
/// ```no_run
/// use k8s_openapi::api::apps::v1::Deployment;
/// use wasmloop_sdk::prelude::*;
/// # fn f(related: &Object) -> Result<Vec<ObjectRef>, Error> {
/// // In `map` for a changed ConfigMap: the Deployments in its namespace that mount it.
/// let users: Vec<Deployment> = cache::list_by_index("configmap", &related.name, related.namespace.as_deref())?;
/// # Ok(Vec::new()) }
/// ```
///
/// # Errors
/// When the host refuses the look-up or an object does not fit `K`.
pub fn list_by_index<K: Kind + DeserializeOwned>(
    index: &str,
    key: &str,
    namespace: Option<&str>,
) -> Result<Vec<K>, Error> {
    list_by_index_objects(&K::gvk(), index, key, namespace)?.iter().map(Object::parse).collect()
}

/// Reads and parses one object of kind `K`.
///
/// # Errors
/// When the host refuses the look-up or the object does not fit `K`.
pub fn get<K: Kind + DeserializeOwned>(namespace: Option<&str>, name: &str) -> Result<Option<K>, Error> {
    get_object(&K::gvk(), namespace, name)?.map(|o| o.parse()).transpose()
}

/// Lists and parses objects of kind `K`.
///
/// # Errors
/// When the host refuses the look-up or an object does not fit `K`.
pub fn list<K: Kind + DeserializeOwned>(
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<K>, Error> {
    list_objects(&K::gvk(), namespace, label_selector)?.iter().map(Object::parse).collect()
}
