//! The kubeconfig of the local control plane.

use std::path::Path;

/// Writes a kubeconfig for `server` that trusts the CA bundle at `ca` and authenticates with
/// `token`.
pub(crate) fn write(path: &Path, server: &str, ca: &Path, token: &str) -> std::io::Result<()> {
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: wasmloop-local
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: admin
  user:
    token: {token}
contexts:
- name: wasmloop-local
  context:
    cluster: wasmloop-local
    user: admin
    namespace: default
current-context: wasmloop-local
",
        ca = ca.display()
    );
    std::fs::write(path, text)
}
