//! Compiled components on disk, keyed by content hash and engine configuration, so loading
//! an unchanged component costs a deserialize (≈0.2 ms) instead of a compile (≈150 ms+).
//!
//! An entry is `<dir>/<sha256>-<engine hash>.cwasm`, written aside and renamed
//! (`disk_budget::write_aside`), so a concurrent reader never maps half a file; a corrupt
//! entry is compiled again and replaced, and an unwritable directory only costs the next load
//! a compile. Kept rather than wasmtime's `cache` feature, as measured
//! (`scripts/bench-compile-cache`, `docs/benchmarks.md`): a hit maps the file instead of
//! reading, decompressing and copying it (5.5× to 13.4× faster), and the byte budget holds at
//! every write (`disk_budget::prune`), where wasmtime's soft limit waits for an hourly
//! clean-up while the pod's `emptyDir` evicts at its `sizeLimit`.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

use crate::disk_budget;
use wasmtime::component::Component;

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Deserialized from the cache.
    Hit,
    /// Compiled now (and stored when a cache directory is set).
    Compiled,
}

/// The on-disk compile cache.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
}

/// Hex SHA-256 of a component's bytes: its identity in the cache and in load status.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn engine_key(engine: &Engine) -> u64 {
    // DefaultHasher::new() uses fixed keys: stable for one build of the host, which is what
    // matters, since another wasmtime build writes artifacts under another key anyway.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.finish()
}

impl CompileCache {
    /// A cache in `dir`, or no disk cache when none.
    pub fn new(dir: Option<PathBuf>) -> Self {
        CompileCache { dir }
    }

    /// The cache directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path_for(&self, engine: &Engine, digest: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{digest}-{:016x}.cwasm", engine_key(engine))))
    }

    /// Returns the compiled component for `bytes`, from the cache when possible.
    ///
    /// A cache entry that cannot be read or deserialized is compiled again and replaced; a
    /// cache directory that cannot be written only costs the next load a compile.
    ///
    /// # Errors
    /// The compile error when the bytes are not a valid component.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &str,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let path = self.path_for(engine, digest);
        if let Some(path) = path.as_deref().filter(|p| p.exists()) {
            match deserialize(engine, path) {
                Ok(component) => {
                    disk_budget::touch(path);
                    return Ok((component, CacheOutcome::Hit));
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "discarding unreadable compiled component; recompiling")
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Some(path) = path {
            if let Err(e) = store(&component, &path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot write the compile cache; the next load compiles again (check the directory is writable)");
            }
            let dir = path.parent().expect("cache paths have a parent");
            // A `.tmp` left by a crash mid-write weighs too.
            disk_budget::prune(dir, BUDGET, |p| p.extension().is_some_and(|x| x == "cwasm" || x == "tmp"), None);
        }
        Ok((component, CacheOutcome::Compiled))
    }
}

/// Bytes of compiled components kept: every version ever loaded would fill a pod's emptyDir in
/// the end; the least recently used go first (a reload of one of them costs a compile, nothing
/// else). With the pulled components' budget, this stays under `deploy/`'s `sizeLimit`.
pub const BUDGET: u64 = 512 << 20;

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: the file was written by `store` below, by this host, from `Component::serialize`
    // of the same engine configuration (the name carries its compatibility hash), into a
    // directory the host owns; wasmtime still validates the header and version.
    unsafe { Component::deserialize_file(engine, path) }
}

fn store(component: &Component, path: &Path) -> std::io::Result<()> {
    let dir = path.parent().expect("cache paths have a parent");
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize().map_err(std::io::Error::other)?;
    // A concurrent reader never maps a half-written file.
    disk_budget::write_aside(path, &bytes)
}
