//! The ConfigMap format that ships a plugin into a cluster, both ways: `wasmloop bundle`
//! writes it, the ConfigMap source reads it.
//!
//! A plugin ConfigMap is labelled `wasmloop.dev/plugin=<name>` and holds the component in
//! `binaryData["plugin.wasm"]`, or gzip-compressed in `binaryData["plugin.wasm.gz"]`, or names
//! it in a registry: `data["plugin.ref"]` (`oci://REGISTRY/REPO@sha256:...`, see [`crate::oci`],
//! with credentials from the Secret the `wasmloop.dev/pull-secret` annotation names), and
//! optionally the plugin's configuration in `data["config.yaml"]` (or `config.json`). It may
//! pin the component's digest (the `wasmloop.dev/digest` annotation, which `bundle` writes)
//! and carry its minisign signature (`data["plugin.wasm.minisig"]`); [`crate::pinning`]
//! checks both.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use bytes::Bytes;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use wasmloop_contract::names::Name;
use wasmloop_contract::validate::quoted;

use crate::oci::{OciError, PluginRef};
use crate::pinning::{DIGEST_ANNOTATION, SIGNATURE_KEY, pin_of};

/// The label naming the plugin a ConfigMap ships.
pub const PLUGIN_LABEL: &str = "wasmloop.dev/plugin";
/// The annotation that makes a plugin ConfigMap a shadow of its plugin: `shadow`.
pub const TRACK_ANNOTATION: &str = "wasmloop.dev/track";
/// The suffix `bundle --shadow` gives the ConfigMap's name.
pub const SHADOW_SUFFIX: &str = "-shadow";
/// The annotation the host writes the load state to.
pub const STATUS_ANNOTATION: &str = "wasmloop.dev/status";
/// The key of an uncompressed component.
pub const WASM_KEY: &str = "plugin.wasm";
/// The key of a gzip-compressed component.
pub const WASM_GZ_KEY: &str = "plugin.wasm.gz";
/// The key of a component's OCI reference.
pub const REF_KEY: &str = "plugin.ref";
/// The annotation naming the Secret (`kubernetes.io/dockerconfigjson`, in the ConfigMap's
/// namespace) that holds credentials for the reference's registry.
pub const PULL_SECRET_ANNOTATION: &str = "wasmloop.dev/pull-secret";
/// The size limit of a ConfigMap's data, as the API server enforces it.
pub const CONFIGMAP_LIMIT: usize = 1024 * 1024;
/// Room left under the limit for metadata, the configuration and the status annotation.
const HEADROOM: usize = 16 * 1024;
/// A decompressed component larger than this is refused: a gzip bomb, not a plugin.
pub use crate::input::MAX_COMPONENT;

/// What a plugin ConfigMap holds.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginPayload {
    /// The plugin name from the label.
    pub name: String,
    /// The component, as stored: nothing until pulled when the ConfigMap names it by
    /// `reference`.
    pub component: Stored,
    /// Where to pull the component from, pinned by digest.
    pub reference: Option<PluginRef>,
    /// The Secret holding the registry's credentials.
    pub pull_secret: Option<Name>,
    /// The configuration as JSON text, if the ConfigMap has one.
    pub config: Option<String>,
    /// The digest the ConfigMap pins the component to (the annotation's text).
    pub pin: Option<String>,
    /// The component's minisign signature (the `.minisig` text).
    pub signature: Option<String>,
    /// Whether it serves or shadows.
    pub track: Track,
}

impl PluginPayload {
    /// Plugin `name`, serving, with no component yet and nothing else said.
    pub fn named(name: String) -> PluginPayload {
        PluginPayload {
            name,
            component: Stored::Nothing,
            reference: None,
            pull_secret: None,
            config: None,
            pin: None,
            signature: None,
            track: Track::Serving,
        }
    }
}

