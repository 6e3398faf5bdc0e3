//! `wasmloop run`: every plugin against the cluster, in one process.
//!
//! `--plugin` files are compiled before the host connects (`load_all`), so a bad file fails
//! the command at once, then installed side by side (`seat_all`), so a file plugin whose
//! caches are slow to sync holds up no other. Each stage of the start races SIGTERM and
//! SIGINT (`Shutdown`, in `host.rs`): compiling and connecting end without a drain, since
//! nothing serves yet; installing stops, and the plugins already serving drain. No install
//! of `run`'s start replaces a serving version, so none is cut off mid-drain. Under `--shard`
//! the coordinator loads plugins in its own task, and a signal waits for its tick.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use wasmloop_runtime::registry::Shadowed;
use wasmloop_sandbox::{Plugin, Sandbox};

use super::common;
use super::host::{Host, Shutdown};
use crate::cli::{PluginIdentity, RunArgs, ShadowArg};
use crate::host_config::HostConfig;
use crate::oci::{Puller, RegistryPolicy};
use crate::pinning::TrustedKeys;
use crate::sources::namespace::NamespaceSource;

pub(super) fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let config = args.host.config.as_deref().map(HostConfig::read).transpose()?.unwrap_or_default();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(serve(args, config))
}

/// Compiles every plugin file before anything connects, so a bad file fails the command at once.
async fn load_all(args: &RunArgs, sandbox: &Sandbox) -> anyhow::Result<Vec<Plugin>> {
    let mut plugins: Vec<Plugin> = Vec::new();
    for path in &args.plugins {
        let plugin = common::load(sandbox, path, &args.host.sandbox).await?;
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
    Ok(plugins)
}

/// Compiles every `--shadow` file before anything connects, and checks it names its plugin.
async fn load_shadows(args: &RunArgs, sandbox: &Sandbox) -> anyhow::Result<Vec<(String, Plugin)>> {
    let mut shadows = Vec::new();
    for ShadowArg { name, path } in &args.shadows {
        let plugin = common::load(sandbox, path, &args.host.sandbox).await?;
        let found = &plugin.manifest().name;
        anyhow::ensure!(
            found == name,
            "--shadow {name}={}: the component is plugin {found:?}, not {name:?}; a shadow names the plugin it shadows",
            path.display()
        );
        anyhow::ensure!(
            !shadows.iter().any(|(other, _)| other == name),
            "--shadow {name}= is given twice; a plugin has one shadow at a time"
        );
        shadows.push((name.clone(), plugin));
    }
    Ok(shadows)
}

/// Seats a `--shadow`: called beside plugin `name`.
async fn seat_shadow(host: &Host, name: &str, plugin: Plugin) -> anyhow::Result<()> {
    let source = wasmloop_sandbox::SourceId::file(plugin.origin());
    let seated = host
        .registry
        .seat_compiled((&source, None), name, plugin, None)
        .await
        .with_context(|| format!("cannot shadow plugin {name} with {source}"))?;
    if let Shadowed::Seated { name, version, .. } = seated {
        tracing::info!(plugin = %name, %source, version, "shadow called beside the serving version; it writes nothing");
    }
    Ok(())
}

fn readiness_item(plugin: &Plugin) -> String {
    format!("plugin {}", plugin.manifest().name)
}

fn shadow_item(name: &str) -> String {
    format!("shadow of plugin {name}")
}

async fn serve(args: &RunArgs, config: HostConfig) -> anyhow::Result<ExitCode> {
    let mut shutdown = Shutdown::listen()?;
    // Compiles and connects: nothing serves yet, so a signal ends it with nothing to drain.
    let (host, start) = tokio::select! {
        started = start(args, config) => started?,
        () = shutdown.requested() => return Ok(Shutdown::before_serving()),
    };
    // Installs wait for caches to sync: a signal stops the loading and drains what serves.
    let signalled = tokio::select! {
        seated = seat_all(&host, args, start) => { seated?; false }
        () = shutdown.requested() => true,
    };
    if signalled {
        tracing::info!("signalled while plugins were loading: the rest are not loaded");
    } else {
        tracing::info!(plugins = host.registry.names().len(), "wasmloop running");
        shutdown.requested().await;
    }
    host.shut_down().await;
    Ok(ExitCode::SUCCESS)
}

/// What `serve` loaded before it connected, to seat once the host runs.
struct Start {
    plugins: Vec<Plugin>,
    shadows: Vec<(String, Plugin)>,
    trusted: Option<Arc<TrustedKeys>>,
}

async fn start(args: &RunArgs, config: HostConfig) -> anyhow::Result<(Host, Start)> {
    let sandbox = super::host::sandbox(&args.host, &config)?;
    // Read before anything connects: a bad keys file fails the command at once.
    let trusted = args.trusted_keys.as_deref().map(TrustedKeys::read).transpose()?.map(Arc::new);
    if let Some(keys) = &trusted {
        tracing::info!(keys = %keys.ids(), "ConfigMap plugins must be signed by one of these minisign keys");
    }
    let plugins = load_all(args, &sandbox).await?;
    let shadows = load_shadows(args, &sandbox).await?;
    // Ready once every plugin serves and every shadow is seated beside it.
    let pending: Vec<String> =
        plugins.iter().map(readiness_item).chain(shadows.iter().map(|(name, _)| shadow_item(name))).collect();
    let host =
        Host::start(&args.host, config, &sandbox, &pending, None, PluginIdentity::Impersonate, &args.plugin_namespaces)
            .await?;
    Ok((host, Start { plugins, shadows, trusted }))
}

/// Installs the file plugins and their shadows, then starts reading plugin ConfigMaps.
async fn seat_all(host: &Host, args: &RunArgs, start: Start) -> anyhow::Result<()> {
    // Side by side: one plugin whose caches are slow to sync holds up no other.
    let installs = start.plugins.into_iter().map(|plugin| async move {
        let (name, item, source) = (
            plugin.manifest().name.clone(),
            readiness_item(&plugin),
            wasmloop_sandbox::SourceId::file(plugin.origin()),
        );
        let loaded = host
            .registry
            .install(&source, host.file_account(), plugin, None)
            .await
            .with_context(|| format!("cannot start plugin {name}"))?;
        host.readiness.ready(&item);
        tracing::info!(plugin = %name, "{loaded}");
        anyhow::Ok(())
    });
    futures::future::try_join_all(installs).await?;
    for (name, plugin) in start.shadows {
        seat_shadow(host, &name, plugin).await?;
        host.readiness.ready(&shadow_item(&name));
    }
    let puller = Arc::new(puller_for(args));
    for namespace in &args.plugin_namespaces {
        let mut source = NamespaceSource::new(
            host.client.clone(),
            namespace,
            host.registry.clone(),
            host.readiness.clone(),
            start.trusted.clone(),
        );
        source = source.puller(puller.clone());
        tokio::spawn(source.run());
        tracing::info!(%namespace, "loading plugins from ConfigMaps labelled wasmloop.dev/plugin and from WasmPlugins");
    }
    Ok(())
}

/// The puller of plugin references: the operator's registry policy, pulled components cached
/// with the compiled ones (in the compile cache's directory `oci`).
fn puller_for(args: &RunArgs) -> Puller {
    let policy =
        RegistryPolicy { plain_http: args.insecure_registries.clone(), allowed: args.allowed_registries.clone() };
    let cache = if args.host.sandbox.no_compile_cache {
        None
    } else {
        args.host
            .sandbox
            .cache_dir
            .clone()
            .or_else(|| wasmloop_sandbox::SandboxConfig::default().cache_dir)
            .map(|dir| dir.join("oci"))
    };
    Puller::new(policy, std::time::Duration::from_secs(args.pull_timeout_seconds), cache)
}
