//! Plugin sharding (`run --shard`): replicas split the plugins between them, on Kubernetes'
//! own coordination, instead of one leader running everything.
//!
//! - **Members.** Each replica holds a member Lease, `<group>-member-<identity>`, in the
//!   Lease namespace and renews it every sixth of the Lease duration. The live members are
//!   those whose Lease this replica saw change within one duration ([`lease::Observations`]).
//! - **Assignment.** Each plugin goes to one live member by rendezvous hashing
//!   ([`hashing::owner`]): every replica computes the same answer, and a member coming or
//!   going moves only the plugins that must move.
//! - **Fences.** A replica runs a plugin only while it holds the plugin's fence Lease,
//!   `<group>-plugin-<name>`. It takes a fence only when it is free or stale; a replica
//!   handing a plugin over stops it (its reconciles in flight finish) before it releases the
//!   fence; and a replica that cannot renew its Leases stops everything, by exiting, an
//!   eighth of a duration before anyone may judge them stale. So a plugin is reconciled by at
//!   most one replica at any moment, even across a network partition.
//! - **Memory divides.** A plugin this replica does not run is parked in the registry:
//!   compiled, but with no informers, instances or queue ([`Registry::sharded`]).
//!
//! Leader election stays for the simple case: while one process holds every plugin, its
//! standby's caches are warm and failover needs no relist. Sharding is for when one process is
//! not enough (memory, CPU, API watches), at the price of a cold start (compile from the cache,
//! list, sync) and a relist on the new replica for every move.
//!
//! - **Members and ticks.** Every tick (a sixth of the Lease duration, at most 2 s) a replica
//!   lists the group's Leases once and renews each it holds with a resourceVersion-guarded
//!   `replace`. Liveness is judged by when *this* replica saw a Lease change (`lease`).
//! - **Fence keys.** A fence's key is the plugin's id, or `x.` and a hash of it for ids that
//!   are no valid label value (a namespaced plugin's `NAMESPACE/NAME`; `lease::plugin_key`).
//!   Its holder is the *process* (the identity and a per-process nonce), so a pod restarted
//!   under the same name waits like anyone. A replica takes a fence only when it is free or
//!   stale, with a guarded write, so two takers cannot both win; then it admits the plugin in
//!   the registry (a start that leaves it parked is tried again after 10 s). A replica that is
//!   no longer the owner evicts it, keeps renewing the fence while its reconciles drain, and
//!   releases it only once the last has ended (`Handover::quiesced`), drain timeout or not.
//!   Freshness is judged by the longer of this replica's duration and the holder's.
//! - **Stopping in time.** A replica that cannot renew its member Lease or a fence within
//!   `lease::renew_deadline` of *sending* its last successful renewal exits: the others may
//!   judge a Lease stale only a whole duration after they saw it change, which is after it was
//!   sent. A watchdog task checks every 100 ms, so a coordinator stuck in a slow call still
//!   stops in time; every API call is bounded by a third of the duration; a fence found held by
//!   another process while renewing it means that promise broke, and the replica exits too.
//!   So a plugin runs on at most one replica at any moment while the nodes' clock *rates*
//!   agree (the Lease protocol's assumption).
//! - **Leaving.** SIGTERM makes the replica hand every plugin over as for a new member, then
//!   delete its member Lease, so the others take over on their next tick, not a Lease later.
//!   After a SIGKILL a move takes a little more than a Lease duration (17.2 s median at 15 s,
//!   `docs/benchmarks.md`), since trusting the dead replica's `renewTime` would trust another
//!   node's clock.
//! - **What shows it.** `wasmloop_shard_running{plugin,replica}`, `wasmloop_shard_members`,
//!   `wasmloop_shard_moves_total{plugin,result}`, the log lines "took the plugin's fence" and
//!   "handed the plugin over", and the `replica` in the plugin object's status, which the
//!   replica running it writes and the one parking it does not.
//!
//! The limit: a plugin is the unit. One plugin's keys are never split between replicas
//! (`docs/limits.md` sketches how that would be done).

