//! The `WasmPlugin` kind (`wasmloop.dev/v1alpha1`, installed by
//! `deploy/base/wasmplugin-crd.yaml`): a plugin as an object of its own, with status conditions
//! that `kubectl wait`, Argo CD and Flux read.
//!
//! A `WasmPlugin` is outside text like any other: the API server checks the CRD's schema and
//! CEL rules, but a CRD installed without them, or an older one, checks nothing. So the spec
//! reaches the host as JSON ([`WasmPlugin::spec`]) and becomes a [`Spec`] here, each field parsed
//! into the host's own types; a spec that does not parse is refused with the field's name.
//!
//! - Its plugin is its own name, or `track.shadows` for a shadow.
//! - The component is an image pinned by digest (`spec.image`, with an optional pull secret)
//!   or lives in a ConfigMap it names (`spec.configMapRef`): [`Spec::payload`] refuses one that
//!   is missing, is a plugin ConfigMap of its own or holds a configuration (a `WasmPlugin`'s
//!   is `spec.config`), and reads its component as a plugin ConfigMap's.
//! - `spec.settings` go over what the manifest proposes, each limit held to the operator's
//!   ceilings as a proposal is, and under the command line's limits; they are part of the
//!   version's digest, so an edit of them alone is a new version.
//! - A promotion's superseded mark is the status itself: `Ready` false with reason
//!   `Superseded` for its generation, read back by [`superseded`], so an edit of the spec (a
//!   new generation) offers it again.
//! - [`build`] writes what `wasmloop bundle --wasmplugin` prints: a `WasmPlugin` pinned to the
//!   component's digest, and the ConfigMap `NAME-component` holding it (or, with `--ref`, the
//!   `WasmPlugin` alone, naming the image).
//!
//! ```
//! use wasmloop::wasmplugin::{Source, Spec, WasmPlugin};
//! let plugin: WasmPlugin = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "hello", "namespace": "team-a", "generation": 1},
//!     "spec": {"configMapRef": {"name": "hello-component"}, "failurePolicy": "Stop"},
//! })).unwrap();
//! let spec = Spec::parse(&plugin).unwrap();
//! assert_eq!(spec.plugin, "hello");
//! assert!(matches!(&spec.source, Source::ConfigMap(name) if name.as_str() == "hello-component"));
//! assert!(spec.stop_on_failure);
//! ```

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};
use wasmloop_contract::names::Name;
use wasmloop_contract::validate;

use crate::oci::{OciError, PluginRef};
use crate::plugin_configmap::{PLUGIN_LABEL, PayloadError, PluginPayload, Track, component_of};

/// The kind's API group.
pub const GROUP: &str = "wasmloop.dev";
/// The kind's version.
pub const VERSION: &str = "v1alpha1";

/// The longest `spec.config` a `WasmPlugin` may give, as JSON: the kind's schema holds it to
/// this too (`deploy/base/wasmplugin-crd.yaml`). The host keeps every `WasmPlugin`'s spec, and
/// hands the configuration to every call.
pub const MAX_CONFIG: usize = 64 << 10;

/// A `WasmPlugin` as the API server serves it. The spec and status stay JSON until
/// [`Spec::parse`] reads them: one malformed object must not break the watch of all.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct WasmPlugin {
    /// Its metadata.
    pub metadata: ObjectMeta,
    /// Its spec, unread.
    #[serde(default)]
    pub spec: serde_json::Value,
    /// Its status, as the host last wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

impl k8s_openapi::Resource for WasmPlugin {
    const API_VERSION: &'static str = "wasmloop.dev/v1alpha1";
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "WasmPlugin";
    const VERSION: &'static str = VERSION;
    const URL_PATH_SEGMENT: &'static str = "wasmplugins";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for WasmPlugin {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Where a `WasmPlugin`'s component comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A ConfigMap of its namespace, as `wasmloop bundle --wasmplugin` writes it.
    ConfigMap(Name),
    /// An OCI registry, pinned by digest, with a pull Secret of its namespace.
    Image {
        /// The reference.
        reference: PluginRef,
        /// The pull Secret.
        pull_secret: Option<Name>,
    },
}

/// What `spec.signature` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signature {
    /// The minisign key id that must have signed the component.
    pub key: Option<String>,
    /// The component's digest, `sha256:<hex>`.
    pub digest: Option<String>,
}

