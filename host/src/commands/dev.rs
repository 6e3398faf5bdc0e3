//! `wasmloop dev`: one plugin against the cluster, reloaded whenever its file or crate
//! changes, without restarting the host or dropping its caches.
//!
//! Bytes already accepted or refused are not offered again; a start failure is retried on the
//! next save (`reload`). Before each rebuild the watch set is computed again, and the watch
//! moved if it changed, a path dependency added say (`rewatch`). A reload may be replacing a
//! serving version, so a signal gives it the drain timeout before it is dropped
//! (`reload_unless_signalled`); cargo runs with `kill_on_drop`. `wasmloop record` is this
//! command with `--dry-run` and a record directory (`record`).

use std::process::ExitCode;

use anyhow::Context as _;
use wasmloop_runtime::registry::{Candidate, RegistryError};

use super::host::{Host, Shutdown};
use crate::cli::{DevArgs, PluginIdentity, RecordArgs};
use crate::host_config::HostConfig;
use crate::sources::path::{Changes, PathSource};

/// `wasmloop record`: `dev --dry-run` that records, so nothing reaches the cluster.
pub(super) fn record(args: RecordArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.host.record_dir.is_some(),
        "wasmloop record needs --record-dir DIR, the directory the cases go to"
    );
    run(&DevArgs { path: args.path, dry_run: true, host: args.host })
}

pub(super) fn run(args: &DevArgs) -> anyhow::Result<ExitCode> {
    let config = args.host.config.as_deref().map(HostConfig::read).transpose()?.unwrap_or_default();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(serve(args, config))
}

/// Offers the current component to the registry and says what happened. A failure leaves the
/// version already serving in place.
async fn reload(host: &Host, source: &PathSource, last: &mut String) -> bool {
    let bytes = match source.component().await {
        Ok(bytes) => bytes,
        Err(error) => {
            // With its causes, as the binary prints an error.
            let error = anyhow::Error::from(error);
            tracing::error!("{error:#}; the previous version, if any, keeps serving");
            return false;
        }
    };
    // Editors and builds touch files without changing them; bytes already accepted, or
    // refused as a component, would be refused again. (A start failure, such as a CRD not
    // installed yet, is retried on the next save.)
    let tried = wasmloop_sandbox::digest(&bytes);
    if tried == *last {
        return false;
    }
    let candidate = Candidate {
        source: source.id(),
        // The operator's own file, as `run --plugin`.
        realm: None,
        expected_name: None,
        bytes: bytes.into(),
        held: None,
        config: None,
        account: host.file_account(),
        settings: None,
    };
    match host.registry.upsert(candidate).await {
        Ok(loaded) => {
            *last = tried;
            tracing::info!(plugin = %loaded.name(), digest = loaded.digest(), "{loaded}");
            true
        }
        Err(error) => {
            if matches!(error, RegistryError::Load { .. } | RegistryError::NameMismatch { .. }) {
                *last = tried;
            }
            tracing::error!(reason = error.reason(), "{error}");
            false
        }
    }
}

/// Watches anew when what the build reads has changed (a manifest edit added or dropped a path
/// dependency, say), before the build, so a save during it is not missed. When
/// `cargo metadata` fails, the watch stays as it is and the build says what is wrong.
async fn rewatch(source: &PathSource, changes: &mut Changes) {
    let Ok(set) = source.watch_set().await else { return };
    if set == changes.set {
        return;
    }
    match source.watch(set) {
        Ok(watching) => {
            *changes = watching;
            tracing::info!(source = %source.label(), "watching what the build now reads");
        }
        Err(error) => {
            let error = anyhow::Error::from(error);
            tracing::warn!(source = %source.label(), "{error:#}; the previous watch stays");
        }
    }
}

/// Reloads, and marks the plugin ready if it loaded; false when a signal came first. A build
/// or a cache sync can take minutes, and a signal must not wait for them; but a reload past
/// its sync may be draining the old version, so it gets the drain timeout to finish.
async fn reload_unless_signalled(host: &Host, source: &PathSource, last: &mut String, shutdown: &mut Shutdown) -> bool {
    let reload = reload(host, source, last);
    tokio::pin!(reload);
    tokio::select! {
        loaded = &mut reload => {
            if loaded {
                host.readiness.ready(&source.label());
            }
            true
        }
        () = shutdown.requested() => {
            if tokio::time::timeout(host.drain, reload).await.is_err() {
                tracing::info!("signalled during a reload: stopped it after the drain timeout");
            }
            false
        }
    }
}

async fn serve(args: &DevArgs, config: HostConfig) -> anyhow::Result<ExitCode> {
    let mut shutdown = Shutdown::listen()?;
    let source = PathSource::new(&args.path)?;
    let sandbox = super::host::sandbox(&args.host, &config)?;
    let item = source.label();
    let dry_run = args.dry_run.then(crate::dry_run::to_stdout);
    if dry_run.is_some() {
        tracing::info!("dry run: nothing is written; each reconcile's writes are printed as diffs");
    }
    let host = tokio::select! {
        host = Host::start(&args.host, config, &sandbox, std::slice::from_ref(&item), dry_run, PluginIdentity::Host, &[]) => host?,
        () = shutdown.requested() => return Ok(Shutdown::before_serving()),
    };
    // Watch before the first load, so a save during it is not missed.
    let set = source.watch_set().await.unwrap_or_else(|error| {
        let error = anyhow::Error::from(error);
        tracing::warn!(source = %item, "{error:#}; watching the crate's own sources until cargo metadata works");
        source.own_watch_set()
    });
    let mut changes = source.watch(set)?;
    let mut last = String::new();
    let mut serving = reload_unless_signalled(&host, &source, &mut last, &mut shutdown).await;
    if serving {
        tracing::info!(source = %source.label(), "wasmloop dev: watching for changes");
    }
    while serving {
        let changed = tokio::select! {
            change = changes.receiver.recv() => change.is_some(),
            () = shutdown.requested() => false,
        };
        if !changed {
            break;
        }
        // Coalesce what piled up while the last reload ran.
        while changes.receiver.try_recv().is_ok() {}
        rewatch(&source, &mut changes).await;
        serving = reload_unless_signalled(&host, &source, &mut last, &mut shutdown).await;
    }
    host.shut_down().await;
    Ok(ExitCode::SUCCESS)
}