pub mod hashing;
pub mod lease;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use wasmloop_sandbox::PluginId;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use wasmloop_runtime::Metrics;
use wasmloop_runtime::registry::Registry;

use crate::leader::{LeaderArgs, NamespaceError};
use lease::{Observations, Step};

/// Why this replica cannot join the shard: it would otherwise run plugins no fence guards.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The Leases' namespace is unknown.
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// The member Lease cannot be written (RBAC).
    #[error(
        "cannot write the member Lease {namespace}/{member}: grant the host get, list, create, update and delete on coordination.k8s.io leases in {namespace}"
    )]
    MemberLease {
        /// The Leases' namespace.
        namespace: wasmloop_contract::names::Namespace,
        /// The member Lease.
        member: String,
        /// What the call said.
        #[source]
        source: LeaseCallError,
    },
}

/// Why a call on the shard's Leases failed: a conflict means another replica wrote first.
#[derive(Debug, thiserror::Error)]
pub enum LeaseCallError {
    /// The API server's answer.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// No answer within a third of the Lease duration.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// The label every sharding Lease carries, valued with the group.
const GROUP_LABEL: &str = "wasmloop.dev/shard";
/// `member` or `fence`.
const ROLE_LABEL: &str = "wasmloop.dev/shard-role";
/// A fence's plugin.
const PLUGIN_LABEL: &str = "wasmloop.dev/plugin";

/// Where the Leases are and how long they hold.
#[derive(Debug, Clone)]
struct Settings {
    group: String,
    /// The replica's name (the pod's): what members are hashed by, stable across restarts.
    identity: String,
    /// This process: the identity and a per-process nonce, the holder of its fences. A pod
    /// restarted under the same name is another process, and waits for its predecessor's
    /// fences to go stale like anyone else.
    process: String,
    duration: Duration,
}

impl Settings {
    fn member_lease(&self) -> String {
        format!("{}-member-{}", self.group, lease::name_segment(&self.identity))
    }

    fn fence_lease(&self, plugin: &str) -> String {
        format!("{}-plugin-{}", self.group, lease::plugin_key(plugin))
    }

    /// A Lease of `role` held by this replica (its members by `identity`, its fences by
    /// `process`), renewed now.
    fn held(&self, name: String, role: &str, plugin: Option<&str>, acquired: Option<MicroTime>) -> Lease {
        let mut labels = std::collections::BTreeMap::from([
            (GROUP_LABEL.to_owned(), self.group.clone()),
            (ROLE_LABEL.to_owned(), role.to_owned()),
        ]);
        if let Some(plugin) = plugin {
            labels.insert(PLUGIN_LABEL.to_owned(), lease::plugin_key(plugin));
        }
        let holder = if plugin.is_some() { &self.process } else { &self.identity };
        let now = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..ObjectMeta::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.clone()),
                lease_duration_seconds: Some(i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)),
                acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
                renew_time: Some(now),
                ..LeaseSpec::default()
            }),
        }
    }
}

/// What this replica does with a plugin whose fence it holds.
enum Work {
    /// Runs it; `start` is its start (compiling, syncing its caches), finished or not, begun
    /// `at`. A start that left it parked (a full pool, a cache that did not sync) is tried again.
    Started { start: JoinHandle<()>, at: Instant },
    /// Hands it over: stops it and waits for its last reconcile, then releases the fence.
    Evicting(JoinHandle<()>),
}

/// How long after a start that left its plugin parked the next is tried.
const RESTART_AFTER: Duration = Duration::from_secs(10);

/// When each Lease this replica holds was last renewed (the successful write's send time), by
/// Lease name. A watchdog task of its own reads it, so a coordinator stuck in a slow call still
/// stops the process in time.
type Renewals = Arc<std::sync::Mutex<HashMap<String, Instant>>>;

struct Coordinator {
    leases: Api<Lease>,
    settings: Settings,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    seen: Observations,
    held: HashMap<PluginId, Work>,
    renewals: Renewals,
    /// Set at shutdown: hand everything over, take nothing.
    leaving: bool,
    /// When this replica joined: it takes nothing for two ticks, so that replicas started
    /// together see each other first instead of one taking everything and handing most of it
    /// back (the memory such a start touches is not all given back to the system).
    joined: Instant,
}

