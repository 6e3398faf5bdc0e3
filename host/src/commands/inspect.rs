//! `wasmloop inspect`: print a plugin's manifest.

use std::process::ExitCode;

use crate::cli::InspectArgs;

pub(super) fn run(args: &InspectArgs) -> anyhow::Result<ExitCode> {
    let sandbox = super::sandbox(&args.sandbox, None)?;
    let plugin = super::block_on(super::load(&sandbox, &args.plugin, &args.sandbox))??;
    super::print(plugin.manifest(), args.output)?;
    Ok(ExitCode::SUCCESS)
}
