//! The `wasmloop` binary: parse the command line, set up logging, run the command.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = wasmloop::cli::Cli::parse();
    wasmloop::logging::init(cli.log_format);
    // One TLS provider for the process: ring, as kube's rustls uses; the registry client
    // (reqwest, built without a provider) takes the process default.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match wasmloop::commands::run(cli.command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
