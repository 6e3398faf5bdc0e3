//! `wasmloop inspect`: print a plugin's manifest.

use std::process::ExitCode;

use super::common;
use crate::cli::InspectArgs;

pub(super) fn run(args: &InspectArgs) -> anyhow::Result<ExitCode> {
    let sandbox = common::sandbox(&args.sandbox, None)?;
    let plugin = common::block_on(common::load(&sandbox, &args.plugin, &args.sandbox))??;
    common::print(plugin.manifest(), args.output)?;
    Ok(ExitCode::SUCCESS)
}
