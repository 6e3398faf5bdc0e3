//! Leader election (`run --leader-elect`): of several hosts, only the holder of a
//! `coordination.k8s.io/v1` Lease reconciles. The others run their informers and queues, so
//! their caches are warm when they take over.
//!
//! The Lease is handled by `kube-lease-manager`. Losing it ends the process, as
//! controller-runtime's managers do: the in-flight reconciles stop at once, and the
//! orchestrator restarts the pod as a standby.

use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use wasmloop_runtime::Metrics;

/// Leader-election options.
#[derive(Debug, Clone, Args)]
pub struct LeaderArgs {
    /// Reconcile only while holding the leader Lease; standbys keep their caches warm.
    #[arg(long)]
    pub leader_elect: bool,
    /// Name of the Lease.
    #[arg(long, default_value = "wasmloop", value_name = "NAME")]
    pub leader_election_id: String,
    /// Namespace of the Lease [default: POD_NAMESPACE, else the service account's namespace].
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// How long a Lease holds without renewal; a standby takes over at most this long after
    /// the leader dies.
    #[arg(long, default_value_t = 15, value_name = "SECONDS")]
    pub lease_duration_seconds: u64,
}

const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

fn namespace(args: &LeaderArgs) -> anyhow::Result<String> {
    if let Some(ns) = args.leader_election_namespace.clone().or_else(|| std::env::var("POD_NAMESPACE").ok()) {
        return Ok(ns);
    }
    std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE).map(|ns| ns.trim().to_owned()).map_err(|_| {
        anyhow::anyhow!(
            "--leader-elect needs the Lease's namespace: pass --leader-election-namespace, or set POD_NAMESPACE (the Downward API does in deploy/)"
        )
    })
}

/// This host's name in the Lease: the pod's name, else the host name and process id.
fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
        format!("{host}-{}", std::process::id())
    })
}

/// Starts campaigning; the receiver turns true while this host leads. Without
/// `--leader-elect` it is true from the start.
///
/// # Errors
/// When the Lease's namespace is unknown or the Lease cannot be read or created (RBAC).
pub async fn campaign(
    client: kube::Client,
    args: &LeaderArgs,
    metrics: std::sync::Arc<Metrics>,
) -> anyhow::Result<watch::Receiver<bool>> {
    if !args.leader_elect {
        metrics.leader(true);
        return Ok(watch::channel(true).1);
    }
    metrics.leader(false);
    let (namespace, identity) = (namespace(args)?, identity());
    let duration = args.lease_duration_seconds.max(2);
    // Renew a third of the duration before expiry, as client-go's 15 s / 10 s defaults do.
    let grace = (duration / 3).max(1);
    let manager = LeaseManagerBuilder::new(client, &args.leader_election_id)
        .with_namespace(&namespace)
        .with_parameters(LeaseParams::new(&identity, duration, grace))
        .build()
        .await
        .with_context(|| {
            format!(
                "cannot use Lease {namespace}/{}: grant the host get, create and update on coordination.k8s.io leases in {namespace}",
                args.leader_election_id
            )
        })?;
    let (mut state, _task) = manager.watch().await;
    let (leading, receiver) = watch::channel(false);
    tracing::info!(lease = %format!("{namespace}/{}", args.leader_election_id), %identity, "campaigning for the leader Lease; standing by with warm caches");
    tokio::spawn(async move {
        let mut led = false;
        while state.changed().await.is_ok() {
            let leads = *state.borrow_and_update();
            if leads && !led {
                tracing::info!(%identity, "acquired the leader Lease: reconciling");
                metrics.leader(true);
                leading.send_replace(true);
            } else if !leads && led {
                leading.send_replace(false);
                metrics.leader(false);
                tracing::error!(%identity, "lost the leader Lease: exiting so that no reconcile runs beside the new leader's");
                // Give the log line a moment to reach the terminal.
                tokio::time::sleep(Duration::from_millis(50)).await;
                std::process::exit(1);
            }
            led = leads;
        }
    });
    Ok(receiver)
}
