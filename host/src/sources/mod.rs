//! Where plugins come from: the first stage of the pipeline. Each source turns what users
//! change (a file, a crate, a ConfigMap) into candidates for the registry.
//!
//! - `wasmloop dev`'s watched file or crate: [`path`].
//! - `wasmloop run --plugin-namespace`'s plugin ConfigMaps and `WasmPlugin`s: [`namespace`].
//! - `wasmloop run --plugin` files are compiled before the host connects and offered by the
//!   command itself (`commands/run.rs`).
//!
//! A source writes no status: the registry reports what each offer did, a source its own
//! refusals, and the status writer (`crate::status`) shows both. Nothing flows back to a
//! source.

pub mod namespace;
pub mod path;
