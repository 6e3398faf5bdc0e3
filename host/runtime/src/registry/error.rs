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

#[cfg(test)]
mod tests {
    use wasmloop_contract::names::{Name, Namespace};
    use wasmloop_sandbox::SourceKind;

    use super::*;

    fn cm(name: &str) -> SourceId {
        SourceId::object(SourceKind::ConfigMap, Namespace::parse("team-a").unwrap(), Name::parse(name).unwrap())
    }

    #[test]
    fn a_refusal_names_the_version_that_keeps_serving() {
        let error = RegistryError::NameMismatch {
            origin: cm("a"),
            expected: "p".into(),
            found: "q".into(),
            running: Some("1.0.0".into()),
        };
        let message = error.to_string();
        assert!(message.starts_with("ConfigMap team-a/a is labelled plugin \"p\""), "{message}");
        assert!(message.ends_with(" (version 1.0.0 keeps serving)"), "{message}");
    }

    #[test]
    fn a_refusal_with_nothing_serving_says_nothing_keeps_serving() {
        let error =
            RegistryError::NameMismatch { origin: cm("a"), expected: "p".into(), found: "q".into(), running: None };
        assert!(!error.to_string().contains("keeps serving"));
    }

    #[test]
    fn each_refusal_has_its_reason_word() {
        let id = PluginId::parse("team-a/p").unwrap();
        let cases = [
            (RegistryError::NameTaken { origin: cm("a"), name: id.clone(), holder: cm("b") }, "NameTaken"),
            (RegistryError::ShadowTaken { origin: cm("a"), name: "p".into(), holder: cm("b") }, "ShadowTaken"),
            (RegistryError::ShadowMismatch { origin: cm("a"), name: "p".into(), reason: "x".into() }, "ShadowMismatch"),
            (RegistryError::ShuttingDown { plugin: id }, "ShuttingDown"),
        ];
        for (error, reason) in cases {
            assert_eq!(error.reason(), reason, "{error}");
        }
    }

    #[test]
    fn a_name_taken_says_which_source_holds_it_and_what_to_do() {
        let error =
            RegistryError::NameTaken { origin: cm("a"), name: PluginId::parse("team-a/p").unwrap(), holder: cm("b") };
        assert_eq!(
            error.to_string(),
            "ConfigMap team-a/a offers plugin \"team-a/p\", which ConfigMap team-a/b already serves; a plugin name is unique within its plugin namespace (the operator's files are one): remove one of the two"
        );
    }
}
