//! Why a candidate was refused, in sentences that name the source, the plugin and what to do;
//! whatever served before still serves.

use wasmloop_sandbox::{LoadError, PluginId, SourceId};

use crate::controller::StartError;

/// A candidate was refused; whatever served before still does.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The component did not load.
    #[error("{source}{}", keeps(.running))]
    Load {
        /// Why.
        #[source]
        source: LoadError,
        /// The version still serving, if any.
        running: Option<String>,
    },
    /// The manifest names another plugin than the source promised.
    #[error("{origin} is labelled plugin {expected:?} but the component's manifest names plugin {found:?}; make the two agree (wasmloop bundle --name sets the label){}", keeps(.running))]
    NameMismatch {
        /// The source.
        origin: SourceId,
        /// What the source promised.
        expected: String,
        /// What the manifest says.
        found: String,
        /// The version still serving, if any.
        running: Option<String>,
    },
    /// Another source of the same realm already serves a plugin of this name.
    #[error(
        "{origin} offers plugin {name:?}, which {holder} already serves; a plugin name is unique within its plugin namespace (the operator's files are one): remove one of the two"
    )]
    NameTaken {
        /// The source.
        origin: SourceId,
        /// The plugin.
        name: PluginId,
        /// The source serving it.
        holder: SourceId,
    },
    /// Another source already offers a shadow of this plugin.
    #[error(
        "{origin} offers a shadow of plugin {name:?}, which already has one from {holder}; a plugin has one shadow at a time: remove one of the two"
    )]
    ShadowTaken {
        /// The source.
        origin: SourceId,
        /// The plugin.
        name: String,
        /// The source whose shadow is seated.
        holder: SourceId,
    },
    /// A shadow cannot stand beside the serving version.
    #[error("{origin}: the shadow of plugin {name:?} {reason}")]
    ShadowMismatch {
        /// The source.
        origin: SourceId,
        /// The plugin.
        name: String,
        /// What does not match, and what to do.
        reason: String,
    },
    /// The host shut down while the version prepared; it was stopped before it started.
    #[error("plugin {plugin}: not started, the host is shutting down")]
    ShuttingDown {
        /// The plugin.
        plugin: PluginId,
    },
    /// Its controller could not start (a kind not served, a cache that did not sync).
    #[error("{source}{}", keeps(.running))]
    Start {
        /// Why.
        #[source]
        source: StartError,
        /// The version still serving, if any.
        running: Option<String>,
    },
}

fn keeps(running: &Option<String>) -> String {
    running.as_ref().map(|v| format!(" (version {v} keeps serving)")).unwrap_or_default()
}

impl RegistryError {
    /// A short CamelCase reason, for Events and metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            RegistryError::Load { source, .. } => source.reason(),
            RegistryError::NameMismatch { .. } => "NameMismatch",
            RegistryError::NameTaken { .. } => "NameTaken",
            RegistryError::ShadowTaken { .. } => "ShadowTaken",
            RegistryError::ShadowMismatch { .. } => "ShadowMismatch",
            RegistryError::ShuttingDown { .. } => "ShuttingDown",
            RegistryError::Start { source: StartError::Identity { .. }, .. } => "IdentityRefused",
            RegistryError::Start { .. } => "StartFailed",
        }
    }
}
