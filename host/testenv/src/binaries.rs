//! Where etcd, kube-apiserver and kube-controller-manager come from: `TEST_ASSET_*`, then
//! `KUBEBUILDER_ASSETS`, then the cache `scripts/kube-binaries` fills ([`Binaries::find`]).
//! That script builds Kubernetes 1.37.2 (kube-apiserver, kube-controller-manager, kubectl) and
//! etcd 3.7.3 from Go modules pinned in `scripts/kube-modules/`, the version stamped as a
//! release build stamps it; the cache key carries the versions and a recipe number, so a
//! changed recipe rebuilds. A kube-apiserver older than [`OLDEST_SUPPORTED`] is refused: a pass
//! there would prove nothing about a supported cluster.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The three binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// etcd.
    pub etcd: PathBuf,
    /// kube-apiserver.
    pub kube_apiserver: PathBuf,
    /// kube-controller-manager; garbage collection and namespace deletion need it.
    pub kube_controller_manager: Option<PathBuf>,
    /// kubectl of the same release, for tests that run documented commands as written.
    pub kubectl: Option<PathBuf>,
}

/// The binaries could not be found or provided.
#[derive(Debug, thiserror::Error)]
pub enum BinariesError {
    /// A variable points at a file that is not there.
    #[error("{var}={path} does not exist; point it at the {what} binary")]
    Missing {
        /// The variable.
        var: &'static str,
        /// Its value.
        path: String,
        /// Which binary.
        what: &'static str,
    },
    /// `KUBEBUILDER_ASSETS` names a directory without the binaries.
    #[error(
        "KUBEBUILDER_ASSETS={dir} lacks etcd or kube-apiserver; point it at a directory holding both (`setup-envtest use -p path` prints one; add kube-controller-manager of the same release for garbage collection and namespace deletion)"
    )]
    Incomplete {
        /// The directory.
        dir: String,
    },
    /// One of the two servers' variables is set without the other.
    #[error(
        "TEST_ASSET_ETCD and TEST_ASSET_KUBE_APISERVER name the two servers together: set both (and TEST_ASSET_KUBE_CONTROLLER_MANAGER, TEST_ASSET_KUBECTL if you have them), or neither and KUBEBUILDER_ASSETS"
    )]
    HalfNamed,
    /// The kube-apiserver is older than the host supports.
    #[error(
        "{binary} is Kubernetes {major}.{minor}; wasmloop supports {}.{} and later (docs/kubernetes-versions.md): point KUBEBUILDER_ASSETS at a newer release, or unset it to use scripts/kube-binaries",
        OLDEST_SUPPORTED.0, OLDEST_SUPPORTED.1
    )]
    Unsupported {
        /// The binary.
        binary: String,
        /// Its major version.
        major: u32,
        /// Its minor version.
        minor: u32,
    },
    /// The provisioning script failed.
    #[error(
        "no control-plane binaries: scripts/kube-binaries failed ({0}); set KUBEBUILDER_ASSETS to a directory with etcd, kube-apiserver, kube-controller-manager and kubectl of one release (setup-envtest provides all but kube-controller-manager, which comes with the release's server binaries), or run scripts/kube-binaries (needs Go and the module proxy) to build them"
    )]
    Provision(String),
}

fn from_var(
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    var: &'static str,
    what: &'static str,
) -> Result<Option<PathBuf>, BinariesError> {
    match env(var) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => {
            let path = PathBuf::from(&v);
            if path.exists() {
                Ok(Some(path))
            } else {
                Err(BinariesError::Missing { var, path: path.display().to_string(), what })
            }
        }
    }
}

fn in_dir(dir: &Path) -> Option<Binaries> {
    let etcd = dir.join("etcd");
    let apiserver = dir.join("kube-apiserver");
    let kcm = dir.join("kube-controller-manager");
    let kubectl = dir.join("kubectl");
    (etcd.exists() && apiserver.exists()).then(|| Binaries {
        etcd,
        kube_apiserver: apiserver,
        kube_controller_manager: kcm.exists().then_some(kcm),
        kubectl: kubectl.exists().then_some(kubectl),
    })
}

/// The provisioning script in this repository.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kube-binaries")
}

/// The oldest Kubernetes release the host is tested against and supports.
pub const OLDEST_SUPPORTED: (u32, u32) = (1, 33);

