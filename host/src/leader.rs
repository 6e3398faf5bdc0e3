//! Leader election (`run --leader-elect`): of several hosts, only the holder of a
//! `coordination.k8s.io/v1` Lease reconciles. The others run their informers, so their caches
//! are warm when they take over.
//!
//! `kube-lease-manager` acquires and renews the Lease. Two safeguards sit on top, as in
//! controller-runtime: losing the Lease ends the process (the in-flight reconciles stop at
//! once; the orchestrator restarts the pod as a standby), and so does failing to confirm the
//! Lease for longer than its renew deadline, since the manager only reports a loss it could
//! read from the API server.
//!
//! - The Lease lasts `--lease-duration-seconds` (15, at least 6) and is renewed halfway: the
//!   manager retries a failed renewal only after 1 to 2 s, so half the duration leaves room for
//!   several attempts. The outcome is a `watch` channel in the runtime's `Context`: workers wait
//!   on it, the status writer writes only while it says so, and a standby queues nothing until
//!   it takes over, then enqueues every primary from its warm cache.
//! - Once the manager reports the lead, the host reads the Lease four times a second
//!   (`confirm`). It leads only from the first read showing a renewal of its own within the
//!   renew deadline, so a host restarted under the same identity, which the manager reports
//!   leading on a Lease that may have expired, waits for a fresh renewal. It ends itself at the
//!   renew deadline counted from the last renewal it saw (`renewTime`), a quarter of the grace
//!   before the Lease expires (13.25 s for 15 s and 7 s; `renew_deadline`): counting from the
//!   last successful *read* instead, as an earlier version did, let a leader reconcile up to a
//!   renewal interval past its Lease's expiry. A read that hangs cannot delay the exit. Another
//!   host judges the expiry by its own clock, so this holds while clocks agree within that
//!   quarter of the grace (1.75 s by default).
//! - On SIGTERM, after draining, the host releases the Lease; a standby checks every second
//!   whether it is free and campaigns at once, so a rolling update leaves no gap of a Lease
//!   duration.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use wasmloop_contract::names::Namespace;
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
    /// Namespace of the Leases, for leader election and sharding [default: POD_NAMESPACE, else
    /// the service account's namespace].
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<Namespace>,
    /// How long a Lease holds without renewal; a standby takes over at most this long after
    /// the leader dies.
    /// At least 6: the leader renews halfway and must see the renewal land before the last
    /// eighth, which shorter Leases leave too little time for on a loaded node.
    #[arg(long, default_value_t = 15, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(6..=3600))]
    pub lease_duration_seconds: u64,
    /// Split the plugins between the replicas instead of electing one leader: each runs the
    /// plugins rendezvous hashing assigns it, fenced by a Lease per plugin. See docs/operators.md,
    /// "Leader election or sharding", for when to choose which.
    #[arg(long, conflicts_with = "leader_elect")]
    pub shard: bool,
    /// The shard's name: the prefix of its Leases (`<group>-member-<pod>`,
    /// `<group>-plugin-<name>`). Replicas of one group share its plugins.
    #[arg(long, default_value = "wasmloop", value_name = "NAME", value_parser = shard_group)]
    pub shard_group: String,
}

/// A `--shard-group` that cannot prefix a Lease name.
#[derive(Debug, thiserror::Error)]
#[error("use 1-40 characters of a-z, 0-9 and '-', not starting or ending with '-'")]
struct BadShardGroup;

/// A shard group is a Lease name prefix: a DNS label, short enough to leave room for the rest.
fn shard_group(text: &str) -> Result<String, BadShardGroup> {
    if text.len() <= 40 && wasmloop_contract::validate::is_dns1123_label(text) {
        Ok(text.to_owned())
    } else {
        Err(BadShardGroup)
    }
}

/// Why the Leases' namespace is unknown: without it neither leader election nor sharding
/// can start.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    /// No flag, no `POD_NAMESPACE`, and not in a pod.
    #[error(
        "--leader-elect and --shard need the Leases' namespace: pass --leader-election-namespace, or set POD_NAMESPACE (the Downward API does in deploy/)"
    )]
    Unknown,
    /// `POD_NAMESPACE`, or the pod's namespace file, holds no namespace.
    #[error("{from}: {why}; pass --leader-election-namespace")]
    Invalid {
        /// Where it was read: the variable or the file.
        from: &'static str,
        /// Why it is none.
        why: wasmloop_contract::names::Invalid,
    },
}