/// A component as a ConfigMap stores it, nothing expanded yet. Its digest names what is stored,
/// so an update that changes nothing of it (an annotation, the host's own status write) is
/// known for the same by hashing at most a ConfigMap's bytes; a gzip stream that expands to
/// 64 MiB is expanded only for content that is new ([`Stored::unpack`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Stored {
    /// No bytes: named by reference, not pulled yet.
    #[default]
    Nothing,
    /// The component itself (`binaryData["plugin.wasm"]`, pulled, or expanded).
    Plain(Bytes),
    /// `binaryData["plugin.wasm.gz"]`, still compressed.
    Gzip(Bytes),
}

impl Stored {
    /// What names the stored bytes: their SHA-256, with how they are stored.
    pub fn digest(&self) -> String {
        match self {
            Stored::Nothing => String::new(),
            Stored::Plain(bytes) => format!("plain:{}", wasmloop_sandbox::digest(bytes)),
            Stored::Gzip(bytes) => format!("gzip:{}", wasmloop_sandbox::digest(bytes)),
        }
    }

    /// The most bytes the component expands to: what holding it will take. A gzip stream says
    /// how long it expands to in its last four bytes, which [`Stored::unpack`] holds it to.
    pub fn expanded_size(&self) -> u64 {
        match self {
            Stored::Nothing => 0,
            Stored::Plain(bytes) => bytes.len() as u64,
            Stored::Gzip(bytes) => gzip_size(bytes).min(MAX_COMPONENT),
        }
    }

    /// Whether it holds no component.
    pub fn is_empty(&self) -> bool {
        match self {
            Stored::Nothing => true,
            Stored::Plain(bytes) | Stored::Gzip(bytes) => bytes.is_empty(),
        }
    }

    /// The component, expanded: blocking work for a gzip stream, to run off the async runtime's
    /// threads. `at` names the ConfigMap in errors.
    ///
    /// # Errors
    /// When the gzip stream is broken, expands past [`MAX_COMPONENT`], or past what it says it
    /// expands to.
    pub fn unpack(self, at: &str) -> Result<Bytes, PayloadError> {
        match self {
            Stored::Nothing => Ok(Bytes::new()),
            Stored::Plain(bytes) => Ok(bytes),
            Stored::Gzip(packed) => {
                let said = gzip_size(&packed).min(MAX_COMPONENT);
                let mut out = Vec::with_capacity(usize::try_from(said).unwrap_or(0));
                flate2::read::GzDecoder::new(&packed[..])
                    .take(said + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| PayloadError::BadGzip(at.to_owned(), e))?;
                match out.len() as u64 {
                    n if n > said && said >= MAX_COMPONENT => Err(PayloadError::TooLarge(at.to_owned())),
                    n if n > said => Err(PayloadError::Misstated(at.to_owned(), said)),
                    _ => Ok(out.into()),
                }
            }
        }
    }
}

/// The size a gzip stream says it expands to (its ISIZE, the length modulo 2^32): a stream of
/// more than 4 GiB, which says less, is refused for expanding past what it said.
fn gzip_size(packed: &[u8]) -> u64 {
    match packed.len().checked_sub(4).map(|at| &packed[at..]) {
        Some(&[a, b, c, d]) => u64::from(u32::from_le_bytes([a, b, c, d])),
        _ => 0,
    }
}

/// Whether a plugin ConfigMap serves its plugin or shadows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Track {
    /// Its actions are carried out (no `wasmloop.dev/track` annotation).
    #[default]
    Serving,
    /// Called beside the serving version and compared with it; writes nothing.
    Shadow,
    /// Loads nothing: the host marks a serving ConfigMap so when a promoted shadow replaces
    /// it, so that a restart does not bring the old version back.
    Superseded,
}