/// A `WasmPlugin`'s spec, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The plugin it serves (its own name) or shadows (`track.shadows`).
    pub plugin: String,
    /// Where the component comes from.
    pub source: Source,
    /// The ServiceAccount of its namespace the plugin acts as.
    pub account: Option<Name>,
    /// The configuration, as JSON text.
    pub config: Option<String>,
    /// Serving or shadow.
    pub track: Track,
    /// `failurePolicy: Stop`: a version that fails to load stops the one serving.
    pub stop_on_failure: bool,
    /// The signature and digest the component must have.
    pub signature: Option<Signature>,
    /// `suspend: true`.
    pub suspend: bool,
    /// The writer's settings over the plugin's proposals, held to the host's ceilings.
    pub settings: Option<wasmloop_sandbox::Settings>,
}

/// The spec as the CRD's schema gives it: every field optional, checked by [`Spec::parse`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSpec {
    config_map_ref: Option<RawRef>,
    image: Option<RawImage>,
    service_account_name: Option<String>,
    settings: Option<RawSettings>,
    config: Option<serde_json::Value>,
    track: Option<RawTrack>,
    failure_policy: Option<String>,
    signature: Option<RawSignature>,
    suspend: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSettings {
    max_concurrent_reconciles: Option<u32>,
    deadline_ms: Option<u32>,
    memory_limit_bytes: Option<u64>,
    response_limit_bytes: Option<u64>,
    resync_seconds: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRef {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawImage {
    reference: String,
    pull_secret_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrack {
    mode: Option<String>,
    shadows: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSignature {
    key_ref: Option<String>,
    digest: Option<String>,
}

/// Why a `WasmPlugin`'s spec is refused: each names the field that is wrong and what to write
/// there, since a CRD installed without its schema checks nothing. Values are quoted cut.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// Not the kind's shape: a field of the wrong type, or one the kind does not have.
    #[error("spec: {0}; see deploy/base/wasmplugin-crd.yaml for the fields")]
    Shape(String),
    /// Neither or both of `spec.configMapRef` and `spec.image`.
    #[error("give exactly one of spec.configMapRef and spec.image")]
    NotOneSource,
    /// A `spec.configMapRef.name` that is no ConfigMap name.
    #[error("spec.configMapRef.name {0} is not a ConfigMap name")]
    ConfigMapName(String),
    /// A `spec.image.reference` that is not pinned, or no plugin reference.
    #[error("spec.image.reference: {0}")]
    Image(OciError),
    /// A `spec.image.pullSecretName` that is no Secret name.
    #[error("spec.image.pullSecretName {0} is not a Secret name")]
    PullSecretName(String),
    /// A `spec.track.mode` of neither track.
    #[error("spec.track.mode is {0}; it is serving or shadow")]
    TrackMode(String),
    /// A shadow without `track.shadows`.
    #[error("spec.track: a shadow names the plugin it shadows (track.shadows)")]
    ShadowsNothing,
    /// `track.shadows` on a serving `WasmPlugin`.
    #[error("spec.track.shadows: only a shadow names a plugin; set track.mode to shadow")]
    NotAShadow,
    /// A `track.shadows` that is no plugin name: the rule it breaks.
    #[error("spec.track.shadows: {0}")]
    ShadowedName(String),
    /// A serving `WasmPlugin`'s name that is no plugin name: the rule it breaks.
    #[error(
        "the WasmPlugin's name is its plugin's name, and {0}; name the WasmPlugin as the component's manifest names the plugin"
    )]
    PluginName(String),
    /// A setting of 0: no time, no memory, no worker.
    #[error("spec.settings: every setting is at least 1")]
    ZeroSetting,
    /// A `spec.failurePolicy` of neither policy.
    #[error("spec.failurePolicy is {0}; it is KeepPrevious or Stop")]
    FailurePolicy(String),
    /// A `spec.serviceAccountName` that is no ServiceAccount name.
    #[error("spec.serviceAccountName {0} is not a ServiceAccount name")]
    ServiceAccount(String),
    /// A `spec.signature.keyRef` that is no minisign key id.
    #[error("spec.signature.keyRef {0} is not a minisign key id (16 hex digits)")]
    KeyRef(String),
    /// A `spec.signature.keyRef` beside `spec.image`: the signature is read from a ConfigMap.
    #[error(
        "spec.signature.keyRef: the host reads a component's signature from its ConfigMap (plugin.wasm.minisig); ship a signed component with spec.configMapRef (a host run with --trusted-keys loads only signed components, so an image alone does not load there)"
    )]
    KeyRefOnImage,
    /// A `spec.config` that is no mapping.
    #[error("spec.config is not an object; give the plugin's configuration as a mapping")]
    ConfigNotObject,
    /// A `spec.config` past [`MAX_CONFIG`], in KiB.
    #[error(
        "spec.config is {0} KiB as JSON, over the {limit} KiB a plugin's configuration may be; keep large data in objects the plugin reads",
        limit = MAX_CONFIG >> 10
    )]
    ConfigTooLarge(usize),
}

