//! The case store of `--record-dir`: one YAML file per recorded reconcile, under a directory
//! per plugin, named by time and object (`DIR/<plugin>/<time>-<namespace>-<name>.yaml`).
//!
//! The store is bounded twice: the newest `keep` cases per plugin, and `max_bytes` over the
//! whole directory (the oldest cases go first). Files are written on one thread of their
//! own, fed through a bounded channel: a slow disk drops cases (counted in the log), never
//! holds a reconcile back.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use wasmloop_runtime::record::{Case, CaseSink, Recorder, RedactionKey};

/// Cases waiting for the writer; past this, new cases are dropped.
const BACKLOG: usize = 256;

/// How much a store keeps.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Cases per plugin.
    pub keep: usize,
    /// Bytes over the whole store.
    pub max_bytes: u64,
}

/// Why the store cannot open: `--record-dir` was asked for, so the host does not run without it.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The directory cannot be created.
    #[error("cannot create the record directory {}", .dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// What creating it said.
        #[source]
        source: std::io::Error,
    },
    /// The directory cannot be listed, so its bounds cannot be kept.
    #[error("cannot list the record directory {}", .dir.display())]
    ListDir {
        /// The directory.
        dir: PathBuf,
        /// What listing it said.
        #[source]
        source: std::io::Error,
    },
    /// The writer thread cannot start.
    #[error("cannot start the record writer")]
    Writer(#[source] std::io::Error),
    /// Others may read the key, and test guesses against the digests in the cases with it.
    #[error(
        "{} may be read by others than its owner; make it 0600 (chmod 600), or delete it to make a new one",
        .path.display()
    )]
    KeyReadable {
        /// The key file.
        path: PathBuf,
    },
    /// The key file holds no key.
    #[error("{} is not a redaction key (32 bytes); delete it to make a new one", .path.display())]
    NotAKey {
        /// The key file.
        path: PathBuf,
    },
    /// No random bytes to make a key of.
    #[error("cannot read random bytes for the redaction key")]
    Random(#[source] std::io::Error),
    /// The key file cannot be made.
    #[error("cannot create {}", .path.display())]
    CreateKey {
        /// The key file.
        path: PathBuf,
        /// What creating it said.
        #[source]
        source: std::io::Error,
    },
    /// The key cannot be written.
    #[error("cannot write {}", .path.display())]
    WriteKey {
        /// The key file.
        path: PathBuf,
        /// What writing it said.
        #[source]
        source: std::io::Error,
    },
    /// The key file cannot be read.
    #[error("cannot read {}", .path.display())]
    ReadKey {
        /// The key file.
        path: PathBuf,
        /// What reading it said.
        #[source]
        source: std::io::Error,
    },
}

/// Why a case cannot be written as text (it always can: it holds JSON values).
#[derive(Debug, thiserror::Error)]
pub enum CaseTextError {
    /// The case is no JSON value.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The JSON value is no YAML.
    #[error(transparent)]
    Yaml(#[from] serde_saphyr::SerializeError),
}

/// Why one case was not kept: the writer logs it and goes on.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error(transparent)]
    Text(#[from] CaseTextError),
    #[error(
        "its {0} bytes are more than a quarter of --record-max-bytes; not kept, so that it cannot evict every other case"
    )]
    TooLarge(usize),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The file in a record directory holding the key its cases' Secrets are digested with: kept
/// beside the cases, never in them, so the cases of one directory digest a value alike.
const KEY_FILE: &str = ".redaction-key";

/// The record directory's key, made (from the kernel's random bytes, readable by its owner
/// only) the first time.
fn key_of(dir: &Path) -> Result<RedactionKey, RecordError> {
    use std::io::Read;
    let path = dir.join(KEY_FILE);
    let mut bytes = [0u8; 32];
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(&path) {
        use std::os::unix::fs::PermissionsExt;
        // Whoever reads the key can test guesses against the digests in the cases.
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(RecordError::KeyReadable { path });
        }
    }
    match std::fs::read(&path) {
        Ok(found) if found.len() == bytes.len() => bytes.copy_from_slice(&found),
        Ok(_) => return Err(RecordError::NotAKey { path }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::File::open("/dev/urandom")
                .and_then(|mut random| random.read_exact(&mut bytes))
                .map_err(RecordError::Random)?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = match options.open(&path) {
                Ok(file) => file,
                Err(source) => return Err(RecordError::CreateKey { path, source }),
            };
            if let Err(source) = std::io::Write::write_all(&mut file, &bytes) {
                return Err(RecordError::WriteKey { path, source });
            }
        }
        Err(source) => return Err(RecordError::ReadKey { path, source }),
    }
    Ok(RedactionKey::new(bytes))
}

