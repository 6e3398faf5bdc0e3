//! What `run` and `dev` share: the endpoints, the cluster connection and the plugin registry.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use wasmloop_runtime::executor::{DryRunSink, WriteBudget};
use wasmloop_runtime::identity::{AccountChoice, Identities, ServiceAccount};
use wasmloop_runtime::quarantine::Board;
use wasmloop_runtime::registry::{Loader, Registry, Settings};
use wasmloop_runtime::{Context, ControllerConfig, Metrics};
use wasmloop_sandbox::Sandbox;

use super::common;
use crate::cli::{HostArgs, PluginIdentity};
use crate::endpoints::{self, Readiness};
use crate::host_config::HostConfig;
use crate::status::StatusWriter;

/// A host connected to its cluster, serving its endpoints, with no plugins yet.
pub(super) struct Host {
    pub registry: Arc<Registry>,
    /// The API client the sources use.
    pub client: kube::Client,
    election: crate::leader::Election,
    /// This replica's part of the shard, with `--shard`.
    shard: Option<crate::shard::Shard>,
    pub readiness: Arc<Readiness>,
    /// How long reconciles in flight get at shutdown and when a version is replaced.
    pub drain: Duration,
    /// The namespace of file plugins' ServiceAccounts.
    identity_namespace: String,
}

fn controller_config(config: &HostConfig, realm: &str, plugin: &str) -> ControllerConfig {
    let settings = config.settings_for(realm, plugin);
    if settings.is_none() && !realm.is_empty() && config.settings_for("", plugin).is_some() {
        // The likeliest slip in host.yaml: a bare key meant for a ConfigMap's plugin.
        tracing::warn!(
            plugin = %format!("{realm}/{plugin}"),
            "host.yaml's plugins.{plugin} is for the plugin {plugin} of your files, not for this one from a plugin ConfigMap in {realm}; it gets no settings of its own: write plugins.{realm}/{plugin} for it"
        );
    }
    let defaults = ControllerConfig::default();
    ControllerConfig {
        concurrency: config.max_concurrent_reconciles.map_or(4, |n| n as usize),
        concurrency_override: settings.and_then(|s| s.max_concurrent_reconciles).map(|n| n as usize),
        max_concurrency: config.limits.max_concurrent_reconciles.map_or(defaults.max_concurrency, |n| n as usize),
        plugin_config: settings.and_then(|s| s.config.as_ref()).map_or_else(|| "{}".to_owned(), ToString::to_string),
        resync: config.resync_seconds.map(Duration::from_secs),
        service_account: config.service_account(realm, plugin),
        namespace: settings.and_then(|s| s.namespace.clone()),
        write_budget: WriteBudget {
            per_second: settings
                .and_then(|s| s.writes_per_second)
                .or(config.limits.writes_per_second)
                .unwrap_or(defaults.write_budget.per_second),
            burst: settings
                .and_then(|s| s.write_burst)
                .or(config.limits.write_burst)
                .unwrap_or(defaults.write_budget.burst),
        },
        min_requeue: settings
            .and_then(|s| s.min_requeue_after_ms)
            .or(config.limits.min_requeue_after_ms)
            .map_or(defaults.min_requeue, Duration::from_millis),
        quarantine: config.quarantine.policy(),
        cpu_weight: settings.and_then(|s| s.cpu_weight).map_or(defaults.cpu_weight, std::num::NonZeroU32::get),
        ..ControllerConfig::default()
    }
}

/// The sandbox of a host that serves plugins: its pool sized from the host configuration, and
/// its guest budgets from the container's limits ([`crate::pod_limits`]) unless set by hand.
pub(super) fn sandbox(args: &HostArgs, config: &HostConfig) -> anyhow::Result<Sandbox> {
    let pod = crate::pod_limits::PodLimits::read();
    let memory = args.guest_memory_budget.unwrap_or_else(|| crate::pod_limits::guest_memory(&pod));
    let cpus = args.guest_cpu_budget.unwrap_or_else(|| crate::pod_limits::guest_cpus(&pod));
    tracing::info!(
        memory_limit = pod.memory,
        cpu_quota = pod.cpus,
        guest_memory_budget = memory,
        guest_cpu_budget = cpus,
        "guest budgets, shared by every plugin"
    );
    common::sandbox_with(&args.sandbox, config.sandbox.max_instances, |sandbox| {
        sandbox.guest_memory_bytes(Some(memory)).guest_cpus(cpus).guest_threads(true)
    })
}

