//! Logging set-up: text or JSON lines on stderr, level from `WASMLOOP_LOG` or `RUST_LOG`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber.
pub fn init(format: LogFormat) {
    let filter = std::env::var("WASMLOOP_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .map(EnvFilter::new)
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
