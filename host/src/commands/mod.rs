//! The commands behind the CLI.

use std::process::ExitCode;

use crate::cli::Command;

#[cfg(feature = "cluster")]
mod bundle;
mod common;
#[cfg(feature = "cluster")]
mod dev;
#[cfg(feature = "cluster")]
mod host;
mod inspect;
#[cfg(feature = "cluster")]
mod push;
mod reconcile;
#[cfg(feature = "cluster")]
mod replay;
#[cfg(feature = "cluster")]
mod run;

pub use common::EXIT_PLUGIN_ERROR;
#[cfg(feature = "cluster")]
pub use replay::EXIT_CHANGED;

/// Runs a command.
///
/// # Errors
/// Input, load and output errors, each naming the file and what to do.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Inspect(args) => inspect::run(&args),
        Command::Reconcile(args) => reconcile::run(&args),
        #[cfg(feature = "cluster")]
        Command::Cluster(command) => run_cluster(command),
    }
}

#[cfg(feature = "cluster")]
fn run_cluster(command: crate::cli::ClusterCommand) -> anyhow::Result<ExitCode> {
    use crate::cli::ClusterCommand;
    match command {
        ClusterCommand::Run(args) => run::run(&args),
        ClusterCommand::Dev(args) => dev::run(&args),
        ClusterCommand::Bundle(args) => bundle::run(&args),
        ClusterCommand::Push(args) => push::run(&args),
        ClusterCommand::Record(args) => dev::record(args),
        ClusterCommand::Replay(args) => replay::run(&args),
    }
}