/// The host's own ServiceAccount, as the downward API gives it to a pod of `deploy/`.
fn own_account_in_pod() -> Option<ServiceAccount> {
    let namespace = std::env::var("POD_NAMESPACE").ok()?;
    let name = std::env::var("POD_SERVICE_ACCOUNT").ok()?;
    ServiceAccount::new(&namespace, &name).ok()
}

impl Host {
    /// Starts the endpoints (with `pending` readiness conditions already set), connects and
    /// builds the registry.
    pub async fn start(
        args: &HostArgs,
        config: HostConfig,
        sandbox: &Sandbox,
        pending: &[String],
        dry_run: Option<DryRunSink>,
        default_identity: PluginIdentity,
        plugin_namespaces: &[wasmloop_contract::names::Namespace],
    ) -> anyhow::Result<Host> {
        let identity = args.plugin_identity.unwrap_or(default_identity);
        let metrics = Arc::new(Metrics::new().budgets(sandbox.memory_budget().cloned(), sandbox.cpu_budget()));
        let quarantines = Arc::new(Board::default());
        let readiness = Arc::new(Readiness::new(quarantines.clone()));
        for what in pending {
            readiness.pending(what, "starting: caches not synced yet");
        }
        endpoints::serve(args.metrics_bind_address, args.health_probe_bind_address, metrics.clone(), readiness.clone())
            .await?;
        let connect =
            "cannot connect to Kubernetes: set KUBECONFIG (or ~/.kube/config), or run in a pod with a service account";
        let kube_config = kube::Config::infer().await.context(connect)?;
        let client = kube::Client::try_from(kube_config.clone()).context(connect)?;
        let election = crate::leader::campaign(client.clone(), &args.leader, metrics.clone()).await?;
        let identities = match identity {
            PluginIdentity::Host => Identities::host(client.clone()),
            PluginIdentity::Impersonate => {
                let every = Duration::from_secs(args.access_review_seconds);
                let own = args.host_service_account.clone().or_else(own_account_in_pod);
                Identities::impersonating(client.clone(), kube_config, every).with_own_account(own)
            }
        };
        tracing::info!(plugin_identity = ?identity, "plugins act as {}", match identity {
            PluginIdentity::Host => "the host".to_owned(),
            PluginIdentity::Impersonate => "their own ServiceAccounts".to_owned(),
        });
        let mut context =
            Context::new(client.clone(), metrics.clone()).identities(identities).leadership(election.leading());
        context.quarantines = quarantines.clone();
        if args.initial_list == crate::cli::InitialListMode::Paged {
            context = context.initial_list(wasmloop_runtime::informer::InitialList::Paged);
        }
        if let Some(sink) = dry_run {
            context = context.dry_run(sink);
        }
        // What ships plugins is the operator's and its tenants': no plugin writes there.
        context = context.guarding(plugin_namespaces.iter().cloned().collect());
        if let Some(dir) = &args.record_dir {
            let keep = usize::try_from(args.record_keep).unwrap_or(usize::MAX);
            let bounds = crate::recording::Bounds { keep, max_bytes: args.record_max_bytes };
            context = context.recording(crate::recording::open(dir, bounds)?);
            tracing::info!(dir = %dir.display(), keep, max_bytes = args.record_max_bytes, "recording every reconcile");
        }
        let drain = Duration::from_secs(config.shutdown_timeout_seconds.unwrap_or(30));
        let loader: Loader = {
            let (sandbox, limits) = (sandbox.clone(), args.sandbox.clone());
            Arc::new(move |bytes: bytes::Bytes, origin: String, settings: Option<wasmloop_sandbox::Settings>| {
                let (sandbox, limits) = (sandbox.clone(), limits.clone());
                Box::pin(
                    async move { common::load_overridden(&sandbox, bytes, &origin, settings.as_ref(), &limits).await },
                )
            })
        };
        let config = Arc::new(config);
        let settings: Settings = Arc::new(move |realm: &str, plugin: &str| controller_config(&config, realm, plugin));
        let (reporter, reports) = wasmloop_runtime::registry::reports::channel();
        let buckets = context.write_buckets.clone();
        let mut registry = Registry::new(context, sandbox.clone(), loader, settings, drain).reporting(reporter);
        if args.leader.shard {
            registry = registry.sharded();
        }
        let registry = Arc::new(registry);
        // The one writer of what the registry reports, on every replica (the leader's writes).
        let mut writer = StatusWriter::new(client.clone(), reports, quarantines, election.leading())
            .metrics(metrics.clone())
            .write_buckets(buckets);
        if args.leader.shard {
            writer = writer.replica(crate::leader::identity());
        }
        tokio::spawn(writer.run());
        let shard = match args.leader.shard {
            true => Some(crate::shard::join(client.clone(), &args.leader, registry.clone(), metrics).await?),
            false => None,
        };
        Ok(Host {
            registry,
            shard,
            client,
            election,
            readiness,
            drain,
            identity_namespace: args.plugin_identity_namespace.to_string(),
        })
    }