/// Why this host cannot campaign: it would otherwise reconcile beside the leader.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    /// The Leases' namespace is unknown.
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// The Lease cannot be read or created (RBAC).
    #[error(
        "cannot use Lease {namespace}/{name}: grant the host get, create and patch on coordination.k8s.io leases in {namespace}"
    )]
    Lease {
        /// The Leases' namespace.
        namespace: Namespace,
        /// The Lease.
        name: String,
        /// What the Lease manager said.
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
}

const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The Leases' namespace: the flag's, else `POD_NAMESPACE`'s, else the pod's own. The two
/// read from the environment are parsed like the flag: they become a request path.
///
/// # Errors
/// A [`NamespaceError`]: none is given, or the environment's is no namespace.
pub(crate) fn namespace(args: &LeaderArgs) -> Result<Namespace, NamespaceError> {
    if let Some(ns) = &args.leader_election_namespace {
        return Ok(ns.clone());
    }
    let (text, from) = match std::env::var("POD_NAMESPACE") {
        Ok(text) => (text, "POD_NAMESPACE"),
        Err(_) => match std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE) {
            Ok(text) => (text.trim().to_owned(), SERVICE_ACCOUNT_NAMESPACE),
            Err(_) => return Err(NamespaceError::Unknown),
        },
    };
    Namespace::parse(&text).map_err(|why| NamespaceError::Invalid { from, why })
}

/// This host's name in the Lease: the pod's name, else the host name and process id.
pub(crate) fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
        format!("{host}-{}", std::process::id())
    })
}

fn give_up(identity: &str, why: &str) -> ! {
    tracing::error!(%identity, "{why}: exiting so that no reconcile runs beside the new leader's");
    // Let the line reach the log before the process goes.
    std::thread::sleep(Duration::from_millis(50));
    std::process::exit(1);
}

type ManagerTask = JoinHandle<kube_lease_manager::Result<LeaseManager>>;

/// The campaign: whether this host leads, and the Lease to give back at shutdown.
pub struct Election {
    leading: watch::Receiver<bool>,
    /// The task following the manager's state (it holds the manager's only receiver) and the
    /// manager's own task.
    manager: Option<(JoinHandle<()>, Arc<Mutex<Option<ManagerTask>>>)>,
}

impl Election {
    /// True while this host may reconcile.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Releases the Lease (if held) so a standby takes over without waiting for it to expire.
    pub async fn resign(self) {
        let Some((follower, manager)) = self.manager else { return };
        // Stop following first, so the release is not taken for a lost Lease; dropping the
        // follower's receiver closes the channel, and the manager releases the Lease.
        follower.abort();
        let _ = follower.await;
        let Some(manager) = manager.lock().expect("lock").take() else { return };
        match tokio::time::timeout(Duration::from_secs(5), manager).await {
            Ok(Ok(Ok(_))) => tracing::info!("released the leader Lease"),
            _ => tracing::warn!("could not release the leader Lease; a standby takes over when it expires"),
        }
    }
}

/// What one campaign needs to start (and restart) its Lease manager.
#[derive(Clone)]
struct Candidate {
    client: kube::Client,
    name: String,
    namespace: Namespace,
    identity: String,
    duration: u64,
    grace: u64,
}

impl Candidate {
    async fn start(&self) -> Result<(watch::Receiver<bool>, ManagerTask), ElectionError> {
        let manager = LeaseManagerBuilder::new(self.client.clone(), &self.name)
            .with_namespace(self.namespace.as_str())
            .with_parameters(LeaseParams::new(&self.identity, self.duration, self.grace))
            .build()
            .await
            .map_err(|source| ElectionError::Lease {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                source,
            })?;
        Ok(manager.watch().await)
    }
}

