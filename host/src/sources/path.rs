//! A plugin on disk for `wasmloop dev`: a `.wasm` file, or a plugin crate rebuilt whenever
//! something its build reads changes (see [`WatchSet::from_metadata`]). Changes are watched
//! with `notify` and debounced, so an editor's burst of writes (or a file copied in several
//! chunks) is one reload; a half-written file that still slips through fails validation and
//! the next write reloads.
//!
//! A component file is watched through its directory (a rename replaces the inode a file
//! watch would follow; `WatchSet::roots`); if that directory is deleted (`cargo clean`),
//! restart `dev`. A crate is watched for what its build reads, never `target/`; when `cargo
//! metadata` fails at start, only the crate's own sources are
//! ([`PathSource::own_watch_set`]). Changes are debounced by 25 ms (`DEBOUNCE`). A crate is
//! built with cargo's JSON messages, which name the artifact; the rendered diagnostics go to
//! the terminal.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

/// How long the path must be quiet before a reload: long enough to fold a build's or an
/// editor's burst of writes into one, short enough to stay out of the save-to-live time.
const DEBOUNCE: Duration = Duration::from_millis(25);

/// Why a path is no plugin to watch: `dev` would have nothing to load.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path cannot be made absolute, or its links followed.
    #[error("cannot resolve {}", .path.display())]
    Resolve {
        /// The path.
        path: PathBuf,
        /// What resolving it said.
        #[source]
        source: std::io::Error,
    },
    /// A directory that is no crate.
    #[error(
        "{} is a directory without a Cargo.toml; pass a plugin crate's directory or a .wasm file",
        .path.display()
    )]
    NotACrate {
        /// The directory.
        path: PathBuf,
    },
    /// A file whose directory does not exist, so it cannot be watched.
    #[error(
        "{} is not in an existing directory; pass a .wasm file or a plugin crate's directory",
        .path.display()
    )]
    NoDirectory {
        /// The path.
        path: PathBuf,
    },
}

/// Why `cargo metadata` does not say what a crate's build reads: its own sources are watched
/// instead.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// Cargo cannot be run.
    #[error("cannot run cargo metadata; install Rust")]
    Run(#[source] std::io::Error),
    /// Cargo ran and failed: its words.
    #[error("cargo metadata in {} failed: {stderr}", .dir.display())]
    Failed {
        /// The crate.
        dir: PathBuf,
        /// What cargo printed on stderr, trimmed.
        stderr: String,
    },
    /// Cargo printed no JSON.
    #[error("cargo metadata printed something other than its JSON")]
    NotJson(#[source] serde_json::Error),
    /// The metadata does not list the crate: it is not a member of its workspace.
    #[error("cargo metadata does not list the crate in {}; is it a member of its workspace?", .dir.display())]
    Unlisted {
        /// The crate.
        dir: PathBuf,
    },
}

/// Why changes cannot be watched: a save would go unseen.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The watcher cannot start.
    #[error("cannot watch for changes")]
    Start(#[source] notify::Error),
    /// A directory cannot be watched.
    #[error("cannot watch {}", .root.display())]
    Root {
        /// The directory.
        root: PathBuf,
        /// What the watcher said.
        #[source]
        source: notify::Error,
    },
}

/// Why there is no component to offer: the version serving, if any, stays.
#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    /// The component file cannot be read.
    #[error("cannot read {}", .file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// What the read said.
        #[source]
        source: std::io::Error,
    },
    /// Cargo cannot be run.
    #[error("cannot run cargo; install Rust and `rustup target add wasm32-wasip2`")]
    Cargo(#[source] std::io::Error),
    /// Cargo's output or exit cannot be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The build failed; cargo printed why.
    #[error("the build of {} failed; fix the errors above and save again", .dir.display())]
    BuildFailed {
        /// The crate.
        dir: PathBuf,
    },
    /// The build made no component: not a cdylib.
    #[error(
        "building {} produced no .wasm; is it a cdylib plugin crate (crate-type = [\"cdylib\"])?",
        .dir.display()
    )]
    NoWasm {
        /// The crate.
        dir: PathBuf,
    },
}

