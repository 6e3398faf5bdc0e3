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
//! the layer no larger than [`MAX_COMPONENT`], the whole pull no longer than the timeout, and
//! no more than [`PARALLEL_PULLS`] at once.
//! Pulled components are cached on disk by manifest digest and checked again when read back.

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
    #[error("registry {0} is not one this host pulls from (run --allowed-registry); push the plugin to one of: {1}")]
    Disallowed(String, String),
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
    #[error("pulling {0} took longer than {1:?}; check the registry, or raise --pull-timeout-seconds")]
    Timeout(String, Duration),
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
    /// When not empty, the only registries plugins may come from.
    pub allowed: Vec<String>,
}

impl RegistryPolicy {
    fn client(&self, timeout: Duration) -> Client {
        Client::new(ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.plain_http.clone()),
            connect_timeout: Some(timeout),
            read_timeout: Some(timeout),
            ..ClientConfig::default()
        })
    }

    fn check(&self, reference: &PluginRef) -> Result<(), OciError> {
        if self.allowed.is_empty() || self.allowed.iter().any(|r| r == reference.registry()) {
            Ok(())
        } else {
            Err(OciError::Disallowed(reference.registry().to_owned(), self.allowed.join(", ")))
        }
    }
}

fn registry_error(reference: &PluginRef, error: impl std::fmt::Display) -> OciError {
    OciError::Registry { registry: reference.registry().to_owned(), message: error.to_string() }
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

/// How many pulls may run at once; more wait their turn. Each holds up to
/// [`MAX_COMPONENT`] in memory, and a namespace may name many references at start.
pub const PARALLEL_PULLS: usize = 4;

/// Pulls plugin components, bounded in size, time and number at once, cached by manifest
/// digest.
#[derive(Debug, Clone)]
pub struct Puller {
    policy: RegistryPolicy,
    timeout: Duration,
    cache: Option<PathBuf>,
    turns: Arc<Semaphore>,
}

impl Puller {
    /// A puller following `policy`, giving up on a pull after `timeout`, caching pulled
    /// components under `cache` (none: no disk cache).
    pub fn new(policy: RegistryPolicy, timeout: Duration, cache: Option<PathBuf>) -> Self {
        Puller { policy, timeout, cache, turns: Arc::new(Semaphore::new(PARALLEL_PULLS)) }
    }

    /// How long a pull may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The component `reference` (pinned) names.
    ///
    /// # Errors
    /// When the reference is not pinned or not allowed, the registry fails, the artifact is
    /// not a component, is too large, or the pull runs out of time.
    pub async fn pull(&self, reference: &PluginRef, auth: &RegistryAuth) -> Result<Vec<u8>, OciError> {
        let digest = reference.digest().ok_or_else(|| OciError::NotPinned(reference.to_string()))?;
        self.policy.check(reference)?;
        if let Some(component) = self.cached(reference, digest) {
            return Ok(component);
        }
        // The wait for a turn is not the registry's time: each turn ends within the timeout.
        let _turn = self.turns.acquire().await.expect("never closed");
        if let Some(component) = self.cached(reference, digest) {
            // Pulled by another ConfigMap while this one waited.
            return Ok(component);
        }
        let pulled = tokio::time::timeout(self.timeout, self.fetch(reference, auth))
            .await
            .map_err(|_| OciError::Timeout(reference.to_string(), self.timeout))??;
        self.store(digest, &pulled);
        Ok(pulled.1)
    }

    async fn fetch(&self, reference: &PluginRef, auth: &RegistryAuth) -> Result<(Vec<u8>, Vec<u8>), OciError> {
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
        if sha256(&component) != layer.digest {
            return Err(registry_error(
                reference,
                format!("the layer's bytes do not match its digest {}", layer.digest),
            ));
        }
        Ok((manifest.to_vec(), component))
    }

    fn entry(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        Some(self.cache.as_ref()?.join(hex))
    }

    /// A component pulled before, if the cache holds it intact: the manifest must still hash
    /// to its digest and name the component's digest.
    fn cached(&self, reference: &PluginRef, digest: &str) -> Option<Vec<u8>> {
        let dir = self.entry(digest)?;
        let manifest = read_bounded(&dir.join("manifest.json"), 64 << 10)?;
        if sha256(&manifest) != digest {
            return None;
        }
        // The layer the pull took, not merely the first.
        let layer = component_layer(reference, &manifest).ok()?;
        let component = read_bounded(&dir.join("component.wasm"), MAX_COMPONENT)?;
        (sha256(&component) == layer.digest).then_some(component)
    }

    /// Best effort: a cache that cannot be written costs a pull next time, nothing else. The
    /// manifest goes last, so a half-written entry is never read back as whole.
    fn store(&self, digest: &str, (manifest, component): &(Vec<u8>, Vec<u8>)) {
        let Some(dir) = self.entry(digest) else { return };
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("component.wasm"), component))
            .and_then(|()| std::fs::write(dir.join("manifest.json"), manifest));
        if let Err(error) = written {
            tracing::warn!(dir = %dir.display(), %error, "cannot cache a pulled plugin; it will be pulled again");
        }
        if let Some(root) = dir.parent() {
            prune(root, MAX_CACHED);
        }
    }
}

/// Pulled components kept on disk: each version ever pulled would fill a pod's emptyDir in the
/// end; the least recently pulled go first (a reload of one of them pulls again).
const MAX_CACHED: usize = 16;

fn prune(root: &std::path::Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    let mut pulled: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if pulled.len() <= keep {
        return;
    }
    pulled.sort();
    for (_, path) in &pulled[..pulled.len() - keep] {
        let _ = std::fs::remove_dir_all(path);
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
        let policy = RegistryPolicy { allowed: vec!["ghcr.io".into()], ..RegistryPolicy::default() };
        let other = PluginRef::parse("oci://evil.example.com/foo:1").unwrap();
        assert!(policy.check(&other).unwrap_err().to_string().contains("push the plugin to one of: ghcr.io"));
        assert!(policy.check(&PluginRef::parse("oci://ghcr.io/foo:1").unwrap()).is_ok());
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
        let puller = Puller::new(RegistryPolicy::default(), Duration::from_secs(1), Some(dir.path().to_owned()));
        let component = b"\0asm component".to_vec();
        let manifest = serde_json::to_vec(&serde_json::json!({"schemaVersion": 2,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": DIGEST, "size": 1},
            "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": sha256(&component), "size": component.len()}]}))
        .unwrap();
        let digest = sha256(&manifest);
        let reference = PluginRef::parse(&format!("oci://registry.example.com/team/p@{digest}")).unwrap();
        puller.store(&digest, &(manifest, component.clone()));
        assert_eq!(puller.cached(&reference, &digest), Some(component));
        let entry = puller.entry(&digest).unwrap();
        std::fs::write(entry.join("component.wasm"), b"tampered").unwrap();
        assert_eq!(
            puller.cached(&reference, &digest),
            None,
            "a component that no longer matches its manifest is pulled again"
        );
        assert_eq!(puller.cached(&reference, DIGEST), None);
    }

    #[test]
    fn the_disk_cache_keeps_the_latest_pulls() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::create_dir(dir.path().join(format!("{i}"))).unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        prune(dir.path(), 3);
        let mut left: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["2", "3", "4"]);
    }
}
