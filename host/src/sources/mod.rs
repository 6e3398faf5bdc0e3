//! Where plugins come from: the first stage of the pipeline. Each source turns what users
//! change (a file, a crate, a ConfigMap) into candidates for the registry.

pub mod namespace;
pub mod path;
