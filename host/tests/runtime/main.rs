//! The runtime's parts that talk to the API server, against the real control plane, in one
//! test binary so that they share one: the executor's writes, the shared informers and the
//! registry's loads. Their decisions are unit-tested in `wasmloop-runtime` without a server
//! (`executor::plan`, `registry::plan`, `controller::plan`, ...), so `cargo test -p
//! wasmloop-runtime` needs none.

#[path = "../common/mod.rs"]
mod common;
mod executor;
mod informer;
mod registry;
