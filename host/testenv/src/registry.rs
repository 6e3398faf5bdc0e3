//! A real OCI registry on loopback for tests: Debian's `docker-registry` (CNCF distribution
//! 2.8) with htpasswd basic auth, started once per test binary under the same watchdog as the
//! control plane. `WASMLOOP_TEST_REGISTRY=HOST:PORT`, with `WASMLOOP_TEST_REGISTRY_USER` and
//! `WASMLOOP_TEST_REGISTRY_PASSWORD`, points the tests at an existing one instead, as
//! `KUBEBUILDER_ASSETS` does for the control plane.
//!
//! ```no_run
//! let registry = wasmloop_testenv::registry::shared();
//! println!("push to oci://{}/plugins/p:1 as {}", registry.address, registry.username);
//! ```

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
    /// A user the registry accepts.
    pub username: String,
    /// Its password.
    pub password: String,
    /// Where its log is, for failure messages; none for an existing registry.
    pub log: Option<PathBuf>,
    _process: Option<Watched>,
    _dir: Option<tempfile::TempDir>,
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
            _process: None,
            _dir: None,
        },
        Err(_) => start().unwrap_or_else(|why| panic!("cannot start the test registry: {why}")),
    })
}

fn find(program: &str, package: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .ok_or_else(|| format!("{program} is not installed; apt-get install {package}"))
}

fn start() -> Result<TestRegistry, String> {
    let registry = find("docker-registry", "docker-registry")?;
    let htpasswd = find("htpasswd", "apache2-utils")?;
    let dir = tempfile::tempdir().map_err(|e| format!("no temp dir: {e}"))?;
    let (username, password) = ("wasmloop".to_owned(), format!("test-{}", std::process::id()));
    // distribution reads bcrypt entries only.
    let entry = Command::new(htpasswd)
        .args(["-Bbn", &username, &password])
        .output()
        .map_err(|e| format!("cannot run htpasswd: {e}"))?;
    if !entry.status.success() {
        return Err(format!("htpasswd failed: {}", String::from_utf8_lossy(&entry.stderr)));
    }
    let passwords = dir.path().join("htpasswd");
    std::fs::write(&passwords, &entry.stdout).map_err(|e| e.to_string())?;
    let address = free_address()?;
    let config = dir.path().join("config.yml");
    std::fs::write(&config, config_yaml(&address, &dir.path().join("data"), &passwords)).map_err(|e| e.to_string())?;
    let log = dir.path().join("registry.log");
    let process = Watched::spawn("docker-registry", &registry, &["serve".into(), config.display().to_string()], &log)
        .map_err(|e| format!("cannot start docker-registry: {e}"))?;
    let started = Instant::now();
    while TcpStream::connect(&address).is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            return Err(format!("docker-registry did not listen on {address} within 30 s; see {}", log.display()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(TestRegistry { address, username, password, log: Some(log), _process: Some(process), _dir: Some(dir) })
}

/// A loopback port nothing listens on now (the registry binds it a moment later).
fn free_address() -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free loopback port: {e}"))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    Ok(address.to_string())
}

fn config_yaml(address: &str, data: &Path, passwords: &Path) -> String {
    format!(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\nauth:\n  htpasswd:\n    realm: wasmloop-test\n    path: {}\n",
        data.display(),
        passwords.display()
    )
}