/// A watched plugin path.
#[derive(Debug, Clone)]
pub enum PathSource {
    /// A component file.
    File(PathBuf),
    /// A plugin crate's directory (holding its Cargo.toml).
    Crate(PathBuf),
}

/// Keeps the watch alive; changes arrive on the receiver.
pub struct Changes {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
    /// One message per debounced burst of relevant changes.
    pub receiver: mpsc::UnboundedReceiver<()>,
    /// What is watched.
    pub set: WatchSet,
}

/// The guest SDK: its bindings are generated from the contract by `wit_bindgen::generate!`
/// with `path: "../wit"` (`guest-sdk/src/bindings.rs`), the `wit/` beside the SDK's crate
/// directory; a plugin gets its WIT from there, not from a `wit/` of its own.
const SDK_PACKAGE: &str = "wasmloop-sdk";

/// What a plugin is built from, as `wasmloop dev` watches it: a change to any of it rebuilds
/// (or, for a component file, reloads) the plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchSet {
    /// Directories watched at any depth: a change anywhere under one counts.
    pub trees: BTreeSet<PathBuf>,
    /// Files watched one by one, through their directory: a change to one counts, a change to
    /// its neighbours does not.
    pub files: BTreeSet<PathBuf>,
}

impl WatchSet {
    /// One component file.
    pub fn file(file: &Path) -> WatchSet {
        WatchSet { trees: BTreeSet::new(), files: BTreeSet::from([file.to_owned()]) }
    }

    /// A crate's own sources: `src/`, `wit/`, `Cargo.toml` and `build.rs`. Never the whole
    /// directory, which may hold a `target/` the build itself writes to.
    pub fn of_crate(dir: &Path) -> WatchSet {
        let mut set = WatchSet::default();
        set.add_crate(dir);
        set
    }

    fn add_crate(&mut self, dir: &Path) {
        self.trees.extend([dir.join("src"), dir.join("wit")]);
        self.files.extend([dir.join("Cargo.toml"), dir.join("build.rs")]);
    }

