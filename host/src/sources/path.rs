//! A plugin on disk for `wasmloop dev`: a `.wasm` file, or a plugin crate rebuilt on every
//! source change. Changes are watched with `notify` and debounced, so an editor's burst of
//! writes (or a file copied in several chunks) is one reload; a half-written file that still
//! slips through fails validation and the next write reloads.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

/// How long the path must be quiet before a reload: long enough to fold a build's or an
/// editor's burst of writes into one, short enough to stay out of the save-to-live time.
const DEBOUNCE: Duration = Duration::from_millis(25);

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
}

impl PathSource {
    /// Recognises `path` as a component file or a crate directory.
    ///
    /// # Errors
    /// When it is neither.
    pub fn new(path: &Path) -> anyhow::Result<PathSource> {
        let path = std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))?;
        if path.is_dir() {
            // Cargo reports manifest paths with symlinks and `..` resolved.
            let path = path.canonicalize().with_context(|| format!("cannot resolve {}", path.display()))?;
            anyhow::ensure!(
                path.join("Cargo.toml").is_file(),
                "{} is a directory without a Cargo.toml; pass a plugin crate's directory or a .wasm file",
                path.display()
            );
            return Ok(PathSource::Crate(path));
        }
        anyhow::ensure!(
            path.parent().is_some_and(Path::is_dir),
            "{} is not in an existing directory; pass a .wasm file or a plugin crate's directory",
            path.display()
        );
        Ok(PathSource::File(path))
    }

    /// How users name it, in logs and errors.
    pub fn label(&self) -> String {
        match self {
            PathSource::File(p) => format!("file {}", p.display()),
            PathSource::Crate(p) => format!("crate {}", p.display()),
        }
    }

    fn relevant(&self, changed: &Path) -> bool {
        match self {
            PathSource::File(file) => changed == file,
            PathSource::Crate(dir) => {
                let Ok(inside) = changed.strip_prefix(dir) else { return false };
                inside.starts_with("src") || inside.starts_with("wit") || inside == Path::new("Cargo.toml")
            }
        }
    }

    /// Starts watching. A file is watched through its directory, so that replacing it by a
    /// rename (as editors and `cp` to a temporary name do) is seen too.
    ///
    /// # Errors
    /// When the watch cannot be set up.
    pub fn watch(&self) -> anyhow::Result<Changes> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let (source, label) = (self.clone(), self.label());
        let mut debouncer = new_debouncer(DEBOUNCE, None, move |result: DebounceEventResult| match result {
            Ok(events) => {
                if events.iter().flat_map(|e| &e.paths).any(|p| source.relevant(p)) {
                    let _ = sender.send(());
                }
            }
            Err(errors) => errors.iter().for_each(|e| {
                tracing::warn!(source = %label, error = %e, "watching for changes failed; if the directory was removed, restart wasmloop dev")
            }),
        })
        .context("cannot watch for changes")?;
        let roots: Vec<(PathBuf, RecursiveMode)> = match self {
            PathSource::File(file) => {
                vec![(file.parent().expect("checked in new").to_owned(), RecursiveMode::NonRecursive)]
            }
            PathSource::Crate(dir) => {
                let mut roots =
                    vec![(dir.join("src"), RecursiveMode::Recursive), (dir.clone(), RecursiveMode::NonRecursive)];
                roots.retain(|(p, _)| p.exists());
                roots
            }
        };
        for (root, mode) in roots {
            debouncer.watch(&root, mode).with_context(|| format!("cannot watch {}", root.display()))?;
        }
        Ok(Changes { _debouncer: debouncer, receiver })
    }

    /// The component's bytes: read for a file; for a crate, built first, with the compiler's
    /// errors on the terminal.
    ///
    /// # Errors
    /// When the file cannot be read or the build fails.
    pub async fn component(&self) -> anyhow::Result<Vec<u8>> {
        let file = match self {
            PathSource::File(file) => file.clone(),
            PathSource::Crate(dir) => build(dir).await?,
        };
        tokio::fs::read(&file).await.with_context(|| format!("cannot read {}", file.display()))
    }
}

/// `cargo build --release --target wasm32-wasip2` in the crate, returning the component it
/// produced (read from cargo's JSON messages; rendered diagnostics go to stderr).
async fn build(dir: &Path) -> anyhow::Result<PathBuf> {
    tracing::info!(krate = %dir.display(), "building");
    let mut child = tokio::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--target", "wasm32-wasip2", "--message-format=json-render-diagnostics"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run cargo; install Rust and `rustup target add wasm32-wasip2`")?;
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
    anyhow::ensure!(status.success(), "the build of {} failed; fix the errors above and save again", dir.display());
    component.with_context(|| {
        format!(
            "building {} produced no .wasm; is it a cdylib plugin crate (crate-type = [\"cdylib\"])?",
            dir.display()
        )
    })
}