/// Starts campaigning. Without `--leader-elect` this host leads from the start.
///
/// # Errors
/// An [`ElectionError`]: the Lease's namespace is unknown, or the Lease cannot be read or
/// created (RBAC).
pub async fn campaign(
    client: kube::Client,
    args: &LeaderArgs,
    metrics: Arc<Metrics>,
) -> Result<Election, ElectionError> {
    if !args.leader_elect {
        metrics.leader(true);
        return Ok(Election { leading: watch::channel(true).1, manager: None });
    }
    metrics.leader(false);
    let duration = args.lease_duration_seconds;
    let candidate = Candidate {
        client: client.clone(),
        name: args.leader_election_id.clone(),
        namespace: namespace(args)?,
        identity: identity(),
        duration,
        // Renew halfway. The manager tries once at the start of the grace and, after an error,
        // again 1 to 2 s later (longer after repeated errors), unlike client-go, which retries
        // every 2 s: half the duration leaves room for a few attempts before the deadline.
        grace: duration / 2,
    };
    let (state, task) = candidate.start().await?;
    let (leading, receiver) = watch::channel(false);
    tracing::info!(lease = %format!("{}/{}", candidate.namespace, candidate.name), identity = %candidate.identity, "campaigning for the leader Lease; standing by with warm caches");
    let manager = Arc::new(Mutex::new(Some(task)));
    let follower = tokio::spawn(follow(candidate, state, manager.clone(), leading, metrics));
    Ok(Election { leading: receiver, manager: Some((follower, manager)) })
}

/// Follows the manager's state into `leading`. While leading, confirms the Lease (see
/// [`confirm`]). While standing by, notices a released Lease at once and campaigns again:
/// the manager would otherwise sleep until the old holder's expiry.
async fn follow(
    candidate: Candidate,
    mut state: watch::Receiver<bool>,
    manager: Arc<Mutex<Option<ManagerTask>>>,
    leading: watch::Sender<bool>,
    metrics: Arc<Metrics>,
) {
    let leases: Api<Lease> = wasmloop_runtime::api::typed_api(candidate.client.clone(), &candidate.namespace);
    let announce = Arc::new(Announce { identity: candidate.identity.clone(), leading, metrics });
    let deadline = renew_deadline(candidate.duration, candidate.grace);
    let mut confirming: Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>> = None;
    let mut standby = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            changed = state.changed() => {
                if changed.is_err() {
                    // The manager stopped: nobody renews the Lease now.
                    if confirming.is_some() {
                        announce.give_up("the leader-election task ended");
                    }
                    return;
                }
                let leads = *state.borrow_and_update();
                if leads && confirming.is_none() {
                    let confirm = confirm(leases.clone(), candidate.name.clone(), deadline, announce.clone());
                    confirming = Some(Box::pin(confirm));
                } else if !leads && confirming.is_some() {
                    announce.give_up("lost the leader Lease");
                }
            }
            () = async {
                match confirming.as_mut() {
                    Some(confirm) => confirm.await,
                    None => std::future::pending().await,
                }
            } => {}
            _ = standby.tick(), if confirming.is_none() => {
                let released = leases.get(&candidate.name).await.ok().and_then(|l| l.spec).is_some_and(|spec| {
                    spec.holder_identity.is_none_or(|holder| holder.is_empty())
                });
                if released {
                    if let Ok((fresh, task)) = candidate.start().await {
                        if let Some(old) = manager.lock().expect("lock").replace(task) {
                            old.abort();
                        }
                        state = fresh;
                    }
                }
            }
        }
    }
}

/// What the rest of the host sees of the lead: the `leading` channel, the metric and the log.
struct Announce {
    identity: String,
    leading: watch::Sender<bool>,
    metrics: Arc<Metrics>,
}

impl Announce {
    fn lead(&self) {
        tracing::info!(identity = %self.identity, "acquired the leader Lease: reconciling");
        self.metrics.leader(true);
        self.leading.send_replace(true);
    }

    /// Workers stop taking keys at once; the exit ends the reconciles in flight.
    fn give_up(&self, why: &str) -> ! {
        self.leading.send_replace(false);
        self.metrics.leader(false);
        give_up(&self.identity, why)
    }
}

