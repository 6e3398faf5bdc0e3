//! What a plugin's ServiceAccount must be allowed to read, and the review that keeps asking
//! while the plugin runs.

use std::sync::Arc;

use super::shared::Shared;
use crate::discovery::{DiscoveryError, Kinds};
use crate::identity::{Access, Identities, IdentityError, ServiceAccount};
use crate::informer::InformerScope;

/// The reads a plugin is served from the shared caches: `list` and `watch` of every kind it
/// declares, in the scope it declares it. Discovery asks as `client`, the plugin's identity,
/// before any informer starts for it.
pub(super) async fn reads_needed<'a>(
    kinds: &Kinds,
    client: &kube::Client,
    scopes: impl Iterator<Item = &'a InformerScope>,
) -> Result<Vec<Access>, DiscoveryError> {
    let mut needed: Vec<Access> = Vec::new();
    for scope in scopes {
        let resolved = kinds.resolve_as(client, &scope.kind).await?;
        let namespace = scope.namespace.clone().filter(|_| resolved.namespaced);
        for verb in ["list", "watch"] {
            let access = Access { verb, resource: resolved.resource.clone(), namespace: namespace.clone() };
            if !needed.contains(&access) {
                needed.push(access);
            }
        }
    }
    Ok(needed)
}

/// Asks again, every review interval, whether the plugin's ServiceAccount may still be acted
/// as and may still read what it is served. A revoked grant, a deleted or no longer opted-in
/// account, or an API server that cannot answer [`UNANSWERED_REVIEWS`] times in a row stops its
/// reconciles and `map` calls until the answer is yes again, when every primary is requeued.
pub(super) async fn review_again(
    shared: Arc<Shared>,
    identities: Arc<Identities>,
    account: ServiceAccount,
    reads: Vec<Access>,
    deny: tokio::sync::watch::Sender<Option<String>>,
) {
    let plugin = shared.id.to_string();
    let mut tick = tokio::time::interval(identities.review_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut unanswered = 0;
    loop {
        tick.tick().await;
        let answer = match identities.ensure_usable(&account).await {
            Ok(()) => identities.review(&account, &reads).await,
            Err(error) => Err(error),
        };
        let refusal = match answer {
            Ok(()) => {
                unanswered = 0;
                if deny.send_replace(None).is_some() {
                    tracing::info!(plugin, "access granted again to {account}; requeueing every primary");
                    shared.enqueue_all(|_| wasmloop_sandbox::Trigger::Resync);
                }
                continue;
            }
            Err(error @ IdentityError::Api { .. }) => {
                unanswered += 1;
                if unanswered < UNANSWERED_REVIEWS {
                    // Keep what we knew for a while: one failed request is no revocation.
                    tracing::warn!(plugin, %error, "could not review the plugin's access; asking again");
                    continue;
                }
                format!("its access could not be reviewed {unanswered} times in a row: {error}")
            }
            Err(error) => error.to_string(),
        };
        if deny.send_replace(Some(refusal.clone())).is_none() {
            shared.metrics.plugin_rejected(&plugin, "AccessRevoked");
            tracing::error!(plugin, "access revoked, reconciles stop until it is granted again: {refusal}");
        }
    }
}

/// How many reviews in a row may go unanswered before a plugin is treated as revoked.
const UNANSWERED_REVIEWS: u32 = 3;
