//! Pulled components on disk, by manifest digest, checked again when read back, and kept within
//! [`CACHE_BUDGET`].

use std::path::PathBuf;

use super::pull::component_layer;
use super::{MAX_MANIFEST, PluginRef, sha256};
use crate::input::MAX_COMPONENT;

/// Bytes of pulled components kept on disk. With the compile cache's budget
/// ([`wasmloop_sandbox::COMPILE_CACHE_BUDGET`]), this stays under `deploy/`'s `sizeLimit`.
pub const CACHE_BUDGET: u64 = 256 << 20;

/// An entry's files: the manifest is written last, as the entry's stamp.
pub(super) const COMPONENT_FILE: &str = "component.wasm";
const MANIFEST_FILE: &str = "manifest.json";

pub(super) fn entry(cache: Option<&std::path::Path>, digest: &str) -> Option<PathBuf> {
    let hex = digest.strip_prefix("sha256:")?;
    Some(cache?.join(hex))
}

/// The component cached in `dir`, if intact: the manifest must still hash to the reference's
/// digest and name the component's digest. A hit marks the entry used.
pub(super) fn cached(dir: &std::path::Path, reference: &PluginRef) -> Option<Vec<u8>> {
    let manifest = read_bounded(&dir.join(MANIFEST_FILE), MAX_MANIFEST)?;
    if Some(sha256(&manifest).as_str()) != reference.digest() {
        return None;
    }
    // The layer the pull took, not merely the first.
    let layer = component_layer(reference, &manifest).ok()?;
    let component = read_bounded(&dir.join(COMPONENT_FILE), MAX_COMPONENT)?;
    let intact = sha256(&component) == layer.digest;
    if intact {
        wasmloop_sandbox::disk_budget::touch(&dir.join(MANIFEST_FILE));
    }
    intact.then_some(component)
}

/// Best effort: a cache that cannot be written costs a pull next time, nothing else. Each file
/// is written aside and renamed into place, so that two pulls of one digest (through two
/// references) never read each other's half-written file; the manifest goes last, so an entry
/// without it is never read back as whole.
pub(super) fn store(dir: &std::path::Path, manifest: &[u8], component: &[u8]) {
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| wasmloop_sandbox::disk_budget::write_aside(&dir.join(COMPONENT_FILE), component))
        .and_then(|()| wasmloop_sandbox::disk_budget::write_aside(&dir.join(MANIFEST_FILE), manifest));
    if let Err(error) = written {
        tracing::warn!(dir = %dir.display(), %error, "cannot cache a pulled plugin; it will be pulled again");
    }
    if let Some(root) = dir.parent() {
        // Each version ever pulled would fill the pod's emptyDir in the end; the least
        // recently used go first (a reload of one of them pulls again).
        wasmloop_sandbox::disk_budget::prune(root, CACHE_BUDGET, std::path::Path::is_dir, Some(MANIFEST_FILE));
    }
}

fn read_bounded(path: &std::path::Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(limit + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= limit).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE};

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_cached_component_is_read_back_only_while_both_digests_still_match() {
        let dir = tempfile::tempdir().unwrap();
        let component = b"\0asm component".to_vec();
        let manifest = serde_json::to_vec(&serde_json::json!({"schemaVersion": 2,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": DIGEST, "size": 1},
            "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": sha256(&component), "size": component.len()}]}))
        .unwrap();
        let digest = sha256(&manifest);
        let reference = PluginRef::parse(&format!("oci://registry.example.com/team/p@{digest}")).unwrap();
        let at = entry(Some(dir.path()), &digest).unwrap();
        store(&at, &manifest, &component);
        assert_eq!(cached(&at, &reference), Some(component));
        std::fs::write(at.join(COMPONENT_FILE), b"tampered").unwrap();
        assert_eq!(cached(&at, &reference), None, "a component that no longer matches its manifest is pulled again");
        let elsewhere = PluginRef::parse(&format!("oci://registry.example.com/team/p@{DIGEST}")).unwrap();
        assert_eq!(cached(&at, &elsewhere), None);
    }
}
