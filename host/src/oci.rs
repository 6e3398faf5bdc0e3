//! Plugins as OCI artifacts, for components too large for a ConfigMap (a Python plugin carries
//! CPython: ~20 MB). `wasmloop push` writes one; a plugin ConfigMap names it in
//! `data["plugin.ref"]` (`oci://REGISTRY/REPO@sha256:...`); the ConfigMap source pulls it.
//!
//! The layout is the CNCF TAG Runtime's Wasm OCI artifact, as wasm-pkg-tools writes it: an
//! OCI image manifest whose config blob has media type `application/vnd.wasm.config.v0+json`
//! and whose one layer is the component, `application/wasm`. Pulls also accept the older
//! `application/vnd.wasm.content.layer.v1+wasm` layer (wasm-to-oci, Kubewarden).
//!
//! A reference in a ConfigMap is hostile input: it must be pinned by digest (oci-client checks
//! the manifest against it, and the layer against the manifest), the registry must be one the
//! operator allows when they restrict them, plain HTTP only for registries the operator lists,
//! the layer no larger than [`MAX_COMPONENT`], the whole pull (waits included) no longer than
//! the timeout, no more than [`PULLS_PER_NAMESPACE`] at once per plugin namespace, and no more
//! than [`PULL_MEMORY_MIB`] held at once in all. Pulled components are cached on disk by
//! manifest digest, checked again when read back, and kept within [`CACHE_BUDGET`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest as _, Sha256};
use tokio::sync::Semaphore;

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

/// Why a reference, a push or a pull failed.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// Not a reference this host takes.
    #[error("{0:?} is not a plugin reference: {1}")]
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
        let bad = |why: &str| OciError::BadReference(text.chars().take(MAX_REFERENCE).collect(), why.to_owned());
        if text.len() > MAX_REFERENCE {
            return Err(bad(&format!("longer than {MAX_REFERENCE} bytes")));
        }
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| bad("it must start with oci://"))?;
        // An implicit registry would be docker.io: a plugin's origin is always spelled out.
        let registry = rest.split('/').next().unwrap_or_default();
        if !rest.contains('/') || !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
            return Err(bad("name the registry, as in oci://registry.example.com/team/plugin:1.0"));
        }
        let reference: Reference = rest.parse().map_err(|e| bad(&format!("{e}")))?;
        if let Some(digest) = reference.digest()
            && !is_sha256(digest)
        {
            return Err(bad("the digest must be sha256: followed by 64 lower-case hex digits"));
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

impl RegistryPolicy {
    fn client(&self, timeout: Duration) -> Client {
        install_tls_provider();
        Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.plain_http.clone()),
            connect_timeout: Some(timeout),
            read_timeout: Some(timeout),
            ..ClientConfig::default()
        })
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

/// How much of a registry's own words an error keeps: they go to a status annotation, an Event
/// and the log, and a registry may send megabytes of error body.
const MAX_REGISTRY_MESSAGE: usize = 512;

fn registry_error(reference: &PluginRef, error: impl std::fmt::Display) -> OciError {
    let mut message = error.to_string();
    if message.len() > MAX_REGISTRY_MESSAGE {
        let mut end = MAX_REGISTRY_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("… (cut)");
    }
    OciError::Registry { registry: reference.registry().to_owned(), message }
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
/// namespace so that one tenant's hanging registries hold up only that tenant's plugins.
pub const PULLS_PER_NAMESPACE: usize = 2;

/// How many MiB of components pulls may hold in memory at once, across namespaces: a pull
/// takes its share once the manifest says how large the layer is.
pub const PULL_MEMORY_MIB: u32 = 256;

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
    /// One pull per reference at a time: a second ConfigMap naming it reads the first one's
    /// result from the cache. Keyed by the whole reference, not the digest, so that a hanging
    /// registry cannot hold up a pull of the same digest from another.
    same: Arc<Turns>,
    /// MiB of components in memory, [`PULL_MEMORY_MIB`] in all.
    memory: Arc<Semaphore>,
}

/// What a pull was doing when its time ran out.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Turn,
    Same,
    Cache,
    Memory,
    Registry,
}

impl Stage {
    fn waiting(self, namespace: &str) -> String {
        match self {
            Stage::Turn => format!(
                "it waited for one of the {PULLS_PER_NAMESPACE} pulls namespace {namespace} may run at once; other pulls of this namespace hang"
            ),
            Stage::Same => "it waited for another ConfigMap's pull of the same reference".to_owned(),
            Stage::Cache => "it was reading the disk cache".to_owned(),
            Stage::Memory => format!("it waited for memory: pulls hold {PULL_MEMORY_MIB} MiB at most, together"),
            Stage::Registry => "check the registry, or raise --pull-timeout-seconds".to_owned(),
        }
    }
}

