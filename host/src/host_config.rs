//! The host configuration file of `wasmloop run --config`.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use wasmloop_contract::names::Namespace;
use wasmloop_runtime::identity::ServiceAccount;
use wasmloop_runtime::quarantine::Policy as QuarantinePolicy;
use wasmloop_sandbox::PluginId;

/// What operators set for the whole host.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostConfig {
    /// Requeue every primary this often, in seconds; wins over a plugin's own, and 0 turns
    /// resync off.
    #[serde(default)]
    pub resync_seconds: Option<u64>,
    /// How long in-flight reconciles get to finish on SIGTERM, in seconds (default 30).
    #[serde(default)]
    pub shutdown_timeout_seconds: Option<u64>,
    /// Reconciles at once per plugin unless a plugin says otherwise (default 4).
    #[serde(default)]
    pub max_concurrent_reconciles: Option<u32>,
    /// Per-plugin settings: `NAME` for a plugin from the operator's files, `NAMESPACE/NAME`
    /// for one from a plugin ConfigMap in `NAMESPACE` ([`HostConfig::settings_for`]).
    #[serde(default)]
    pub plugins: HashMap<PluginId, PluginSettings>,
    /// Ceilings on what a plugin may propose for itself.
    #[serde(default)]
    pub limits: Ceilings,
    /// The wasm sandbox.
    #[serde(default)]
    pub sandbox: SandboxSettings,
    /// When a plugin whose calls keep failing is quarantined.
    #[serde(default)]
    pub quarantine: QuarantineSettings,
}

/// When a plugin whose guest calls keep failing (traps, deadlines, limits) is quarantined, and
/// how it is probed.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QuarantineSettings {
    /// The window the failure rate is measured over, and how long it must stay at or above
    /// `failurePercent` (default 60).
    #[serde(default)]
    pub after_seconds: Option<u64>,
    /// How many failures, at least, in the window (default 10).
    #[serde(default)]
    pub min_failures: Option<u32>,
    /// The share of failed calls, in percent, at or above which a plugin is failing (default
    /// 50; 1 to 100). Its own errors count, as traps and deadlines do.
    #[serde(default)]
    pub failure_percent: Option<u8>,
    /// The first wait between probe calls (default 5); it doubles after each failed probe.
    #[serde(default)]
    pub first_probe_seconds: Option<u64>,
    /// The longest wait between probe calls (default 300).
    #[serde(default)]
    pub max_probe_seconds: Option<u64>,
}

/// The largest CPU weight a plugin may be given: a hundred times another's share is as far as a
/// fair share goes.
const MAX_CPU_WEIGHT: u32 = 100;

/// The longest any quarantine duration may be: a day.
const MAX_QUARANTINE_SECONDS: u64 = 86_400;

/// Why a host configuration's text is refused. Its sentence follows the file's name
/// (`host.yaml: quarantine.minFailures: must be at least 1`), as [`HostConfig::read`] writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not YAML, or not the schema (an unknown field, a plugin key that names no plugin).
    #[error(" is not a valid wasmloop host configuration: {0}")]
    Schema(String),
    /// A quarantine duration of none, or longer than a day.
    #[error(": quarantine.{field}: {value} is not between 1 and {MAX_QUARANTINE_SECONDS}")]
    QuarantineSeconds {
        /// The field, as the file spells it.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// A failure share that is no percentage, or 0.
    #[error(": quarantine.failurePercent: {0} is not between 1 and 100")]
    FailurePercent(u8),
    /// No failure needed: every plugin would be quarantined.
    #[error(": quarantine.minFailures: must be at least 1")]
    MinFailures,
    /// A first probe wait the doubling could never reach from.
    #[error(": quarantine.firstProbeSeconds: must not exceed maxProbeSeconds")]
    ProbeOrder,
    /// A plugin's ServiceAccount that is none.
    #[error(": plugins.{plugin}.serviceAccount: {why}")]
    ServiceAccount {
        /// The plugin key.
        plugin: PluginId,
        /// Why it is none.
        why: wasmloop_runtime::identity::InvalidServiceAccount,
    },
    /// A CPU weight past a fair share's reach.
    #[error(": plugins.{plugin}.cpuWeight: {weight} is not between 1 and {MAX_CPU_WEIGHT}")]
    CpuWeight {
        /// The plugin key.
        plugin: PluginId,
        /// The weight given.
        weight: NonZeroU32,
    },
}

