//! The `wasmloop` host: command line, commands and their inputs. The sandbox lives in
//! `wasmloop-sandbox`; this crate wires it to files, the terminal, HTTP endpoints and the cluster.

pub mod cli;
pub mod commands;
pub mod dry_run;
pub mod endpoints;
pub mod host_config;
pub mod input;
pub mod leader;
pub mod logging;
pub mod oci;
pub mod offline_cache;
pub mod pinning;
pub mod plugin_configmap;
pub mod recording;
pub mod replay;
pub mod shard;
pub mod sources;
