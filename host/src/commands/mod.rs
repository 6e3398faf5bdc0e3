//! The commands behind the CLI.

use std::process::ExitCode;

use crate::cli::Command;

mod bundle;
mod common;
mod dev;
mod host;
mod inspect;
mod push;
mod reconcile;
mod replay;
mod run;

pub use common::EXIT_PLUGIN_ERROR;
pub use replay::EXIT_CHANGED;

/// Runs a command.
///
/// # Errors
/// Input, load and output errors, each naming the file and what to do.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Inspect(args) => inspect::run(&args),
        Command::Reconcile(args) => reconcile::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Dev(args) => dev::run(&args),
        Command::Bundle(args) => bundle::run(&args),
        Command::Push(args) => push::run(&args),
        Command::Record(args) => dev::record(args),
        Command::Replay(args) => replay::run(&args),
    }
}