    /// Everything a build of the crate in `dir` reads that an author edits, from the output of
    /// `cargo metadata --format-version 1 --no-deps` run in it (which resolves
    /// `{ workspace = true }` dependencies to their paths):
    /// - the crate's own sources ([`WatchSet::of_crate`]);
    /// - those of each path dependency, normal or build (not dev: `cargo build` does not
    ///   build those), followed through the workspace's members; a path dependency outside
    ///   the workspace is watched, but its own path dependencies are not (`--no-deps` does not
    ///   list them);
    /// - the contract the SDK's bindings are generated from: the `wit/` beside the
    ///   `wasmloop-sdk` crate's directory (`generate!` reads `../wit`);
    /// - the workspace's `Cargo.toml`, whose `[workspace.dependencies]` and profiles the crate
    ///   inherits.
    ///
    /// # Errors
    /// [`MetadataError::Unlisted`] when the metadata does not list the crate.
    pub fn from_metadata(metadata: &Value, dir: &Path) -> Result<WatchSet, MetadataError> {
        let packages: HashMap<PathBuf, &Value> = metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|package| {
                let manifest = Path::new(package["manifest_path"].as_str()?);
                Some((manifest.parent()?.to_owned(), package))
            })
            .collect();
        if !packages.contains_key(dir) {
            return Err(MetadataError::Unlisted { dir: dir.to_owned() });
        }
        let mut set = WatchSet::default();
        let (mut pending, mut seen) = (vec![dir.to_owned()], HashSet::new());
        while let Some(crate_dir) = pending.pop() {
            if !seen.insert(crate_dir.clone()) {
                continue;
            }
            set.add_crate(&crate_dir);
            let Some(package) = packages.get(&crate_dir) else { continue };
            for dependency in package["dependencies"].as_array().into_iter().flatten() {
                let Some(path) = dependency["path"].as_str().filter(|_| dependency["kind"] != "dev") else {
                    continue;
                };
                let path = PathBuf::from(path);
                if dependency["name"] == SDK_PACKAGE
                    && let Some(beside) = path.parent()
                {
                    set.trees.insert(beside.join("wit"));
                }
                pending.push(path);
            }
        }
        if let Some(root) = metadata["workspace_root"].as_str() {
            set.files.insert(Path::new(root).join("Cargo.toml"));
        }
        Ok(set)
    }

    /// Whether a change to `path` counts.
    pub fn covers(&self, path: &Path) -> bool {
        self.files.contains(path) || self.trees.iter().any(|tree| path.starts_with(tree))
    }

    /// What to hand `notify`, given which directories exist: each tree (not inside another)
    /// recursively, and the directory of each file, alone, unless a tree already covers it.
    fn roots(&self, is_dir: impl Fn(&Path) -> bool) -> Vec<(PathBuf, RecursiveMode)> {
        let trees: Vec<&PathBuf> = self.trees.iter().filter(|tree| is_dir(tree)).collect();
        let covered = |path: &Path| trees.iter().any(|tree| path.starts_with(tree));
        let mut roots: Vec<(PathBuf, RecursiveMode)> = trees
            .iter()
            .filter(|tree| !trees.iter().any(|other| other != *tree && tree.starts_with(other)))
            .map(|tree| ((*tree).clone(), RecursiveMode::Recursive))
            .collect();
        let dirs: BTreeSet<&Path> =
            self.files.iter().filter_map(|file| file.parent()).filter(|dir| is_dir(dir) && !covered(dir)).collect();
        roots.extend(dirs.into_iter().map(|dir| (dir.to_owned(), RecursiveMode::NonRecursive)));
        roots
    }
}

impl PathSource {
    /// Recognises `path` as a component file or a crate directory.
    ///
    /// # Errors
    /// A [`PathError`] when it is neither.
    pub fn new(path: &Path) -> Result<PathSource, PathError> {
        let path = std::path::absolute(path).map_err(|source| PathError::Resolve { path: path.to_owned(), source })?;
        if path.is_dir() {
            // Cargo reports manifest paths with symlinks and `..` resolved.
            let path = path.canonicalize().map_err(|source| PathError::Resolve { path: path.clone(), source })?;
            if !path.join("Cargo.toml").is_file() {
                return Err(PathError::NotACrate { path });
            }
            return Ok(PathSource::Crate(path));
        }
        if !path.parent().is_some_and(Path::is_dir) {
            return Err(PathError::NoDirectory { path });
        }
        Ok(PathSource::File(path))
    }

    /// The source it is, as the registry knows it.
    pub fn id(&self) -> wasmloop_sandbox::SourceId {
        match self {
            PathSource::File(p) => wasmloop_sandbox::SourceId::File(p.clone()),
            PathSource::Crate(p) => wasmloop_sandbox::SourceId::Crate(p.clone()),
        }
    }

    /// How users name it, in logs and errors.
    pub fn label(&self) -> String {
        self.id().to_string()
    }

    /// What to watch: the file; for a crate, what its build reads
    /// ([`WatchSet::from_metadata`], from `cargo metadata`).
    ///
    /// # Errors
    /// A [`MetadataError`] when `cargo metadata` fails (a manifest half edited, say) or does
    /// not list the crate.
    pub async fn watch_set(&self) -> Result<WatchSet, MetadataError> {
        match self {
            PathSource::File(file) => Ok(WatchSet::file(file)),
            PathSource::Crate(dir) => WatchSet::from_metadata(&metadata(dir).await?, dir),
        }
    }