/// A replica's part in the shard; [`Shard::leave`] hands its plugins over at shutdown.
pub struct Shard {
    leave: watch::Sender<bool>,
    task: JoinHandle<()>,
    watchdog: JoinHandle<()>,
}

/// Joins the shard: creates this replica's member Lease and starts taking its share of the
/// plugins `registry` knows (which must be [`Registry::sharded`]).
///
/// # Errors
/// A [`JoinError`]: the Lease namespace is unknown, or the member Lease cannot be written
/// (RBAC).
pub async fn join(
    client: kube::Client,
    args: &LeaderArgs,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
) -> Result<Shard, JoinError> {
    let namespace = crate::leader::namespace(args)?;
    let identity = crate::leader::identity();
    let settings = Settings {
        group: args.shard_group.clone(),
        process: format!("{identity}/{}", lease::nonce()),
        identity,
        duration: Duration::from_secs(args.lease_duration_seconds),
    };
    let leases: Api<Lease> = wasmloop_runtime::api::typed_api(client, &namespace);
    let renewals = Renewals::default();
    let mut coordinator = Coordinator {
        leases,
        settings,
        registry,
        metrics,
        seen: Observations::default(),
        held: HashMap::new(),
        renewals: renewals.clone(),
        leaving: false,
        joined: Instant::now(),
    };
    let member = coordinator.settings.member_lease();
    if let Err(source) = coordinator.renew(&member, "member", None).await {
        return Err(JoinError::MemberLease { namespace, member, source });
    }
    tracing::info!(
        identity = %coordinator.settings.identity, lease = %format!("{namespace}/{member}"),
        "joined the shard: running the plugins assigned to this replica"
    );
    let watchdog = tokio::spawn(watchdog(renewals, lease::renew_deadline(coordinator.settings.duration)));
    let (leave, mut leaving) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(coordinator.settings.tick());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                Ok(()) = leaving.changed(), if !coordinator.leaving => coordinator.leaving = true,
                _ = tick.tick() => {
                    coordinator.tick().await;
                    if coordinator.leaving && coordinator.held.is_empty() {
                        return coordinator.quit().await;
                    }
                }
            }
        }
    });
    Ok(Shard { leave, task, watchdog })
}

/// Ends the process when any Lease this replica holds goes unrenewed past `deadline`.
async fn watchdog(renewals: Renewals, deadline: Duration) {
    let mut check = tokio::time::interval(Duration::from_millis(100));
    loop {
        check.tick().await;
        let late =
            renewals.lock().expect("lock").iter().find(|(_, at)| at.elapsed() > deadline).map(|(n, _)| n.clone());
        if let Some(lease) = late {
            give_up(&format!("could not renew Lease {lease} within its renew deadline"));
        }
    }
}

impl Shard {
    /// Leaves the shard: takes no more plugins and hands over every plugin running here, as
    /// for a new member (each stops, its reconciles in flight given the registry's drain time,
    /// while its fence is still renewed; then the fence is released), then deletes the member
    /// Lease, so the other replicas take over on their next tick instead of after a Lease
    /// duration.
    pub async fn leave(self) {
        let _ = self.leave.send(true);
        let _ = self.task.await;
        self.watchdog.abort();
    }
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
}

fn label<'a>(lease: &'a Lease, key: &str) -> Option<&'a str> {
    lease.metadata.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str)
}

impl Settings {
    /// How often the Leases are read and the plugins' owners judged: a sixth of the duration,
    /// at most 2 s, so that a long Lease does not make new plugins and handovers wait.
    fn tick(&self) -> Duration {
        (self.duration / 6).min(Duration::from_secs(2))
    }

    /// How often a held Lease is renewed: a sixth of the duration.
    fn renew_every(&self) -> Duration {
        self.duration / 6
    }