/// Why a ConfigMap does not ship a usable plugin.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// No component.
    #[error(
        "ConfigMap {0} has neither binaryData[\"plugin.wasm\"], binaryData[\"plugin.wasm.gz\"] nor data[\"plugin.ref\"]; create it with `wasmloop bundle PLUGIN.wasm --name NAME`"
    )]
    NoComponent(String),
    /// A broken gzip stream.
    #[error(
        "ConfigMap {0}: binaryData[\"plugin.wasm.gz\"] is not valid gzip ({1}); recreate it with `wasmloop bundle`"
    )]
    BadGzip(String, std::io::Error),
    /// A gzip bomb.
    #[error("ConfigMap {0}: binaryData[\"plugin.wasm.gz\"] expands beyond {limit} MiB; that is not a plugin", limit = MAX_COMPONENT >> 20)]
    TooLarge(String),
    /// A gzip stream longer than its trailer says: its memory was reserved by what it said.
    #[error(
        "ConfigMap {0}: binaryData[\"plugin.wasm.gz\"] expands beyond the {1} bytes its gzip trailer says; recreate it with `wasmloop bundle`"
    )]
    Misstated(String, u64),
    /// A configuration that does not parse.
    #[error("ConfigMap {0}: data[\"{1}\"] is not valid YAML/JSON ({2}); fix the plugin configuration")]
    BadConfig(String, &'static str, String),
    /// An unknown track.
    #[error(
        "ConfigMap {0}: the annotation {TRACK_ANNOTATION} is {1}; it is \"shadow\" for a candidate, or \"superseded\" (set by the host) for a ConfigMap a promoted shadow replaced; remove it to serve"
    )]
    BadTrack(String, String),
    /// A reference that is not a pinned plugin reference.
    #[error("ConfigMap {0}: data[\"plugin.ref\"]: {1}")]
    BadReference(String, OciError),
    /// Both bytes and a reference.
    #[error(
        "ConfigMap {0} holds both a component and data[\"plugin.ref\"]; keep one: the bytes, or the reference `wasmloop push` printed"
    )]
    TwoComponents(String),
    /// A pull secret name that is no Secret name.
    #[error(
        "ConfigMap {0}: the annotation {PULL_SECRET_ANNOTATION} is {1}, not a Secret name; name a Secret of this namespace"
    )]
    BadPullSecret(String, String),
    /// An empty plugin label.
    #[error("ConfigMap {0}: the label {PLUGIN_LABEL} is empty; set it to the plugin's name")]
    NoName(String),
    /// A plugin label that is no plugin name.
    #[error("ConfigMap {0}: the label {PLUGIN_LABEL}: {1}; set it to the name in the component's manifest")]
    BadName(String, String),
}

fn display(cm: &ConfigMap) -> String {
    // As the API server names objects (at most 253 bytes), whatever the ConfigMap says.
    let part = |text: Option<&str>| wasmloop_contract::validate::cut(text.unwrap_or_default().to_owned(), 253);
    format!("{}/{}", part(cm.metadata.namespace.as_deref()), part(cm.metadata.name.as_deref()))
}

/// Reads the plugin a ConfigMap ships.
///
/// # Errors
/// When the ConfigMap lacks a component, holds broken gzip, or a configuration that does not parse.
pub fn read(cm: &ConfigMap) -> Result<PluginPayload, PayloadError> {
    let at = display(cm);
    let name = cm.metadata.labels.as_ref().and_then(|l| l.get(PLUGIN_LABEL)).cloned().unwrap_or_default();
    if name.is_empty() {
        return Err(PayloadError::NoName(at));
    }
    // The label names the plugin in metrics, logs and the registry before the component's
    // manifest is read: it must be a plugin name, as the manifest's will be.
    if let Err(rule) = wasmloop_contract::validate::plugin_name(&name) {
        return Err(PayloadError::BadName(at, rule));
    }
    let (component, reference, pull_secret) = component_of(cm)?;
    let data = cm.data.as_ref();
    let config = match (data.and_then(|d| d.get("config.yaml")), data.and_then(|d| d.get("config.json"))) {
        (Some(text), _) => Some(("config.yaml", text)),
        (None, Some(text)) => Some(("config.json", text)),
        (None, None) => None,
    };
    let config = config
        .map(|(key, text)| {
            serde_saphyr::from_str_with_options::<serde_json::Value>(text, crate::input::yaml_options())
                .map(|v| v.to_string())
                .map_err(|e| {
                    PayloadError::BadConfig(
                        at.clone(),
                        key,
                        wasmloop_contract::validate::cut(crate::input::yaml_error(&e), 256),
                    )
                })
        })
        .transpose()?;
    let pin = cm.metadata.annotations.as_ref().and_then(|a| a.get(DIGEST_ANNOTATION)).cloned();
    let signature = data.and_then(|d| d.get(SIGNATURE_KEY)).cloned();
    let track = match cm.metadata.annotations.as_ref().and_then(|a| a.get(TRACK_ANNOTATION)).map(String::as_str) {
        None => Track::Serving,
        Some("shadow") => Track::Shadow,
        Some("superseded") => Track::Superseded,
        Some(other) => return Err(PayloadError::BadTrack(at, quoted(other))),
    };
    Ok(PluginPayload { name, component, reference, pull_secret, config, pin, signature, track })
}

