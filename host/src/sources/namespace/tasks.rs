//! The work the source runs beside its loop, each in a task of its own so that a slow
//! registry of images, or a plugin whose caches take minutes to sync, holds up no other
//! object: a pull (after checking whom the plugin acts as), and a load.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_runtime::identity::AccountChoice;
use wasmloop_runtime::registry::{Candidate, Registry, RegistryError};

use super::plan::{LoadDone, LoadFailure, LoadSpec, Offer, PullFailure, Shipper};
use crate::oci::{self, OciError, PluginRef, Puller};
use crate::pinning::{self, TrustedKeys};

/// A finished pull: the object it was for, which pull it was, and the component or why not.
pub(super) struct Pulled {
    pub(super) shipper: Shipper,
    pub(super) id: u64,
    pub(super) offer: Offer,
    /// Holds its share of the pulls' memory until the component is loaded.
    pub(super) result: Result<oci::Component, PullFailure>,
}

/// A finished load: the object it was for, which load it was, and what it did.
pub(super) struct Finished {
    pub(super) shipper: Shipper,
    pub(super) id: u64,
    pub(super) result: Result<LoadDone, LoadFailure>,
}

/// Checks that plugin `plugin` of `realm` may act as `account` (none: a shadow, which acts as
/// nobody), then pulls the component `reference` names with pull secret `secret`.
pub(super) async fn pull_checked(
    (registry, puller, secrets): (&Registry, &Puller, &Api<Secret>),
    (realm, plugin, account): (&Namespace, &str, Option<&AccountChoice>),
    reference: &PluginRef,
    secret: Option<&Name>,
) -> Result<oci::Component, PullFailure> {
    // Whom it acts as, before a connection is made or memory taken for it.
    if let Some(account) = account
        && let Err(source) = registry.may_act(Some(realm), plugin, account).await
    {
        return Err(PullFailure::Identity(RegistryError::Start { source, running: None }));
    }
    pull(puller, secrets, reference, secret).await.map_err(|e| PullFailure::Fetch(e.to_string()))
}

/// Takes the component's share of the load memory (unless a pull brought one), expands and
/// checks its bytes off the runtime's threads, and offers it to the registry, which compiles
/// it and then lets go of the bytes and their share.
pub(super) async fn load(
    spec: LoadSpec,
    (registry, puller, trusted): (&Registry, &Puller, Option<Arc<TrustedKeys>>),
    realm: Namespace,
    memory: Option<oci::Memory>,
) -> Result<LoadDone, LoadFailure> {
    let shadow = spec.shadow();
    let LoadSpec { source, payload, stored_in, account, settings, invalid } = spec;
    // Whom it acts as is checked before anything is read or compiled for it: an object
    // naming an account it may not use costs one look-up, not a load.
    if !shadow && let Err(source) = registry.may_act(Some(&realm), &payload.name, &account).await {
        return Err(LoadFailure::Registry(RegistryError::Start { source, running: None }));
    }
    let memory = match memory {
        Some(memory) => memory,
        None => puller.load_memory(&realm, payload.component.expanded_size()).await,
    };
    let plugin = payload.name.clone();
    let (stored, pin, signature) = (payload.component, payload.pin.clone(), payload.signature.clone());
    let checked = tokio::task::spawn_blocking(move || {
        let bytes = stored.unpack(&stored_in).map_err(|e| (invalid, e.to_string()))?;
        pinning::check(&bytes, pin.as_deref(), signature.as_deref(), trusted.as_deref())
            .map_err(|e| (e.reason(), e.to_string()))?;
        Ok::<_, (&'static str, String)>(bytes)
    })
    .await
    .expect("expanding and checking a component does not panic");
    let bytes = checked.map_err(|(reason, message)| LoadFailure::Bytes { plugin: plugin.clone(), reason, message })?;
    let candidate = Candidate {
        settings,
        source,
        realm: Some(realm),
        expected_name: Some(plugin),
        bytes,
        held: Some(Arc::new(memory)),
        config: payload.config,
        account,
    };
    if shadow {
        return registry.shadow(candidate).await.map(|_| LoadDone::Seated).map_err(LoadFailure::Registry);
    }
    registry.upsert(candidate).await.map(LoadDone::Loaded).map_err(LoadFailure::Registry)
}

/// The Secret types a pull secret may have: those `kubectl create secret docker-registry`
/// writes. Any other Secret of the namespace (a token, a TLS key) is not read as credentials.
const PULL_SECRET_TYPES: [&str; 2] = ["kubernetes.io/dockerconfigjson", "kubernetes.io/dockercfg"];

/// The component `reference` names, for a plugin of `secrets`' namespace, with the credentials
/// of pull secret `secret`; the Secret's read counts against the pull's time.
async fn pull(
    puller: &Puller,
    secrets: &Api<Secret>,
    reference: &PluginRef,
    secret: Option<&Name>,
) -> Result<oci::Component, OciError> {
    let deadline = tokio::time::Instant::now() + puller.timeout();
    let namespace = secrets.namespace().unwrap_or_default();
    let auth = match secret {
        None => oci_client::secrets::RegistryAuth::Anonymous,
        Some(name) => {
            let at = format!("{namespace}/{name}");
            let read = tokio::time::timeout_at(deadline, secrets.get_opt(name)).await.map_err(|_| {
                OciError::Credentials(format!(
                    "pull secret {at}: reading it took longer than {:?}; check the API server",
                    puller.timeout()
                ))
            })?;
            let secret = read
                .map_err(|e| OciError::Credentials(unreadable_secret(&at, name, &namespace, &e)))?
                .ok_or_else(|| {
                    OciError::Credentials(format!(
                        "pull secret {at} does not exist; create it with `kubectl create secret docker-registry`"
                    ))
                })?;
            let type_ = secret.type_.as_deref().unwrap_or("Opaque");
            if !PULL_SECRET_TYPES.contains(&type_) {
                return Err(OciError::Credentials(format!(
                    "pull secret {at} is of type {type_}, not {}; create it with `kubectl create secret docker-registry`",
                    PULL_SECRET_TYPES[0]
                )));
            }
            let data = secret.data.unwrap_or_default();
            let document = data.get(".dockerconfigjson").or_else(|| data.get(".dockercfg")).ok_or_else(|| {
                OciError::Credentials(format!(
                    "pull secret {at} has no .dockerconfigjson; create it with `kubectl create secret docker-registry`"
                ))
            })?;
            oci::credentials(&document.0, reference.registry(), &at)?
        }
    };
    puller.pull_by(deadline, &namespace, reference, &auth).await
}

/// Why pull secret `at` could not be read, and what to do: `deploy/` lets the host get only the
/// Secrets its Role names, so a forbidden read most likely wants the name added there.
fn unreadable_secret(at: &str, name: &str, namespace: &str, error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.is_forbidden() => format!(
            "pull secret {at}: the host may not read it ({}); add {name} to the resourceNames of Role wasmloop's rule on Secrets in {namespace} (deploy/base/rbac.yaml)",
            wasmloop_contract::validate::cut(status.message.clone(), 512)
        ),
        other => format!(
            "pull secret {at}: cannot read it ({}); the host needs get on Secrets in {namespace}",
            wasmloop_contract::validate::cut(other.to_string(), 512)
        ),
    }
}