    /// What to watch when [`PathSource::watch_set`] fails: the file, or the crate's own
    /// sources.
    pub fn own_watch_set(&self) -> WatchSet {
        match self {
            PathSource::File(file) => WatchSet::file(file),
            PathSource::Crate(dir) => WatchSet::of_crate(dir),
        }
    }

    /// Starts watching `set`. A file is watched through its directory, so that replacing it
    /// by a rename (as editors and `cp` to a temporary name do) is seen too.
    ///
    /// # Errors
    /// A [`WatchError`] when the watch cannot be set up.
    pub fn watch(&self, set: WatchSet) -> Result<Changes, WatchError> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let (relevant, label) = (set.clone(), self.label());
        let mut debouncer = new_debouncer(DEBOUNCE, None, move |result: DebounceEventResult| match result {
            Ok(events) => {
                if events.iter().flat_map(|e| &e.paths).any(|p| relevant.covers(p)) {
                    let _ = sender.send(());
                }
            }
            Err(errors) => errors.iter().for_each(|e| {
                tracing::warn!(source = %label, error = %e, "watching for changes failed; if the directory was removed, restart wasmloop dev")
            }),
        })
        .map_err(WatchError::Start)?;
        for (root, mode) in set.roots(Path::is_dir) {
            if let Err(source) = debouncer.watch(&root, mode) {
                return Err(WatchError::Root { root, source });
            }
        }
        Ok(Changes { _debouncer: debouncer, receiver, set })
    }

    /// The component's bytes: read for a file; for a crate, built first, with the compiler's
    /// errors on the terminal.
    ///
    /// # Errors
    /// A [`ComponentError`] when the file cannot be read or the build fails.
    pub async fn component(&self) -> Result<Vec<u8>, ComponentError> {
        let file = match self {
            PathSource::File(file) => file.clone(),
            PathSource::Crate(dir) => build(dir).await?,
        };
        match tokio::fs::read(&file).await {
            Ok(bytes) => Ok(bytes),
            Err(source) => Err(ComponentError::Read { file, source }),
        }
    }
}

/// Cargo: the one that runs us (`cargo run`), else the one on the PATH.
fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// `cargo metadata --format-version 1 --no-deps` in the crate: its workspace's members and
/// their dependencies, paths resolved, without touching the network.
async fn metadata(dir: &Path) -> Result<Value, MetadataError> {
    let out = tokio::process::Command::new(cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(dir)
        .stdin(Stdio::null())
        // A reload that a signal cancels takes cargo with it.
        .kill_on_drop(true)
        .output()
        .await
        .map_err(MetadataError::Run)?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(MetadataError::Failed { dir: dir.to_owned(), stderr });
    }
    serde_json::from_slice(&out.stdout).map_err(MetadataError::NotJson)
}

