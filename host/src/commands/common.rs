//! What the commands share: starting the sandbox, loading a plugin, printing, exit codes.
//! Apart from `mod.rs` so that the commands depend on it and `mod.rs` depends on them, never
//! both ways.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use wasmloop_sandbox::{LoadError, Plugin, Sandbox, SandboxConfig};

use crate::cli::{OutputFormat, SandboxArgs};

/// Exit code of a reconcile whose plugin failed (bad input and load errors exit 1).
pub const EXIT_PLUGIN_ERROR: u8 = 3;

/// Runs an offline command's async work (loading, one call) on a runtime of its own.
pub(super) fn block_on<F: std::future::Future>(work: F) -> anyhow::Result<F::Output> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    Ok(runtime.block_on(work))
}

/// The sandbox, its pool sized from the host configuration.
pub(super) fn sandbox(args: &SandboxArgs, pool: Option<u32>) -> anyhow::Result<Sandbox> {
    sandbox_with(args, pool, |config| config)
}

/// [`sandbox`], its configuration finished by `finish` (the host-wide budgets of `run`).
pub(super) fn sandbox_with(
    args: &SandboxArgs,
    pool: Option<u32>,
    finish: impl FnOnce(SandboxConfig) -> SandboxConfig,
) -> anyhow::Result<Sandbox> {
    let mut config = SandboxConfig::default();
    if let Some(n) = pool {
        config = config.max_instances(n);
    }
    if let Some(bytes) = args.keep_resident_bytes {
        config = config.keep_resident_bytes(usize::try_from(bytes).unwrap_or(usize::MAX));
        let worst = config.kept_resident_bytes() as u64 * u64::from(config.memory_slots());
        tracing::info!(
            bytes = config.kept_resident_bytes(),
            slots = config.memory_slots(),
            worst_case_mib = worst >> 20,
            "--keep-resident-bytes: each pool slot a call has used keeps this much resident and copies it back on every drop; count the worst case in the pod's memory limit"
        );
    }
    if args.no_compile_cache {
        config = config.cache_dir(None);
    } else if let Some(dir) = &args.cache_dir {
        config = config.cache_dir(Some(dir.clone()));
    }
    Sandbox::new(finish(config)).map_err(|e| anyhow::anyhow!("cannot start the wasm sandbox: {e:#}"))
}

/// Loads a plugin file, applying the command line's limits over the plugin's own.
pub(super) async fn load(sandbox: &Sandbox, path: &Path, args: &SandboxArgs) -> anyhow::Result<Plugin> {
    let bytes = read_component(path)?;
    Ok(load_bytes(sandbox, &bytes, &path.display().to_string(), args).await?)
}

/// A component file, bounded as a ConfigMap's component is: a device, a pipe or a file past
/// the limit is refused before it is read whole.
pub(super) fn read_component(path: &Path) -> anyhow::Result<Vec<u8>> {
    Ok(crate::input::read_bytes_bounded(path, crate::input::MAX_COMPONENT, "a plugin component (.wasm)")?)
}

/// Compiles and validates a component, applying the command line's limits over the plugin's own:
/// the operator's explicit settings win over what the plugin proposes.
pub(super) async fn load_bytes(
    sandbox: &Sandbox,
    bytes: &[u8],
    origin: &str,
    args: &SandboxArgs,
) -> Result<Plugin, LoadError> {
    load_overridden(sandbox, bytes::Bytes::copy_from_slice(bytes), origin, None, args).await
}

/// [`load_bytes`], with `settings` (a `WasmPlugin`'s) over what the plugin proposes first: the
/// command line's limits win over both, as they win over a proposal.
pub(super) async fn load_overridden(
    sandbox: &Sandbox,
    bytes: bytes::Bytes,
    origin: &str,
    settings: Option<&wasmloop_sandbox::Settings>,
    args: &SandboxArgs,
) -> Result<Plugin, LoadError> {
    let plugin = sandbox.load_shared(bytes, origin).await?;
    let plugin = match settings {
        Some(settings) => plugin.overridden(settings),
        None => plugin,
    };
    let mut limits = plugin.limits();
    if let Some(ms) = args.deadline_ms {
        limits = limits.deadline(Duration::from_millis(ms));
    }
    if let Some(bytes) = args.memory_limit {
        limits = limits.memory_bytes(bytes);
    }
    if let Some(bytes) = args.response_limit {
        limits = limits.response_bytes(bytes);
    }
    if let Some(n) = args.max_actions {
        limits = limits.max_actions(n);
    }
    Ok(plugin.with_limits(limits))
}

pub(super) fn print(value: &impl serde::Serialize, format: OutputFormat) -> anyhow::Result<()> {
    // Through serde_json::Value so enums print as plain maps, not YAML tags.
    let value = serde_json::to_value(value)?;
    let text = match format {
        OutputFormat::Yaml => serde_saphyr::to_string(&value)?,
        OutputFormat::Json => serde_json::to_string_pretty(&value)? + "\n",
    };
    print!("{text}");
    Ok(())
}