/// Why the ConfigMap a `WasmPlugin`'s `spec.configMapRef` names offers no component for it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigMapRefError {
    /// No such ConfigMap.
    #[error(
        "spec.configMapRef names ConfigMap {namespace}/{name}, which does not exist; create it with `wasmloop bundle PLUGIN.wasm --wasmplugin`"
    )]
    Missing {
        /// The `WasmPlugin`'s namespace.
        namespace: String,
        /// The ConfigMap.
        name: Name,
    },
    /// A plugin ConfigMap: it ships its plugin itself, so two objects would claim it.
    #[error(
        "spec.configMapRef names ConfigMap {namespace}/{name}, which is labelled {PLUGIN_LABEL} and so ships a plugin of its own; remove the label, or delete this WasmPlugin"
    )]
    PluginConfigMap {
        /// The `WasmPlugin`'s namespace.
        namespace: String,
        /// The ConfigMap.
        name: Name,
    },
    /// A configuration in the ConfigMap, where it would be ignored.
    #[error(
        "ConfigMap {namespace}/{name} holds a configuration (config.yaml or config.json); a WasmPlugin's configuration is its spec.config: move it there"
    )]
    HoldsConfig {
        /// The `WasmPlugin`'s namespace.
        namespace: String,
        /// The ConfigMap.
        name: Name,
    },
    /// No component, or not one the host can read.
    #[error(transparent)]
    Component(#[from] PayloadError),
}

/// Why [`build`] writes no `WasmPlugin`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The configuration is neither YAML nor JSON: the parser's words.
    #[error("the configuration is not valid YAML or JSON: {0}")]
    Config(String),
}

/// `reference` as a plugin reference URL: `oci://` is implied, as in a pod's `image`.
fn oci_url(reference: &str) -> String {
    match reference.starts_with("oci://") {
        true => reference.to_owned(),
        false => format!("oci://{reference}"),
    }
}

impl Spec {
    /// Reads `plugin`'s spec.
    ///
    /// # Errors
    /// A [`SpecError`] naming the field that is wrong and what to write there.
    pub fn parse(plugin: &WasmPlugin) -> Result<Spec, SpecError> {
        let raw = RawSpec::deserialize(&plugin.spec).map_err(|e| SpecError::Shape(validate::quoted(&e.to_string())))?;
        let name = plugin.metadata.name.as_deref().unwrap_or_default();
        // Checked in the order the fields are documented: the first wrong one is named.
        let source = source_of(raw.config_map_ref, raw.image)?;
        let (track, plugin) = track_of(raw.track, name)?;
        let settings = settings_of(raw.settings)?;
        let stop_on_failure = match raw.failure_policy.as_deref() {
            None | Some("KeepPrevious") => false,
            Some("Stop") => true,
            Some(other) => return Err(SpecError::FailurePolicy(validate::quoted(other))),
        };
        let account = raw.service_account_name.map(account_of).transpose()?;
        let signature = raw.signature.map(|s| signature_of(s, &source)).transpose()?;
        let config = config_of(raw.config)?;
        let suspend = raw.suspend.unwrap_or(false);
        Ok(Spec { plugin, source, account, config, track, stop_on_failure, signature, suspend, settings })
    }
}

/// Where the component comes from: exactly one of `spec.configMapRef` and `spec.image`.
fn source_of(config_map_ref: Option<RawRef>, image: Option<RawImage>) -> Result<Source, SpecError> {
    match (config_map_ref, image) {
        (Some(reference), None) => Ok(Source::ConfigMap(
            Name::parse(&reference.name).map_err(|_| SpecError::ConfigMapName(validate::quoted(&reference.name)))?,
        )),
        (None, Some(image)) => Ok(Source::Image {
            reference: PluginRef::parse(&oci_url(image.reference.trim()))
                .and_then(PluginRef::pinned)
                .map_err(SpecError::Image)?,
            pull_secret: image
                .pull_secret_name
                .map(|named| Name::parse(&named).map_err(|_| SpecError::PullSecretName(validate::quoted(&named))))
                .transpose()?,
        }),
        _ => Err(SpecError::NotOneSource),
    }
}