/// The component a ConfigMap holds (empty when it names a reference instead), the reference,
/// and the pull Secret its annotation names: what a plugin ConfigMap and the ConfigMap a
/// `WasmPlugin`'s `configMapRef` names both hold.
///
/// # Errors
/// When it holds no component, two, broken gzip, or a bad reference or pull Secret name.
pub fn component_of(cm: &ConfigMap) -> Result<(Stored, Option<PluginRef>, Option<Name>), PayloadError> {
    let binary = cm.binary_data.as_ref();
    let data = cm.data.as_ref();
    let at = display(cm);
    let reference = data
        .and_then(|d| d.get(REF_KEY))
        .map(|text| PluginRef::parse(text.trim()).and_then(PluginRef::pinned))
        .transpose()
        .map_err(|e| PayloadError::BadReference(at.clone(), e))?;
    if reference.is_some() && binary.is_some_and(|b| b.contains_key(WASM_KEY) || b.contains_key(WASM_GZ_KEY)) {
        return Err(PayloadError::TwoComponents(at));
    }
    let pull_secret = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PULL_SECRET_ANNOTATION))
        .map(|named| Name::parse(named).map_err(|_| PayloadError::BadPullSecret(at.clone(), quoted(named))))
        .transpose()?;
    let component = if reference.is_some() {
        Stored::Nothing
    } else if let Some(plain) = binary.and_then(|b| b.get(WASM_KEY)) {
        Stored::Plain(Bytes::copy_from_slice(&plain.0))
    } else if let Some(packed) = binary.and_then(|b| b.get(WASM_GZ_KEY)) {
        Stored::Gzip(Bytes::copy_from_slice(&packed.0))
    } else {
        return Err(PayloadError::NoComponent(at));
    };
    if component.is_empty() && reference.is_none() {
        return Err(PayloadError::NoComponent(at));
    }
    Ok((component, reference, pull_secret))
}

/// Why [`build`] cannot ship a component in a ConfigMap.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Even compressed, the component leaves no room under the API server's limit.
    #[error(
        "plugin {name} is {} KiB, {} KiB gzip-compressed, and a ConfigMap holds at most {} KiB (with room for metadata and config); push it to a registry instead (`wasmloop push PLUGIN.wasm oci://REGISTRY/REPO:TAG`, then `wasmloop bundle PLUGIN.wasm --name {name} --ref` with the reference push printed), or shrink the component (opt-level = \"s\", lto = true, strip = true, fewer dependencies)",
        .size / 1024,
        .compressed / 1024,
        .budget / 1024
    )]
    TooLarge {
        /// The plugin.
        name: String,
        /// The component's size, in bytes.
        size: usize,
        /// Its size gzip-compressed, in bytes.
        compressed: usize,
        /// The most a ConfigMap has room for, in bytes.
        budget: usize,
    },
    /// Compressing failed.
    #[error(transparent)]
    Compress(#[from] std::io::Error),
}

/// Where a registry holds the component: its pinned reference and the pull Secret's name.
#[derive(Debug, Clone, Copy)]
pub struct Pushed<'a> {
    /// The reference `wasmloop push` printed.
    pub reference: &'a PluginRef,
    /// The Secret with the registry's credentials, when it needs any.
    pub pull_secret: Option<&'a str>,
}