/// Why `--config` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("cannot read {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the read said.
        #[source]
        source: std::io::Error,
    },
    /// The file is no host configuration.
    #[error("{}{error}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        error: ConfigError,
    },
}

impl QuarantineSettings {
    /// The policy, defaults filled in (checked when read).
    pub fn policy(&self) -> QuarantinePolicy {
        let defaults = QuarantinePolicy::default();
        let seconds = |value: Option<u64>, default: Duration| value.map_or(default, Duration::from_secs);
        QuarantinePolicy {
            after: seconds(self.after_seconds, defaults.after),
            min_failures: self.min_failures.unwrap_or(defaults.min_failures),
            failure_percent: self.failure_percent.unwrap_or(defaults.failure_percent),
            first_probe: seconds(self.first_probe_seconds, defaults.first_probe),
            max_probe: seconds(self.max_probe_seconds, defaults.max_probe),
        }
    }

    fn check(&self) -> Result<(), ConfigError> {
        for (field, value) in [
            ("afterSeconds", self.after_seconds),
            ("firstProbeSeconds", self.first_probe_seconds),
            ("maxProbeSeconds", self.max_probe_seconds),
        ] {
            if let Some(value) = value.filter(|v| !(1..=MAX_QUARANTINE_SECONDS).contains(v)) {
                return Err(ConfigError::QuarantineSeconds { field, value });
            }
        }
        if let Some(percent) = self.failure_percent.filter(|p| !(1..=100).contains(p)) {
            return Err(ConfigError::FailurePercent(percent));
        }
        if self.min_failures == Some(0) {
            return Err(ConfigError::MinFailures);
        }
        let policy = self.policy();
        if policy.first_probe > policy.max_probe {
            return Err(ConfigError::ProbeOrder);
        }
        Ok(())
    }
}

/// The most a plugin may ask for itself; the operator's per-plugin settings are not held to
/// these.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Ceilings {
    /// The most reconciles at once a plugin may propose (default 16).
    #[serde(default)]
    pub max_concurrent_reconciles: Option<u32>,
    /// API writes per second a plugin may make, sustained (default 50).
    #[serde(default)]
    pub writes_per_second: Option<NonZeroU32>,
    /// API writes a plugin may make at once before the rate applies (default 100).
    #[serde(default)]
    pub write_burst: Option<NonZeroU32>,
    /// The shortest `requeue_after` a plugin gets, in milliseconds (default 1000).
    #[serde(default)]
    pub min_requeue_after_ms: Option<u64>,
}

/// Settings of the wasm sandbox.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxSettings {
    /// Guest instances alive at once across all plugins (default 256). Each plugin reserves
    /// one per worker (its concurrency); a plugin that does not fit is refused, naming the
    /// figures.
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
    /// The ServiceAccount a plugin loaded from a file acts as, `NAMESPACE/NAME` (default: the
    /// one named like the plugin in `--plugin-identity-namespace`). ConfigMap plugins name
    /// theirs with the `wasmloop.dev/service-account` annotation instead.
    #[serde(default)]
    pub service_account: Option<String>,
    /// The one namespace the plugin is served its primaries, children, watches and reads
    /// from; a plugin that declares another namespace is refused.
    #[serde(default)]
    pub namespace: Option<wasmloop_contract::names::Namespace>,
    /// This plugin's writes per second (wins over `limits.writesPerSecond`).
    #[serde(default)]
    pub writes_per_second: Option<NonZeroU32>,
    /// This plugin's write burst (wins over `limits.writeBurst`).
    #[serde(default)]
    pub write_burst: Option<NonZeroU32>,
    /// This plugin's floor on `requeue_after`, in milliseconds (wins over
    /// `limits.minRequeueAfterMs`).
    #[serde(default)]
    pub min_requeue_after_ms: Option<u64>,
    /// This plugin's weight in the host's CPU budget (1 to 100, default 1): running beside
    /// others, it gets this many parts of the guests' CPU for each part a plugin of weight 1
    /// gets. Its shadow draws from its share.
    #[serde(default)]
    pub cpu_weight: Option<std::num::NonZeroU32>,
}