/// Whether it serves or shadows, and the plugin it is: its own name, or the one it shadows.
/// The plugin name labels metrics and logs before the manifest is read, so it is checked here.
fn track_of(raw: Option<RawTrack>, name: &str) -> Result<(Track, String), SpecError> {
    let (mode, shadows) = raw.map(|t| (t.mode, t.shadows)).unwrap_or_default();
    let track = match mode.as_deref() {
        None | Some("serving") => Track::Serving,
        Some("shadow") => Track::Shadow,
        Some(other) => return Err(SpecError::TrackMode(validate::quoted(other))),
    };
    let plugin = match (track, shadows) {
        (Track::Shadow, Some(shadows)) => shadows,
        (Track::Shadow, None) => return Err(SpecError::ShadowsNothing),
        (_, Some(_)) => return Err(SpecError::NotAShadow),
        (_, None) => name.to_owned(),
    };
    validate::plugin_name(&plugin).map_err(|rule| match track {
        Track::Shadow => SpecError::ShadowedName(rule),
        _ => SpecError::PluginName(rule),
    })?;
    Ok((track, plugin))
}

/// The settings over the manifest's: none when they override nothing (the same version as
/// without them), and none of them zero (no time, no memory, no worker: the schema's minimum
/// is 1).
fn settings_of(raw: Option<RawSettings>) -> Result<Option<wasmloop_sandbox::Settings>, SpecError> {
    let settings = raw.map(|r| wasmloop_sandbox::Settings {
        max_concurrent_reconciles: r.max_concurrent_reconciles,
        deadline_ms: r.deadline_ms,
        memory_limit_bytes: r.memory_limit_bytes,
        response_limit_bytes: r.response_limit_bytes,
        resync_seconds: r.resync_seconds,
    });
    let settings = settings.filter(|s| *s != wasmloop_sandbox::Settings::default());
    if let Some(s) = &settings {
        let zero = [
            s.max_concurrent_reconciles.map(u64::from),
            s.deadline_ms.map(u64::from),
            s.memory_limit_bytes,
            s.response_limit_bytes,
            s.resync_seconds.map(u64::from),
        ];
        if zero.contains(&Some(0)) {
            return Err(SpecError::ZeroSetting);
        }
    }
    Ok(settings)
}

/// `spec.serviceAccountName`: a DNS-1123 subdomain, as the API server requires, so no `:` to
/// smuggle a user name.
fn account_of(named: String) -> Result<Name, SpecError> {
    let refuse = || SpecError::ServiceAccount(validate::quoted(&named));
    match validate::is_dns1123_subdomain(&named) {
        true => Name::parse(&named).map_err(|_| refuse()),
        false => Err(refuse()),
    }
}

/// `spec.signature`, its keyRef named as the host names trusted keys: 16 upper-case hex
/// digits (minisign's own comment line drops leading zeros, and a user copies the id from
/// there). A keyRef asks for a signature the host reads from the component's ConfigMap.
fn signature_of(raw: RawSignature, source: &Source) -> Result<Signature, SpecError> {
    let mut signature = Signature { key: raw.key_ref, digest: raw.digest };
    if let Some(key) = signature.key.as_mut() {
        if key.is_empty() || key.len() > 16 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SpecError::KeyRef(validate::quoted(key)));
        }
        *key = format!("{:0>16}", key.to_ascii_uppercase());
        if matches!(source, Source::Image { .. }) {
            return Err(SpecError::KeyRefOnImage);
        }
    }
    Ok(signature)
}

/// `spec.config` as JSON text: a mapping, within [`MAX_CONFIG`].
fn config_of(raw: Option<serde_json::Value>) -> Result<Option<String>, SpecError> {
    if raw.as_ref().is_some_and(|config| !config.is_object()) {
        return Err(SpecError::ConfigNotObject);
    }
    let config = raw.map(|config| config.to_string());
    if let Some(length) = config.as_ref().map(String::len).filter(|length| *length > MAX_CONFIG) {
        return Err(SpecError::ConfigTooLarge(length.div_ceil(1024)));
    }
    Ok(config)
}

