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
//!
//! - **Only [`Puller`] talks to registries**, through oci-client (reqwest on rustls with the
//!   ring provider, which [`install_tls_provider`] installs for the process wherever a client
//!   is built). Every wait of a pull counts against one deadline (`--pull-timeout-seconds`,
//!   120); the HTTP clients' own timeouts are 5 s longer, so the deadline, which names the
//!   wait, is what ends a pull.
//! - **Turns and memory are per namespace** (`admission`): one tenant's hanging registries
//!   hold up only its own plugins; turns are not per registry too, which would let a
//!   namespace multiply its pulls by naming registries. One pull per namespace and reference
//!   runs at a time (keyed by the whole reference, so a hanging registry cannot hold up the
//!   same digest from another); a second object reads the first's result from the disk cache.
//!   A component's memory share is taken once its size is known (the manifest's layer size, a
//!   cache file's, a plugin ConfigMap's gzip trailer) and goes with the bytes into the load,
//!   until compiled.
//! - **The manifest is read by the puller itself** (oci-client reads a body whole), hashed
//!   against the reference's digest before anything parses it, and must hold exactly one wasm
//!   layer, whose `urls` are dropped (oci-client would fetch them, addresses of the
//!   publisher's choosing). The layer's size is held to its declared one while it streams,
//!   and its digest checked off the runtime's threads. Whatever a registry says is cut to 512
//!   bytes, refusals to 4 KiB, a pull secret's parse errors never quote it.
//! - **Credentials** come from the pull secret the object names, of type
//!   `kubernetes.io/dockerconfigjson` (or `dockercfg`), never a credential helper, which a
//!   Secret could otherwise make the host run; `deploy/` lets the host get only the Secrets
//!   it names.
//! - **The registry policy is the operator's, never the object's**: no registry is allowed
//!   until `--allowed-registry` names one (or `*`); an `--insecure-registry` counts as named;
//!   both take `HOST[:PORT]` only. `'*'` extends the trust in a registry's server to any a
//!   plugin object's writer names, which is why nothing is allowed by default. Manifest reads
//!   follow at most three redirects, never from HTTPS to HTTP.
//! - **The disk cache is shared across namespaces by digest**: a tenant that names a digest
//!   another pulled with its credentials gets the bytes, as with a node's image cache; the
//!   digest is the secret there. Entries are written aside and renamed, the manifest last,
//!   both digests checked again on read.
//! - `push` writes the CNCF Wasm OCI artifact (config with `architecture: wasm`, `os:
//!   wasip2`, the layer digests and the exported contract) and prints the reference pinned to
//!   the manifest's digest.

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
pub use reference::{BadRegistry, PluginRef, registry_name};

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
