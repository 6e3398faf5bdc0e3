//! A real OCI registry on loopback for tests: Debian's `docker-registry` (CNCF distribution
//! 2.8) with htpasswd basic auth, started once per test binary under the same watchdog as the
//! control plane. `WASMLOOP_TEST_REGISTRY=HOST:PORT`, with `WASMLOOP_TEST_REGISTRY_USER` and
//! `WASMLOOP_TEST_REGISTRY_PASSWORD`, points the tests at an existing one instead, as
//! `KUBEBUILDER_ASSETS` does for the control plane.
//!
//! A test that needs a registry serving what no honest one would (a manifest other than the
//! one its digest names, a layer other than its manifest's) starts one of its own with
//! [`private`] and changes its storage: distribution serves what its storage holds, as a
//! registry whose disk was tampered with would.
//!
//! ```no_run
//! let registry = wasmloop_testenv::registry::shared();
//! println!("push to oci://{}/plugins/p:1 as {}", registry.address, registry.username);
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::watchdog::Watched;

/// A registry the tests push to and pull from.
pub struct TestRegistry {
    /// `127.0.0.1:PORT`.
    pub address: String,
    /// A user the registry accepts; empty when it takes anonymous pushes.
    pub username: String,
    /// Its password.
    pub password: String,
    /// Where its log is, for failure messages; none for an existing registry.
    pub log: Option<PathBuf>,
    /// Its storage's root, for a registry this process started.
    storage: Option<PathBuf>,
    _process: Option<Watched>,
    _dir: Option<tempfile::TempDir>,
}

impl TestRegistry {
    /// The file in which the registry keeps blob `digest` (`sha256:HEX`; manifests are blobs
    /// too): what a test writes there, the registry serves. None for an existing registry.
    pub fn blob_file(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        let storage = self.storage.as_ref()?;
        Some(storage.join("docker/registry/v2/blobs/sha256").join(hex.get(..2)?).join(hex).join("data"))
    }
}

/// The registry shared by every test of this test binary, started on first use.
///
/// # Panics
/// When `docker-registry` or `htpasswd` is missing (the message says which package to install)
/// or the registry does not come up (the message says where its log is).
pub fn shared() -> &'static TestRegistry {
    static REGISTRY: OnceLock<TestRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| match std::env::var("WASMLOOP_TEST_REGISTRY") {
        Ok(address) => TestRegistry {
            address,
            username: std::env::var("WASMLOOP_TEST_REGISTRY_USER").unwrap_or_default(),
            password: std::env::var("WASMLOOP_TEST_REGISTRY_PASSWORD").unwrap_or_default(),
            log: None,
            storage: None,
            _process: None,
            _dir: None,
        },
        Err(_) => start(true).unwrap_or_else(|why| panic!("cannot start the test registry: {why}")),
    })
}

/// A registry of the caller's own, taking anonymous pushes and pulls, whose storage the caller
/// may change ([`TestRegistry::blob_file`]); it stops when dropped. Always a new
/// `docker-registry` process, whatever `WASMLOOP_TEST_REGISTRY` says: changing storage needs
/// one the test owns.
///
/// # Errors
/// When `docker-registry` is missing or does not come up.
pub fn private() -> Result<TestRegistry, String> {
    start(false)
}

fn find(program: &str, package: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .ok_or_else(|| format!("{program} is not installed; apt-get install {package}"))
}

fn start(authenticated: bool) -> Result<TestRegistry, String> {
    let registry = find("docker-registry", "docker-registry")?;
    let dir = tempfile::tempdir().map_err(|e| format!("no temp dir: {e}"))?;
    let (username, password) = if authenticated {
        ("wasmloop".to_owned(), format!("test-{}", std::process::id()))
    } else {
        Default::default()
    };
    let passwords = if authenticated {
        // distribution reads bcrypt entries only.
        let entry = Command::new(find("htpasswd", "apache2-utils")?)
            .args(["-Bbn", &username, &password])
            .output()
            .map_err(|e| format!("cannot run htpasswd: {e}"))?;
        if !entry.status.success() {
            return Err(format!("htpasswd failed: {}", String::from_utf8_lossy(&entry.stderr)));
        }
        let passwords = dir.path().join("htpasswd");
        std::fs::write(&passwords, &entry.stdout).map_err(|e| e.to_string())?;
        Some(passwords)
    } else {
        None
    };
    let storage = dir.path().join("data");
    let log = dir.path().join("registry.log");
    // Every answer carries it: another registry that won the port race is not taken for this one.
    let nonce = dir.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // The port is free when chosen and taken a moment later: another process may take it
    // first, and then this registry exits and a fresh port is tried.
    for _ in 0..3 {
        let address = free_address()?;
        let config = dir.path().join("config.yml");
        let yaml = config_yaml(&address, &storage, passwords.as_deref(), &nonce);
        std::fs::write(&config, yaml).map_err(|e| e.to_string())?;
        let mut process =
            Watched::spawn("docker-registry", &registry, &["serve".into(), config.display().to_string()], &log)
                .map_err(|e| format!("cannot start docker-registry: {e}"))?;
        let started = Instant::now();
        loop {
            if answers_as_registry(&address, &nonce) {
                return Ok(TestRegistry {
                    address,
                    username,
                    password,
                    log: Some(log),
                    storage: Some(storage),
                    _process: Some(process),
                    _dir: Some(dir),
                });
            }
            if !process.running() {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!("docker-registry did not listen on {address} within 30 s; see {}", log.display()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Err(format!("docker-registry exited three times on start; see {}", log.display()))
}

/// True when `address` answers `GET /v2/` as this distribution registry does: with the
/// `nonce` its configuration adds to every answer (a listener of another process on the port,
/// or another test's registry, would not).
fn answers_as_registry(address: &str, nonce: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(address) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream.write_all(b"GET /v2/ HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
        return false;
    }
    let mut reply = Vec::new();
    let _ = stream.take(64 << 10).read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply).to_ascii_lowercase();
    reply.contains("docker-distribution-api-version: registry/2.0")
        && reply.contains(&format!("x-wasmloop-test-registry: {}", nonce.to_ascii_lowercase()))
}

/// A loopback port nothing listens on now (the registry binds it a moment later).
fn free_address() -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free loopback port: {e}"))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    Ok(address.to_string())
}

fn config_yaml(address: &str, data: &Path, passwords: Option<&Path>, nonce: &str) -> String {
    let auth = passwords.map_or_else(String::new, |passwords| {
        format!("auth:\n  htpasswd:\n    realm: wasmloop-test\n    path: {}\n", passwords.display())
    });
    format!(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\n  headers:\n    X-Wasmloop-Test-Registry: [\"{nonce}\"]\n{auth}",
        data.display(),
    )
}