/// `cargo build --release --target wasm32-wasip2` in the crate, returning the component it
/// produced (read from cargo's JSON messages; rendered diagnostics go to stderr).
async fn build(dir: &Path) -> Result<PathBuf, ComponentError> {
    tracing::info!(krate = %dir.display(), "building");
    let mut child = tokio::process::Command::new(cargo())
        .args(["build", "--release", "--target", "wasm32-wasip2", "--message-format=json-render-diagnostics"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(ComponentError::Cargo)?;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut component = None;
    while let Some(line) = lines.next_line().await? {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if message["reason"] != "compiler-artifact"
            || message["manifest_path"] != dir.join("Cargo.toml").display().to_string()
        {
            continue;
        }
        let files = message["filenames"].as_array().into_iter().flatten().filter_map(|f| f.as_str());
        if let Some(wasm) = files.into_iter().find(|f| f.ends_with(".wasm")) {
            component = Some(PathBuf::from(wasm));
        }
    }
    let status = child.wait().await?;
    if !status.success() {
        return Err(ComponentError::BuildFailed { dir: dir.to_owned() });
    }
    component.ok_or_else(|| ComponentError::NoWasm { dir: dir.to_owned() })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A package of `cargo metadata`'s output: its directory and its dependencies as
    /// `(name, path, kind)`; a registry dependency has no path, a normal one no kind.
    fn package(dir: &str, dependencies: &[(&str, Option<&str>, Option<&str>)]) -> Value {
        let dependencies: Vec<Value> = dependencies
            .iter()
            .map(|(name, path, kind)| {
                let mut dependency = json!({"name": name, "kind": kind});
                match path {
                    Some(path) => dependency["path"] = json!(path),
                    None => dependency["source"] = json!("registry+https://github.com/rust-lang/crates.io-index"),
                }
                dependency
            })
            .collect();
        json!({"manifest_path": format!("{dir}/Cargo.toml"), "dependencies": dependencies})
    }

    fn metadata(root: &str, packages: Vec<Value>) -> Value {
        json!({"packages": packages, "workspace_root": root, "version": 1})
    }

    /// The sources of each crate in `crates`, and the other `trees` and `files`.
    fn expected(crates: &[&str], trees: &[&str], files: &[&str]) -> WatchSet {
        let mut set = WatchSet::default();
        for dir in crates {
            set.add_crate(Path::new(dir));
        }
        set.trees.extend(trees.iter().map(PathBuf::from));
        set.files.extend(files.iter().map(PathBuf::from));
        set
    }

    /// This workspace's shape: a plugin inheriting the SDK from `[workspace.dependencies]`.
    fn workspace_plugin() -> Value {
        metadata(
            "/ws",
            vec![
                package(
                    "/ws/plugins/p",
                    &[
                        ("wasmloop-sdk", Some("/ws/guest-sdk"), None),
                        ("serde", None, None),
                        ("wasmloop-testenv", Some("/ws/host/testenv"), Some("dev")),
                    ],
                ),
                package("/ws/guest-sdk", &[("serde", None, None), ("wit-bindgen", None, None)]),
                package("/ws/host/testenv", &[("wasmloop-sandbox", Some("/ws/host/sandbox"), None)]),
                package("/ws/host/sandbox", &[]),
            ],
        )
    }

    #[test]
    fn a_plugin_is_watched_with_its_path_dependencies_the_sdks_contract_and_the_workspace_manifest() {
        let cases = [
            (
                "a workspace member: the SDK's sources and wit/, the workspace Cargo.toml; no dev or registry crate",
                workspace_plugin(),
                "/ws/plugins/p",
                expected(&["/ws/plugins/p", "/ws/guest-sdk"], &["/ws/wit"], &["/ws/Cargo.toml"]),
            ),
            (
                "path dependencies are followed through workspace members, build-dependencies included",
                metadata(
                    "/ws",
                    vec![
                        package("/ws/p", &[("lib", Some("/ws/lib"), None), ("gen", Some("/ws/gen"), Some("build"))]),
                        package("/ws/lib", &[("util", Some("/ws/util"), None), ("p", Some("/ws/p"), Some("dev"))]),
                        package("/ws/util", &[("lib", Some("/ws/lib"), Some("dev"))]),
                        package("/ws/gen", &[]),
                    ],
                ),
                "/ws/p",
                expected(&["/ws/p", "/ws/lib", "/ws/util", "/ws/gen"], &[], &["/ws/Cargo.toml"]),
            ),
            (
                "a crate of its own: a path dependency outside it is watched (its own are not listed), \
                 and the contract beside the SDK it points at",
                metadata(
                    "/p",
                    vec![package(
                        "/p",
                        &[
                            ("wasmloop-sdk", Some("/src/wasmloop/guest-sdk"), None),
                            ("shared", Some("/src/shared"), None),
                        ],
                    )],
                ),
                "/p",
                expected(&["/p", "/src/wasmloop/guest-sdk", "/src/shared"], &["/src/wasmloop/wit"], &[]),
            ),
        ];
        for (case, metadata, dir, expected) in cases {
            let got = WatchSet::from_metadata(&metadata, Path::new(dir)).unwrap_or_else(|e| panic!("{case}: {e:#}"));
            assert_eq!(got, expected, "{case}");
        }
    }

    #[test]
    fn metadata_that_does_not_list_the_crate_is_an_error() {
        let error = WatchSet::from_metadata(&workspace_plugin(), Path::new("/elsewhere")).unwrap_err();
        assert!(matches!(error, MetadataError::Unlisted { .. }), "{error:?}");
        assert!(error.to_string().contains("does not list the crate in /elsewhere"), "{error}");
    }

    #[test]
    fn a_change_counts_under_a_watched_tree_or_to_a_watched_file_only() {
        let plugin = WatchSet::from_metadata(&workspace_plugin(), Path::new("/ws/plugins/p")).unwrap();
        let component = WatchSet::file(Path::new("/d/p.wasm"));
        let cases = [
            (&plugin, "/ws/plugins/p/src/lib.rs", true),
            (&plugin, "/ws/plugins/p/src/deep/mod.rs", true),
            (&plugin, "/ws/plugins/p/Cargo.toml", true),
            (&plugin, "/ws/plugins/p/build.rs", true),
            (&plugin, "/ws/plugins/p/README.md", false),
            (&plugin, "/ws/plugins/p/srcs/lib.rs", false),
            (&plugin, "/ws/plugins/p/target/wasm32-wasip2/release/p.wasm", false),
            (&plugin, "/ws/wit/plugin.wit", true),
            (&plugin, "/ws/wit/v0.1/plugin.wit", true),
            (&plugin, "/ws/guest-sdk/src/lib.rs", true),
            (&plugin, "/ws/guest-sdk/Cargo.toml", true),
            (&plugin, "/ws/Cargo.toml", true),
            (&plugin, "/ws/Cargo.lock", false),
            (&plugin, "/ws/target/release/build/x", false),
            (&plugin, "/ws/host/testenv/src/lib.rs", false),
            (&component, "/d/p.wasm", true),
            (&component, "/d/p.wasm.tmp", false),
            (&component, "/d/other.wasm", false),
        ];
        for (set, path, expected) in cases {
            assert_eq!(set.covers(Path::new(path)), expected, "{path}");
        }
    }

    #[test]
    fn notify_watches_existing_trees_recursively_and_the_directories_of_files_alone() {
        use notify::RecursiveMode::{NonRecursive, Recursive};
        let set = expected(&["/c"], &["/c/src/nested", "/w/wit"], &["/c/src/generated.rs", "/c/missing/x"]);
        let cases: [(&str, &[&str], Vec<(&str, RecursiveMode)>); 3] = [
            (
                "everything exists",
                &["/c", "/c/src", "/c/src/nested", "/c/wit", "/c/missing", "/w/wit"],
                vec![
                    ("/c/src", Recursive),
                    ("/c/wit", Recursive),
                    ("/w/wit", Recursive),
                    ("/c", NonRecursive),
                    ("/c/missing", NonRecursive),
                ],
            ),
            ("no wit/ anywhere", &["/c", "/c/src"], vec![("/c/src", Recursive), ("/c", NonRecursive)]),
            (
                "the contract outside the crate, and no wit/ in it",
                &["/c", "/c/src", "/w/wit"],
                vec![("/c/src", Recursive), ("/w/wit", Recursive), ("/c", NonRecursive)],
            ),
        ];
        for (case, dirs, expected) in cases {
            let got = set.roots(|path| dirs.iter().any(|dir| path == Path::new(dir)));
            let expected: Vec<(PathBuf, RecursiveMode)> =
                expected.into_iter().map(|(path, mode)| (PathBuf::from(path), mode)).collect();
            assert_eq!(got, expected, "{case}");
        }
    }
}
