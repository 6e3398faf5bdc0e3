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
//! The limit: a plugin is the unit. One plugin's keys are never split between replicas (see
//! `docs/architecture.md`, "Sharding", for how that would be done).

pub mod hashing;
pub mod lease;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
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

use crate::leader::LeaderArgs;
use lease::{Observations, Step};

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
    identity: String,
    duration: Duration,
}

impl Settings {
    fn member_lease(&self) -> String {
        format!("{}-member-{}", self.group, lease::name_segment(&self.identity))
    }

    fn fence_lease(&self, plugin: &str) -> String {
        format!("{}-plugin-{plugin}", self.group)
    }

    /// A Lease of `role` held by this replica, renewed now.
    fn held(&self, name: String, role: &str, plugin: Option<&str>, acquired: Option<MicroTime>) -> Lease {
        let mut labels = std::collections::BTreeMap::from([
            (GROUP_LABEL.to_owned(), self.group.clone()),
            (ROLE_LABEL.to_owned(), role.to_owned()),
        ]);
        if let Some(plugin) = plugin {
            labels.insert(PLUGIN_LABEL.to_owned(), plugin.to_owned());
        }
        let now = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..ObjectMeta::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
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
    /// Runs it; the handle is its start (compiling, syncing its caches), finished or not.
    Started(JoinHandle<()>),
    /// Hands it over: stops it, then releases the fence.
    Evicting(JoinHandle<()>),
}

struct Held {
    /// When the last successful renewal was sent.
    renewed: Instant,
    work: Work,
}

struct Coordinator {
    leases: Api<Lease>,
    settings: Settings,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
    seen: Observations,
    held: HashMap<String, Held>,
    /// When the last successful renewal of the member Lease was sent.
    member_renewed: Instant,
}

/// A replica's part in the shard; [`Shard::leave`] hands its plugins over at shutdown.
pub struct Shard {
    stop: watch::Sender<bool>,
    task: JoinHandle<Coordinator>,
}

/// Joins the shard: creates this replica's member Lease and starts taking its share of the
/// plugins `registry` knows (which must be [`Registry::sharded`]).
///
/// # Errors
/// When the Lease namespace is unknown or the member Lease cannot be written (RBAC).
pub async fn join(
    client: kube::Client,
    args: &LeaderArgs,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
) -> anyhow::Result<Shard> {
    let namespace = crate::leader::namespace(args)?;
    let settings = Settings {
        group: args.shard_group.clone(),
        identity: crate::leader::identity(),
        duration: Duration::from_secs(args.lease_duration_seconds),
    };
    let leases: Api<Lease> = Api::namespaced(client, &namespace);
    let mut coordinator = Coordinator {
        leases,
        settings,
        registry,
        metrics,
        seen: Observations::default(),
        held: HashMap::new(),
        member_renewed: Instant::now(),
    };
    let member = coordinator.settings.member_lease();
    coordinator.renew(&member, "member", None, None).await.with_context(|| {
        format!(
            "cannot write the member Lease {namespace}/{member}: grant the host get, list, create, update and delete on coordination.k8s.io leases in {namespace}"
        )
    })?;
    tracing::info!(
        identity = %coordinator.settings.identity, lease = %format!("{namespace}/{member}"),
        "joined the shard: running the plugins assigned to this replica"
    );
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(coordinator.settings.duration / 6);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stopped.changed() => return coordinator,
                _ = tick.tick() => coordinator.tick().await,
            }
        }
    });
    Ok(Shard { stop, task })
}

impl Shard {
    /// Leaves the shard: stops taking plugins, stops every plugin running here (each given
    /// `drain` to finish its reconciles), releases their fences and deletes the member Lease,
    /// so the other replicas take over at once instead of after a Lease duration.
    pub async fn leave(self, drain: Duration) {
        let _ = self.stop.send(true);
        let Ok(mut coordinator) = self.task.await else { return };
        for held in coordinator.held.values_mut() {
            // Starts finish first, so nothing starts after the registry stops.
            let (Work::Started(task) | Work::Evicting(task)) = &mut held.work;
            let _ = task.await;
        }
        coordinator.registry.shut_down(drain).await;
        let plugins: Vec<String> = coordinator.held.keys().cloned().collect();
        for plugin in plugins {
            coordinator.release(&plugin).await;
        }
        let member = coordinator.settings.member_lease();
        match coordinator.leases.delete(&member, &DeleteParams::default()).await {
            Ok(_) => tracing::info!("left the shard: released every fence and the member Lease"),
            Err(error) => {
                tracing::warn!(%error, "could not delete the member Lease; the others drop it when it goes stale")
            }
        }
    }
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
}

