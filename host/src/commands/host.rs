//! What `run` and `dev` share: the endpoints, the cluster connection and the plugin registry.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use wasmloop_runtime::executor::DryRunSink;
use wasmloop_runtime::registry::{Loader, Registry, Settings};
use wasmloop_runtime::{Context, ControllerConfig, Metrics};
use wasmloop_sandbox::Sandbox;

use crate::cli::HostArgs;
use crate::endpoints::{self, Readiness};
use crate::host_config::HostConfig;

/// A host connected to its cluster, serving its endpoints, with no plugins yet.
pub(super) struct Host {
    pub registry: Arc<Registry>,
    /// The API client the sources use.
    pub client: kube::Client,
    /// True while this host leads (always, without leader election).
    pub leading: tokio::sync::watch::Receiver<bool>,
    election: crate::leader::Election,
    pub readiness: Arc<Readiness>,
    /// How long reconciles in flight get at shutdown and when a version is replaced.
    pub drain: Duration,
}

fn controller_config(config: &HostConfig, plugin: &str) -> ControllerConfig {
    let settings = config.plugins.get(plugin);
    let defaults = ControllerConfig::default();
    ControllerConfig {
        concurrency: config.max_concurrent_reconciles.map_or(4, |n| n as usize),
        concurrency_override: settings.and_then(|s| s.max_concurrent_reconciles).map(|n| n as usize),
        max_concurrency: config.limits.max_concurrent_reconciles.map_or(defaults.max_concurrency, |n| n as usize),
        plugin_config: settings.and_then(|s| s.config.as_ref()).map_or_else(|| "{}".to_owned(), ToString::to_string),
        resync: config.resync_seconds.map(Duration::from_secs),
        ..ControllerConfig::default()
    }
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
    ) -> anyhow::Result<Host> {
        let metrics = Arc::new(Metrics::new());
        let readiness = Arc::new(Readiness::default());
        for what in pending {
            readiness.pending(what, "starting: caches not synced yet");
        }
        endpoints::serve(args.metrics_bind_address, args.health_probe_bind_address, metrics.clone(), readiness.clone())
            .await?;
        let client = kube::Client::try_default().await.context(
            "cannot connect to Kubernetes: set KUBECONFIG (or ~/.kube/config), or run in a pod with a service account",
        )?;
        let election = crate::leader::campaign(client.clone(), &args.leader, metrics.clone()).await?;
        let mut context = Context::new(client.clone(), metrics).leadership(election.leading());
        if let Some(sink) = dry_run {
            context = context.dry_run(sink);
        }
        let drain = Duration::from_secs(config.shutdown_timeout_seconds.unwrap_or(30));
        let loader: Loader = {
            let (sandbox, limits) = (sandbox.clone(), args.sandbox.clone());
            Arc::new(move |bytes: Arc<[u8]>, origin: String| {
                let (sandbox, limits) = (sandbox.clone(), limits.clone());
                Box::pin(async move { super::load_bytes(&sandbox, &bytes, &origin, &limits).await })
            })
        };
        let config = Arc::new(config);
        let settings: Settings = Arc::new(move |plugin: &str| controller_config(&config, plugin));
        Ok(Host {
            registry: Arc::new(Registry::new(context, sandbox.clone(), loader, settings, drain)),
            client,
            leading: election.leading(),
            election,
            readiness,
            drain,
        })
    }

    /// Stops every plugin, letting reconciles in flight finish.
    pub async fn shut_down(self) {
        tracing::info!(timeout = ?self.drain, "shutting down: no new reconciles, finishing those in flight");
        self.registry.shut_down(self.drain).await;
        // Hand the Lease over now rather than make the next leader wait for it to run out.
        self.election.resign().await;
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub(super) async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}