    /// How long `lease` must go unchanged to be stale: the longer of this replica's duration
    /// and the one its holder wrote, so that a rollout changing `--lease-duration-seconds`
    /// never judges a holder by a shorter Lease than it renews by.
    fn judged(&self, lease: Option<&Lease>) -> Duration {
        let written = lease.and_then(|l| l.spec.as_ref()).and_then(|s| s.lease_duration_seconds);
        let written = written.and_then(|s| u64::try_from(s).ok()).map(Duration::from_secs).unwrap_or_default();
        self.duration.max(written.min(Duration::from_secs(3600)))
    }
}

impl Coordinator {
    /// An API call bounded by a third of the Lease duration, so that a hanging request cannot
    /// hold the loop (the watchdog keeps the deadline whatever the loop does).
    async fn bounded<T>(&self, call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, LeaseCallError> {
        let limit = self.settings.duration / 3;
        match tokio::time::timeout(limit, call).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(LeaseCallError::Timeout(limit)),
        }
    }

    /// True when Lease `name` is due for renewal.
    fn due(&self, name: &str) -> bool {
        let last = self.renewals.lock().expect("lock").get(name).copied();
        last.is_none_or(|at| at.elapsed() + self.settings.tick() / 2 >= self.settings.renew_every())
    }

    async fn tick(&mut self) {
        let member = self.settings.member_lease();
        if self.due(&member)
            && let Err(error) = self.renew(&member, "member", None).await
        {
            tracing::warn!(%error, "could not renew the member Lease");
        }
        let selector = format!("{GROUP_LABEL}={}", self.settings.group);
        match self.bounded(self.leases.list(&ListParams::default().labels(&selector))).await {
            // Seen no earlier than the answer came: a change is dated late, never early, so a
            // Lease is never judged stale before it is.
            Ok(list) => self.follow(list.items, Instant::now()).await,
            Err(error) => tracing::warn!(%error, "could not list the shard's Leases"),
        }
    }

    /// One look at every Lease of the group: who is alive, what this replica should run, and
    /// the fences it takes, renews and releases accordingly.
    async fn follow(&mut self, leases: Vec<Lease>, now: Instant) {
        let names: HashSet<&str> = leases.iter().filter_map(|l| l.metadata.name.as_deref()).collect();
        self.seen.retain(&names);
        for lease in &leases {
            if let (Some(name), Some(version)) = (&lease.metadata.name, &lease.metadata.resource_version) {
                self.seen.see(name, version, now);
            }
        }
        let mut members: Vec<String> = leases
            .iter()
            .filter(|l| label(l, ROLE_LABEL) == Some("member"))
            .filter(|l| {
                l.metadata.name.as_deref().is_some_and(|n| self.seen.fresh(n, now, self.settings.judged(Some(l))))
            })
            .filter_map(|l| holder(l).filter(|h| !h.is_empty()).map(str::to_owned))
            .collect();
        if !members.contains(&self.settings.identity) {
            members.push(self.settings.identity.clone());
        }
        members.sort();
        members.dedup();
        self.metrics.shard_members(members.len());
        let fences: HashMap<&str, &Lease> = leases
            .iter()
            .filter(|l| label(l, ROLE_LABEL) == Some("fence"))
            .filter_map(|l| Some((l.metadata.name.as_deref()?, l)))
            .collect();
        let settings = self.settings.clone();
        let fence = |plugin: &PluginId| fences.get(settings.fence_lease(plugin.as_str()).as_str()).copied();
        let known = self.registry.known();
        let mine: HashSet<&PluginId> = known
            .iter()
            .filter(|_| !self.leaving)
            .filter(|p| hashing::owner(p.as_str(), &members) == Some(self.settings.identity.as_str()))
            .collect();
        let held: Vec<PluginId> = self.held.keys().cloned().collect();
        for plugin in held {
            self.keep_or_hand_over(&plugin, mine.contains(&plugin), fence(&plugin)).await;
        }
        let settling = self.joined.elapsed() < 2 * self.settings.tick();
        for plugin in mine.into_iter().filter(|_| !settling) {
            if !self.held.contains_key(plugin) {
                self.try_take(plugin, fence(plugin), now).await;
            }
        }
    }