/// Builds the ConfigMap shipping `component` as plugin `name`, pinned to its digest, with its
/// configuration and signature when given: plain when it fits, gzip-compressed when only
/// that makes it fit, or by reference when it was `pushed` to a registry. A shadow is named
/// `<name>-shadow` and annotated as one.
///
/// # Errors
/// [`BuildError::TooLarge`] when even the compressed component exceeds the ConfigMap size
/// limit.
pub fn build(
    name: &str,
    namespace: &str,
    component: &[u8],
    config: Option<&str>,
    signature: Option<&str>,
    track: Track,
    pushed: Option<Pushed<'_>>,
) -> Result<ConfigMap, BuildError> {
    let text = config.map_or(0, str::len) + signature.map_or(0, str::len);
    let budget = (CONFIGMAP_LIMIT - HEADROOM).saturating_sub(text);
    let shipped = if pushed.is_some() {
        None
    } else if component.len() <= budget {
        Some((WASM_KEY, component.to_vec()))
    } else {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(component)?;
        let packed = encoder.finish()?;
        if packed.len() > budget {
            return Err(BuildError::TooLarge {
                name: name.to_owned(),
                size: component.len(),
                compressed: packed.len(),
                budget,
            });
        }
        Some((WASM_GZ_KEY, packed))
    };
    let mut data = BTreeMap::new();
    if let Some(config) = config {
        data.insert("config.yaml".to_owned(), config.to_owned());
    }
    if let Some(signature) = signature {
        data.insert(SIGNATURE_KEY.to_owned(), signature.to_owned());
    }
    if let Some(pushed) = pushed {
        data.insert(REF_KEY.to_owned(), pushed.reference.to_string());
    }
    let mut annotations = BTreeMap::from([(DIGEST_ANNOTATION.to_owned(), pin_of(component))]);
    if let Some(secret) = pushed.and_then(|p| p.pull_secret) {
        annotations.insert(PULL_SECRET_ANNOTATION.to_owned(), secret.to_owned());
    }
    let configmap = match track {
        Track::Serving | Track::Superseded => name.to_owned(),
        Track::Shadow => {
            annotations.insert(TRACK_ANNOTATION.to_owned(), "shadow".to_owned());
            format!("{name}{SHADOW_SUFFIX}")
        }
    };
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(configmap),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(PLUGIN_LABEL.to_owned(), name.to_owned())])),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        binary_data: shipped.map(|(key, payload)| BTreeMap::from([(key.to_owned(), ByteString(payload))])),
        data: Some(data).filter(|d| !d.is_empty()),
        ..ConfigMap::default()
    })
}

