//! The rules the wasmloop host and the plugin SDK share, in one place so that the two cannot
//! drift: a plugin's tests (the SDK's `TestCase`) refuse what the host refuses.
//!
//! It depends on nothing of either side and builds for the host and for `wasm32-wasip2`.
//!
//! ```
//! use wasmloop_contract::gvk::split_api_version;
//! use wasmloop_contract::selector::Selector;
//! assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
//! let tier: Selector = "tier in (web,api)".parse().unwrap();
//! assert!(tier.matches(|k| (k == "tier").then_some("web")));
//! ```

pub mod action;
pub mod annotations;
pub mod cache;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod fields;
pub mod gvk;
pub mod manifest;
pub mod names;
pub mod selector;
pub mod validate;