impl Puller {
    /// A puller following `policy`, giving up on a pull after `timeout`, caching pulled
    /// components under `cache` (none: no disk cache).
    pub fn new(policy: RegistryPolicy, timeout: Duration, cache: Option<PathBuf>) -> Self {
        Puller {
            policy,
            timeout,
            cache,
            turns: Arc::new(Turns::new(PULLS_PER_NAMESPACE)),
            same: Arc::new(Turns::new(1)),
            memory: Arc::new(Semaphore::new(PULL_MEMORY_MIB as usize)),
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
    pub async fn pull(&self, namespace: &str, reference: &PluginRef, auth: &RegistryAuth) -> Result<Vec<u8>, OciError> {
        self.pull_by(tokio::time::Instant::now() + self.timeout, namespace, reference, auth).await
    }

    /// The component `reference` (pinned) names, for a plugin of `namespace`, by `deadline`:
    /// the waits for a turn, for memory and for another pull of the same reference count.
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
    ) -> Result<Vec<u8>, OciError> {
        self.admissible(reference)?;
        let digest = reference.digest().unwrap_or_default();
        let mut stage = Stage::Turn;
        let pulled = tokio::time::timeout_at(deadline, async {
            let _turn = self.turns.take(namespace).await;
            stage = Stage::Same;
            let _only = self.same.take(&reference.to_string()).await;
            // A hit takes a turn too: reading and hashing 64 MiB is work a namespace must not
            // multiply.
            stage = Stage::Cache;
            if let Some(component) = self.cached(reference, digest).await {
                tracing::info!(%reference, "the component is in the disk cache: no pull");
                return Ok(component);
            }
            self.fetch(reference, auth, &mut stage).await
        })
        .await;
        pulled.unwrap_or_else(|_| Err(OciError::Timeout(reference.to_string(), self.timeout, stage.waiting(namespace))))
    }

    async fn fetch(&self, reference: &PluginRef, auth: &RegistryAuth, stage: &mut Stage) -> Result<Vec<u8>, OciError> {
        *stage = Stage::Registry;
        let client = self.policy.client(self.timeout);
        let image = &reference.reference;
        // oci-client checks the manifest's bytes against the reference's digest.
        let (manifest, _) = client
            .pull_manifest_raw(image, auth, &[MANIFEST_MEDIA_TYPE])
            .await
            .map_err(|e| registry_error(reference, e))?;
        let layer = component_layer(reference, &manifest)?;
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > MAX_COMPONENT {
            return Err(OciError::TooLarge(reference.to_string(), size));
        }
        *stage = Stage::Memory;
        let mib = u32::try_from(size.div_ceil(1 << 20).max(1)).expect("at most MAX_COMPONENT");
        let _memory = self.memory.acquire_many(mib).await.expect("never closed");
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
        let (manifest, digest) = (manifest.to_vec(), reference.digest().unwrap_or_default().to_owned());
        let (cache, layer_digest) = (self.cache.clone(), layer.digest.clone());
        // Hashing and writing 64 MiB is blocking work: off the runtime's threads.
        let (component, matches) = tokio::task::spawn_blocking(move || {
            let matches = sha256(&component) == layer_digest;
            if matches {
                if let Some(dir) = entry(cache.as_deref(), &digest) {
                    store(&dir, &manifest, &component);
                }
            }
            (component, matches)
        })
        .await
        .expect("hashing does not panic");
        if !matches {
            return Err(registry_error(
                reference,
                format!("the layer's bytes do not match its digest {}", layer.digest),
            ));
        }
        Ok(component)
    }

    /// A component pulled before, if the cache holds it intact; read off the runtime's threads.
    async fn cached(&self, reference: &PluginRef, digest: &str) -> Option<Vec<u8>> {
        let dir = entry(self.cache.as_deref(), digest)?;
        let reference = reference.clone();
        let digest = digest.to_owned();
        tokio::task::spawn_blocking(move || cached(&dir, &reference, &digest)).await.ok().flatten()
    }
}

/// Permits per key, for keys a caller chooses (namespaces, references); a key is forgotten once
/// nobody holds or waits for its permits, so the map stays as small as the pulls under way.
#[derive(Debug)]
struct Turns {
    per_key: usize,
    keys: std::sync::Mutex<std::collections::HashMap<String, Arc<Semaphore>>>,
}

/// A permit of [`Turns`], or the wait for one.
struct Turn<'a> {
    turns: &'a Turns,
    key: String,
    semaphore: Arc<Semaphore>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Turns {
    fn new(per_key: usize) -> Self {
        Turns { per_key, keys: std::sync::Mutex::default() }
    }

    async fn take(&self, key: &str) -> Turn<'_> {
        let semaphore = {
            let mut keys = self.keys.lock().expect("not poisoned");
            keys.entry(key.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.per_key))).clone()
        };
        // The guard exists before the wait, so a wait that is given up still forgets the key.
        let mut turn = Turn { turns: self, key: key.to_owned(), semaphore, permit: None };
        turn.permit = Some(turn.semaphore.clone().acquire_owned().await.expect("never closed"));
        turn
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.lock().expect("not poisoned").len()
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.permit = None;
        let mut keys = self.turns.keys.lock().expect("not poisoned");
        // The map's and this guard's: nobody else holds or waits.
        if Arc::strong_count(&self.semaphore) == 2 {
            keys.remove(&self.key);
        }
    }
}