/// What a plugin ConfigMap offers, in one number: its UID, labels, annotations, `data` and
/// `binaryData`, leaving out the status annotation the host writes itself. Equal fingerprints
/// are equal offers, so the echo of the host's own status write (and a relist) is told apart
/// without reading the component again. The hash is keyed by `keys` (random per process): a
/// tenant cannot make an edit collide with what was handled.
///
/// ```
/// use std::hash::RandomState;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use wasmloop::plugin_configmap::{STATUS_ANNOTATION, fingerprint};
/// let keys = RandomState::new();
/// let mut cm = ConfigMap::default();
/// let before = fingerprint(&cm, &keys);
/// cm.metadata.annotations.get_or_insert_default().insert(STATUS_ANNOTATION.into(), "{}".into());
/// assert_eq!(fingerprint(&cm, &keys), before);
/// cm.data.get_or_insert_default().insert("config.yaml".into(), "a: 1".into());
/// assert_ne!(fingerprint(&cm, &keys), before);
/// ```
pub fn fingerprint(cm: &ConfigMap, keys: &std::hash::RandomState) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut hasher = keys.build_hasher();
    cm.metadata.uid.hash(&mut hasher);
    cm.metadata.labels.hash(&mut hasher);
    let annotations = cm.metadata.annotations.iter().flatten().filter(|(key, _)| *key != STATUS_ANNOTATION);
    for (key, value) in annotations {
        (key, value).hash(&mut hasher);
    }
    // A separator: annotations and data cannot trade entries and hash the same.
    0xffu8.hash(&mut hasher);
    cm.data.hash(&mut hasher);
    for (key, value) in cm.binary_data.iter().flatten() {
        (key, &value.0).hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuzz_seeds_are_plugin_configmaps() {
        for (seed, by_reference) in [("by-reference", true), ("inline-gz", false)] {
            let path = format!("{}/fuzz/corpus/plugin_configmap/{seed}", env!("CARGO_MANIFEST_DIR"));
            let cm: ConfigMap = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            let payload = read(&cm).unwrap();
            assert_eq!((payload.name.as_str(), payload.reference.is_some()), ("labeler", by_reference), "{seed}");
        }
    }

    #[test]
    fn a_plugin_label_that_is_no_plugin_name_is_refused_naming_the_rule() {
        let mut cm = build("p", "ns", b"\0asm", None, None, Track::Serving, None).unwrap();
        cm.metadata.labels.get_or_insert_default().insert(PLUGIN_LABEL.into(), "labEler".into());
        let refused = read(&cm).unwrap_err().to_string();
        assert!(refused.contains("name \"labEler\" must be 1-63 characters of a-z, 0-9 and '-'"), "{refused}");
    }

    #[test]
    fn a_bad_track_or_pull_secret_is_quoted_cut() {
        let mut cm = build("p", "ns", b"\0asm", None, None, Track::Serving, None).unwrap();
        let long = "\u{15}".repeat(4096);
        let annotations = cm.metadata.annotations.get_or_insert_default();
        annotations.insert(TRACK_ANNOTATION.into(), long.clone());
        assert!(read(&cm).unwrap_err().to_string().len() < 600);
        let annotations = cm.metadata.annotations.get_or_insert_default();
        annotations.remove(TRACK_ANNOTATION);
        annotations.insert(PULL_SECRET_ANNOTATION.into(), long);
        assert!(read(&cm).unwrap_err().to_string().len() < 600);
    }

    #[test]
    fn a_small_component_ships_uncompressed_and_reads_back() {
        let cm = build("p", "ns", b"\0asm-bytes", Some("level: 3\n"), Some("signed"), Track::Serving, None).unwrap();
        assert!(cm.binary_data.as_ref().unwrap().contains_key(WASM_KEY));
        let payload = read(&cm).unwrap();
        assert_eq!(
            payload,
            PluginPayload {
                name: "p".into(),
                component: Stored::Plain(Bytes::from_static(b"\0asm-bytes")),
                reference: None,
                pull_secret: None,
                config: Some(r#"{"level":3}"#.into()),
                pin: Some(pin_of(b"\0asm-bytes")),
                signature: Some("signed".into()),
                track: Track::Serving,
            }
        );
    }

    #[test]
    fn a_shadow_is_named_apart_annotated_and_reads_back_as_a_shadow() {
        let cm = build("p", "ns", b"x", None, None, Track::Shadow, None).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("p-shadow"));
        let payload = read(&cm).unwrap();
        assert_eq!((payload.name.as_str(), payload.track), ("p", Track::Shadow));
    }

    #[test]
    fn an_unknown_track_is_refused_naming_the_only_one() {
        let mut cm = build("p", "ns", b"x", None, None, Track::Serving, None).unwrap();
        cm.metadata.annotations.get_or_insert_default().insert(TRACK_ANNOTATION.into(), "canary".into());
        let error = read(&cm).unwrap_err().to_string();
        assert!(error.contains("\"canary\"") && error.contains("\"shadow\""), "{error}");
    }

    #[test]
    fn a_large_compressible_component_ships_gzipped_and_reads_back() {
        let component = vec![7u8; 3 * CONFIGMAP_LIMIT];
        let cm = build("p", "ns", &component, None, None, Track::Serving, None).unwrap();
        assert!(cm.binary_data.as_ref().unwrap().contains_key(WASM_GZ_KEY));
        let stored = read(&cm).unwrap().component;
        assert_eq!(stored.expanded_size(), component.len() as u64, "the gzip says what it expands to");
        assert_eq!(stored.unpack("ns/p").unwrap(), component);
    }

    #[test]
    fn the_stored_digest_names_what_is_stored_without_expanding_it() {
        let component = vec![7u8; 3 * CONFIGMAP_LIMIT];
        let mut cm = build("p", "ns", &component, None, None, Track::Serving, None).unwrap();
        let before = read(&cm).unwrap().component.digest();
        cm.metadata.annotations.get_or_insert_default().insert(STATUS_ANNOTATION.into(), "{}".into());
        assert_eq!(read(&cm).unwrap().component.digest(), before, "an annotation changes nothing stored");
        let other = build("p", "ns", &vec![8u8; 3 * CONFIGMAP_LIMIT], None, None, Track::Serving, None).unwrap();
        assert_ne!(read(&other).unwrap().component.digest(), before);
    }

    #[test]
    fn a_gzip_stream_that_expands_past_what_it_says_is_refused() {
        let component = vec![7u8; 3 * CONFIGMAP_LIMIT];
        let mut cm = build("p", "ns", &component, None, None, Track::Serving, None).unwrap();
        let packed = &mut cm.binary_data.as_mut().unwrap().get_mut(WASM_GZ_KEY).unwrap().0;
        // The trailer says 1 KiB; the stream holds 3 MiB.
        let at = packed.len() - 4;
        packed[at..].copy_from_slice(&1024u32.to_le_bytes());
        let error = read(&cm).unwrap().component.unpack("ns/p").unwrap_err().to_string();
        assert!(error.contains("expands beyond the 1024 bytes its gzip trailer says"), "{error}");
    }

    #[test]
    fn a_component_too_large_even_compressed_is_refused_with_sizes() {
        // Incompressible: every byte differs from the last in a long-period sequence.
        let mut x: u32 = 1;
        let component: Vec<u8> = (0..2 * CONFIGMAP_LIMIT)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let error = build("big", "ns", &component, None, None, Track::Serving, None).unwrap_err().to_string();
        assert!(error.contains("plugin big is 2048 KiB") && error.contains("shrink the component"), "{error}");
        assert!(error.contains("wasmloop push PLUGIN.wasm oci://"), "a large plugin is pointed at push: {error}");
    }

    const REFERENCE: &str =
        "oci://127.0.0.1:5000/plugins/p@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_pushed_component_ships_as_its_reference_pinned_to_its_bytes() {
        let reference = PluginRef::parse(REFERENCE).unwrap();
        let pushed = Pushed { reference: &reference, pull_secret: Some("registry-creds") };
        let cm = build("p", "ns", &[9u8; 3 * CONFIGMAP_LIMIT], None, None, Track::Serving, Some(pushed)).unwrap();
        assert!(cm.binary_data.is_none());
        let payload = read(&cm).unwrap();
        assert_eq!(payload.reference, Some(reference));
        assert_eq!(payload.pull_secret.as_deref(), Some("registry-creds"));
        assert_eq!(payload.pin, Some(pin_of(&[9u8; 3 * CONFIGMAP_LIMIT])));
        assert!(payload.component.is_empty());
    }

    #[test]
    fn a_reference_must_be_pinned_by_digest() {
        let mut cm = build("p", "ns", b"x", None, None, Track::Serving, None).unwrap();
        cm.binary_data = None;
        cm.data = Some(BTreeMap::from([(REF_KEY.to_owned(), "oci://ghcr.io/team/p:latest".to_owned())]));
        let error = read(&cm).unwrap_err().to_string();
        assert!(error.contains("ConfigMap ns/p: data[\"plugin.ref\"]") && error.contains("names no digest"), "{error}");
    }

    #[test]
    fn bytes_and_a_reference_together_are_refused() {
        let mut cm = build("p", "ns", b"x", None, None, Track::Serving, None).unwrap();
        cm.data = Some(BTreeMap::from([(REF_KEY.to_owned(), REFERENCE.to_owned())]));
        assert!(read(&cm).unwrap_err().to_string().contains("holds both a component and data[\"plugin.ref\"]"));
    }

    #[test]
    fn a_pull_secret_that_is_no_name_is_refused() {
        let mut cm = build("p", "ns", b"x", None, None, Track::Serving, None).unwrap();
        cm.metadata.annotations.get_or_insert_default().insert(PULL_SECRET_ANNOTATION.into(), "../etc".into());
        assert!(read(&cm).unwrap_err().to_string().contains("not a Secret name"));
    }

    #[test]
    fn a_configmap_without_a_component_says_how_to_make_one() {
        let mut cm = build("p", "ns", b"x", None, None, Track::Serving, None).unwrap();
        cm.binary_data = None;
        let error = read(&cm).unwrap_err().to_string();
        assert!(error.contains("ConfigMap ns/p") && error.contains("wasmloop bundle"), "{error}");
    }

    #[test]
    fn broken_config_is_named_with_its_key() {
        let mut cm = build("p", "ns", b"x", None, None, Track::Serving, None).unwrap();
        cm.data = Some(BTreeMap::from([("config.yaml".to_owned(), "a: [".to_owned())]));
        let error = read(&cm).unwrap_err().to_string();
        assert!(error.contains("data[\"config.yaml\"]"), "{error}");
    }

    /// A plugin ConfigMap with a component, a config, a pull secret and a status.
    fn shipped() -> ConfigMap {
        let mut cm = build("p", "ns", &[1, 2, 3], Some("a: 1"), None, Track::Serving, None).unwrap();
        let annotations = cm.metadata.annotations.get_or_insert_default();
        annotations.insert(STATUS_ANNOTATION.into(), r#"{"active":null}"#.into());
        annotations.insert(PULL_SECRET_ANNOTATION.into(), "creds".into());
        cm.metadata.uid = Some("u1".into());
        cm
    }

    #[test]
    fn the_hosts_own_status_write_leaves_the_fingerprint_as_it_was() {
        let keys = std::hash::RandomState::new();
        let (before, mut after) = (shipped(), shipped());
        after.metadata.annotations.as_mut().unwrap().insert(STATUS_ANNOTATION.into(), r#"{"lastError":"x"}"#.into());
        after.metadata.resource_version = Some("99".into());
        assert_eq!(fingerprint(&after, &keys), fingerprint(&before, &keys));
    }

    #[test]
    fn every_edit_of_what_a_configmap_offers_changes_its_fingerprint() {
        let keys = std::hash::RandomState::new();
        let base = fingerprint(&shipped(), &keys);
        let edits: [(&str, fn(&mut ConfigMap)); 6] = [
            ("the component", |cm| cm.binary_data.as_mut().unwrap().values_mut().for_each(|b| b.0.push(0))),
            ("the config", |cm| {
                cm.data.get_or_insert_default().insert("config.yaml".into(), "a: 2".into());
            }),
            ("the plugin label", |cm| {
                cm.metadata.labels.as_mut().unwrap().insert(PLUGIN_LABEL.into(), "q".into());
            }),
            ("the pull secret", |cm| {
                cm.metadata.annotations.as_mut().unwrap().insert(PULL_SECRET_ANNOTATION.into(), "other".into());
            }),
            ("the track the host marks superseded", |cm| {
                cm.metadata.annotations.as_mut().unwrap().insert(TRACK_ANNOTATION.into(), "superseded".into());
            }),
            ("its UID (deleted and created again)", |cm| cm.metadata.uid = Some("u2".into())),
        ];
        for (what, edit) in edits {
            let mut cm = shipped();
            edit(&mut cm);
            assert_ne!(fingerprint(&cm, &keys), base, "an edit of {what} went unseen");
        }
    }

    #[test]
    fn an_annotation_and_a_data_key_of_the_same_text_are_told_apart() {
        let keys = std::hash::RandomState::new();
        let (mut annotated, mut stored) = (ConfigMap::default(), ConfigMap::default());
        annotated.metadata.annotations = Some([("k".to_owned(), "v".to_owned())].into());
        stored.data = Some([("k".to_owned(), "v".to_owned())].into());
        assert_ne!(fingerprint(&annotated, &keys), fingerprint(&stored, &keys));
    }
}