    /// Renews a held fence; starts handing the plugin over when it is no longer this
    /// replica's, and releases the fence once it has stopped.
    async fn keep_or_hand_over(&mut self, plugin: &PluginId, mine: bool, fence: Option<&Lease>) {
        let work = self.held.get_mut(plugin).expect("held");
        if !mine && let Work::Started { start, .. } = work {
            let start = std::mem::replace(start, tokio::spawn(async {}));
            let (registry, name) = (self.registry.clone(), plugin.clone());
            tracing::info!(%plugin, "another replica is to run this plugin: stopping it here before handing it over");
            *work = Work::Evicting(tokio::spawn(async move {
                // A start in progress ends first, so the stop finds what it started; and the
                // fence goes only once its last reconcile has ended, drain timeout or not.
                let _ = start.await;
                for handover in registry.evict(&name).await {
                    handover.quiesced().await;
                }
            }));
        }
        let restart =
            matches!(work, Work::Started { start, at } if start.is_finished() && at.elapsed() > RESTART_AFTER);
        if restart && self.registry.is_parked(plugin) {
            tracing::info!(%plugin, "starting the plugin again: its last start left it parked");
            let again = self.start(plugin);
            self.held.insert(plugin.clone(), Work::Started { start: again, at: Instant::now() });
        }
        let work = self.held.get_mut(plugin).expect("held");
        if let Work::Evicting(task) = work
            && task.is_finished()
        {
            self.release(plugin).await;
            return;
        }
        let name = self.settings.fence_lease(plugin.as_str());
        if self.due(&name)
            && let Err(error) = self.renew_from(&name, "fence", Some(plugin.as_str()), fence).await
        {
            tracing::warn!(%plugin, %error, "could not renew the plugin's fence");
        }
    }

    /// Starts admitting `plugin` in the registry; its metric says it runs once a version does.
    fn start(&self, plugin: &PluginId) -> JoinHandle<()> {
        let (registry, metrics, replica, name) =
            (self.registry.clone(), self.metrics.clone(), self.settings.identity.clone(), plugin.clone());
        tokio::spawn(async move {
            // Reconciles of a version stopped here without a successor end first.
            for handover in registry.take_retired(&name) {
                handover.quiesced().await;
            }
            let mut serving = false;
            for (source, result) in registry.admit(&name).await {
                match result {
                    Ok(loaded) => {
                        serving = true;
                        tracing::info!(%source, digest = loaded.digest(), "{loaded}");
                    }
                    Err(error) => tracing::error!(%source, reason = error.reason(), "{error}"),
                }
            }
            if serving {
                metrics.shard_running(name.as_str(), &replica, true);
            }
        })
    }

    /// Takes the fence of a plugin this replica is to run, if it is free or stale, and starts
    /// the plugin.
    async fn try_take(&mut self, plugin: &PluginId, fence: Option<&Lease>, now: Instant) {
        let name = self.settings.fence_lease(plugin.as_str());
        let fresh = self.seen.fresh(&name, now, self.settings.judged(fence));
        if fence.is_some() && lease::step(fence.and_then(holder), &self.settings.process, fresh) == Step::Wait {
            return;
        }
        let sent = Instant::now();
        let mut lease = self.settings.held(name.clone(), "fence", Some(plugin.as_str()), None);
        let taken = match fence {
            None => self.bounded(self.leases.create(&PostParams::default(), &lease)).await.map(drop),
            Some(current) => {
                // Guarded by the version this replica judged: if anyone wrote the fence since,
                // the write fails and the next tick judges again.
                lease.metadata.resource_version = current.metadata.resource_version.clone();
                self.bounded(self.leases.replace(&name, &PostParams::default(), &lease)).await.map(drop)
            }
        };
        match taken {
            Ok(()) => {
                self.renewals.lock().expect("lock").insert(name, sent);
                tracing::info!(%plugin, identity = %self.settings.identity, "took the plugin's fence: starting it here");
                let start = self.start(plugin);
                self.held.insert(plugin.clone(), Work::Started { start, at: Instant::now() });
            }
            Err(LeaseCallError::Api(error)) if is_conflict(&error) => {
                tracing::debug!(%plugin, "another replica wrote the fence first; judging again next tick");
            }
            Err(error) => tracing::warn!(%plugin, %error, "could not take the plugin's fence"),
        }
    }

