//! A fresh instance per call sees nothing of an earlier one, whatever the pool's memory reset
//! kept resident: the hostile plugin's `scribble` mode grows its memory, fails on any byte of
//! the new pages that is not zero (wasm promises zeros), and on any byte of two statics that
//! is not what the image gives them (one in the data segment, one in `.bss`), then dirties
//! all of them for the next instance in its slot (every other page of the grown memory).
//!
//! The pool has memories for one instance and its spare, so four calls in a row reuse a slot.
//!
//! The reset asks the kernel which pages were written (`PAGEMAP_SCAN`). A written page the
//! kernel swapped out is not present, and wasmtime 48 left it holding the last call's bytes
//! (wasmtime#14357): the last test pages the guest's memory out in the middle of each call.
//! It needs swap, and makes a swap file of its own (as root) when the machine has none, for
//! its own length only: `cargo test` runs one test binary at a time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::Mutex;

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
    // Proof that the pages went: after each call's page-out, every page it marked was in swap.
    let calls = host.calls.lock().unwrap();
    assert_eq!(calls.len(), 4, "a call did not log");
    for (call, (marked, swapped)) in calls.iter().enumerate() {
        // Every other page grown, and the two statics' four pages.
        assert!(*marked >= SCRIBBLED / 4096 / 2 + 4, "call {}: found {marked} marked pages", call + 1);
        assert_eq!(swapped, marked, "call {}: not every marked page went to swap", call + 1);
    }
}

/// A host whose `log` (the guest logs once it has scribbled) finds the pages the guest marked
/// and pages them out while the call is still running.
#[derive(Default)]
struct PagingOut {
    /// Per call: the pages found marked, and how many of them were then in swap.
    calls: Mutex<Vec<(usize, usize)>>,
}

impl HostServices for PagingOut {
    fn get(&self, _: &Gvk, _: Option<&Namespace>, _: &Name) -> Option<Object> {
        None
    }

    fn list(&self, _: &Gvk, _: Option<&Namespace>, _: &Selector) -> Vec<Object> {
        Vec::new()
    }

    fn log(&self, _plugin: &str, _level: LogLevel, message: &str) {
        if message.starts_with("scribbled") {
            self.calls.lock().unwrap().push(page_out_marked_pages());
        }
    }
}

const PAGE: usize = 4096;

/// Finds every 4 KiB page of this process's private writable mappings that is all `0xA5` (what
/// `scribble` writes), pages each out (`MADV_PAGEOUT`), and counts those then in swap.
#[expect(unsafe_code, reason = "reads this process's own mappings and advises on them")]
fn page_out_marked_pages() -> (usize, usize) {
    let marked: Vec<usize> = private_writable_mappings()
        .into_iter()
        .flat_map(|(start, end)| (start..end).step_by(PAGE))
        // SAFETY: the page lies in a readable mapping of this process; the guest that wrote it
        // is parked in this very host call, and other tests' guests only write 0xA5 over it.
        .filter(|&page| unsafe { marked_page(page) })
        .collect();
    for &page in &marked {
        // SAFETY: advice only: the kernel writes the page to swap and faults it back in, with
        // the same contents, when it is touched.
        let _ = unsafe { rustix::mm::madvise(page as *mut _, PAGE, rustix::mm::Advice::LinuxPageOut) };
    }
    let swapped = marked.iter().filter(|&&page| in_swap(page)).count();
    (marked.len(), swapped)
}

/// Whether the page at `page` is all `0xA5`.
///
/// # Safety
///
/// `page` must be a readable 4 KiB page.
#[expect(unsafe_code, reason = "a raw read of a page another thread may write")]
unsafe fn marked_page(page: usize) -> bool {
    const MARK: u64 = 0xA5A5_A5A5_A5A5_A5A5;
    let words = page as *const u64;
    // SAFETY: the caller's promise; volatile, since the guest wrote it behind Rust's back.
    (0..PAGE / 8).all(|i| unsafe { std::ptr::read_volatile(words.add(i)) } == MARK)
}

/// The `[start, end)` of each private writable mapping in `/proc/self/maps`.
fn private_writable_mappings() -> Vec<(usize, usize)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (range, perms) = (fields.next()?, fields.next()?);
            if !perms.starts_with("rw") || !perms.ends_with('p') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            Some((usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?))
        })
        .collect()
}

/// Whether `/proc/self/pagemap` says the page at `page` is in swap (bit 62).
fn in_swap(page: usize) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let mut pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
    pagemap.seek(SeekFrom::Start((page / PAGE * 8) as u64)).unwrap();
    let mut entry = [0u8; 8];
    pagemap.read_exact(&mut entry).unwrap();
    u64::from_le_bytes(entry) & (1 << 62) != 0
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
        let Some(file) = &self.0 else { return };
        // A file still in use as swap is kept, not deleted under the kernel.
        if Command::new("swapoff").arg(file).status().is_ok_and(|s| s.success()) {
            let _ = std::fs::remove_file(file);
        } else {
            eprintln!("swapoff {} failed: switch it off and remove it by hand", file.display());
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
