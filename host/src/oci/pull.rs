//! Pulling a plugin artifact a ConfigMap names: bounded in size, time and number at once, its
//! manifest read here (at most [`MAX_MANIFEST`] bytes) and its layer checked against it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, RegistryOperation};
use tokio::sync::Semaphore;

use super::admission::{LOAD_MEMORY_MIB, Memory, NAMESPACE_LOAD_MEMORY_MIB, PULLS_PER_NAMESPACE, Turns, mib};
use super::cache::{COMPONENT_FILE, cached, entry, store};
use super::{LAYER_MEDIA_TYPE, LEGACY_LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, MAX_MANIFEST, MAX_REGISTRY_MESSAGE};
use super::{OciError, PluginRef, RegistryPolicy, cut, is_sha256, registry_error, sha256};
use crate::input::MAX_COMPONENT;

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
    /// MiB of components in memory, [`LOAD_MEMORY_MIB`] in all.
    memory: Arc<Semaphore>,
    /// MiB of components in memory per plugin namespace, [`NAMESPACE_LOAD_MEMORY_MIB`] each.
    namespace_memory: Arc<Turns>,
    /// Reads manifests, bounded (oci-client reads the blobs).
    http: reqwest::Client,
}

/// A pulled component. It holds its share of the loads' memory ([`LOAD_MEMORY_MIB`]) until it
/// is dropped, so a caller keeps it, or its [`Memory`], until the component is compiled.
#[derive(Debug)]
pub struct Component {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    _memory: Memory,
}

impl Component {
    /// The bytes, and the share of memory that goes with them.
    pub fn into_parts(self) -> (Vec<u8>, Memory) {
        (self.bytes, self._memory)
    }
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
                "it waited for memory: the loads of namespace {namespace} hold {NAMESPACE_LOAD_MEMORY_MIB} MiB at most, together; other loads of this namespace are slow"
            ),
            Stage::Memory => format!(
                "it waited for memory: components not compiled yet hold {LOAD_MEMORY_MIB} MiB at most, together"
            ),
            Stage::Registry => "check the registry, or raise --pull-timeout-seconds".to_owned(),
            Stage::Verify => {
                "it was checking the layer's digest and writing the disk cache; raise --pull-timeout-seconds".to_owned()
            }
        }
    }
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
            memory: Arc::new(Semaphore::new(LOAD_MEMORY_MIB as usize)),
            namespace_memory: Arc::new(Turns::new(NAMESPACE_LOAD_MEMORY_MIB as usize)),
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

    /// Memory for `bytes` of a component of `namespace` being loaded from elsewhere (a plugin
    /// ConfigMap's, before its gzip is expanded): the same shares a pull takes, held until
    /// dropped.
    pub async fn load_memory(&self, namespace: &str, bytes: u64) -> Memory {
        self.memory(namespace, mib(bytes), &mut Stage::Memory).await
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

/// The one component layer of a plugin artifact's manifest.
pub(super) fn component_layer(reference: &PluginRef, manifest: &[u8]) -> Result<OciDescriptor, OciError> {
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

#[cfg(test)]
mod tests {
    use oci_client::Reference;

    use super::*;
    use crate::oci::CONFIG_MEDIA_TYPE;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

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
        let held = puller.memory("tenant-a", NAMESPACE_LOAD_MEMORY_MIB, &mut stage).await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), puller.memory("tenant-a", 1, &mut stage)).await;
        assert!(waiting.is_err(), "tenant-a holds its whole share");
        assert!(matches!(stage, Stage::NamespaceMemory), "{stage:?}");
        assert_eq!(
            puller.memory.available_permits(),
            (LOAD_MEMORY_MIB - NAMESPACE_LOAD_MEMORY_MIB) as usize,
            "the waiting pull holds none of the host's memory"
        );
        let other = puller.memory("tenant-b", LOAD_MEMORY_MIB - NAMESPACE_LOAD_MEMORY_MIB, &mut stage).await;
        drop((held, other));
        assert_eq!(puller.memory.available_permits(), LOAD_MEMORY_MIB as usize, "both shares went back");
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

    /// Why a pull fails of a 9-byte layer the registry then serves as `served`.
    async fn pull_tampered(served: &[u8]) -> OciError {
        let registry = private_registry().await;
        let layer = b"\0asm real".to_vec();
        let digest = publish(&registry, "1", &layer, &image_manifest(&layer, 9, "")).await;
        tamper(&registry, &sha256(&layer), served);
        pull_from(&registry.address, &digest, Duration::from_secs(30)).await.unwrap_err()
    }

    #[tokio::test]
    async fn a_layer_other_than_its_manifest_names_is_refused() {
        let error = pull_tampered(b"\0asm fake").await;
        assert!(matches!(error, OciError::Registry { .. }), "{error}");
        assert!(error.to_string().to_lowercase().contains("digest"), "{error}");
    }

    #[tokio::test]
    async fn a_layer_longer_than_its_manifest_says_is_refused() {
        let error = pull_tampered(b"\0asm real, and then a great deal more").await;
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
