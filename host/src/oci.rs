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
//! per plugin namespace, and no more than [`PULL_MEMORY_MIB`] held at once in all
//! ([`NAMESPACE_MEMORY_MIB`] by one namespace), until the component is loaded. Pulled
//! components are cached on disk by manifest digest, checked again when read back, and kept
//! within [`CACHE_BUDGET`].
//!
//! The registry itself is trusted as far as its operator chose it: its token and error replies
//! are read by oci-client, and it may redirect blob downloads (to a CDN, as most do) wherever it
//! likes. What a plugin's publisher controls (the manifest, the layer) is bounded here.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest as _, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmloop_contract::validate::quoted;

use crate::plugin_configmap::MAX_COMPONENT;

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

/// A plugin reference: `oci://REGISTRY/REPO[:TAG][@sha256:DIGEST]`, the registry explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginRef {
    reference: Reference,
}

impl PluginRef {
    /// Parses a reference.
    ///
    /// # Errors
    /// When it lacks the scheme or an explicit registry, or does not parse.
    pub fn parse(text: &str) -> Result<PluginRef, OciError> {
        // The text is quoted cut: it is a ConfigMap writer's, bound for a status and an Event.
        let bad = |why: &str| OciError::BadReference(quoted(text), cut(why));
        if text.len() > MAX_REFERENCE {
            return Err(bad(&format!("longer than {MAX_REFERENCE} bytes")));
        }
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| bad("it must start with oci://"))?;
        // An implicit registry would be docker.io: a plugin's origin is always spelled out.
        let registry = rest.split('/').next().unwrap_or_default();
        if !rest.contains('/') || !is_registry(registry) {
            return Err(bad("name the registry, as in oci://registry.example.com/team/plugin:1.0"));
        }
        // The operator's registry names are lower case, and compared exactly.
        if registry.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(bad("write the registry in lower case"));
        }
        let reference: Reference = rest.parse().map_err(|e| bad(&format!("{e}")))?;
        if let Some(digest) = reference.digest()
            && !is_sha256(digest)
        {
            return Err(bad("the digest must be sha256: followed by 64 lower-case hex digits"));
        }
        // Written out in full (an implicit `:latest` spelled), it must still be a reference this
        // host takes: what it prints into a ConfigMap or a status parses back.
        let whole = SCHEME.len() + reference.whole().len();
        if whole > MAX_REFERENCE {
            return Err(bad(&format!("{whole} bytes written out in full, more than {MAX_REFERENCE}")));
        }
        Ok(PluginRef { reference })
    }

    /// The registry, `host[:port]`.
    pub fn registry(&self) -> &str {
        self.reference.resolve_registry()
    }

    /// The manifest digest, when the reference is pinned.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// This reference, pinned: the error when it is not.
    ///
    /// # Errors
    /// [`OciError::NotPinned`] without a digest.
    pub fn pinned(self) -> Result<PluginRef, OciError> {
        match self.digest() {
            Some(_) => Ok(self),
            None => Err(OciError::NotPinned(self.to_string())),
        }
    }

    /// The same repository at `digest`.
    fn at(&self, digest: &str) -> PluginRef {
        let reference = Reference::with_digest(
            self.reference.registry().to_owned(),
            self.reference.repository().to_owned(),
            digest.to_owned(),
        );
        PluginRef { reference }
    }
}

impl std::fmt::Display for PluginRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SCHEME}{}", self.reference.whole())
    }
}

fn is_sha256(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// Checks a registry the operator names (`run --allowed-registry`, `--insecure-registry`):
/// `HOST[:PORT]` as a reference spells it (a host with a dot, a port, or `localhost`; lower
/// case, as references must be), so that a value that could never match (a URL, a path, a bare
/// word) is refused at start rather than silently pulling nothing.
///
/// # Errors
/// When `text` is not `HOST[:PORT]`.
pub fn registry_name(text: &str) -> Result<String, String> {
    let refuse = || {
        format!("{text:?} is not a registry: write HOST or HOST:PORT in lower case, as in ghcr.io or 127.0.0.1:5000")
    };
    // References have no bracketed IPv6 form, so such a registry could never be named.
    if !is_registry(text) || text.bytes().any(|b| b.is_ascii_uppercase() || b == b'[') {
        return Err(refuse());
    }
    // As references resolve it.
    if text == "docker.io" {
        return Ok("index.docker.io".to_owned());
    }
    let (host, port) = text.split_once(':').map_or((text, None), |(h, p)| (h, Some(p)));
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    let host_ok = !host.is_empty() && host.len() <= 253 && host.split('.').all(label_ok);
    let port_ok = port.is_none_or(|p| p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok_and(|n| n > 0));
    if host_ok && port_ok { Ok(text.to_owned()) } else { Err(refuse()) }
}

/// What a reference's first part must be to name a registry rather than a Docker Hub
/// namespace: a host with a dot, a port, or `localhost`.
fn is_registry(first: &str) -> bool {
    first.contains('.') || first.contains(':') || first == "localhost"
}

/// How the host reaches registries.
#[derive(Debug, Clone, Default)]
pub struct RegistryPolicy {
    /// Registries (`host[:port]`) spoken to over plain HTTP.
    pub plain_http: Vec<String>,
    /// The only registries plugins may come from (with `plain_http`'s); `*` allows any. None:
    /// no pulls, since a reference in a ConfigMap would otherwise make the host connect
    /// wherever its writer likes.
    pub allowed: Vec<String>,
}

/// Installs the process's one TLS provider, ring, as kube's rustls uses: the registry client
/// (reqwest, built without a provider) takes the process default. Idempotent.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// How much longer than a pull's deadline its HTTP clients wait, so that the deadline, which
/// says what the pull was waiting for, is always what ends a pull that runs out of time.
const CLIENT_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);