fn label<'a>(lease: &'a Lease, key: &str) -> Option<&'a str> {
    lease.metadata.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str)
}

impl Coordinator {
    async fn tick(&mut self) {
        let sent = Instant::now();
        let member = self.settings.member_lease();
        match self.renew(&member, "member", None, None).await {
            Ok(()) => self.member_renewed = sent,
            Err(error) => tracing::warn!(%error, "could not renew the member Lease"),
        }
        let selector = format!("{GROUP_LABEL}={}", self.settings.group);
        match self.leases.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => self.follow(list.items, sent).await,
            Err(error) => tracing::warn!(%error, "could not list the shard's Leases"),
        }
        self.check_deadlines();
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
        let duration = self.settings.duration;
        let mut members: Vec<String> = leases
            .iter()
            .filter(|l| label(l, ROLE_LABEL) == Some("member"))
            .filter(|l| l.metadata.name.as_deref().is_some_and(|n| self.seen.fresh(n, now, duration)))
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
            .filter_map(|l| Some((label(l, PLUGIN_LABEL)?, l)))
            .collect();
        let known = self.registry.known().await;
        let mine: HashSet<&str> = known
            .iter()
            .map(String::as_str)
            .filter(|p| hashing::owner(p, &members) == Some(self.settings.identity.as_str()))
            .collect();
        let held: Vec<String> = self.held.keys().cloned().collect();
        for plugin in held {
            self.keep_or_hand_over(&plugin, mine.contains(plugin.as_str()), fences.get(plugin.as_str()).copied()).await;
        }
        for plugin in mine {
            if !self.held.contains_key(plugin) {
                self.try_take(plugin, fences.get(plugin).copied(), now).await;
            }
        }
    }

    /// Renews a held fence; starts handing the plugin over when it is no longer this
    /// replica's, and releases the fence once it has stopped.
    async fn keep_or_hand_over(&mut self, plugin: &str, mine: bool, fence: Option<&Lease>) {
        let held = self.held.get_mut(plugin).expect("held");
        if !mine && let Work::Started(start) = &mut held.work {
            let start = std::mem::replace(start, tokio::spawn(async {}));
            let (registry, name) = (self.registry.clone(), plugin.to_owned());
            tracing::info!(%plugin, "another replica is to run this plugin: stopping it here before handing it over");
            held.work = Work::Evicting(tokio::spawn(async move {
                // A start in progress ends first, so the stop finds what it started.
                let _ = start.await;
                registry.evict(&name).await;
            }));
        }
        if let Work::Evicting(task) = &held.work
            && task.is_finished()
        {
            self.release(plugin).await;
            return;
        }
        let sent = Instant::now();
        let name = self.settings.fence_lease(plugin);
        let acquired = fence.and_then(|f| f.spec.as_ref()).and_then(|s| s.acquire_time.clone());
        match self.renew(&name, "fence", Some(plugin), acquired).await {
            Ok(()) => {
                if let Some(held) = self.held.get_mut(plugin) {
                    held.renewed = sent;
                }
            }
            Err(error) => tracing::warn!(%plugin, %error, "could not renew the plugin's fence"),
        }
    }

    /// Takes the fence of a plugin this replica is to run, if it is free or stale, and starts
    /// the plugin.
    async fn try_take(&mut self, plugin: &str, fence: Option<&Lease>, now: Instant) {
        let name = self.settings.fence_lease(plugin);
        let fresh = self.seen.fresh(&name, now, self.settings.duration);
        if fence.is_some() && lease::step(fence.and_then(holder), &self.settings.identity, fresh) == Step::Wait {
            return;
        }
        let sent = Instant::now();
        let mut lease = self.settings.held(name.clone(), "fence", Some(plugin), None);
        let taken = match fence {
            None => self.leases.create(&PostParams::default(), &lease).await.map(drop),
            Some(current) => {
                // Guarded by the version this replica judged: if anyone wrote the fence since,
                // the write fails and the next tick judges again.
                lease.metadata.resource_version = current.metadata.resource_version.clone();
                self.leases.replace(&name, &PostParams::default(), &lease).await.map(drop)
            }
        };
        match taken {
            Ok(()) => {
                tracing::info!(%plugin, identity = %self.settings.identity, "took the plugin's fence: starting it here");
                let (registry, metrics, replica, name) =
                    (self.registry.clone(), self.metrics.clone(), self.settings.identity.clone(), plugin.to_owned());
                let admitting = tokio::spawn(async move {
                    for (source, result) in registry.admit(&name).await {
                        match result {
                            Ok(loaded) => tracing::info!(%source, digest = loaded.digest(), "{loaded}"),
                            Err(error) => tracing::error!(%source, reason = error.reason(), "{error}"),
                        }
                    }
                    metrics.shard_running(&name, &replica, true);
                });
                self.held.insert(plugin.to_owned(), Held { renewed: sent, work: Work::Started(admitting) });
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::debug!(%plugin, "another replica wrote the fence first; judging again next tick");
            }
            Err(error) => tracing::warn!(%plugin, %error, "could not take the plugin's fence"),
        }
    }

    /// Gives a fence back (holder cleared), once its plugin no longer runs here.
    async fn release(&mut self, plugin: &str) {
        let name = self.settings.fence_lease(plugin);
        let released = async {
            let mut current = self.leases.get(&name).await?;
            if current.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(self.settings.identity.as_str())
            {
                return Ok(());
            }
            current.spec = Some(LeaseSpec::default());
            current.metadata.managed_fields = None;
            self.leases.replace(&name, &PostParams::default(), &current).await.map(drop)
        };
        match released.await {
            Ok(()) => {
                self.held.remove(plugin);
                self.metrics.shard_running(plugin, &self.settings.identity, false);
                tracing::info!(%plugin, "handed the plugin over: fence released");
            }
            Err(error) => tracing::warn!(%plugin, %error, "could not release the plugin's fence; trying again"),
        }
    }

    /// Creates or renews Lease `name`, held by this replica.
    async fn renew(
        &self,
        name: &str,
        role: &str,
        plugin: Option<&str>,
        acquired: Option<MicroTime>,
    ) -> Result<(), kube::Error> {
        let mut lease = self.settings.held(name.to_owned(), role, plugin, acquired);
        match self.leases.get_opt(name).await? {
            None => self.leases.create(&PostParams::default(), &lease).await.map(drop),
            Some(current) => {
                // Only a stale fence is ever taken, and a replica stops before its fences go
                // stale: another holder here means that promise broke. Stop everything.
                if let Some(other) = holder(&current).filter(|h| role == "fence" && *h != self.settings.identity) {
                    give_up(&format!("another replica ({other}) holds the fence {name} this replica renews"));
                }
                lease.metadata.resource_version = current.metadata.resource_version;
                self.leases.replace(name, &PostParams::default(), &lease).await.map(drop)
            }
        }
    }

    /// Stops everything when this replica's Leases may soon be judged stale by the others.
    fn check_deadlines(&self) {
        let deadline = lease::renew_deadline(self.settings.duration);
        if self.member_renewed.elapsed() > deadline {
            give_up("could not renew the member Lease within its renew deadline");
        }
        if let Some((plugin, _)) = self.held.iter().find(|(_, h)| h.renewed.elapsed() > deadline) {
            give_up(&format!("could not renew the fence of plugin {plugin} within its renew deadline"));
        }
    }
}

/// Ends the process, so that no reconcile here runs beside another replica's; the
/// orchestrator restarts the pod, which joins again.
fn give_up(why: &str) -> ! {
    tracing::error!("{why}: exiting so that no plugin runs on two replicas");
    std::thread::sleep(Duration::from_millis(50));
    std::process::exit(1);
}