    /// Gives a fence back (holder cleared), once its plugin no longer runs here.
    async fn release(&mut self, plugin: &PluginId) {
        let name = self.settings.fence_lease(plugin.as_str());
        let released = async {
            let mut current = self.bounded(self.leases.get(&name)).await?;
            if holder(&current) != Some(self.settings.process.as_str()) {
                return Ok(());
            }
            current.spec = Some(LeaseSpec::default());
            current.metadata.managed_fields = None;
            self.bounded(self.leases.replace(&name, &PostParams::default(), &current)).await.map(drop)
        };
        match released.await {
            Ok(()) => {
                self.held.remove(plugin);
                self.renewals.lock().expect("lock").remove(&name);
                self.metrics.shard_running(plugin.as_str(), &self.settings.identity, false);
                tracing::info!(%plugin, "handed the plugin over: fence released");
            }
            Err(error) => {
                // Still held, still renewed: the next tick tries again.
                tracing::warn!(%plugin, %error, "could not release the plugin's fence; trying again");
                if let Err(error) = self.renew(&name, "fence", Some(plugin.as_str())).await {
                    tracing::warn!(%plugin, %error, "could not renew the plugin's fence");
                }
            }
        }
    }

    /// Creates or renews Lease `name`, held by this replica, reading it first.
    async fn renew(&self, name: &str, role: &str, plugin: Option<&str>) -> Result<(), LeaseCallError> {
        let current = self.bounded(self.leases.get_opt(name)).await?;
        self.renew_from(name, role, plugin, current.as_ref()).await
    }

    /// Creates or renews Lease `name`, held by this replica, as `current` (just listed or
    /// read; none: it does not exist) shows it, and notes the renewal. A write that finds the
    /// Lease changed since fails, and the next tick tries again.
    async fn renew_from(
        &self,
        name: &str,
        role: &str,
        plugin: Option<&str>,
        current: Option<&Lease>,
    ) -> Result<(), LeaseCallError> {
        let sent = Instant::now();
        let acquired = current.and_then(|c| c.spec.as_ref()).and_then(|s| s.acquire_time.clone());
        let mut lease = self.settings.held(name.to_owned(), role, plugin, acquired);
        match current {
            None => self.bounded(self.leases.create(&PostParams::default(), &lease)).await.map(drop)?,
            Some(current) => {
                // Only a stale fence is ever taken, and a replica stops before its fences go
                // stale: another holder here means that promise broke. Stop everything.
                let me = if plugin.is_some() { &self.settings.process } else { &self.settings.identity };
                if let Some(other) = holder(current).filter(|h| plugin.is_some() && *h != me.as_str()) {
                    give_up(&format!("another replica ({other}) holds the fence {name} this replica renews"));
                }
                lease.metadata.resource_version = current.metadata.resource_version.clone();
                self.bounded(self.leases.replace(name, &PostParams::default(), &lease)).await.map(drop)?;
            }
        }
        self.renewals.lock().expect("lock").insert(name.to_owned(), sent);
        Ok(())
    }

    /// Once everything is handed over: stops the watchdog's watch on the member Lease and
    /// deletes it.
    async fn quit(self) {
        let member = self.settings.member_lease();
        self.renewals.lock().expect("lock").remove(&member);
        self.registry.shut_down(Duration::ZERO).await;
        match self.bounded(self.leases.delete(&member, &DeleteParams::default())).await {
            Ok(_) => tracing::info!("left the shard: every plugin handed over, member Lease deleted"),
            Err(error) => {
                tracing::warn!(%error, "could not delete the member Lease; the others drop it when it goes stale")
            }
        }
    }
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(e) if e.code == 409)
}

/// Ends the process, so that no reconcile here runs beside another replica's; the
/// orchestrator restarts the pod, which joins again.
fn give_up(why: &str) -> ! {
    tracing::error!("{why}: exiting so that no plugin runs on two replicas");
    std::thread::sleep(Duration::from_millis(50));
    std::process::exit(1);
}