impl RegistryPolicy {
    fn client(&self, timeout: Duration) -> Client {
        install_tls_provider();
        let timeout = timeout + CLIENT_TIMEOUT_MARGIN;
        Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.plain_http.clone()),
            connect_timeout: Some(timeout),
            read_timeout: Some(timeout),
            ..ClientConfig::default()
        })
    }

    /// Reads manifests: redirects are followed only a few times, and never from HTTPS to
    /// plain HTTP.
    fn http(&self, timeout: Duration) -> reqwest::Client {
        install_tls_provider();
        let timeout = timeout + CLIENT_TIMEOUT_MARGIN;
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let downgrade = attempt.previous().first().is_some_and(|first| first.scheme() == "https")
                && attempt.url().scheme() != "https";
            if downgrade || attempt.previous().len() > 3 { attempt.stop() } else { attempt.follow() }
        });
        reqwest::Client::builder()
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .redirect(redirects)
            .user_agent(concat!("wasmloop/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a client with a TLS provider installed builds")
    }

    fn scheme_for(&self, registry: &str) -> &'static str {
        if self.plain_http.iter().any(|r| r == registry) { "http" } else { "https" }
    }

    fn check(&self, reference: &PluginRef) -> Result<(), OciError> {
        let registry = reference.registry();
        let named = self.allowed.iter().chain(&self.plain_http);
        if self.allowed.iter().any(|r| r == "*") || named.clone().any(|r| r == registry) {
            return Ok(());
        }
        let named: Vec<&str> = named.map(String::as_str).collect();
        if named.is_empty() {
            Err(OciError::NoRegistryAllowed(registry.to_owned()))
        } else {
            Err(OciError::Disallowed(registry.to_owned(), named.join(", ")))
        }
    }
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

/// What `push` says about the component in the config blob.
pub struct Described<'a> {
    /// The plugin's name.
    pub name: &'a str,
    /// The plugin's version.
    pub version: &'a str,
    /// The contract it exports, `wasmloop:plugin/plugin@0.2.1`.
    pub exports: &'a str,
}

/// Pushes `component` to `reference` (a tag or a digest) and returns the reference pinned to
/// the manifest it wrote.
///
/// # Errors
/// When the registry refuses or fails.
pub async fn push(
    reference: &PluginRef,
    component: &[u8],
    described: &Described<'_>,
    auth: &RegistryAuth,
    policy: &RegistryPolicy,
) -> Result<PluginRef, OciError> {
    let client = policy.client(Duration::from_secs(300));
    let image = &reference.reference;
    client.auth(image, auth, RegistryOperation::Push).await.map_err(|e| registry_error(reference, e))?;
    let layer_digest = sha256(component);
    let config = serde_json::json!({
        "created": k8s_openapi::jiff::Timestamp::now().to_string(),
        "author": null,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {"exports": [described.exports], "imports": [], "target": null},
    });
    let config = serde_json::to_vec(&config).expect("JSON serializes");
    let config_digest = sha256(&config);
    let descriptor = |media_type: &str, digest: &str, size: usize| OciDescriptor {
        media_type: media_type.to_owned(),
        digest: digest.to_owned(),
        size: i64::try_from(size).unwrap_or(i64::MAX),
        ..OciDescriptor::default()
    };
    let mut layer = descriptor(LAYER_MEDIA_TYPE, &layer_digest, component.len());
    layer.annotations =
        Some([("org.opencontainers.image.title".to_owned(), format!("{}.wasm", described.name))].into());
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
        config: descriptor(CONFIG_MEDIA_TYPE, &config_digest, config.len()),
        layers: vec![layer],
        annotations: Some(
            [
                ("org.opencontainers.image.title".to_owned(), described.name.to_owned()),
                ("org.opencontainers.image.version".to_owned(), described.version.to_owned()),
            ]
            .into(),
        ),
        ..OciImageManifest::default()
    };
    client.push_blob(image, config, &config_digest).await.map_err(|e| registry_error(reference, e))?;
    client.push_blob(image, component.to_vec(), &layer_digest).await.map_err(|e| registry_error(reference, e))?;
    let body = serde_json::to_vec(&manifest).expect("JSON serializes");
    let digest = sha256(&body);
    let content_type = http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE);
    client.push_manifest_raw(image, body, content_type).await.map_err(|e| registry_error(reference, e))?;
    Ok(reference.at(&digest))
}

/// How many pulls of one plugin namespace may run at once; more wait their turn. Turns are per
/// namespace so that one tenant's hanging registries hold up only the plugins of its own
/// namespace: tenants that must not hold up each other's pulls get plugin namespaces of their
/// own (`--plugin-namespace` is repeatable). Not per registry too, since a namespace could then
/// multiply its pulls by naming registries.
pub const PULLS_PER_NAMESPACE: usize = 2;

/// How many MiB of pulled components may be held in memory at once, across namespaces, from
/// the manifest's word on the layer's size until the component is loaded (compiling copies it
/// twice more, one load at a time): within `deploy/`'s 512 MiB limit beside the serving plugins.
pub const PULL_MEMORY_MIB: u32 = 128;

/// How many of [`PULL_MEMORY_MIB`] the pulls of one plugin namespace may hold: a registry that
/// trickles bytes keeps its share for the whole pull, so one namespace never holds them all.
pub const NAMESPACE_MEMORY_MIB: u32 = PULL_MEMORY_MIB / 2;

// A component of the largest size must fit in a namespace's share, and a share in the whole, or
// a pull would wait for more permits than exist.
const _: () = assert!(MAX_COMPONENT >> 20 <= NAMESPACE_MEMORY_MIB as u64 && NAMESPACE_MEMORY_MIB <= PULL_MEMORY_MIB);

/// Bytes of pulled components kept on disk. With the compile cache's budget
/// ([`wasmloop_sandbox::COMPILE_CACHE_BUDGET`]), this stays under `deploy/`'s `sizeLimit`.
pub const CACHE_BUDGET: u64 = 256 << 20;

/// Pulls plugin components, bounded in size, time and number at once, cached by manifest
/// digest.
#[derive(Debug, Clone)]
pub struct Puller {
    policy: RegistryPolicy,
    timeout: Duration,
    cache: Option<PathBuf>,
    /// Pulls at once per plugin namespace.
    turns: Arc<Turns>,
    /// One pull per namespace and reference at a time: a second ConfigMap of the namespace
    /// naming it reads the first one's result from the cache. Keyed by the whole reference, not
    /// the digest, so that a hanging registry cannot hold up a pull of the same digest from
    /// another; and by namespace, so that a tenant whose pull of a popular reference waits (for
    /// its memory share, say) holds up no other tenant's.
    same: Arc<Turns>,
    /// MiB of components in memory, [`PULL_MEMORY_MIB`] in all.
    memory: Arc<Semaphore>,
    /// MiB of components in memory per plugin namespace, [`NAMESPACE_MEMORY_MIB`] each.
    namespace_memory: Arc<Turns>,
    /// Reads manifests, bounded (oci-client reads the blobs).
    http: reqwest::Client,
}

