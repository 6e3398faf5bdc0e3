//! Plugins as OCI artifacts, for components too large for a ConfigMap (a Python plugin carries
//! CPython: ~20 MB). `wasmloop push` writes one; a plugin ConfigMap names it in
//! `data["plugin.ref"]` (`oci://REGISTRY/REPO@sha256:...`); the ConfigMap source pulls it.
//!
//! The layout is the CNCF TAG Runtime's Wasm OCI artifact, as wasm-pkg-tools writes it: an
//! OCI image manifest whose config blob has media type `application/vnd.wasm.config.v0+json`
//! and whose one layer is the component, `application/wasm`. Pulls also accept the older
//! `application/vnd.wasm.content.layer.v1+wasm` layer (wasm-to-oci, Kubewarden).
//!
//! A reference in a ConfigMap is hostile input: it must be pinned by digest (the manifest is
//! checked against it, and the layer against the manifest), the registry must be one the
//! operator names, the manifest no larger than [`MAX_MANIFEST`] (read by this module, since
//! oci-client reads one whole), the layer no larger than [`MAX_COMPONENT`], the whole pull
//! (waits included) no longer than the timeout, no more than [`PULLS_PER_NAMESPACE`] at once
//! per plugin namespace, and no more than [`LOAD_MEMORY_MIB`] held at once in all
//! ([`NAMESPACE_LOAD_MEMORY_MIB`] by one namespace, plugin ConfigMaps' components included),
//! until the component is compiled. Pulled
//! components are cached on disk by manifest digest, checked again when read back, and kept
//! within [`CACHE_BUDGET`].
//!
//! The registry itself is trusted as far as its operator chose it: its token and error replies
//! are read by oci-client, and it may redirect blob downloads (to a CDN, as most do) wherever it
//! likes. What a plugin's publisher controls (the manifest, the layer) is bounded here.

mod admission;
mod cache;
mod credentials;
mod policy;
mod pull;
mod push;
mod reference;

use std::time::Duration;

use sha2::{Digest as _, Sha256};

use crate::input::MAX_COMPONENT;
pub use admission::{LOAD_MEMORY_MIB, Memory, NAMESPACE_LOAD_MEMORY_MIB, PULLS_PER_NAMESPACE};
pub use cache::CACHE_BUDGET;
pub use credentials::credentials;
pub use policy::{RegistryPolicy, install_tls_provider};
pub use pull::{Component, Puller};
pub use push::{Described, push};
pub use reference::{PluginRef, registry_name};

/// The scheme of a plugin reference.
pub const SCHEME: &str = "oci://";
/// The component layer's media type.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The layer media type of wasm-to-oci and Kubewarden, accepted when pulling.
pub const LEGACY_LAYER_MEDIA_TYPE: &str = oci_client::manifest::WASM_LAYER_MEDIA_TYPE;
/// The config blob's media type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The manifest's media type.
const MANIFEST_MEDIA_TYPE: &str = oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
/// A reference longer than this is refused before it is parsed.
const MAX_REFERENCE: usize = 512;
/// The largest manifest pulled: a plugin artifact's is a few hundred bytes, and the cache reads
/// back no more.
pub const MAX_MANIFEST: u64 = 64 << 10;

/// Why a reference, a push or a pull failed.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// Not a reference this host takes.
    #[error("{0} is not a plugin reference: {1}")]
    BadReference(String, String),
    /// A reference without a digest where one is required.
    #[error("{0} names no digest; pin it: `wasmloop push` prints the reference as oci://REGISTRY/REPO@sha256:DIGEST")]
    NotPinned(String),
    /// A registry outside the operator's list.
    #[error("registry {0} is not one this host pulls from; push the plugin to one of: {1}")]
    Disallowed(String, String),
    /// No registry is allowed: the operator has not chosen any.
    #[error(
        "this host pulls plugins from no registry; its operator allows one with `run --allowed-registry {0}` (or `--allowed-registry '*'` for any)"
    )]
    NoRegistryAllowed(String),
    /// The registry refused or failed.
    #[error("registry {registry}: {message}")]
    Registry {
        /// The registry.
        registry: String,
        /// What went wrong.
        message: String,
    },
    /// An artifact that is not a wasm component.
    #[error("{0} is not a wasm plugin artifact: {1}; push the component with `wasmloop push`")]
    NotWasm(String, String),
    /// A layer past the size limit.
    #[error("{0}: the component is {1} bytes, more than the {limit} MiB a plugin may be", limit = MAX_COMPONENT >> 20)]
    TooLarge(String, u64),
    /// A manifest past the size limit.
    #[error(
        "{0}: its manifest is more than {limit} KiB, where a plugin artifact's is a few hundred bytes; push the component with `wasmloop push`",
        limit = MAX_MANIFEST >> 10
    )]
    ManifestTooLarge(String),
    /// The pull ran past its time.
    #[error("pulling {0} took longer than {1:?}: {2}")]
    Timeout(String, Duration, String),
    /// A pull secret that does not give credentials for the registry.
    #[error("{0}")]
    Credentials(String),
}

fn is_sha256(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// How much of a registry's (or a manifest's) own words an error keeps: they go to a status
/// annotation, an Event and the log, and a registry may send megabytes of error body.
const MAX_REGISTRY_MESSAGE: usize = 512;

/// `text` cut to [`MAX_REGISTRY_MESSAGE`] bytes, between characters.
fn cut(text: impl std::fmt::Display) -> String {
    wasmloop_contract::validate::cut(text.to_string(), MAX_REGISTRY_MESSAGE)
}

fn registry_error(reference: &PluginRef, error: impl std::fmt::Display) -> OciError {
    OciError::Registry { registry: reference.registry().to_owned(), message: cut(error) }
}
