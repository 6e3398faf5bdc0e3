//! The controller machinery wasmloop runs once for every plugin.
//!
//! Data flows one way: informers turn watch events into keys, the [`queue`] hands keys to
//! workers, workers call the plugin and the executor carries out its actions. This crate
//! grows along that pipeline; today it holds the shared informers and the work queue.

pub mod controller;
pub mod discovery;
pub mod executor;
pub mod informer;
pub mod queue;

pub use controller::{Controller, ControllerConfig, Key};
pub use informer::{Change, Entry, Informer, InformerScope, Informers};
pub use queue::{QueueConfig, WorkQueue};
