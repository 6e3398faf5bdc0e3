//! `wasmloop run`: every plugin against the cluster, in one process.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use wasmloop_runtime::discovery::Kinds;
use wasmloop_runtime::executor::Executor;
use wasmloop_runtime::{Controller, ControllerConfig, Informers};

use crate::cli::RunArgs;
use crate::host_config::HostConfig;

pub(super) fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.as_deref().map(HostConfig::read).transpose()?.unwrap_or_default();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(serve(args, config))
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}

async fn serve(args: &RunArgs, config: HostConfig) -> anyhow::Result<ExitCode> {
    let sandbox = super::sandbox(&args.sandbox)?;
    let mut plugins: Vec<wasmloop_sandbox::Plugin> = Vec::new();
    for path in &args.plugins {
        let plugin = super::load(&sandbox, path, &args.sandbox)?;
        if let Some(other) = plugins.iter().find(|p| p.manifest().name == plugin.manifest().name) {
            anyhow::bail!(
                "{} and {} are both plugin {:?}; plugin names must be unique (they name the field manager); load one of them",
                other.origin(),
                plugin.origin(),
                plugin.manifest().name
            );
        }
        plugins.push(plugin);
    }
    let client = kube::Client::try_default().await.context(
        "cannot connect to Kubernetes: set KUBECONFIG (or ~/.kube/config), or run in a pod with a service account",
    )?;
    let kinds = Arc::new(Kinds::new(client.clone()));
    let informers = Informers::new(client.clone(), kinds.clone());
    let executor = Arc::new(Executor::new(client.clone(), kinds.clone()));
    let mut controllers = Vec::new();
    for plugin in plugins {
        let name = plugin.manifest().name.clone();
        let settings = config.plugins.get(&name);
        let controller_config = ControllerConfig {
            concurrency: config.max_concurrent_reconciles.map_or(4, |n| n as usize),
            concurrency_override: settings.and_then(|s| s.max_concurrent_reconciles).map(|n| n as usize),
            plugin_config: settings
                .and_then(|s| s.config.as_ref())
                .map_or_else(|| "{}".to_owned(), ToString::to_string),
            resync: config.resync_seconds.map(Duration::from_secs),
            ..ControllerConfig::default()
        };
        let controller =
            Controller::start(plugin, client.clone(), &informers, kinds.clone(), executor.clone(), controller_config)
                .await
                .with_context(|| format!("cannot start plugin {name}"))?;
        tracing::info!(plugin = %name, "plugin running");
        controllers.push(controller);
    }
    tracing::info!(
        plugins = controllers.len(),
        watches = informers.stats().active_watches.load(std::sync::atomic::Ordering::Relaxed),
        "wasmloop running"
    );
    shutdown_signal().await;
    let timeout = Duration::from_secs(config.shutdown_timeout_seconds.unwrap_or(30));
    tracing::info!(?timeout, "shutting down: no new reconciles, finishing those in flight");
    futures::future::join_all(controllers.into_iter().map(|c| c.shut_down(timeout))).await;
    Ok(ExitCode::SUCCESS)
}
