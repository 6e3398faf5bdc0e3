//! The `wasmloop` host: command line, commands and their inputs. The sandbox lives in
//! `wasmloop-sandbox`; this crate wires it to files, the terminal and (later) the cluster.

pub mod cli;
pub mod commands;
pub mod host_config;
pub mod input;
pub mod logging;
pub mod offline_cache;