impl Spec {
    /// What this spec offers without its component: enough to stop or retire what it served.
    pub fn bare_payload(&self) -> PluginPayload {
        PluginPayload {
            config: self.config.clone(),
            pin: self.signature.as_ref().and_then(|s| s.digest.clone()),
            track: self.track,
            ..PluginPayload::named(self.plugin.clone())
        }
    }

    /// The ConfigMap `spec.configMapRef` names, if it names one.
    pub fn configmap(&self) -> Option<&Name> {
        match &self.source {
            Source::ConfigMap(name) => Some(name),
            Source::Image { .. } => None,
        }
    }

    /// What this spec offers, with `configmap`, the ConfigMap `spec.configMapRef` names as it
    /// was read (none when it does not exist), in `namespace`.
    ///
    /// # Errors
    /// A [`ConfigMapRefError`] naming what is wrong and what to do: the ConfigMap is missing,
    /// ships no component, ships its own configuration, or is a plugin ConfigMap of its own.
    pub fn payload(&self, namespace: &str, configmap: Option<&ConfigMap>) -> Result<PluginPayload, ConfigMapRefError> {
        let mut payload = self.bare_payload();
        match (&self.source, configmap) {
            (Source::Image { reference, pull_secret }, _) => {
                payload.reference = Some(reference.clone());
                payload.pull_secret = pull_secret.clone();
            }
            (Source::ConfigMap(name), None) => {
                return Err(ConfigMapRefError::Missing { namespace: namespace.to_owned(), name: name.clone() });
            }
            (Source::ConfigMap(name), Some(cm)) => {
                let (namespace, name) = (namespace.to_owned(), name.clone());
                if cm.labels().contains_key(PLUGIN_LABEL) {
                    return Err(ConfigMapRefError::PluginConfigMap { namespace, name });
                }
                if cm.data.as_ref().is_some_and(|d| d.contains_key("config.yaml") || d.contains_key("config.json")) {
                    return Err(ConfigMapRefError::HoldsConfig { namespace, name });
                }
                let (component, reference, pull_secret) = component_of(cm)?;
                (payload.component, payload.reference, payload.pull_secret) = (component, reference, pull_secret);
                payload.signature = cm.data.as_ref().and_then(|d| d.get(crate::pinning::SIGNATURE_KEY)).cloned();
            }
        }
        Ok(payload)
    }
}

/// Whether the host marked this generation of `plugin` superseded (a promoted shadow serves its
/// plugin from another `WasmPlugin`): its status says so, for this very generation, so a
/// restart does not bring the old version back, and an edit of its spec offers it again.
pub fn superseded(plugin: &WasmPlugin) -> Option<String> {
    let status = plugin.status.as_ref()?;
    let ready = status["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready")?;
    let current = ready["reason"] == SUPERSEDED
        && ready["observedGeneration"].as_i64().is_some()
        && ready["observedGeneration"].as_i64() == plugin.metadata.generation;
    current.then(|| validate::cut(ready["message"].as_str().unwrap_or_default().to_owned(), 4096))
}

/// The `Ready` condition's reason on a `WasmPlugin` a promoted shadow replaced.
pub const SUPERSEDED: &str = "Superseded";

/// The suffix of the ConfigMap `wasmloop bundle --wasmplugin` ships a component in.
pub const COMPONENT_SUFFIX: &str = "-component";

