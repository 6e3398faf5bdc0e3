//! The controller machinery wasmloop runs once for every plugin.
//!
//! Data flows one way: informers turn watch events into keys, the [`queue`] hands keys to
//! workers, workers call the plugin and the executor carries out its actions. [`metrics`] observes
//! every stage.

pub mod api;
pub mod compare;
pub mod context;
pub mod controller;
pub mod discovery;
pub mod events;
pub mod executor;
pub mod identity;
pub mod informer;
pub mod metrics;
pub mod quarantine;
pub mod queue;
pub mod record;
pub mod registry;
pub mod shadow;
pub mod writer;

pub use context::Context;
pub use controller::{Controller, ControllerConfig, Key};
pub use informer::{Change, Entry, Informer, InformerScope, Informers};
pub use metrics::Metrics;
pub use queue::{QueueConfig, WorkQueue};
