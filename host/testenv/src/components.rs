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
pub const GUESTS: [&str; 18] = [
    "foo-deployment",
    "pod-logger",
    "node-image-watch",
    "configmap-mirror",
    "ttl-janitor",
    "namespace-defaults",
    "hostile-plugin",
    "future-contract-plugin",
    "stale-contract-plugin",
    "labeler-plugin",
    "labeler-v2-plugin",
    "foo-deployment-next",
    "secret-reader-plugin",
    "noop-plugin",
    "stamp-plugin",
    "smuggler-plugin",
    "roller-plugin",
    "mapper-plugin",
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

/// The Python plugins and test guests, as `scripts/build-plugins` lists them: directories
/// relative to the workspace.
pub const PYTHON_GUESTS: [&str; 4] = [
    "plugins/foo-deployment-py",
    "plugins/configmap-mirror-py",
    "plugins/namespace-defaults-py",
    "host/tests/guests-py/remember",
];

/// The Python plugin in directory `dir` (relative to the workspace, `plugins/foo-deployment-py`)
/// as a component, built with the Python SDK's build command (`python -m wasmloop build`,
/// componentize-py underneath) into `wasm32-wasip2/python/<last part of dir>.wasm` unless that
/// file is newer than every source of the plugin and the SDK. The interpreter is [`python`]'s.
///
/// # Panics
/// When the build fails, with its output and what to install.
pub fn python_component(dir: &str) -> PathBuf {
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = Path::new(dir).file_name().expect("a directory").to_string_lossy();
    let out = target_dir().join("wasm32-wasip2/python").join(format!("{name}.wasm"));
    // The contract in the repository too: the SDK's shipped copy may be older than it.
    let sources = [workspace().join(dir), workspace().join("guest-sdk/python/wasmloop"), workspace().join("wit")];
    let built = std::fs::metadata(&out).and_then(|m| m.modified()).ok();
    if built.is_some_and(|built| sources.iter().all(|s| newest_source(s) <= Some(built))) {
        return out;
    }
    let python = python();
    ship_contract("python");
    // Built aside and renamed, so a reader never sees half a component.
    let partial = out.with_extension("wasm.partial");
    let done = Command::new(python)
        .current_dir(workspace())
        .env("PYTHONPATH", workspace().join("guest-sdk/python"))
        .args(["-m", "wasmloop", "build"])
        .arg(workspace().join(dir))
        .arg("-o")
        .arg(&partial)
        .output()
        .expect("the checkout's Python runs");
    assert!(
        done.status.success(),
        "building the Python plugin {dir} failed (scripts/python-env sets up what it needs in .venv/):\n{}",
        String::from_utf8_lossy(&done.stderr)
    );
    std::fs::rename(&partial, &out).expect("the built component");
    out
}

/// Ships the repository's contract into the SDK of `language` (`scripts/sdk-assets`), as its
/// build does, before a plugin is built against it.
///
/// # Panics
/// When `scripts/sdk-assets` fails, with its words.
fn ship_contract(language: &str) {
    let out = Command::new(workspace().join("scripts/sdk-assets"))
        .arg(language)
        .output()
        .expect("bash runs scripts/sdk-assets");
    assert!(out.status.success(), "scripts/sdk-assets {language} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// The Python for plugin work: `WASMLOOP_PYTHON` if set, else the checkout's `.venv`, which
/// `scripts/python-env` creates (here, on first use) with the pinned componentize-py and pytest
/// and the SDK importable.
///
/// # Panics
/// When `scripts/python-env` fails, with its words.
pub fn python() -> std::ffi::OsString {
    static PYTHON: std::sync::OnceLock<std::ffi::OsString> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(|| {
            if let Some(python) = std::env::var_os("WASMLOOP_PYTHON") {
                return python;
            }
            let out =
                Command::new(workspace().join("scripts/python-env")).output().expect("bash runs scripts/python-env");
            assert!(out.status.success(), "scripts/python-env failed:\n{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).trim().into()
        })
        .clone()
}

/// The JavaScript plugins, as `scripts/build-plugins` lists them: directories relative to the
/// workspace.
pub const JS_GUESTS: [&str; 1] = ["plugins/foo-deployment-js"];

/// The JavaScript plugin in directory `dir` (relative to the workspace,
/// `plugins/foo-deployment-js`) as a component, built with the JavaScript SDK's build command
/// (`node guest-sdk/js/src/build.js build`, esbuild and componentize-js underneath) into
/// `wasm32-wasip2/js/<last part of dir>.wasm` unless that file is newer than every source of
/// the plugin and the SDK. The SDK's packages come from `npm ci` in `guest-sdk/js`.
///
/// # Panics
/// When the build fails, with its output and what to install.
pub fn js_component(dir: &str) -> PathBuf {
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = Path::new(dir).file_name().expect("a directory").to_string_lossy();
    let out_dir = target_dir().join("wasm32-wasip2/js");
    std::fs::create_dir_all(&out_dir).expect("the JS output directory");
    let out = out_dir.join(format!("{name}.wasm"));
    let sources = [workspace().join(dir), workspace().join("guest-sdk/js/src"), workspace().join("wit")];
    let built = std::fs::metadata(&out).and_then(|m| m.modified()).ok();
    if built.is_some_and(|built| sources.iter().all(|s| newest_source(s) <= Some(built))) {
        return out;
    }
    let sdk = workspace().join("guest-sdk/js");
    if !sdk.join("node_modules").is_dir() {
        // As scripts/test does: the pinned packages from the lock file, inside the checkout.
        let installed = Command::new("npm")
            .current_dir(&sdk)
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .output()
            .expect("npm runs (install Node.js 20.19 or later with npm)");
        assert!(
            installed.status.success(),
            "npm ci in guest-sdk/js failed:\n{}",
            String::from_utf8_lossy(&installed.stderr)
        );
    }
    ship_contract("js");
    let done = Command::new("node")
        .current_dir(workspace())
        .arg("guest-sdk/js/src/build.js")
        .arg("build")
        .arg(workspace().join(dir))
        .arg("-o")
        .arg(&out)
        .output()
        .expect("node runs (install Node.js 20 or later)");
    assert!(
        done.status.success(),
        "building the JavaScript plugin {dir} failed (`npm ci` in guest-sdk/js installs what it needs):\n{}",
        String::from_utf8_lossy(&done.stderr)
    );
    out
}

/// The latest modification time of a source file (`.py`, `.js`, `.wit`) under `dir`, outside
/// `node_modules`.
fn newest_source(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "node_modules") { None } else { newest_source(&path) }
        } else if path.extension().is_some_and(|e| e == "py" || e == "wit" || e == "js") {
            entry.metadata().and_then(|m| m.modified()).ok()
        } else {
            None
        };
        newest = newest.max(time);
    }
    newest
}
