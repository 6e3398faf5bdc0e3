//! Which API resource serves a kind, and whether it is namespaced: asked once per kind.
//!
//! A targeted look-up of the kind's group version (`pinned_kind`), not a walk of every
//! group: it works on every server version (aggregated discovery returns nothing on 1.20).

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};
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
#[error("kind {kind} is not served by the API server ({source}); install its CRD, or fix the plugin's manifest")]
pub struct DiscoveryError {
    /// The kind.
    pub kind: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
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

    /// Resolves `kind`, from the cache when it was resolved before.
    ///
    /// # Errors
    /// When the server does not serve the kind.
    pub async fn resolve(&self, kind: &Gvk) -> Result<Resolved, DiscoveryError> {
        if let Some(found) = self.cache.lock().expect("lock").get(kind) {
            return Ok(found.clone());
        }
        let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
        let (resource, capabilities) = discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|source| DiscoveryError { kind: kind.to_string(), source })?;
        let resolved = Resolved { resource, namespaced: capabilities.scope == Scope::Namespaced };
        self.cache.lock().expect("lock").insert(kind.clone(), resolved.clone());
        Ok(resolved)
    }
}
