//! The host configuration file of `wasmloop run --config`.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

/// What operators set for the whole host.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostConfig {
    /// Requeue every primary this often, in seconds (a plugin's own setting wins).
    #[serde(default)]
    pub resync_seconds: Option<u64>,
    /// How long in-flight reconciles get to finish on SIGTERM, in seconds (default 30).
    #[serde(default)]
    pub shutdown_timeout_seconds: Option<u64>,
    /// Reconciles at once per plugin unless a plugin says otherwise (default 4).
    #[serde(default)]
    pub max_concurrent_reconciles: Option<u32>,
    /// Per-plugin settings, by plugin name.
    #[serde(default)]
    pub plugins: HashMap<String, PluginSettings>,
    /// Ceilings on what a plugin may propose for itself.
    #[serde(default)]
    pub limits: Ceilings,
    /// The wasm sandbox.
    #[serde(default)]
    pub sandbox: SandboxSettings,
}

/// The most a plugin may ask for itself; the operator's per-plugin settings are not held to
/// these.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Ceilings {
    /// The most reconciles at once a plugin may propose (default 16).
    #[serde(default)]
    pub max_concurrent_reconciles: Option<u32>,
}

/// Settings of the wasm sandbox.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxSettings {
    /// Guest instances alive at once across all plugins (default 256). Each plugin reserves
    /// its concurrency plus one; a plugin that does not fit is refused, naming the figures.
    #[serde(default)]
    pub max_instances: Option<u32>,
}

/// Settings of one plugin.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginSettings {
    /// The plugin's own configuration, handed to it as JSON.
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    /// Reconciles at once for this plugin.
    #[serde(default)]
    pub max_concurrent_reconciles: Option<u32>,
}

impl HostConfig {
    /// Reads the file.
    ///
    /// # Errors
    /// When it cannot be read or does not match the schema (unknown fields included).
    pub fn read(path: &Path) -> anyhow::Result<HostConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_yaml::from_str(&text)
            .with_context(|| format!("{} is not a valid wasmloop host configuration", path.display()))
    }
}