/// What `wasmloop bundle --wasmplugin` writes for plugin `name`: the ConfigMap holding the
/// component, unless it was pushed, and the `WasmPlugin` naming it (or the image), pinned to
/// the component's digest, with its configuration and, when signed, the signing key.
/// `configmap` is a ConfigMap [`crate::plugin_configmap::build`] made for the component.
///
/// # Errors
/// [`BuildError::Config`] when the configuration is not JSON-shaped YAML.
pub fn build(
    configmap: ConfigMap,
    name: &str,
    track: Track,
    config: Option<&str>,
    pushed: Option<crate::plugin_configmap::Pushed<'_>>,
) -> Result<(Option<ConfigMap>, serde_json::Value), BuildError> {
    use serde_json::json;
    let namespace = configmap.metadata.namespace.clone().unwrap_or_default();
    let object = configmap.metadata.name.clone().unwrap_or_else(|| name.to_owned());
    let pin = configmap.annotations().get(crate::pinning::DIGEST_ANNOTATION).cloned();
    let signer = configmap
        .data
        .as_ref()
        .and_then(|d| d.get(crate::pinning::SIGNATURE_KEY))
        .and_then(|s| crate::pinning::signature_key_id(s));
    let mut spec = json!({});
    let component = match pushed {
        Some(pushed) => {
            spec["image"] = json!({"reference": pushed.reference.to_string()});
            if let Some(secret) = pushed.pull_secret {
                spec["image"]["pullSecretName"] = json!(secret);
            }
            None
        }
        None => {
            // The component's ConfigMap ships no plugin of its own: no label, no annotations.
            let mut component = configmap;
            let component_name = format!("{object}{COMPONENT_SUFFIX}");
            component.metadata.name = Some(component_name.clone());
            (component.metadata.labels, component.metadata.annotations) = (None, None);
            if let Some(data) = component.data.as_mut() {
                data.remove("config.yaml");
            }
            spec["configMapRef"] = json!({"name": component_name});
            Some(component)
        }
    };
    if let Some(text) = config {
        let value = serde_saphyr::from_str_with_options::<serde_json::Value>(text, crate::input::yaml_options())
            .map_err(|e| BuildError::Config(crate::input::yaml_error(&e)))?;
        spec["config"] = value;
    }
    spec["signature"] = json!({"digest": pin});
    if let Some(key) = signer {
        spec["signature"]["keyRef"] = json!(key);
    }
    if track == Track::Shadow {
        spec["track"] = json!({"mode": "shadow", "shadows": name});
    }
    let plugin = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": "WasmPlugin",
        "metadata": {"name": object, "namespace": namespace},
        "spec": spec,
    });
    Ok((component, plugin))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plugin(name: &str, spec: serde_json::Value) -> WasmPlugin {
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "team-a", "generation": 1}, "spec": spec}),
        )
        .unwrap()
    }

    const IMAGE: &str = "127.0.0.1:5000/hello@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_key_ref_copied_from_minisign_s_comment_without_its_leading_zero_names_the_key() {
        let spec = json!({"configMapRef": {"name": "a"}, "signature": {"keyRef": "7062bb2c1849a14"}});
        let parsed = Spec::parse(&plugin("p", spec)).unwrap();
        assert_eq!(parsed.signature.and_then(|s| s.key).as_deref(), Some("07062BB2C1849A14"));
    }

    #[test]
    fn a_spec_the_schema_would_refuse_is_refused_naming_the_field() {
        let cases = [
            (json!({}), "give exactly one of spec.configMapRef and spec.image"),
            (json!({"configMapRef": {"name": "a"}, "image": {"reference": IMAGE}}), "exactly one"),
            (json!({"image": {"reference": "127.0.0.1:5000/hello:latest"}}), "spec.image.reference"),
            (json!({"configMapRef": {"name": "Not/A/Name"}}), "spec.configMapRef.name"),
            (json!({"configMapRef": {"name": "a"}, "track": {"mode": "shadow"}}), "track.shadows"),
            (json!({"configMapRef": {"name": "a"}, "track": {"shadows": "x"}}), "only a shadow"),
            (json!({"configMapRef": {"name": "a"}, "track": {"mode": "canary"}}), "spec.track.mode"),
            (json!({"configMapRef": {"name": "a"}, "failurePolicy": "Ignore"}), "spec.failurePolicy"),
            (json!({"configMapRef": {"name": "a"}, "serviceAccountName": "system:admin"}), "spec.serviceAccountName"),
            (json!({"configMapRef": {"name": "a"}, "settings": {"deadlineMs": 0}}), "spec.settings"),
            (json!({"configMapRef": {"name": "a"}, "settings": {"cpu": 5}}), "unknown field"),
            (json!({"configMapRef": {"name": "a"}, "signature": {"keyRef": "zz"}}), "spec.signature.keyRef"),
            (json!({"image": {"reference": IMAGE}, "signature": {"keyRef": "0123456789ABCDEF"}}), "from its ConfigMap"),
            (json!({"configMapRef": {"name": "a"}, "unknown": 1}), "unknown field"),
            (json!({"configMapRef": {"name": "a"}, "suspend": "yes"}), "spec:"),
            (json!({"configMapRef": {"name": "a"}, "config": {"blob": "x".repeat(MAX_CONFIG)}}), "over the 64 KiB"),
        ];
        for (spec, expected) in cases {
            let error = Spec::parse(&plugin("hello", spec.clone())).expect_err(&spec.to_string()).to_string();
            assert!(error.contains(expected), "{spec}: {error}");
        }
        assert!(matches!(Spec::parse(&plugin("hello", json!({}))), Err(SpecError::NotOneSource)));
    }

    #[test]
    fn the_worst_values_come_back_cut() {
        let huge = format!("\u{1b}[31m{}", "x".repeat(5 << 20));
        let specs = [
            json!({"image": {"reference": huge}}),
            json!({"configMapRef": {"name": huge}}),
            json!({"image": {"reference": IMAGE, "pullSecretName": huge}}),
            json!({"image": {"reference": IMAGE}, "serviceAccountName": huge}),
            json!({"image": {"reference": IMAGE}, "failurePolicy": huge}),
            json!({"image": {"reference": IMAGE}, "track": {"mode": huge}}),
            json!({"image": {"reference": IMAGE}, (huge.clone()): 1}),
        ];
        for spec in specs {
            let error = Spec::parse(&plugin("hello", spec)).unwrap_err().to_string();
            assert!(
                error.len() < 1024 && !error.contains('\u{1b}'),
                "{} bytes: {}",
                error.len(),
                &error[..200.min(error.len())]
            );
        }
    }

    #[test]
    fn settings_that_override_nothing_are_none() {
        let empty = Spec::parse(&plugin("hello", json!({"image": {"reference": IMAGE}, "settings": {}}))).unwrap();
        assert_eq!(empty.settings, None, "the same version as without settings");
        let set = json!({"image": {"reference": IMAGE}, "settings": {"deadlineMs": 300}});
        assert_eq!(Spec::parse(&plugin("hello", set)).unwrap().settings.unwrap().deadline_ms, Some(300));
    }

    #[test]
    fn the_wasmplugin_s_name_is_its_plugin_s_unless_it_shadows_one() {
        let serving = Spec::parse(&plugin("hello", json!({"image": {"reference": IMAGE}}))).unwrap();
        assert_eq!((serving.plugin.as_str(), serving.track), ("hello", Track::Serving));
        let shadow = json!({"image": {"reference": IMAGE}, "track": {"mode": "shadow", "shadows": "hello"}});
        let shadow = Spec::parse(&plugin("hello-canary", shadow)).unwrap();
        assert_eq!((shadow.plugin.as_str(), shadow.track), ("hello", Track::Shadow));
        let error = Spec::parse(&plugin("hello.v2", json!({"image": {"reference": IMAGE}}))).unwrap_err().to_string();
        assert!(error.contains("the WasmPlugin's name is its plugin's name"), "{error}");
    }

    #[test]
    fn a_configmap_that_ships_a_plugin_of_its_own_or_a_configuration_is_refused() {
        let spec = Spec::parse(&plugin("hello", json!({"configMapRef": {"name": "hello-wasm"}}))).unwrap();
        let labelled: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "hello-wasm", "labels": {PLUGIN_LABEL: "hello"}},
            "binaryData": {"plugin.wasm": "AGFzbQ=="},
        }))
        .unwrap();
        assert!(spec.payload("team-a", Some(&labelled)).unwrap_err().to_string().contains("ships a plugin of its own"));
        let configured: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "hello-wasm"}, "binaryData": {"plugin.wasm": "AGFzbQ=="}, "data": {"config.yaml": "a: 1"},
        }))
        .unwrap();
        assert!(spec.payload("team-a", Some(&configured)).unwrap_err().to_string().contains("spec.config"));
        assert!(spec.payload("team-a", None).unwrap_err().to_string().contains("does not exist"));
        assert!(matches!(spec.payload("team-a", None), Err(ConfigMapRefError::Missing { .. })));
        assert!(matches!(spec.payload("team-a", Some(&labelled)), Err(ConfigMapRefError::PluginConfigMap { .. })));
        let plain: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "hello-wasm"}, "binaryData": {"plugin.wasm": "AGFzbQ=="},
        }))
        .unwrap();
        let component = spec.payload("team-a", Some(&plain)).unwrap().component;
        assert_eq!(component.unpack("team-a/hello-wasm").unwrap(), &b"\0asm"[..]);
    }
}