impl HostConfig {
    /// Reads the file.
    ///
    /// # Errors
    /// A [`ConfigFileError`]: it cannot be read, or [`HostConfig::parse`] refuses it.
    pub fn read(path: &Path) -> Result<HostConfig, ConfigFileError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read { path: path.to_owned(), source })?;
        HostConfig::parse(&text).map_err(|error| ConfigFileError::Invalid { path: path.to_owned(), error })
    }

    /// Parses the file's text and checks what the schema cannot: the quarantine policy, each
    /// plugin key and ServiceAccount.
    ///
    /// # Errors
    /// A [`ConfigError`], whose sentence follows the file's name, saying what is wrong and where.
    pub fn parse(text: &str) -> Result<HostConfig, ConfigError> {
        let config: HostConfig = serde_saphyr::from_str_with_options(text, crate::input::yaml_options())
            .map_err(|e| ConfigError::Schema(crate::input::yaml_error(&e)))?;
        config.quarantine.check()?;
        for (plugin, settings) in &config.plugins {
            if let Some(account) = &settings.service_account {
                account
                    .parse::<ServiceAccount>()
                    .map_err(|why| ConfigError::ServiceAccount { plugin: plugin.clone(), why })?;
            }
            if let Some(weight) = settings.cpu_weight.filter(|w| w.get() > MAX_CPU_WEIGHT) {
                return Err(ConfigError::CpuWeight { plugin: plugin.clone(), weight });
            }
        }
        Ok(config)
    }

    /// The operator's settings for plugin `plugin` of `realm`: the entry `NAME` for a plugin
    /// from the operator's files (realm empty), `NAMESPACE/NAME` for one from a plugin
    /// ConfigMap in `NAMESPACE`. Never by name alone: a ConfigMap writer who names a plugin
    /// after one the operator configured gets none of its settings.
    pub fn settings_for(&self, realm: &str, plugin: &str) -> Option<&PluginSettings> {
        let realm = match realm {
            "" => None,
            realm => Some(Namespace::parse(realm).ok()?),
        };
        self.plugins.get(&PluginId::new(realm, plugin).ok()?)
    }

    /// The ServiceAccount the operator configured for `plugin` of `realm` (checked when read).
    pub fn service_account(&self, realm: &str, plugin: &str) -> Option<ServiceAccount> {
        self.settings_for(realm, plugin)?.service_account.as_deref()?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuzz_seeds_and_the_readme_example_are_valid_host_configurations() {
        for seed in ["readme", "quarantine"] {
            let path = format!("{}/fuzz/corpus/host_config/{seed}", env!("CARGO_MANIFEST_DIR"));
            let config = HostConfig::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
            assert!(
                config.settings_for("", "labeler").is_some() || config.settings_for("", "configmap-mirror").is_some()
            );
        }
    }

    #[test]
    fn a_plugin_key_is_found_by_its_realm_and_name_only() {
        let config = HostConfig::parse("plugins:\n  labeler: {}\n  team-b/labeler: {writesPerSecond: 5}\n").unwrap();
        assert!(config.settings_for("", "labeler").unwrap().writes_per_second.is_none());
        assert_eq!(config.settings_for("team-b", "labeler").unwrap().writes_per_second.map(u32::from), Some(5));
        assert!(config.settings_for("team-c", "labeler").is_none());
    }

    #[test]
    fn a_plugin_key_that_names_no_plugin_says_what_to_write() {
        let error = HostConfig::parse("plugins:\n  Team_B/labeler: {}\n").unwrap_err().to_string();
        assert!(error.contains("write NAME for a plugin file, NAMESPACE/NAME for a plugin namespace's"), "{error}");
    }
}