    /// How a plugin loaded from a file picks its ServiceAccount.
    pub fn file_account(&self) -> AccountChoice {
        AccountChoice::Operator { namespace: self.identity_namespace.clone() }
    }

    /// Stops every plugin, letting reconciles in flight finish.
    pub async fn shut_down(self) {
        tracing::info!(timeout = ?self.drain, "shutting down: no new reconciles, finishing those in flight");
        match self.shard {
            // Hands every plugin over at once rather than after the fences go stale.
            Some(shard) => shard.leave().await,
            None => self.registry.shut_down(self.drain).await,
        }
        // Hand the Lease over now rather than make the next leader wait for it to run out.
        self.election.resign().await;
    }
}

/// SIGTERM and Ctrl-C, listened for from the moment it is made.
///
/// Made first thing in a command: until a handler exists, SIGTERM kills the process outright
/// instead of letting it drain. Commands race their start against [`Shutdown::requested`], so
/// a signal during a long start (a cache sync may take two minutes) is not held until it ends.
pub(super) struct Shutdown {
    term: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Shutdown {
    pub(super) fn listen() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        let cannot = "cannot listen for SIGTERM and SIGINT, so the host could not drain on shutdown";
        Ok(Shutdown {
            term: signal(SignalKind::terminate()).context(cannot)?,
            interrupt: signal(SignalKind::interrupt()).context(cannot)?,
        })
    }

    /// Says that a signal ended the start before anything served, and the exit code for it.
    pub(super) fn before_serving() -> std::process::ExitCode {
        tracing::info!("shutting down during start-up: nothing serves yet, so nothing drains");
        std::process::ExitCode::SUCCESS
    }

    /// Resolves on the first SIGTERM or SIGINT since [`Shutdown::listen`].
    pub(super) async fn requested(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> HostConfig {
        serde_saphyr::from_str_with_options(yaml, crate::input::yaml_options()).unwrap()
    }

    #[test]
    fn write_budgets_and_requeue_floors_win_in_order_plugin_then_limits_then_default() {
        let cases = [
            ("{}", (50, 100, 1000)),
            ("limits: {writesPerSecond: 5, writeBurst: 7, minRequeueAfterMs: 200}", (5, 7, 200)),
            (
                "limits: {writesPerSecond: 5, writeBurst: 7, minRequeueAfterMs: 200}\nplugins: {p: {writesPerSecond: 9, writeBurst: 11, minRequeueAfterMs: 20}}",
                (9, 11, 20),
            ),
            ("plugins: {p: {writesPerSecond: 9}}", (9, 100, 1000)),
            // Another plugin's settings are not this one's.
            ("plugins: {q: {writesPerSecond: 9, minRequeueAfterMs: 20}}", (50, 100, 1000)),
        ];
        for (yaml, (rate, burst, floor)) in cases {
            let got = controller_config(&config(yaml), "", "p");
            assert_eq!(
                (got.write_budget.per_second.get(), got.write_budget.burst.get(), got.min_requeue.as_millis()),
                (rate, burst, floor),
                "{yaml}"
            );
        }
    }

    #[test]
    fn settings_match_a_realm_and_a_name_never_a_name_alone() {
        let yaml = "plugins: {p: {writesPerSecond: 9}, team-a/p: {writesPerSecond: 7}}";
        let rate = |realm: &str| controller_config(&config(yaml), realm, "p").write_budget.per_second.get();
        assert_eq!(rate(""), 9, "a file plugin's entry is its name");
        assert_eq!(rate("team-a"), 7, "a ConfigMap plugin's entry is its namespace and name");
        assert_eq!(rate("team-b"), 50, "a plugin of another realm named alike gets neither");
    }

    #[test]
    fn a_zero_write_rate_is_refused_rather_than_read_as_unlimited() {
        assert!(
            serde_saphyr::from_str_with_options::<HostConfig>(
                "limits: {writesPerSecond: 0}",
                crate::input::yaml_options()
            )
            .is_err()
        );
    }
}
