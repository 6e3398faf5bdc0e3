//! Which API resource serves a kind, and whether it is namespaced: asked once per kind.
//!
//! A targeted look-up of the kind's group version (`pinned_kind`), not a walk of every
//! group: one small request per kind, where aggregated discovery would fetch every group's
//! resources to answer for one.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::api::ApiResource;
use kube::discovery::{self, Scope};
use wasmloop_sandbox::Gvk;

/// A kind resolved by discovery.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The resource (plural, group, version).
    pub resource: ApiResource,
    /// True for namespaced kinds.
    pub namespaced: bool,
}

/// The kind could not be resolved.
#[derive(Debug, thiserror::Error)]
#[error("kind {kind} is not served by the API server ({reason}); install its CRD, or fix the plugin's manifest")]
pub struct DiscoveryError {
    /// The kind.
    pub kind: Gvk,
    /// What the API server answered, cut: a body kube could not parse is quoted in it.
    pub reason: String,
}

/// A cache of resolved kinds.
pub struct Kinds {
    client: Client,
    cache: Mutex<HashMap<Gvk, Resolved>>,
}

impl Kinds {
    /// An empty cache using `client`.
    pub fn new(client: Client) -> Kinds {
        Kinds { client, cache: Mutex::new(HashMap::new()) }
    }

    /// Resolves `kind`, from the cache when it was resolved before. Only a parsed [`Gvk`] can
    /// be asked for, so the request's path names a group and a version and nothing else.
    ///
    /// # Errors
    /// When the server does not serve the kind.
    pub async fn resolve(&self, kind: &Gvk) -> Result<Resolved, DiscoveryError> {
        self.resolve_as(&self.client, kind).await
    }

    /// [`Kinds::resolve`], asking the server as `client` when it must ask: a plugin's kinds are
    /// discovered as the plugin's identity, once it was checked.
    ///
    /// # Errors
    /// When the server does not serve the kind, or does not tell `client`.
    pub async fn resolve_as(&self, client: &Client, kind: &Gvk) -> Result<Resolved, DiscoveryError> {
        if let Some(found) = self.cache.lock().expect("lock").get(kind) {
            return Ok(found.clone());
        }
        let gvk = crate::api::group_version_kind(kind);
        let (resource, capabilities) = discovery::pinned_kind(client, &gvk).await.map_err(|source| DiscoveryError {
            kind: kind.clone(),
            reason: wasmloop_contract::validate::foreign(source.to_string()),
        })?;
        let resolved = Resolved { resource, namespaced: capabilities.scope == Scope::Namespaced };
        self.cache.lock().expect("lock").insert(kind.clone(), resolved.clone());
        Ok(resolved)
    }
}
