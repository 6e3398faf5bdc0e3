//! The `wasmloop` host: command line, commands and their inputs. The sandbox lives in
//! `wasmloop-sandbox`; this crate wires it to files, the terminal, HTTP endpoints and the cluster.
//!
//! Without the default `cluster` feature only the offline commands and their modules are built
//! (`cli`, `commands`, `input`, `logging`, `offline_cache`).

pub mod cli;
pub mod commands;
#[cfg(feature = "cluster")]
pub mod dry_run;
#[cfg(feature = "cluster")]
pub mod endpoints;
#[cfg(feature = "cluster")]
pub mod host_config;
pub mod input;
#[cfg(feature = "cluster")]
pub mod leader;
pub mod logging;
#[cfg(feature = "cluster")]
pub mod oci;
pub mod offline_cache;
#[cfg(feature = "cluster")]
pub mod pinning;
#[cfg(feature = "cluster")]
pub mod plugin_configmap;
#[cfg(feature = "cluster")]
pub mod pod_limits;
#[cfg(feature = "cluster")]
pub mod recording;
#[cfg(feature = "cluster")]
pub mod replay;
#[cfg(feature = "cluster")]
pub mod shard;
#[cfg(feature = "cluster")]
pub mod sources;
#[cfg(feature = "cluster")]
pub mod status;
#[cfg(feature = "cluster")]
pub mod wasmplugin;
