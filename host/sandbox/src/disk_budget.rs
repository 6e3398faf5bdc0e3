//! Caches on disk held to a byte budget. The host's caches live on a pod's `emptyDir`, and a
//! pod whose `emptyDir` outgrows its `sizeLimit` is evicted, so each cache keeps under a number
//! of bytes (not of entries: a Python component weighs a thousand Rust ones). The least
//! recently *used* entries go first: a hit marks its entry used ([`touch`]).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use wasmloop_sandbox::disk_budget::{Entry, over_budget};
//!
//! let at = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
//! let entries = vec![
//!     Entry { path: "old".into(), used: at(1), bytes: 60 },
//!     Entry { path: "new".into(), used: at(3), bytes: 60 },
//!     Entry { path: "mid".into(), used: at(2), bytes: 60 },
//! ];
//! assert_eq!(over_budget(entries, 130), vec![std::path::PathBuf::from("old")]);
//! ```

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Writes `path` through a file of its own (`.NAME.PID.SEQ.tmp` beside it) renamed into place,
/// so that no reader ever sees it half written, and two writers of one entry (two loads of a
/// component, two pulls of a digest) never share a file. A `.tmp` left by a crash still weighs:
/// as an entry of its own where the cache counts them (the compile cache), or as part of its
/// entry directory (the OCI cache).
///
/// # Errors
/// When the file cannot be written or renamed; the file aside is removed.
pub fn write_aside(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let aside = path.with_file_name(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let written = std::fs::write(&aside, bytes).and_then(|()| std::fs::rename(&aside, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written
}

/// One cache entry: a file or a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Where it is.
    pub path: PathBuf,
    /// When it was last written or hit.
    pub used: SystemTime,
    /// What it weighs on disk.
    pub bytes: u64,
}

/// The entries to remove so that the rest weigh at most `budget`: the least recently used
/// first. The most recent entry is always kept, as it is the one just written or read.
pub fn over_budget(mut entries: Vec<Entry>, budget: u64) -> Vec<PathBuf> {
    entries.sort_by(|a, b| b.used.cmp(&a.used).then_with(|| a.path.cmp(&b.path)));
    let mut kept = 0u64;
    let mut remove = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        kept = kept.saturating_add(entry.bytes);
        if i > 0 && kept > budget {
            remove.push(entry.path);
        }
    }
    remove
}

/// Marks `path` used now. Best effort: an entry that cannot be marked is only pruned sooner.
pub fn touch(path: &Path) {
    let marked = std::fs::File::options().write(true).open(path).and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(error) = marked {
        tracing::debug!(path = %path.display(), %error, "cannot mark a cache entry used");
    }
}

/// Removes the least recently used entries of `dir` that `is_entry` accepts until they weigh
/// at most `budget` bytes. An entry's use time is its `stamp` file's modification time (the
/// entry itself when `stamp` is `None`); a directory weighs its files.
pub fn prune(dir: &Path, budget: u64, is_entry: impl Fn(&Path) -> bool, stamp: Option<&str>) {
    let Ok(listing) = std::fs::read_dir(dir) else { return };
    let entries: Vec<Entry> = listing
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| is_entry(p))
        .filter_map(|path| {
            let stamped = stamp.map_or_else(|| path.clone(), |name| path.join(name));
            // An entry without its stamp (a write a crash cut short) is dated by itself and
            // weighs like any other, or it would outlive every budget.
            let meta = std::fs::metadata(&stamped).or_else(|_| std::fs::metadata(&path)).ok()?;
            let used = meta.modified().ok()?;
            Some(Entry { bytes: weight(&path), path, used })
        })
        .collect();
    for path in over_budget(entries, budget) {
        let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        if let Err(error) = removed {
            tracing::warn!(path = %path.display(), %error, "cannot prune a cache entry; the cache may outgrow its budget");
        }
    }
}

/// A file's size, or the sum of a directory's files (one level: entries are flat).
fn weight(path: &Path) -> u64 {
    let Ok(meta) = std::fs::metadata(path) else { return 0 };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|files| files.filter_map(Result::ok).filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn entry(name: &str, used: u64, bytes: u64) -> Entry {
        Entry { path: name.into(), used: SystemTime::UNIX_EPOCH + Duration::from_secs(used), bytes }
    }

    #[test]
    fn the_least_recently_used_go_until_the_rest_fit() {
        let cases: &[(&str, Vec<Entry>, u64, &[&str])] = &[
            ("all fit", vec![entry("a", 1, 10), entry("b", 2, 10)], 20, &[]),
            ("one over", vec![entry("a", 1, 10), entry("b", 2, 10), entry("c", 3, 10)], 25, &["a"]),
            ("a big old one", vec![entry("big", 1, 100), entry("b", 2, 10), entry("c", 3, 10)], 25, &["big"]),
            (
                "order is use, not listing",
                vec![entry("c", 3, 10), entry("a", 1, 10), entry("b", 2, 10)],
                15,
                &["b", "a"],
            ),
            ("the newest stays even alone over", vec![entry("huge", 9, 500), entry("a", 1, 10)], 100, &["a"]),
            ("an empty cache", vec![], 0, &[]),
        ];
        for (case, entries, budget, expected) in cases {
            let removed = over_budget(entries.clone(), *budget);
            let expected: Vec<PathBuf> = expected.iter().map(PathBuf::from).collect();
            assert_eq!(removed, expected, "{case}");
        }
    }

    #[test]
    fn a_hit_keeps_an_entry_that_would_have_gone() {
        let dir = tempfile::tempdir().unwrap();
        for (i, name) in ["0.cwasm", "1.cwasm", "2.cwasm"].iter().enumerate() {
            let path = dir.path().join(name);
            std::fs::write(&path, [0u8; 10]).unwrap();
            let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + i as u64);
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
        }
        touch(&dir.path().join("0.cwasm"));
        std::fs::write(dir.path().join("notes.txt"), [0u8; 100]).unwrap();
        prune(dir.path(), 20, |p| p.extension().is_some_and(|x| x == "cwasm"), None);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["0.cwasm", "2.cwasm", "notes.txt"]);
    }

    #[test]
    fn an_entry_a_crash_left_without_its_stamp_weighs_and_goes_like_any_other() {
        let dir = tempfile::tempdir().unwrap();
        for (i, name) in ["half", "whole"].iter().enumerate() {
            let entry = dir.path().join(name);
            std::fs::create_dir(&entry).unwrap();
            std::fs::write(entry.join("component.wasm"), [0u8; 100]).unwrap();
            if *name == "whole" {
                std::fs::write(entry.join("manifest.json"), b"{}").unwrap();
            }
            let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + i as u64);
            let stamp = if *name == "whole" { entry.join("manifest.json") } else { entry.clone() };
            std::fs::File::open(&stamp).unwrap().set_modified(when).unwrap();
        }
        prune(dir.path(), 150, Path::is_dir, Some("manifest.json"));
        assert!(!dir.path().join("half").exists(), "the older, stampless entry went");
        assert!(dir.path().join("whole").exists());
    }
}