/// Opens (creating it) the store in `dir` and returns the recorder that feeds it.
///
/// # Errors
/// A [`RecordError`]: the directory cannot be created or listed, or its key read or made.
pub fn open(dir: &Path, bounds: Bounds) -> Result<Recorder, RecordError> {
    std::fs::create_dir_all(dir).map_err(|source| RecordError::CreateDir { dir: dir.to_owned(), source })?;
    let mut store = Store { dir: dir.to_owned(), bounds, files: VecDeque::new(), bytes: 0 };
    store.scan().map_err(|source| RecordError::ListDir { dir: dir.to_owned(), source })?;
    let (send, receive) = std::sync::mpsc::sync_channel(BACKLOG);
    std::thread::Builder::new()
        .name("wasmloop-record".into())
        .spawn(move || store.run(receive))
        .map_err(RecordError::Writer)?;
    Ok(Recorder { sink: sink(send), key: key_of(dir)? })
}

fn sink(send: SyncSender<Case>) -> CaseSink {
    let dropped = std::sync::atomic::AtomicU64::new(0);
    Arc::new(move |case: Case| match send.try_send(case) {
        Ok(()) => {}
        Err(TrySendError::Full(case)) => {
            // Said at the 1st, 2nd, 4th, 8th... drop: a slow disk must not also flood the log.
            let n = dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(plugin = %case.plugin, dropped = n, "the record writer is behind: cases dropped");
            }
        }
        Err(TrySendError::Disconnected(_)) => {}
    })
}

/// The files of the store, oldest first, with their sizes.
struct Store {
    dir: PathBuf,
    bounds: Bounds,
    files: VecDeque<(PathBuf, String, u64)>,
    bytes: u64,
}

impl Store {
    /// Takes in the cases a previous run left, so the bounds hold across restarts.
    fn scan(&mut self) -> std::io::Result<()> {
        let mut found = Vec::new();
        for plugin in std::fs::read_dir(&self.dir)? {
            let plugin = plugin?;
            if !plugin.file_type()?.is_dir() {
                continue;
            }
            let plugin_name = plugin.file_name().to_string_lossy().into_owned();
            for file in std::fs::read_dir(plugin.path())? {
                let file = file?;
                let name = file.file_name().to_string_lossy().into_owned();
                if name.ends_with(".yaml.partial") {
                    // A write the last run did not finish.
                    let _ = std::fs::remove_file(file.path());
                } else if is_case_file(&name) {
                    found.push((file.file_name(), file.path(), plugin_name.clone(), file.metadata()?.len()));
                }
            }
        }
        // Names start with the time: their order is the cases' order.
        found.sort();
        for (_, path, plugin, size) in found {
            self.bytes += size;
            self.files.push_back((path, plugin, size));
        }
        Ok(())
    }

    fn run(mut self, cases: Receiver<Case>) {
        for case in cases {
            if let Err(error) = self.write(&case) {
                tracing::warn!(plugin = %case.plugin, %error, "cannot record a case");
            }
        }
    }

    fn write(&mut self, case: &Case) -> Result<(), WriteError> {
        let text = to_text(case)?;
        if text.len() as u64 > self.bounds.max_bytes / 4 {
            return Err(WriteError::TooLarge(text.len()));
        }
        let plugin = folder(&case.plugin);
        let dir = self.dir.join(&plugin);
        std::fs::create_dir_all(&dir)?;
        let name = file_name(case);
        let mut path = dir.join(&name);
        // Two calls on one object within a microsecond: keep both.
        let mut n = 1;
        while path.exists() {
            path = dir.join(name.replace(".yaml", &format!("-{n}.yaml")));
            n += 1;
        }
        // Written whole or not at all: a replay may read the directory meanwhile.
        let partial = path.with_extension("yaml.partial");
        if let Err(error) = std::fs::write(&partial, &text).and_then(|()| std::fs::rename(&partial, &path)) {
            let _ = std::fs::remove_file(&partial);
            return Err(error.into());
        }
        self.bytes += text.len() as u64;
        self.files.push_back((path, plugin.clone(), text.len() as u64));
        self.trim(&plugin);
        Ok(())
    }

