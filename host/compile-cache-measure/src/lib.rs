//! What both measurements share: the host's engine settings, and the size of a directory.

use std::path::Path;

use wasmtime::Config;

/// The settings of the host's engine that decide what is compiled (`SandboxConfig::
/// wasmtime_config`, without the pooling allocator, which compiling does not read).
pub fn config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true).concurrency_support(false).epoch_interruption(true);
    config
}

/// Bytes under `dir`, files of subdirectories included.
pub fn size(dir: &Path) -> u64 {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => size(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A fresh directory of this process under the temporary directory.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("compile-cache-measure-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a writable temporary directory");
    dir
}
