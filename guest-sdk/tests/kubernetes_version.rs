//! The SDK leaves the Kubernetes version to the plugin, as k8s-openapi requires of libraries.

use std::path::Path;
use std::process::Command;

/// The workspace's target directory: `CARGO_TARGET_TMPDIR` is its `tmp/`. Sharing it lets the
/// build reuse the wasm32 dependencies the suite's plugin builds compiled.
fn target_dir() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("CARGO_TARGET_TMPDIR is <target>/tmp")
}

#[test]
fn a_plugin_that_picks_kubernetes_1_34_builds_against_the_sdk() {
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugin-on-1-34");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&plugin)
        .env("CARGO_TARGET_DIR", target_dir())
        .args(["build", "--release", "--locked", "--offline", "--target", "wasm32-wasip2"])
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the plugin that picks v1_34 did not build:\n{stderr}");
    let component = target_dir().join("wasm32-wasip2/release/plugin_on_1_34.wasm");
    let bytes = std::fs::read(&component).expect("the build wrote the component");
    // A component (layer 1), not a core module: what the host loads.
    assert_eq!(&bytes[..4], b"\0asm");
    assert_eq!(&bytes[6..8], [1, 0], "{} is not a component", component.display());
}
