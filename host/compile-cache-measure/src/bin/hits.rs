//! The time of a cache hit, for each component named: wasmtime's cache (`Component::new` of
//! bytes compiled before: hash, read, zstd-decompress, copy) against the host's
//! (`CompileCache::load`: SHA-256 of the bytes, which names the entry, then
//! `Component::deserialize_file`, which maps the file), medians of 9, and what each keeps on
//! disk. Prints a Markdown table.

use std::time::Instant;

use compile_cache_measure::{config, scratch, size};
use sha2::Digest as _;
use wasmtime::component::Component;
use wasmtime::{Cache, CacheConfig, Engine};

const RUNS: usize = 9;

fn median(mut seconds: Vec<f64>) -> f64 {
    seconds.sort_by(f64::total_cmp);
    seconds[seconds.len() / 2]
}

fn timed(mut run: impl FnMut()) -> f64 {
    median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                run();
                started.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn main() {
    println!(
        "| component | bytes | compile | hit, wasmtime cache | hit, host cache | ratio | on disk, wasmtime | on disk, host |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let dir = scratch("wasmtime");
        let mut cache = CacheConfig::new();
        cache.with_directory(&dir);
        let mut with_cache = config();
        with_cache.cache(Some(Cache::new(cache).expect("a cache in a fresh directory")));
        let engine = Engine::new(&with_cache).expect("an engine");
        let started = Instant::now();
        drop(Component::new(&engine, &bytes).expect("a component"));
        let compile = started.elapsed().as_secs_f64();
        let wasmtime_hit = timed(|| drop(Component::new(&engine, &bytes).expect("a component")));
        let engine = Engine::new(&config()).expect("an engine");
        let file = scratch("host").join("component.cwasm");
        let compiled = Component::new(&engine, &bytes).expect("a component");
        std::fs::write(&file, compiled.serialize().expect("serializes")).expect("writable");
        let host_hit = timed(|| {
            std::hint::black_box(sha2::Sha256::digest(&bytes));
            // SAFETY: written just above by `serialize` of an engine with these settings.
            drop(unsafe { Component::deserialize_file(&engine, &file) }.expect("deserializes"));
        });
        let name = std::path::Path::new(&path).file_name().unwrap_or_default().to_string_lossy();
        println!(
            "| {name} | {} | {compile:.2} s | {:.1} ms | {:.1} ms | {:.1}× | {:.1} MiB | {:.1} MiB |",
            bytes.len(),
            wasmtime_hit * 1e3,
            host_hit * 1e3,
            wasmtime_hit / host_hit,
            size(&dir) as f64 / f64::from(1 << 20),
            std::fs::metadata(&file).map_or(0, |m| m.len()) as f64 / f64::from(1 << 20),
        );
    }
}