    /// Removes the oldest cases past either bound.
    fn trim(&mut self, plugin: &str) {
        let mut of_plugin = self.files.iter().filter(|(_, p, _)| p == plugin).count();
        let mut index = 0;
        while index < self.files.len() && (of_plugin > self.bounds.keep || self.bytes > self.bounds.max_bytes) {
            let over_bytes = self.bytes > self.bounds.max_bytes;
            let mine = self.files[index].1 == plugin;
            if over_bytes || (mine && of_plugin > self.bounds.keep) {
                let (path, owner, size) = self.files.remove(index).expect("in range");
                let _ = std::fs::remove_file(&path);
                self.bytes -= size;
                if owner == plugin {
                    of_plugin -= 1;
                }
            } else {
                index += 1;
            }
        }
    }
}

/// A case as its file holds it, which `replay::parse_case` reads back.
///
/// # Errors
/// A [`CaseTextError`] when it cannot be serialised (it always can: it holds JSON values).
pub fn to_text(case: &Case) -> Result<String, CaseTextError> {
    // Through serde_json::Value so enums print as plain maps, not YAML tags.
    Ok(serde_saphyr::to_string(&serde_json::to_value(case)?)?)
}

/// The directory of plugin `id`'s cases: `NAME`, or `NAMESPACE.NAME` for a plugin ConfigMap's
/// (neither holds a `.`), so plugins of one name from two realms keep their cases apart.
fn folder(id: &wasmloop_sandbox::PluginId) -> String {
    match id.realm() {
        None => id.name().to_owned(),
        Some(realm) => format!("{realm}.{}", id.name()),
    }
}

/// `<time>-<namespace>-<name>.yaml`, the time in UTC to the nanosecond at a fixed width so
/// that names sort as the cases were made; namespace and name cut to 60 characters each, so
/// the name fits any file system's 255 bytes.
fn file_name(case: &Case) -> String {
    let meta = &case.request.object["metadata"];
    let part = |field: &str| -> String {
        let text = meta[field].as_str().unwrap_or("");
        text.chars().take(60).map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' }).collect()
    };
    let time = case
        .recorded_at
        .parse::<k8s_openapi::jiff::Timestamp>()
        .map(|t| format!("{}{:09}Z", t.strftime("%Y-%m-%dT%H%M%S."), t.subsec_nanosecond()))
        .unwrap_or_else(|_| "0000-00-00T000000.000000000Z".to_owned());
    let place = match part("namespace") {
        namespace if namespace.is_empty() => part("name"),
        namespace => format!("{namespace}-{}", part("name")),
    };
    format!("{time}-{place}.yaml")
}

