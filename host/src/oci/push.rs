//! Writing a plugin artifact: the component as the one layer of an OCI image manifest.

use std::time::Duration;

use oci_client::RegistryOperation;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;

use super::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, OciError, PluginRef, RegistryPolicy};
use super::{registry_error, sha256};

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
