//! The `wasmloop` binary: parse the command line, set up logging, run the command.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = wasmloop::cli::Cli::parse();
    wasmloop::logging::init(cli.log_format);
    #[cfg(feature = "cluster")]
    wasmloop::oci::install_tls_provider();
    match wasmloop::commands::run(cli.command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