/// Refuses a kube-apiserver older than [`OLDEST_SUPPORTED`]: its flags and APIs differ, and a
/// suite that passes there proves nothing about a supported cluster. A binary whose version
/// cannot be read is let through; it fails later with its own words if it is wrong.
pub(crate) fn check_supported(apiserver: &Path) -> Result<(), BinariesError> {
    match kubernetes_version(apiserver) {
        Some((major, minor)) if (major, minor) < OLDEST_SUPPORTED => {
            Err(BinariesError::Unsupported { binary: apiserver.display().to_string(), major, minor })
        }
        _ => Ok(()),
    }
}

/// `(major, minor)` of a Kubernetes binary, from its `--version` output
/// (`Kubernetes v1.37.2`).
pub(crate) fn kubernetes_version(binary: &Path) -> Option<(u32, u32)> {
    let out = Command::new(binary).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().find_map(|w| w.strip_prefix('v'))?;
    let mut parts = version.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

impl Binaries {
    /// Finds the binaries: `TEST_ASSET_*`, then `KUBEBUILDER_ASSETS`, then the cache that
    /// `scripts/kube-binaries` fills (running it when the cache is empty).
    ///
    /// # Errors
    /// When a variable names a missing file, or nothing is found and the script fails.
    pub fn find() -> Result<Binaries, BinariesError> {
        Binaries::find_with(&|var| std::env::var_os(var))
    }

    fn find_with(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Result<Binaries, BinariesError> {
        let servers =
            (from_var(env, "TEST_ASSET_ETCD", "etcd")?, from_var(env, "TEST_ASSET_KUBE_APISERVER", "kube-apiserver")?);
        match servers {
            (Some(etcd), Some(kube_apiserver)) => {
                let kube_controller_manager =
                    from_var(env, "TEST_ASSET_KUBE_CONTROLLER_MANAGER", "kube-controller-manager")?;
                let kubectl = from_var(env, "TEST_ASSET_KUBECTL", "kubectl")?;
                return Ok(Binaries { etcd, kube_apiserver, kube_controller_manager, kubectl });
            }
            // One server named and the other not would start a plane of two releases, or
            // quietly not the one named: refused.
            (Some(_), None) | (None, Some(_)) => return Err(BinariesError::HalfNamed),
            (None, None) => {}
        }
        if let Some(dir) = from_var(env, "KUBEBUILDER_ASSETS", "assets directory")? {
            return in_dir(&dir).ok_or_else(|| BinariesError::Incomplete { dir: dir.display().to_string() });
        }
        let out = Command::new("bash")
            .arg(script())
            .output()
            .map_err(|e| BinariesError::Provision(format!("cannot run {}: {e}", script().display())))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
            return Err(BinariesError::Provision(tail.join(" | ")));
        }
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        in_dir(&dir)
            .ok_or_else(|| BinariesError::Provision(format!("it printed {} which lacks the binaries", dir.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |var| pairs.iter().find(|(k, _)| *k == var).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn test_asset_variables_win_and_name_each_binary() {
        let dir = std::env::temp_dir();
        let file = std::env::current_exe().unwrap();
        let (f, d) = (file.to_str().unwrap(), dir.to_str().unwrap());
        let found = Binaries::find_with(&env(&[
            ("TEST_ASSET_ETCD", f),
            ("TEST_ASSET_KUBE_APISERVER", f),
            ("KUBEBUILDER_ASSETS", d),
        ]))
        .unwrap();
        assert_eq!(found.etcd, file);
        assert_eq!(found.kube_controller_manager, None);
    }

    #[test]
    fn one_server_named_without_the_other_is_refused() {
        let file = std::env::current_exe().unwrap();
        let err = Binaries::find_with(&env(&[("TEST_ASSET_KUBE_APISERVER", file.to_str().unwrap())])).unwrap_err();
        assert!(matches!(err, BinariesError::HalfNamed), "{err}");
    }

    #[test]
    fn a_variable_naming_a_missing_file_is_an_error_naming_it() {
        let err = Binaries::find_with(&env(&[("TEST_ASSET_ETCD", "/nonexistent/etcd")])).unwrap_err();
        assert!(err.to_string().contains("TEST_ASSET_ETCD=/nonexistent/etcd does not exist"), "{err}");
    }

    #[test]
    fn assets_directory_without_the_binaries_is_an_error_naming_it() {
        let dir = tempfile_dir();
        let err = Binaries::find_with(&env(&[("KUBEBUILDER_ASSETS", dir.to_str().unwrap())])).unwrap_err();
        assert!(err.to_string().starts_with("KUBEBUILDER_ASSETS="), "{err}");
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wasmloop-empty-assets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