/// A pulled component. It holds its share of the pulls' memory ([`PULL_MEMORY_MIB`]) until it
/// is dropped, so a caller keeps it until the component is loaded.
#[derive(Debug)]
pub struct Component {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    _memory: Memory,
}

/// A pull's share of memory: its namespace's, then the whole host's.
#[derive(Debug)]
struct Memory {
    _namespace: Turn,
    _host: OwnedSemaphorePermit,
}

/// What a pull was doing when its time ran out.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Turn,
    Same,
    Cache,
    NamespaceMemory,
    Memory,
    Registry,
    Verify,
}

impl Stage {
    fn waiting(self, namespace: &str) -> String {
        match self {
            Stage::Turn => format!(
                "it waited for one of the {PULLS_PER_NAMESPACE} pulls namespace {namespace} may run at once; other pulls of this namespace hang"
            ),
            Stage::Same => "it waited for another ConfigMap's pull of the same reference in this namespace".to_owned(),
            Stage::Cache => "it was reading the disk cache".to_owned(),
            Stage::NamespaceMemory => format!(
                "it waited for memory: the pulls of namespace {namespace} hold {NAMESPACE_MEMORY_MIB} MiB at most, together; other pulls of this namespace are slow"
            ),
            Stage::Memory => format!(
                "it waited for memory: pulled components not loaded yet hold {PULL_MEMORY_MIB} MiB at most, together"
            ),
            Stage::Registry => "check the registry, or raise --pull-timeout-seconds".to_owned(),
            Stage::Verify => {
                "it was checking the layer's digest and writing the disk cache; raise --pull-timeout-seconds".to_owned()
            }
        }
    }
}

/// A component's share of [`PULL_MEMORY_MIB`].
fn mib(bytes: u64) -> u32 {
    u32::try_from(bytes.min(MAX_COMPONENT).div_ceil(1 << 20).max(1)).expect("at most MAX_COMPONENT")
}

impl Puller {
    /// A puller following `policy`, giving up on a pull after `timeout`, caching pulled
    /// components under `cache` (none: no disk cache).
    pub fn new(policy: RegistryPolicy, timeout: Duration, cache: Option<PathBuf>) -> Self {
        Puller {
            http: policy.http(timeout),
            policy,
            timeout,
            cache,
            turns: Arc::new(Turns::new(PULLS_PER_NAMESPACE)),
            same: Arc::new(Turns::new(1)),
            memory: Arc::new(Semaphore::new(PULL_MEMORY_MIB as usize)),
            namespace_memory: Arc::new(Turns::new(NAMESPACE_MEMORY_MIB as usize)),
        }
    }

    /// How long a pull may take, waits included.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Checks what can be checked before a pull: that `reference` is pinned, and allowed.
    ///
    /// # Errors
    /// When it is not.
    pub fn admissible(&self, reference: &PluginRef) -> Result<(), OciError> {
        reference.digest().ok_or_else(|| OciError::NotPinned(reference.to_string()))?;
        self.policy.check(reference)
    }

    /// The component `reference` (pinned) names, for a plugin of `namespace`, within the
    /// timeout from now.
    ///
    /// # Errors
    /// As [`Puller::pull_by`].
    pub async fn pull(
        &self,
        namespace: &str,
        reference: &PluginRef,
        auth: &RegistryAuth,
    ) -> Result<Component, OciError> {
        self.pull_by(tokio::time::Instant::now() + self.timeout, namespace, reference, auth).await
    }

    /// The component `reference` (pinned) names, for a plugin of `namespace`, by `deadline`:
    /// the waits for a turn, for memory and for another pull of the same reference count.
    ///
    /// ```no_run
    /// # async fn pull(puller: &wasmloop::oci::Puller) -> Result<(), wasmloop::oci::OciError> {
    /// use oci_client::secrets::RegistryAuth;
    /// use wasmloop::oci::PluginRef;
    ///
    /// let reference = PluginRef::parse(
    ///     "oci://registry.example.com/team-a/foo@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    /// )?;
    /// let deadline = tokio::time::Instant::now() + puller.timeout();
    /// let component = puller.pull_by(deadline, "team-a", &reference, &RegistryAuth::Anonymous).await?;
    /// // Its share of the pulls' memory goes when the component does: load it, then drop it.
    /// drop(component);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// When the reference is not pinned or not allowed, the registry fails, the artifact is
    /// not a component, is too large, or the deadline passes.
    pub async fn pull_by(
        &self,
        deadline: tokio::time::Instant,
        namespace: &str,
        reference: &PluginRef,
        auth: &RegistryAuth,
    ) -> Result<Component, OciError> {
        self.admissible(reference)?;
        let mut stage = Stage::Turn;
        let pulled = tokio::time::timeout_at(deadline, async {
            let _turn = self.turns.take(namespace, 1).await;
            stage = Stage::Same;
            // A space cannot appear in a namespace or a reference, so keys cannot collide.
            let _only = self.same.take(&format!("{namespace} {reference}"), 1).await;
            // A hit takes a turn too: reading and hashing 64 MiB is work a namespace must not
            // multiply.
            if let Some(component) = self.cached(namespace, reference, &mut stage).await {
                tracing::info!(%reference, "the component is in the disk cache: no pull");
                return Ok(component);
            }
            self.fetch(namespace, reference, auth, &mut stage).await
        })
        .await;
        pulled.unwrap_or_else(|_| Err(OciError::Timeout(reference.to_string(), self.timeout, stage.waiting(namespace))))
    }

    /// `mib` of memory for a pull of `namespace`: the namespace's share first, so that a
    /// namespace at its cap waits without holding any of the host's.
    async fn memory(&self, namespace: &str, mib: u32, stage: &mut Stage) -> Memory {
        *stage = Stage::NamespaceMemory;
        let namespace = self.namespace_memory.take(namespace, mib).await;
        *stage = Stage::Memory;
        let host = self.memory.clone().acquire_many_owned(mib).await.expect("never closed");
        Memory { _namespace: namespace, _host: host }
    }