/// Whether a file in a plugin's directory is a case this store wrote: its name starts with
/// the time, as [`file_name`] writes it. The store deletes only those.
fn is_case_file(name: &str) -> bool {
    // YYYY-MM-DDTHHMMSS.nnnnnnnnnZ-...
    let b = name.as_bytes();
    let digits = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    name.ends_with(".yaml")
        && b.len() > 29
        && digits(0..4)
        && b[10] == b'T'
        && b[17] == b'.'
        && digits(18..27)
        && b[27] == b'Z'
        && b[28] == b'-'
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wasmloop_runtime::record::{Outcome, RecordedRequest};

    use super::*;

    fn case(plugin: &str, name: &str, at: &str, padding: usize) -> Case {
        Case {
            plugin: wasmloop_sandbox::PluginId::parse(plugin).unwrap(),
            version: "1.0.0".into(),
            digest: "d".into(),
            recorded_at: at.into(),
            request: RecordedRequest {
                phase: "apply".into(),
                object: json!({"metadata": {"namespace": "ns", "name": name}, "pad": "x".repeat(padding)}),
                owned: Vec::new(),
                previous: None,
                attempt: 0,
                config: json!({}),
                triggers: Vec::new(),
                triggers_dropped: 0,
            },
            lookups: Vec::new(),
            truncated: false,
            outcome: Outcome::Response(json!({"actions": []})),
        }
    }

    fn names(dir: &Path, plugin: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join(plugin))
            .map(|d| d.map(|f| f.unwrap().file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    fn store(dir: &Path, keep: usize, max_bytes: u64) -> Store {
        let mut store =
            Store { dir: dir.to_owned(), bounds: Bounds { keep, max_bytes }, files: VecDeque::new(), bytes: 0 };
        store.scan().unwrap();
        store
    }

    #[test]
    fn each_plugin_keeps_its_newest_cases() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store(dir.path(), 2, u64::MAX);
        for (i, plugin) in ["a", "a", "b", "a"].iter().enumerate() {
            store.write(&case(plugin, &format!("o{i}"), &format!("2026-11-23T10:00:0{i}Z"), 0)).unwrap();
        }
        assert_eq!(
            names(dir.path(), "a"),
            ["2026-11-23T100001.000000000Z-ns-o1.yaml", "2026-11-23T100003.000000000Z-ns-o3.yaml"]
        );
        assert_eq!(names(dir.path(), "b"), ["2026-11-23T100002.000000000Z-ns-o2.yaml"]);
    }

    #[test]
    fn the_store_keeps_under_its_byte_cap_oldest_first_across_plugins_and_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let sample = serde_json::to_value(case("a", "o0", "2026-11-23T10:00:00Z", 1000)).unwrap();
        let one = serde_saphyr::to_string(&sample).unwrap().len() as u64;
        let cap = 4 * one + one / 2;
        let mut first = store(dir.path(), 100, cap);
        first.write(&case("a", "o0", "2026-11-23T10:00:00Z", 1000)).unwrap();
        for i in 1..4 {
            first.write(&case("b", &format!("o{i}"), &format!("2026-11-23T10:00:0{i}Z"), 1000)).unwrap();
        }
        // A restart reads what is there before it writes.
        let mut second = store(dir.path(), 100, cap);
        second.write(&case("b", "o4", "2026-11-23T10:00:04Z", 1000)).unwrap();
        assert_eq!(names(dir.path(), "a"), Vec::<String>::new());
        assert_eq!(names(dir.path(), "b").len(), 4);
    }

    #[test]
    fn the_store_deletes_only_files_it_wrote_and_names_sort_by_time() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/01-netcfg.yaml"), "mine: true\n").unwrap();
        std::fs::write(dir.path().join("a/x.yaml.partial"), "half").unwrap();
        let mut store = store(dir.path(), 1, u64::MAX);
        // A whole second sorts before a later fraction of it, as it was made.
        store.write(&case("a", "o0", "2026-11-23T10:00:00Z", 0)).unwrap();
        store.write(&case("a", "o1", "2026-11-23T10:00:00.5Z", 0)).unwrap();
        assert_eq!(names(dir.path(), "a"), ["01-netcfg.yaml", "2026-11-23T100000.500000000Z-ns-o1.yaml"]);
    }

    #[test]
    fn a_case_too_large_for_the_store_is_refused_rather_than_evicting_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store(dir.path(), 100, 64 << 10);
        store.write(&case("a", "small", "2026-11-23T10:00:00Z", 10)).unwrap();
        let error = store.write(&case("b", "huge", "2026-11-23T10:00:01Z", 32 << 10)).unwrap_err().to_string();
        assert!(error.contains("quarter of --record-max-bytes"), "{error}");
        assert_eq!(names(dir.path(), "a").len(), 1);
    }

    #[test]
    fn a_case_file_reads_back_as_the_case() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store(dir.path(), 10, u64::MAX);
        let written = case("a", "o", "2026-11-23T10:00:00Z", 3);
        store.write(&written).unwrap();
        let path = dir.path().join("a").join(&names(dir.path(), "a")[0]);
        let text = std::fs::read_to_string(path).unwrap();
        let read: Case = serde_saphyr::from_str_with_options(&text, crate::input::yaml_options()).unwrap();
        assert_eq!(read, written);
    }
}
