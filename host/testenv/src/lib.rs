//! A real Kubernetes control plane on loopback for tests and local trials: etcd,
//! kube-apiserver and kube-controller-manager, started from real binaries.
//!
//! Binaries are found through controller-runtime's envtest variables (`TEST_ASSET_ETCD` and
//! `TEST_ASSET_KUBE_APISERVER` together, with `TEST_ASSET_KUBE_CONTROLLER_MANAGER`, else
//! `KUBEBUILDER_ASSETS`), else in the user cache where `scripts/kube-binaries` builds them.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let plane = wasmloop_testenv::shared();          // started once per test binary
//! let ns = plane.namespace("smoke").await?;        // each test gets its own namespace
//! let client = plane.client().await?;
//! # Ok(()) }
//! ```
//!
//! # Guarantees
//! Nothing listens beyond 127.0.0.1. Every component runs under a watchdog that stops it when
//! the process that started the plane exits, however it exits, so no test run leaves servers
//! behind. Component logs stay on disk and their paths are printed when something fails.

mod binaries;
pub mod components;
mod control_plane;
mod fixtures;
mod kubeconfig;
pub mod registry;
mod watchdog;

pub use binaries::{Binaries, BinariesError};
pub use control_plane::{ControlPlane, ControlPlaneError, Controllers, TestNamespace};
pub use fixtures::wait_for_event;

use std::sync::OnceLock;

/// The control plane shared by every test of this test binary, started on first use.
///
/// # Panics
/// When the binaries cannot be found or built, or the plane does not become ready: the
/// message says why and where the logs are. Tests that need Kubernetes fail rather than
/// skip, so a CI run without a control plane cannot pass silently.
pub fn shared() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(|| match ControlPlane::start_blocking() {
        Ok(plane) => plane,
        Err(e) => panic!("cannot start the test control plane: {e}"),
    })
}

/// Polls `check` until it returns `Some`, or panics after `timeout` naming `what` and the
/// last value seen.
///
/// # Panics
/// When `timeout` passes first.
pub async fn eventually<T, F, Fut>(timeout: std::time::Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let started = std::time::Instant::now();
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if started.elapsed() >= timeout => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
}