fn entry(cache: Option<&std::path::Path>, digest: &str) -> Option<PathBuf> {
    let hex = digest.strip_prefix("sha256:")?;
    Some(cache?.join(hex))
}

/// The component cached in `dir`, if intact: the manifest must still hash to its digest and
/// name the component's digest. A hit marks the entry used.
fn cached(dir: &std::path::Path, reference: &PluginRef, digest: &str) -> Option<Vec<u8>> {
    let manifest = read_bounded(&dir.join("manifest.json"), 64 << 10)?;
    if sha256(&manifest) != digest {
        return None;
    }
    // The layer the pull took, not merely the first.
    let layer = component_layer(reference, &manifest).ok()?;
    let component = read_bounded(&dir.join("component.wasm"), MAX_COMPONENT)?;
    let intact = sha256(&component) == layer.digest;
    if intact {
        wasmloop_sandbox::disk_budget::touch(&dir.join("manifest.json"));
    }
    intact.then_some(component)
}

/// Best effort: a cache that cannot be written costs a pull next time, nothing else. The
/// manifest goes last, so a half-written entry is never read back as whole.
fn store(dir: &std::path::Path, manifest: &[u8], component: &[u8]) {
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(dir.join("component.wasm"), component))
        .and_then(|()| std::fs::write(dir.join("manifest.json"), manifest));
    if let Err(error) = written {
        tracing::warn!(dir = %dir.display(), %error, "cannot cache a pulled plugin; it will be pulled again");
        let _ = std::fs::remove_dir_all(dir);
    }
    if let Some(root) = dir.parent() {
        // Each version ever pulled would fill the pod's emptyDir in the end; the least
        // recently used go first (a reload of one of them pulls again).
        wasmloop_sandbox::disk_budget::prune(root, CACHE_BUDGET, std::path::Path::is_dir, Some("manifest.json"));
    }
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
    let manifest: OciImageManifest =
        serde_json::from_slice(manifest).map_err(|e| not_wasm(format!("its manifest does not parse ({e})")))?;
    let layers: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == LAYER_MEDIA_TYPE || l.media_type == LEGACY_LAYER_MEDIA_TYPE)
        .collect();
    match layers.as_slice() {
        [layer] if is_sha256(&layer.digest) => Ok((*layer).clone()),
        [_] => Err(not_wasm("its layer's digest is not sha256".to_owned())),
        [] => {
            let found: Vec<&str> = manifest.layers.iter().map(|l| l.media_type.as_str()).collect();
            Err(not_wasm(format!("no {LAYER_MEDIA_TYPE} layer (layers: {})", found.join(", "))))
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
    #[derive(serde::Deserialize)]
    struct Entry {
        auth: Option<String>,
        username: Option<String>,
        password: Option<String>,
    }
    let fail = |why: String| OciError::Credentials(format!("pull secret {secret}: {why}"));
    let value: serde_json::Value =
        serde_json::from_slice(document).map_err(|e| fail(format!("not a docker config JSON ({e})")))?;
    let auths = value.get("auths").unwrap_or(&value);
    let entries: std::collections::BTreeMap<String, Entry> = serde_json::from_value(auths.clone())
        .map_err(|e| fail(format!("its auths are not a map of registry credentials ({e})")))?;
    let host = |key: &str| {
        let key = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
        key.split('/').next().unwrap_or_default().to_owned()
    };
    let entry =
        entries.iter().find(|(key, _)| host(key) == registry).map(|(_, e)| e).ok_or_else(|| {
            fail(format!("it holds no credentials for registry {registry}; add an auths entry for it"))
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
    fn an_overlong_reference_is_refused_before_it_is_parsed() {
        let text = format!("oci://ghcr.io/{}", "a".repeat(600));
        assert!(PluginRef::parse(&text).unwrap_err().to_string().contains("longer than 512 bytes"));
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
        assert!(error.ends_with("… (cut)"), "{error}");
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
        assert_eq!(cached(&at, &reference, &digest), Some(component));
        std::fs::write(at.join("component.wasm"), b"tampered").unwrap();
        assert_eq!(
            cached(&at, &reference, &digest),
            None,
            "a component that no longer matches its manifest is pulled again"
        );
        assert_eq!(cached(&at, &reference, DIGEST), None);
    }

    #[tokio::test]
    async fn turns_are_per_key_and_forgotten_when_nobody_waits() {
        let turns = Turns::new(1);
        let a = turns.take("tenant-a").await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), turns.take("tenant-a")).await;
        assert!(waiting.is_err(), "a key's one turn is taken");
        let b = turns.take("tenant-b").await;
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
            futures::future::join_all((0..PULLS_PER_NAMESPACE).map(|_| puller.turns.take("tenant"))).await;
        let reference = PluginRef::parse(&format!("oci://registry.example.com/p@{DIGEST}")).unwrap();
        let error = puller.pull("tenant", &reference, &RegistryAuth::Anonymous).await.unwrap_err();
        assert!(matches!(error, OciError::Timeout(..)), "{error}");
        assert!(error.to_string().contains("pulls namespace tenant may run at once"), "{error}");
    }

    /// A registry that lies, as a hostile one would: a real registry cannot be made to serve a
    /// manifest other than the one its digest names, or a layer other than its manifest's, so
    /// this one (axum, on loopback) serves what `manifest` and `blob` say to every pull, and
    /// counts the requests for blobs.
    async fn lying_registry(manifest: Vec<u8>, blob: Vec<u8>) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use axum::http::{StatusCode, Uri, header};
        let blobs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = blobs.clone();
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let (manifest, blob, counted) = (manifest.clone(), blob.clone(), counted.clone());
            async move {
                let path = uri.path();
                if path.contains("/manifests/") {
                    (StatusCode::OK, [(header::CONTENT_TYPE, MANIFEST_MEDIA_TYPE)], manifest)
                } else if path.contains("/blobs/") {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    (StatusCode::OK, [(header::CONTENT_TYPE, "application/octet-stream")], blob)
                } else {
                    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], b"{}".to_vec())
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (address, blobs)
    }

    fn image_manifest(layer: &[u8], declared_size: u64) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": DIGEST, "size": 2},
            "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": sha256(layer), "size": declared_size}]}))
        .unwrap()
    }

    async fn pull_from(address: &str, digest: &str, timeout: Duration) -> Result<Vec<u8>, OciError> {
        let policy = RegistryPolicy { plain_http: vec![address.to_owned()], ..RegistryPolicy::default() };
        let puller = Puller::new(policy, timeout, None);
        let reference = PluginRef::parse(&format!("oci://{address}/plugins/p@{digest}")).unwrap();
        puller.pull("tenant", &reference, &RegistryAuth::Anonymous).await
    }

    #[tokio::test]
    async fn a_manifest_other_than_the_one_pinned_is_refused() {
        let layer = b"\0asm".to_vec();
        let pinned = image_manifest(&layer, 4);
        let served = image_manifest(b"\0asm other", 10);
        let (address, blobs) = lying_registry(served, layer).await;
        let error = pull_from(&address, &sha256(&pinned), Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(error, OciError::Registry { .. }), "{error}");
        assert!(error.to_string().to_lowercase().contains("digest"), "{error}");
        assert_eq!(blobs.load(std::sync::atomic::Ordering::SeqCst), 0, "no layer is fetched for a false manifest");
    }

    #[tokio::test]
    async fn a_layer_declared_over_the_limit_is_refused_before_it_is_fetched() {
        let layer = b"\0asm".to_vec();
        let manifest = image_manifest(&layer, MAX_COMPONENT + 1);
        let (address, blobs) = lying_registry(manifest.clone(), layer).await;
        let error = pull_from(&address, &sha256(&manifest), Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(error, OciError::TooLarge(_, size) if size == MAX_COMPONENT + 1), "{error}");
        assert_eq!(blobs.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_layer_other_than_its_manifest_names_is_refused() {
        let layer = b"\0asm real".to_vec();
        let manifest = image_manifest(&layer, 9);
        let (address, _) = lying_registry(manifest.clone(), b"\0asm fake".to_vec()).await;
        let error = pull_from(&address, &sha256(&manifest), Duration::from_secs(30)).await.unwrap_err();
        assert!(matches!(error, OciError::Registry { .. }), "{error}");
        assert!(error.to_string().to_lowercase().contains("digest"), "{error}");
    }

    #[tokio::test]
    async fn a_layer_longer_than_its_manifest_says_is_refused() {
        let layer = b"\0asm real".to_vec();
        let manifest = image_manifest(&layer, 4);
        let (address, _) = lying_registry(manifest.clone(), layer).await;
        let error = pull_from(&address, &sha256(&manifest), Duration::from_secs(30)).await.unwrap_err();
        assert!(error.to_string().contains("longer than the 4 bytes its manifest says"), "{error}");
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