/// Once the manager reports the lead: reads the Lease four times a second, announces the lead
/// on the first read showing a renewal by this host that is still within `stop_at`, and ends
/// the process `stop_at` after the last renewal it saw (the renew deadline, before the Lease
/// expires). Counting from the renewal, not from the read, is what keeps a leader whose
/// renewals fail from reconciling beside the next one; waiting for a fresh renewal before
/// leading covers a host restarted under the same identity, whom the manager reports leading
/// on a Lease that may have expired. A read that hangs cannot hold the exit back.
async fn confirm(leases: Api<Lease>, name: String, stop_at: Duration, announce: Arc<Announce>) {
    let reported = tokio::time::Instant::now();
    let mut renewed: Option<tokio::time::Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let read = tokio::time::timeout_at(renewed.unwrap_or(reported) + stop_at, async {
            tick.tick().await;
            leases.get(&name).await
        });
        let Ok(read) = read.await else {
            announce.give_up("could not confirm the leader Lease within its renew deadline");
        };
        let Ok(lease) = read else { continue };
        match holder(&lease.spec.unwrap_or_default(), &announce.identity, Timestamp::now()) {
            Holder::Us { renewed_ago: Some(ago) } => {
                let now = tokio::time::Instant::now();
                let Some(at) = now.checked_sub(ago).filter(|at| *at + stop_at > now) else { continue };
                if renewed.is_none() {
                    announce.lead();
                }
                renewed = Some(renewed.map_or(at, |r| r.max(at)));
            }
            Holder::Us { renewed_ago: None } => {}
            Holder::Other => announce.give_up("another host holds the leader Lease"),
        }
    }
}

/// Who holds a Lease, as `identity` reads it at `now`.
#[derive(Debug, PartialEq, Eq)]
enum Holder {
    /// This host, its last renewal `renewed_ago`: none without a renewal time, or with one in
    /// the future (this host's clock stepped back), which proves nothing about when it was.
    Us { renewed_ago: Option<Duration> },
    /// Another host, or nobody: either way this host no longer leads.
    Other,
}

fn holder(spec: &k8s_openapi::api::coordination::v1::LeaseSpec, identity: &str, now: Timestamp) -> Holder {
    if spec.holder_identity.as_deref() != Some(identity) {
        return Holder::Other;
    }
    let renewed_ago = spec.renew_time.as_ref().and_then(|t| Duration::try_from(now.duration_since(t.0)).ok());
    Holder::Us { renewed_ago }
}

/// How long after its last renewal a leader stops: a quarter of the grace before the Lease
/// expires. The manager renews at the start of the grace, so a renewal has three quarters of
/// it to land and be read; the last quarter covers stopping, and clock skew with the host
/// that judges the expiry, before another host may take over.
fn renew_deadline(duration: u64, grace: u64) -> Duration {
    Duration::from_secs(duration) - Duration::from_secs(grace) / 4
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use k8s_openapi::jiff::SignedDuration;

    use super::*;

    #[test]
    fn a_lease_is_ours_with_the_age_of_its_last_renewal_and_anyone_elses_is_not() {
        let now: Timestamp = "2026-11-23T12:00:10Z".parse().unwrap();
        let spec = |holder: Option<&str>, renewed: Option<i64>| LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            renew_time: renewed.map(|s| MicroTime(now - SignedDuration::from_secs(s))),
            ..LeaseSpec::default()
        };
        let cases = [
            (
                "renewed 3 s ago by us",
                spec(Some("us"), Some(3)),
                Holder::Us { renewed_ago: Some(Duration::from_secs(3)) },
            ),
            (
                "long expired, still ours",
                spec(Some("us"), Some(60)),
                Holder::Us { renewed_ago: Some(Duration::from_secs(60)) },
            ),
            ("renewed in our future", spec(Some("us"), Some(-2)), Holder::Us { renewed_ago: None }),
            ("ours without a renewal time", spec(Some("us"), None), Holder::Us { renewed_ago: None }),
            ("another holder", spec(Some("them"), Some(0)), Holder::Other),
            ("released", spec(Some(""), Some(0)), Holder::Other),
            ("never held", spec(None, None), Holder::Other),
        ];
        for (name, spec, want) in cases {
            assert_eq!(holder(&spec, "us", now), want, "{name}");
        }
    }

    #[test]
    fn a_leader_stops_a_quarter_of_the_grace_before_its_lease_expires() {
        let cases = [(15, 7, 13_250), (6, 3, 5_250), (3600, 1800, 3_150_000)];
        for (duration, grace, millis) in cases {
            assert_eq!(renew_deadline(duration, grace), Duration::from_millis(millis), "{duration} s / {grace} s");
        }
    }
}