    async fn fetch(
        &self,
        namespace: &str,
        reference: &PluginRef,
        auth: &RegistryAuth,
        stage: &mut Stage,
    ) -> Result<Component, OciError> {
        *stage = Stage::Registry;
        let client = self.policy.client(self.timeout);
        let image = &reference.reference;
        let manifest = self.manifest(&client, reference, auth).await?;
        let layer = component_layer(reference, &manifest)?;
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > MAX_COMPONENT {
            return Err(OciError::TooLarge(reference.to_string(), size));
        }
        let memory = self.memory(namespace, mib(size), stage).await;
        *stage = Stage::Registry;
        // The stream checks the bytes against the layer's digest as they arrive; the count
        // holds a registry that sends more than the manifest said to the limit.
        let mut stream = client.pull_blob_stream(image, &layer).await.map_err(|e| registry_error(reference, e))?.stream;
        let mut component = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| registry_error(reference, e))?;
            if (component.len() + chunk.len()) as u64 > size {
                return Err(registry_error(
                    reference,
                    format!("the layer is longer than the {size} bytes its manifest says"),
                ));
            }
            component.extend_from_slice(&chunk);
        }
        let digest = reference.digest().unwrap_or_default().to_owned();
        let (cache, layer_digest) = (self.cache.clone(), layer.digest.clone());
        *stage = Stage::Verify;
        // Hashing and writing 64 MiB is blocking work: off the runtime's threads. The bytes'
        // share of memory goes with them, so a pull given up meanwhile frees it only with them.
        let component = tokio::task::spawn_blocking(move || {
            let component = Component { bytes: component, _memory: memory };
            let matches = sha256(&component.bytes) == layer_digest;
            if matches && let Some(dir) = entry(cache.as_deref(), &digest) {
                store(&dir, &manifest, &component.bytes);
            }
            matches.then_some(component)
        })
        .await
        .expect("hashing does not panic");
        component.ok_or_else(|| {
            registry_error(reference, format!("the layer's bytes do not match its digest {}", layer.digest))
        })
    }

    /// The manifest `reference` pins, read here rather than by oci-client, which reads a body
    /// of any length whole: at most [`MAX_MANIFEST`] bytes, and they must hash to the digest.
    async fn manifest(&self, client: &Client, reference: &PluginRef, auth: &RegistryAuth) -> Result<Vec<u8>, OciError> {
        let image = &reference.reference;
        // oci-client speaks the token protocol, and keeps the token for the blob's pull.
        let token =
            client.auth(image, auth, RegistryOperation::Pull).await.map_err(|e| registry_error(reference, e))?;
        let digest = reference.digest().unwrap_or_default();
        let url = format!(
            "{}://{}/v2/{}/manifests/{digest}",
            self.policy.scheme_for(reference.registry()),
            reference.registry(),
            image.repository()
        );
        let request = self.http.get(url).header(http::header::ACCEPT, MANIFEST_MEDIA_TYPE);
        let request = match (token, auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            (None, _) => request,
        };
        let mut response = request.send().await.map_err(|e| registry_error(reference, e))?;
        let status = response.status();
        if !status.is_success() {
            let body = read_at_most(&mut response, MAX_REGISTRY_MESSAGE as u64).await.unwrap_or_default();
            let body = String::from_utf8_lossy(&body);
            return Err(registry_error(reference, format_args!("the manifest: {status}: {body}")));
        }
        if response.content_length().is_some_and(|length| length > MAX_MANIFEST) {
            return Err(OciError::ManifestTooLarge(reference.to_string()));
        }
        let body = read_at_most(&mut response, MAX_MANIFEST + 1).await.map_err(|e| registry_error(reference, e))?;
        if body.len() as u64 > MAX_MANIFEST {
            return Err(OciError::ManifestTooLarge(reference.to_string()));
        }
        let actual = sha256(&body);
        if actual != digest {
            return Err(registry_error(
                reference,
                format_args!("the manifest it sent hashes to {actual}, not to the pinned {digest}"),
            ));
        }
        Ok(body)
    }

    /// A component pulled before, if the cache holds it intact; read off the runtime's threads,
    /// with its share of memory like a pull's.
    async fn cached(&self, namespace: &str, reference: &PluginRef, stage: &mut Stage) -> Option<Component> {
        *stage = Stage::Cache;
        let dir = entry(self.cache.as_deref(), reference.digest()?)?;
        let size = tokio::fs::metadata(dir.join(COMPONENT_FILE)).await.ok()?.len();
        if size > MAX_COMPONENT {
            return None;
        }
        let memory = self.memory(namespace, mib(size), stage).await;
        *stage = Stage::Cache;
        let reference = reference.clone();
        // The share of memory goes with the bytes, as in a pull.
        let read = move || cached(&dir, &reference).map(|bytes| Component { bytes, _memory: memory });
        tokio::task::spawn_blocking(read).await.ok().flatten()
    }
}

/// The first `limit` bytes of `response`'s body, or fewer: the rest is never read.
async fn read_at_most(response: &mut reqwest::Response, limit: u64) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = usize::try_from(limit.saturating_sub(body.len() as u64)).unwrap_or(usize::MAX);
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() as u64 >= limit {
            break;
        }
    }
    Ok(body)
}

/// Permits per key, for keys a caller chooses (namespaces, references); a key is forgotten once
/// nobody holds or waits for its permits, so the map stays as small as the pulls under way.
#[derive(Debug)]
struct Turns {
    per_key: usize,
    keys: std::sync::Mutex<std::collections::HashMap<String, Arc<Semaphore>>>,
}

/// Permits of [`Turns`], or the wait for them. Owned, so that it can go with a pull's bytes into
/// blocking work and outlive the pull's task.
#[derive(Debug)]
struct Turn {
    turns: Arc<Turns>,
    key: String,
    semaphore: Arc<Semaphore>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Turns {
    fn new(per_key: usize) -> Self {
        Turns { per_key, keys: std::sync::Mutex::default() }
    }

    /// `count` of `key`'s permits; callers ask for at most `per_key`.
    async fn take(self: &Arc<Self>, key: &str, count: u32) -> Turn {
        debug_assert!(count as usize <= self.per_key, "{count} of {} permits would wait forever", self.per_key);
        let semaphore = {
            let mut keys = self.keys.lock().expect("not poisoned");
            keys.entry(key.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.per_key))).clone()
        };
        // The guard exists before the wait, so a wait that is given up still forgets the key.
        let mut turn = Turn { turns: self.clone(), key: key.to_owned(), semaphore, permit: None };
        turn.permit = Some(turn.semaphore.clone().acquire_many_owned(count).await.expect("never closed"));
        turn
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.lock().expect("not poisoned").len()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.permit = None;
        let mut keys = self.turns.keys.lock().expect("not poisoned");
        // The map's and this guard's: nobody else holds or waits.
        if Arc::strong_count(&self.semaphore) == 2 {
            keys.remove(&self.key);
        }
    }
}

