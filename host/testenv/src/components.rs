//! The plugin components tests load, built by the tests themselves: a plain `cargo test`
//! works once `rustup target add wasm32-wasip2` has run, as Spin's test components do.
//!
//! The first call in a test binary runs one `cargo build --release --target wasm32-wasip2`
//! of every guest crate, into the same target directory the tests were built in. Cargo keeps
//! it incremental: when `scripts/build-plugins` (which `scripts/test` runs) built them
//! already, it only checks that they are fresh. Test binaries run one after another, and
//! cargo locks the target directory, so two builds never race.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Every plugin and test guest, as `scripts/build-plugins` lists them.
pub const GUESTS: [&str; 13] = [
    "foo-deployment",
    "pod-logger",
    "node-image-watch",
    "configmap-mirror",
    "hostile-plugin",
    "future-contract-plugin",
    "stale-contract-plugin",
    "labeler-plugin",
    "labeler-v2-plugin",
    "foo-deployment-next",
    "secret-reader-plugin",
    "noop-plugin",
    "stamp-plugin",
];

/// The target directory the tests were built in (`CARGO_TARGET_DIR`, else the workspace's).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace().join("target"))
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The component `name` (a crate's library name, `foo_deployment`), built if it is missing
/// or stale.
///
/// # Panics
/// When the build fails, with cargo's output and what to do.
pub fn component(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(why) = BUILT.get_or_init(build) {
        panic!("the test components could not be built: {why}");
    }
    let path = target_dir().join("wasm32-wasip2/release").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is not built by any guest crate; is {name} in GUESTS?", path.display());
    path
}

fn build() -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(workspace()).env("CARGO_TARGET_DIR", target_dir());
    command.args(["build", "--release", "--target", "wasm32-wasip2"]);
    for guest in GUESTS {
        command.args(["-p", guest]);
    }
    let out = command.output().map_err(|e| format!("cannot run cargo: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let hint = if stderr.contains("wasm32-wasip2") && stderr.contains("target may not be installed") {
        "; run `rustup target add wasm32-wasip2`"
    } else {
        ""
    };
    Err(format!("cargo build --target wasm32-wasip2 failed{hint}:\n{stderr}"))
}

/// Guest `package` (library `lib`) built as plugin `name`: its crate reads the name from the
/// environment variable `var` at build time (`option_env!`), so cargo rebuilds only that crate.
/// Copied to `wasm32-wasip2/named/<name>.wasm`, since each build overwrites the last. Builds
/// run one at a time.
///
/// # Panics
/// When the build fails.
pub fn component_named(package: &str, lib: &str, var: &str, name: &str) -> PathBuf {
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // Every guest first, so that this build's artifacts are the last word for `lib`.
    component(lib);
    let _one = BUILDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let copy = target_dir().join("wasm32-wasip2/named").join(format!("{name}.wasm"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace())
        .env("CARGO_TARGET_DIR", target_dir())
        .env(var, name)
        .args(["build", "--release", "--target", "wasm32-wasip2", "-p", package])
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "building {package} as {name} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    std::fs::create_dir_all(copy.parent().expect("a parent")).expect("a directory for named guests");
    std::fs::copy(target_dir().join("wasm32-wasip2/release").join(format!("{lib}.wasm")), &copy)
        .expect("the build's output");
    copy
}
