//! The wasmloop plugin sandbox.
//!
//! One [`Sandbox`] owns the wasmtime `Engine` (pooling allocator, epoch interruption and the
//! ticker that makes deadlines fire), the on-disk compile cache and the `Linker`. Loading a
//! component ([`Sandbox::load`]) checks that it is a component built for a compatible
//! contract, compiles it once per content hash, pre-links it and reads its manifest. Every
//! call ([`Plugin::reconcile`], [`Plugin::map`]) gets a fresh `Store` and instance: nothing
//! leaks between reconciles, and a trap poisons nothing.
//!
//! ```no_run
//! use std::sync::Arc;
//! use wasmloop_sandbox::{Sandbox, SandboxConfig, EmptyHost};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let sandbox = Sandbox::new(SandboxConfig::default())?;
//! let bytes = std::fs::read("foo_deployment.wasm")?;
//! let plugin = sandbox.load(&bytes, "foo_deployment.wasm").await?;
//! println!("{} watches {}", plugin.manifest().name, plugin.manifest().primary.kind);
//! // Its own share of the instance pool, so its calls never wait for another plugin's.
//! let plugin = sandbox.reserve(&plugin)?;
//! # let request: wasmloop_sandbox::Request = todo!();
//! let response = plugin.reconcile(&request, Arc::new(EmptyHost)).await?;
//! # Ok(()) }
//! ```

mod action;
mod adapter;
mod bindings;
mod call_clock;
pub mod capability;
mod compile_cache;
mod config;
#[cfg(feature = "conformance")]
pub mod conformance;
mod contract;
pub mod cpu_budget;
pub mod disk_budget;
mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod guest_threads;
mod host_services;
mod ids;
mod lift;
mod manifest;
pub mod memory_budget;
mod object;
mod plugin;
mod pool;
mod response;
#[cfg(test)]
mod rules_suite;
mod sandbox;
mod state;
pub mod triggers;
pub use wasmloop_contract::validate;

pub use bindings::{
    ApplyConflict, FieldConflict, GenerationChange, Gvk, Object, Phase, Request, Trigger, WitObjectRef,
};
pub use compile_cache::{BUDGET as COMPILE_CACHE_BUDGET, CompileCache, digest};
pub use config::{Capped, Limits, MAX_KEEP_RESIDENT_BYTES, SandboxConfig};
pub use contract::{CONTRACT_PACKAGE, CONTRACT_VERSION, LEGACY_CONTRACT_VERSIONS, version_of};
pub use cpu_budget::CpuBudget;
pub use error::{CallError, CallFailure, LoadError};
pub use host_services::{CacheDenied, EmptyHost, HostServices, ListKey, ListPage, LogLevel};
pub use ids::{BadPluginId, PluginId, SourceId, SourceKind};
pub use manifest::{Contract, Index, Keep, KindSelector, Manifest, Settings, WriteGrant, WriteScope, WriteVerbs};
pub use memory_budget::{MemoryBudget, Pressure};
pub use object::{metadata_only, object_from_value};
pub use plugin::{Plugin, StageTimings};
pub use response::{Action, Apply, EventType, ObjectRef, PatchKind, Response};
pub use sandbox::Sandbox;
pub use wasmloop_contract::selector::{Selector, SelectorError};