/// An entry's files: the manifest is written last, as the entry's stamp.
const COMPONENT_FILE: &str = "component.wasm";
const MANIFEST_FILE: &str = "manifest.json";

fn entry(cache: Option<&std::path::Path>, digest: &str) -> Option<PathBuf> {
    let hex = digest.strip_prefix("sha256:")?;
    Some(cache?.join(hex))
}

/// The component cached in `dir`, if intact: the manifest must still hash to the reference's
/// digest and name the component's digest. A hit marks the entry used.
fn cached(dir: &std::path::Path, reference: &PluginRef) -> Option<Vec<u8>> {
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
fn store(dir: &std::path::Path, manifest: &[u8], component: &[u8]) {
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| write_aside(&dir.join(COMPONENT_FILE), component))
        .and_then(|()| write_aside(&dir.join(MANIFEST_FILE), manifest));
    if let Err(error) = written {
        tracing::warn!(dir = %dir.display(), %error, "cannot cache a pulled plugin; it will be pulled again");
    }
    if let Some(root) = dir.parent() {
        // Each version ever pulled would fill the pod's emptyDir in the end; the least
        // recently used go first (a reload of one of them pulls again).
        wasmloop_sandbox::disk_budget::prune(root, CACHE_BUDGET, std::path::Path::is_dir, Some(MANIFEST_FILE));
    }
}

/// Writes `path` through a file of this process and thread, renamed into place.
fn write_aside(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let aside = path.with_file_name(format!(".{name}.{}.{:?}.tmp", std::process::id(), std::thread::current().id()));
    let written = std::fs::write(&aside, bytes).and_then(|()| std::fs::rename(&aside, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    written
}

fn read_bounded(path: &std::path::Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(limit + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= limit).then_some(bytes)
}

/// The one component layer of a plugin artifact's manifest.
fn component_layer(reference: &PluginRef, manifest: &[u8]) -> Result<OciDescriptor, OciError> {
    let not_wasm = |why: String| OciError::NotWasm(reference.to_string(), why);
    // serde quotes the values it refuses, and the manifest is the publisher's to write.
    let manifest: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|e| not_wasm(cut(format_args!("its manifest does not parse ({e})"))))?;
    let layers: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == LAYER_MEDIA_TYPE || l.media_type == LEGACY_LAYER_MEDIA_TYPE)
        .collect();
    match layers.as_slice() {
        [layer] if is_sha256(&layer.digest) => {
            // oci-client would try a descriptor's `urls` when the registry fails: addresses the
            // publisher chose, which the host must not be made to fetch.
            Ok(OciDescriptor { urls: None, ..(*layer).clone() })
        }
        [_] => Err(not_wasm("its layer's digest is not sha256".to_owned())),
        [] => {
            let found: Vec<&str> = manifest.layers.iter().map(|l| l.media_type.as_str()).collect();
            Err(not_wasm(cut(format_args!("no {LAYER_MEDIA_TYPE} layer (layers: {})", found.join(", ")))))
        }
        _ => Err(not_wasm(format!("{} component layers; a plugin artifact has one", layers.len()))),
    }
}

