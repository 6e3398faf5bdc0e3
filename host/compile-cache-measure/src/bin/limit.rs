//! How far wasmtime's cache outgrows its size limit (`files-total-size-soft-limit`, 16 MiB
//! here) while the components named are compiled one after another, and whether its cleanup
//! worker has caught up 1, 5 and 20 s later. The host's cache prunes as it writes
//! (`disk_budget::prune`), so it never holds more than its budget and the entry just written.

use compile_cache_measure::{config, scratch, size};
use wasmtime::component::Component;
use wasmtime::{Cache, CacheConfig, Engine};

const LIMIT_MIB: u64 = 16;

fn main() {
    let dir = scratch("limit");
    let mut cache = CacheConfig::new();
    cache.with_directory(&dir).with_files_total_size_soft_limit(LIMIT_MIB << 20);
    let mut with_cache = config();
    with_cache.cache(Some(Cache::new(cache).expect("a cache in a fresh directory")));
    let engine = Engine::new(&with_cache).expect("an engine");
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        drop(Component::new(&engine, &bytes).expect("a component"));
        let name = std::path::Path::new(&path).file_name().unwrap_or_default().to_string_lossy();
        println!("after {name}: {} MiB (limit {LIMIT_MIB} MiB)", size(&dir) >> 20);
    }
    for seconds in [1, 5, 20] {
        std::thread::sleep(std::time::Duration::from_secs(seconds));
        println!("{seconds} s later: {} MiB", size(&dir) >> 20);
    }
}
