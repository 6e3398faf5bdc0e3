//! `wasmloop run` with the Python foo-deployment (`plugins/foo-deployment-py`) on the real
//! control plane. Its own test binary, so no Rust foo-deployment host runs beside it: what
//! reconciles the Foos here can only be the Python component.

mod common;

#[tokio::test]
async fn the_python_foo_deployment_has_sample_controller_parity() {
    let plugin = wasmloop_testenv::components::python_component("plugins/foo-deployment-py");
    common::sample_controller_parity("run-python", &plugin).await;
}
