//! A fresh instance per call sees nothing of an earlier one, whatever the pool's memory reset
//! kept resident: the hostile plugin's `scribble` mode grows its memory, fails on any byte of
//! the new pages that is not zero (wasm promises zeros), then dirties every other page of them
//! for the next instance in its slot.
//!
//! The pool has memories for one instance and its spare, so four calls in a row reuse a slot.
//!
//! The reset asks the kernel which pages were written (`PAGEMAP_SCAN`). A written page the
//! kernel swapped out is not present, and wasmtime 48 left it holding the last call's bytes
//! (wasmtime#14357): the last test pages the guest's memory out in the middle of each call.
//! It needs swap, and makes a swap file of its own (as root) when the machine has none.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_sandbox::{
    EmptyHost, Gvk, HostServices, LogLevel, Object, Phase, Plugin, Request, Sandbox, SandboxConfig, Selector,
    object_from_value,
};

/// 2 MiB marked every other page: 256 disjoint dirty regions, past the 64 one scan of the
/// kernel's dirty pages reports, so the reset has to resume its scan to find them all.
const SCRIBBLED: usize = 2 << 20;

fn request() -> Request {
    let object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "scribbler", "namespace": "default", "uid": "0b5c1d2e-3f40-4a51-8b62-7c8d9e0f1a2b"},
    });
    Request {
        object: object_from_value(&object).unwrap(),
        owned: Vec::new(),
        phase: Phase::Apply,
        previous: None,
        attempt: 0,
        config: json!({"mode": "scribble", "bytes": SCRIBBLED}).to_string(),
        triggers: Vec::new(),
        triggers_dropped: 0,
    }
}

async fn hostile(config: SandboxConfig) -> Plugin {
    let path = wasmloop_testenv::components::component("hostile_plugin");
    let bytes = std::fs::read(&path).unwrap();
    let sandbox = Sandbox::new(config.cache_dir(None).max_instances(1)).unwrap();
    sandbox.load(&bytes, "hostile_plugin.wasm").await.unwrap()
}

/// Four calls of `scribble`, one after another, in a sandbox made with `config`.
async fn scribble_four_times(config: SandboxConfig, host: Arc<dyn HostServices>) {
    let plugin = hostile(config).await;
    for call in 1..=4 {
        if let Err(error) = plugin.reconcile(&request(), host.clone()).await {
            panic!("call {call} saw an earlier instance's memory: {error}");
        }
    }
}

#[tokio::test]
async fn an_instance_sees_nothing_of_the_last_one_when_its_dirty_pages_are_returned() {
    // The default keeps 64 KiB resident: most of what was dirtied goes back to the kernel.
    scribble_four_times(SandboxConfig::default(), Arc::new(EmptyHost)).await;
}

#[tokio::test]
async fn an_instance_sees_nothing_of_the_last_one_when_every_dirty_page_is_reset_in_place() {
    // The most an operator may keep resident: the whole 1 MiB of dirty pages is copied back.
    scribble_four_times(SandboxConfig::default().keep_resident_bytes(16 << 20), Arc::new(EmptyHost)).await;
}

#[tokio::test]
async fn an_instance_sees_nothing_of_the_last_one_when_its_dirty_pages_were_swapped_out() {
    let _swap = Swap::on();
    let host = Arc::new(PagingOut::default());
    // Every dirty page reset in place: none is returned to the kernel, which would drop a
    // swapped one whatever the scan said, so the scan alone decides.
    scribble_four_times(SandboxConfig::default().keep_resident_bytes(16 << 20), host.clone()).await;
    // Proof that the pages went: the process had pages in swap after each call's writes.
    assert_eq!(host.swapped_calls.load(Ordering::Relaxed), 4, "the guest's pages were never in swap");
}

/// A host whose `log` (the guest logs once it has scribbled) pages out every private writable
/// mapping of this process, the guest's memory among them, while the call is still running.
#[derive(Default)]
struct PagingOut {
    /// Calls after whose page-out the process had something in swap.
    swapped_calls: AtomicU64,
}

impl HostServices for PagingOut {
    fn get(&self, _: &Gvk, _: Option<&Namespace>, _: &Name) -> Option<Object> {
        None
    }

    fn list(&self, _: &Gvk, _: Option<&Namespace>, _: &Selector) -> Vec<Object> {
        Vec::new()
    }

    fn log(&self, _plugin: &str, _level: LogLevel, message: &str) {
        if !message.starts_with("scribbled") {
            return;
        }
        page_out_private_mappings();
        if swapped_kib() > 0 {
            self.swapped_calls.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// `MADV_PAGEOUT` over every private writable mapping in `/proc/self/maps`.
#[expect(unsafe_code, reason = "madvise takes raw addresses; advice changes no contents")]
fn page_out_private_mappings() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
        if !perms.starts_with("rw") || !perms.ends_with('p') {
            continue;
        }
        let (start, end) = range.split_once('-').unwrap();
        let start = usize::from_str_radix(start, 16).unwrap();
        let end = usize::from_str_radix(end, 16).unwrap();
        // SAFETY: advice only: the kernel writes the pages to swap and faults them back in
        // when touched, with the same contents.
        let _ = unsafe { rustix::mm::madvise(start as *mut _, end - start, rustix::mm::Advice::LinuxPageOut) };
    }
}

/// This process's `VmSwap`, in KiB.
fn swapped_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSwap:")).expect("VmSwap in /proc/self/status");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Swap for one test: the machine's own when it has some, else a file of this test's, switched
/// off and removed when dropped.
struct Swap(Option<PathBuf>);

impl Swap {
    fn on() -> Swap {
        let active = std::fs::read_to_string("/proc/swaps").unwrap().lines().count() > 1;
        if active {
            return Swap(None);
        }
        let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("isolation-swap-{}", std::process::id()));
        let file_arg = file.to_str().unwrap();
        run("fallocate", &["-l", "256M", file_arg]);
        run("chmod", &["600", file_arg]);
        run("mkswap", &[file_arg]);
        run("swapon", &[file_arg]);
        Swap(Some(file))
    }
}

impl Drop for Swap {
    fn drop(&mut self) {
        if let Some(file) = &self.0 {
            let _ = Command::new("swapoff").arg(file).status();
            let _ = std::fs::remove_file(file);
        }
    }
}

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        status.status.success(),
        "{program} {args:?}: {}; this test pages a guest out mid-call and makes its own swap file, as root",
        String::from_utf8_lossy(&status.stderr)
    );
}