/// The credentials a `.dockerconfigjson` (or legacy `.dockercfg`) Secret holds for `registry`:
/// `auth` (base64 `user:password`), or `username` and `password`. Only these are read; no
/// credential helper is ever run.
///
/// # Errors
/// When the document does not parse or holds nothing for the registry.
pub fn credentials(document: &[u8], registry: &str, secret: &str) -> Result<RegistryAuth, OciError> {
    use serde::Deserialize as _;
    #[derive(serde::Deserialize)]
    struct Entry {
        auth: Option<String>,
        username: Option<String>,
        password: Option<String>,
    }
    // Never serde's words: they quote the values they refuse, and these are credentials.
    let fail = |why: String| OciError::Credentials(format!("pull secret {secret}: {why}"));
    let value: serde_json::Value = serde_json::from_slice(document)
        .map_err(|e| fail(format!("not a docker config JSON (line {}, column {})", e.line(), e.column())))?;
    let auths = value.get("auths").unwrap_or(&value);
    let auths = auths.as_object().ok_or_else(|| fail("its auths are not a map of registry credentials".to_owned()))?;
    // Keys are written as users write registries: any case, with a scheme and path or not.
    let host = |key: &str| {
        let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
        key.split('/').next().unwrap_or_default().to_ascii_lowercase()
    };
    let entry =
        auths.iter().find(|(key, _)| host(key) == registry).map(|(_, e)| e).ok_or_else(|| {
            fail(format!("it holds no credentials for registry {registry}; add an auths entry for it"))
        })?;
    let entry: Entry = Entry::deserialize(entry).map_err(|_| {
        fail(format!("the entry for {registry} is not an object of auth, or username and password, strings"))
    })?;
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    use base64::Engine as _;
    let auth = entry.auth.as_deref().ok_or_else(|| fail(format!("the entry for {registry} has no auth")))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| fail(format!("the auth of {registry} is not base64 text")))?;
    let (user, password) =
        decoded.split_once(':').ok_or_else(|| fail(format!("the auth of {registry} is not user:password")))?;
    Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_are_parsed_or_refused_with_the_reason() {
        let cases: &[(&str, Result<(&str, Option<&str>), &str>)] = &[
            ("oci://127.0.0.1:5000/team/foo:1.0", Ok(("127.0.0.1:5000", None))),
            (
                "oci://ghcr.io/team/foo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                Ok(("ghcr.io", Some(DIGEST))),
            ),
            ("oci://localhost/foo:1", Ok(("localhost", None))),
            ("ghcr.io/team/foo:1", Err("must start with oci://")),
            ("oci://team/foo:1", Err("name the registry")),
            ("oci://foo", Err("name the registry")),
            ("oci://ghcr.io/team/foo@sha256:abc", Err("")),
            ("oci://ghcr.io/Team/foo:1", Err("")),
            ("oci://GHCR.io/team/foo:1", Err("write the registry in lower case")),
        ];
        for (text, expected) in cases {
            match (PluginRef::parse(text), expected) {
                (Ok(r), Ok((registry, digest))) => {
                    assert_eq!((r.registry(), r.digest()), (*registry, *digest), "{text}");
                    assert_eq!(r.to_string(), *text, "a reference prints as written");
                }
                (Err(e), Err(why)) => assert!(e.to_string().contains(why), "{text}: {e}"),
                (got, _) => panic!("{text}: unexpected {got:?}"),
            }
        }
    }

    #[test]
    fn an_operator_names_a_registry_as_a_reference_spells_it() {
        let cases: &[(&str, bool)] = &[
            ("ghcr.io", true),
            ("127.0.0.1:5000", true),
            ("localhost", true),
            ("my-registry.example.com:443", true),
            ("[::1]:5000", false),
            ("[::1]", false),
            ("https://ghcr.io", false),
            ("ghcr.io/", false),
            ("ghcr.io/team", false),
            ("registry", false),
            ("GHCR.io", false),
            ("ghcr.io:", false),
            ("ghcr.io:99999", false),
            ("ghcr.io:0", false),
            ("", false),
            ("-bad.io", false),
            ("a..b", false),
        ];
        for (text, accepted) in cases {
            assert_eq!(registry_name(text).is_ok(), *accepted, "{text}: {:?}", registry_name(text));
        }
        let hub = PluginRef::parse("oci://docker.io/team/foo:1").unwrap();
        assert_eq!(registry_name("docker.io").unwrap(), hub.registry(), "named as references resolve it");
    }

    #[test]
    fn an_overlong_reference_is_refused_before_it_is_parsed() {
        let text = format!("oci://ghcr.io/{}", "a".repeat(600));
        assert!(PluginRef::parse(&text).unwrap_err().to_string().contains("longer than 512 bytes"));
    }

    #[test]
    fn a_reference_is_taken_only_if_it_parses_back_written_out_in_full() {
        // 510 bytes as given; 517 with the `:latest` its printed form spells (found by fuzzing).
        let registry = format!("{}.{}.{}.{}.io", "r".repeat(63), "e".repeat(63), "g".repeat(63), "i".repeat(54));
        let text = format!("oci://{registry}/{}", "a".repeat(254));
        let error = PluginRef::parse(&text).unwrap_err().to_string();
        assert!(error.contains("517 bytes written out in full, more than 512"), "{error}");
        let fits = PluginRef::parse(&format!("oci://{registry}/{}", "a".repeat(240))).unwrap();
        assert_eq!(PluginRef::parse(&fits.to_string()).unwrap(), fits);
    }

    #[test]
    fn a_tag_is_not_a_pin() {
        let error = PluginRef::parse("oci://ghcr.io/team/foo:1").unwrap().pinned().unwrap_err();
        assert!(error.to_string().contains("`wasmloop push` prints the reference"), "{error}");
    }

    #[test]
    fn a_registry_outside_the_allowed_list_is_refused_naming_the_list() {
        let policy = RegistryPolicy { allowed: vec!["ghcr.io".into()], plain_http: vec!["127.0.0.1:5000".into()] };
        let other = PluginRef::parse("oci://evil.example.com/foo:1").unwrap();
        let refused = policy.check(&other).unwrap_err().to_string();
        assert!(refused.contains("push the plugin to one of: ghcr.io, 127.0.0.1:5000"), "{refused}");
        assert!(policy.check(&PluginRef::parse("oci://ghcr.io/foo:1").unwrap()).is_ok());
        assert!(
            policy.check(&PluginRef::parse("oci://127.0.0.1:5000/foo:1").unwrap()).is_ok(),
            "a registry the operator lists as insecure is one they chose"
        );
    }

    #[test]
    fn a_registry_s_long_error_body_is_cut_before_it_reaches_a_status() {
        let reference = PluginRef::parse(&format!("oci://registry.example.com/p@{DIGEST}")).unwrap();
        let error = registry_error(&reference, "é".repeat(100_000)).to_string();
        assert!(error.len() < MAX_REGISTRY_MESSAGE + 64, "{} bytes", error.len());
        assert!(error.ends_with('…'), "{error}");
    }

    #[test]
    fn no_registry_is_allowed_until_the_operator_names_one() {
        let reference = PluginRef::parse("oci://169.254.169.254/latest:1").unwrap();
        let refused = RegistryPolicy::default().check(&reference).unwrap_err().to_string();
        assert!(refused.contains("--allowed-registry 169.254.169.254"), "{refused}");
        let any = RegistryPolicy { allowed: vec!["*".into()], ..RegistryPolicy::default() };
        assert!(any.check(&reference).is_ok());
    }

    fn basic(auth: RegistryAuth) -> (String, String) {
        match auth {
            RegistryAuth::Basic(user, password) => (user, password),
            other => panic!("expected basic auth, got {other:?}"),
        }
    }

    #[test]
    fn pull_secret_credentials_are_read_for_the_registry() {
        let config = br#"{"auths": {"https://other.io/v1/": {"auth": "eDp5"},
                                     "127.0.0.1:5000": {"auth": "cGx1Z2luOnMzY3JldDp3aXRoOmNvbG9ucw=="}}}"#;
        assert_eq!(
            basic(credentials(config, "127.0.0.1:5000", "s").unwrap()),
            ("plugin".into(), "s3cret:with:colons".into())
        );
        assert_eq!(basic(credentials(config, "other.io", "s").unwrap()), ("x".into(), "y".into()));
        let plain = br#"{"auths": {"ghcr.io": {"username": "u", "password": "p"}}}"#;
        assert_eq!(basic(credentials(plain, "ghcr.io", "s").unwrap()), ("u".into(), "p".into()));
        let shouted = br#"{"auths": {"https://GHCR.io/v1/": {"auth": "dTpw"}}}"#;
        assert_eq!(basic(credentials(shouted, "ghcr.io", "s").unwrap()), ("u".into(), "p".into()));
        let legacy = br#"{"ghcr.io": {"auth": "dTpw"}}"#;
        assert_eq!(basic(credentials(legacy, "ghcr.io", "s").unwrap()), ("u".into(), "p".into()));
    }

    #[test]
    fn a_pull_secret_without_credentials_for_the_registry_says_what_to_add() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"auths": {"ghcr.io": {"auth": "dTpw"}}}"#, "holds no credentials for registry quay.io"),
            (b"not json", "not a docker config JSON"),
            (br#"{"auths": {"quay.io": {"auth": "!!"}}}"#, "not base64 text"),
            (br#"{"auths": {"quay.io": {"auth": "bm9jb2xvbg=="}}}"#, "not user:password"),
            (br#"{"auths": {"quay.io": {}}}"#, "has no auth"),
        ];
        for (document, needle) in cases {
            let error = credentials(document, "quay.io", "ns/secret").unwrap_err().to_string();
            assert!(error.starts_with("pull secret ns/secret: ") && error.contains(needle), "{error}");
        }
    }

    #[test]
    fn a_pull_secret_s_values_never_reach_its_errors() {
        let secret = "c3VwZXItc2VjcmV0LXRva2Vu";
        let documents = [
            format!(r#"{{"auths": {{"quay.io": "{secret}"}}}}"#),
            format!(r#"{{"auths": {{"quay.io": {{"auth": 7, "password": "{secret}"}}}}}}"#),
            format!(r#"{{"auths": {{"other.io": "{secret}", "quay.io": {{"auth": "dTpw"}}}}}}"#),
            format!(r#"{{"auths": "{secret}"}}"#),
            format!(r#"{{"auths": {{"quay.io": {{"auth": "{secret}"#),
        ];
        for document in &documents {
            match credentials(document.as_bytes(), "quay.io", "ns/s") {
                Err(error) => assert!(!error.to_string().contains(secret), "{error}"),
                Ok(_) => assert!(document.contains("other.io"), "only the entry for the registry is read: {document}"),
            }
        }
    }

    #[test]
    fn a_manifest_s_words_are_cut_before_they_reach_a_status() {
        let reference = PluginRef::parse(&format!("oci://ghcr.io/foo@{DIGEST}")).unwrap();
        let long = "x".repeat(100_000);
        let manifests = [
            serde_json::to_vec(&serde_json::json!({"schemaVersion": long})).unwrap(),
            serde_json::to_vec(&serde_json::json!({"schemaVersion": 2,
                "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": DIGEST, "size": 1},
                "layers": [{"mediaType": long, "digest": DIGEST, "size": 1}]}))
            .unwrap(),
        ];
        for manifest in &manifests {
            let error = component_layer(&reference, manifest).unwrap_err().to_string();
            assert!(error.len() < 2 * MAX_REGISTRY_MESSAGE, "{} bytes", error.len());
        }
    }

    #[test]
    fn a_manifest_needs_exactly_one_component_layer() {
        let reference = PluginRef::parse(&format!("oci://ghcr.io/foo@{DIGEST}")).unwrap();
        let manifest = |layers: &[&str]| {
            let layers: Vec<_> =
                layers.iter().map(|m| serde_json::json!({"mediaType": m, "digest": DIGEST, "size": 1})).collect();
            serde_json::to_vec(&serde_json::json!({"schemaVersion": 2,
                "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": DIGEST, "size": 1}, "layers": layers}))
            .unwrap()
        };
        assert!(component_layer(&reference, &manifest(&[LAYER_MEDIA_TYPE])).is_ok());
        assert!(component_layer(&reference, &manifest(&[LEGACY_LAYER_MEDIA_TYPE])).is_ok());
        let none =
            component_layer(&reference, &manifest(&["application/vnd.oci.image.layer.v1.tar+gzip"])).unwrap_err();
        assert!(none.to_string().contains("no application/wasm layer"), "{none}");
        let two = component_layer(&reference, &manifest(&[LAYER_MEDIA_TYPE, LAYER_MEDIA_TYPE])).unwrap_err();
        assert!(two.to_string().contains("2 component layers"), "{two}");
    }

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

    #[tokio::test]
    async fn turns_are_per_key_and_forgotten_when_nobody_waits() {
        let turns = Arc::new(Turns::new(1));
        let a = turns.take("tenant-a", 1).await;
        // Polled once and given up: it must wait, and giving up must forget it.
        let waiting = futures::FutureExt::now_or_never(turns.take("tenant-a", 1));
        assert!(waiting.is_none(), "a key's one turn is taken");
        let b = turns.take("tenant-b", 1).await;
        assert_eq!(turns.len(), 2, "another key has turns of its own");
        drop((a, b));
        assert_eq!(turns.len(), 0, "a wait given up and turns given back leave nothing behind");
    }

    #[tokio::test]
    async fn a_pull_that_waits_its_whole_time_for_a_turn_says_so() {
        let puller = Puller::new(
            RegistryPolicy { allowed: vec!["*".into()], ..RegistryPolicy::default() },
            Duration::from_millis(50),
            None,
        );
        let _held: Vec<_> =
            futures::future::join_all((0..PULLS_PER_NAMESPACE).map(|_| puller.turns.take("tenant", 1))).await;
        let reference = PluginRef::parse(&format!("oci://registry.example.com/p@{DIGEST}")).unwrap();
        let error = puller.pull("tenant", &reference, &RegistryAuth::Anonymous).await.unwrap_err();
        assert!(matches!(error, OciError::Timeout(..)), "{error}");
        assert!(error.to_string().contains("pulls namespace tenant may run at once"), "{error}");
    }

    #[tokio::test]
    async fn a_namespace_at_its_memory_share_waits_without_holding_the_host_s() {
        let puller = Puller::new(RegistryPolicy::default(), Duration::from_secs(1), None);
        let mut stage = Stage::Turn;
        let held = puller.memory("tenant-a", NAMESPACE_MEMORY_MIB, &mut stage).await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), puller.memory("tenant-a", 1, &mut stage)).await;
        assert!(waiting.is_err(), "tenant-a holds its whole share");
        assert!(matches!(stage, Stage::NamespaceMemory), "{stage:?}");
        assert_eq!(
            puller.memory.available_permits(),
            (PULL_MEMORY_MIB - NAMESPACE_MEMORY_MIB) as usize,
            "the waiting pull holds none of the host's memory"
        );
        let other = puller.memory("tenant-b", NAMESPACE_MEMORY_MIB, &mut stage).await;
        drop((held, other));
        assert_eq!(puller.memory.available_permits(), PULL_MEMORY_MIB as usize, "both shares went back");
        assert_eq!(puller.namespace_memory.len(), 0, "and no namespace is remembered");
    }

    /// A real registry of the test's own (distribution, anonymous), for the pulls below.
    async fn private_registry() -> wasmloop_testenv::registry::TestRegistry {
        tokio::task::spawn_blocking(wasmloop_testenv::registry::private).await.unwrap().expect("a test registry")
    }

    const CONFIG: &[u8] = b"{}";

    fn image_manifest(layer: &[u8], declared_size: u64, note: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": sha256(CONFIG), "size": CONFIG.len()},
            "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": sha256(layer), "size": declared_size}],
            "annotations": {"note": note}}))
        .unwrap()
    }

    /// Pushes `layer` and `manifest` (tagged `tag`) to repository plugins/p, as any registry
    /// client may: the registry stores manifests it does not understand the sizes of. Returns
    /// the manifest's digest.
    async fn publish(
        registry: &wasmloop_testenv::registry::TestRegistry,
        tag: &str,
        layer: &[u8],
        manifest: &[u8],
    ) -> String {
        let policy = RegistryPolicy { plain_http: vec![registry.address.clone()], ..RegistryPolicy::default() };
        let client = policy.client(Duration::from_secs(30));
        let image: Reference = format!("{}/plugins/p:{tag}", registry.address).parse().unwrap();
        client.auth(&image, &RegistryAuth::Anonymous, RegistryOperation::Push).await.unwrap();
        client.push_blob(&image, CONFIG.to_vec(), &sha256(CONFIG)).await.unwrap();
        client.push_blob(&image, layer.to_vec(), &sha256(layer)).await.unwrap();
        let media_type = http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE);
        client.push_manifest_raw(&image, manifest.to_vec(), media_type).await.unwrap();
        sha256(manifest)
    }

    /// Changes what the registry serves for blob `digest`, as a registry whose disk was
    /// tampered with would.
    fn tamper(registry: &wasmloop_testenv::registry::TestRegistry, digest: &str, bytes: &[u8]) {
        std::fs::write(registry.blob_file(digest).expect("a registry of our own"), bytes).unwrap();
    }

    async fn pull_from(address: &str, digest: &str, timeout: Duration) -> Result<Component, OciError> {
        let policy = RegistryPolicy { plain_http: vec![address.to_owned()], ..RegistryPolicy::default() };
        let puller = Puller::new(policy, timeout, None);
        let reference = PluginRef::parse(&format!("oci://{address}/plugins/p@{digest}")).unwrap();
        puller.pull("tenant", &reference, &RegistryAuth::Anonymous).await
    }

    #[tokio::test]
    async fn an_honest_registry_s_component_is_pulled_whole() {
        let registry = private_registry().await;
        let layer = b"\0asm component".to_vec();
        let digest = publish(&registry, "1", &layer, &image_manifest(&layer, layer.len() as u64, "")).await;
        let pulled = pull_from(&registry.address, &digest, Duration::from_secs(30)).await.unwrap();
        assert_eq!(pulled.bytes, layer);
    }

    #[tokio::test]
    async fn a_manifest_other_than_the_one_pinned_is_refused() {
        let registry = private_registry().await;
        let layer = b"\0asm".to_vec();
        let pinned = publish(&registry, "1", &layer, &image_manifest(&layer, 4, "pinned")).await;
        tamper(&registry, &pinned, &image_manifest(&layer, 4, "served instead"));
        let error = pull_from(&registry.address, &pinned, Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(error, OciError::Registry { .. }), "{error}");
        assert!(error.to_string().contains(&format!("not to the pinned {pinned}")), "{error}");
    }

    #[tokio::test]
    async fn a_manifest_over_the_limit_is_refused_unread() {
        let registry = private_registry().await;
        let layer = b"\0asm".to_vec();
        let padded = image_manifest(&layer, 4, &"x".repeat(usize::try_from(MAX_MANIFEST).unwrap()));
        let digest = publish(&registry, "1", &layer, &padded).await;
        let error = pull_from(&registry.address, &digest, Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(error, OciError::ManifestTooLarge(_)), "{error}");
    }

    #[tokio::test]
    async fn a_layer_declared_over_the_limit_is_refused_before_it_is_fetched() {
        let registry = private_registry().await;
        let layer = b"\0asm".to_vec();
        let digest = publish(&registry, "1", &layer, &image_manifest(&layer, MAX_COMPONENT + 1, "")).await;
        let error = pull_from(&registry.address, &digest, Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(error, OciError::TooLarge(_, size) if size == MAX_COMPONENT + 1), "{error}");
    }

    #[tokio::test]
    async fn a_layer_other_than_its_manifest_names_is_refused() {
        let registry = private_registry().await;
        let layer = b"\0asm real".to_vec();
        let digest = publish(&registry, "1", &layer, &image_manifest(&layer, 9, "")).await;
        tamper(&registry, &sha256(&layer), b"\0asm fake");
        let error = pull_from(&registry.address, &digest, Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(error, OciError::Registry { .. }), "{error}");
        assert!(error.to_string().to_lowercase().contains("digest"), "{error}");
    }

    #[tokio::test]
    async fn a_layer_longer_than_its_manifest_says_is_refused() {
        let registry = private_registry().await;
        let layer = b"\0asm real".to_vec();
        let digest = publish(&registry, "1", &layer, &image_manifest(&layer, 9, "")).await;
        tamper(&registry, &sha256(&layer), b"\0asm real, and then a great deal more");
        let error = pull_from(&registry.address, &digest, Duration::from_secs(30)).await.unwrap_err();
        assert!(error.to_string().contains("longer than the 9 bytes its manifest says"), "{error}");
    }

    #[tokio::test]
    async fn a_layer_s_urls_are_never_fetched() {
        let registry = private_registry().await;
        let layer = b"\0asm".to_vec();
        // A listener standing for an address inside the cluster that the publisher names.
        let inside = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut manifest: serde_json::Value = serde_json::from_slice(&image_manifest(&layer, 4, "")).unwrap();
        manifest["layers"][0]["urls"] = serde_json::json!([format!("http://{}/secret", inside.local_addr().unwrap())]);
        let digest = publish(&registry, "1", &layer, &serde_json::to_vec(&manifest).unwrap()).await;
        // The registry loses the layer: oci-client would turn to the urls.
        std::fs::remove_file(registry.blob_file(&sha256(&layer)).unwrap()).unwrap();
        let error = pull_from(&registry.address, &digest, Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(error, OciError::Registry { .. }), "{error}");
        let connected = tokio::time::timeout(Duration::ZERO, inside.accept()).await;
        assert!(connected.is_err(), "the pull failed, having connected nowhere but the registry");
    }

    #[tokio::test]
    async fn a_registry_that_never_answers_runs_out_the_pull_s_time() {
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = silent.local_addr().unwrap().to_string();
        let error = pull_from(&address, DIGEST, Duration::from_millis(300)).await.unwrap_err();
        assert!(matches!(error, OciError::Timeout(..)), "{error}");
        assert!(error.to_string().contains("check the registry, or raise --pull-timeout-seconds"), "{error}");
        drop(silent);
    }
}
