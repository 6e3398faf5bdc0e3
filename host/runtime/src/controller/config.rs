//! How a controller runs: the operator's settings, the plugin's proposals and the rules
//! that settle them, decided before any informer starts.
//!
//! The operator's explicit setting wins (`host.yaml` `plugins.<name>`), then the plugin's
//! proposal held to the operator's ceiling (at most 16 concurrent reconciles, a resync no
//! shorter than 10 s), then the host's default. Two pure, table-tested rules confine a plugin:
//! `effective_namespace` (`plugins.<name>.namespace` confines every informer scope of the
//! plugin; a manifest naming another namespace is refused) and `grants_within` (a confined
//! plugin's write grants may not reach beyond its namespace), so the confinement bounds
//! writes as well as reads.

use std::time::Duration;

use wasmloop_contract::names::Namespace;
use wasmloop_sandbox::{Manifest, WriteScope};

use crate::executor::WriteBudget;
use crate::identity::{Identity, ServiceAccount};
use crate::quarantine::Policy as QuarantinePolicy;
use crate::queue::QueueConfig;

/// How a controller runs.
///
/// Settings win in this order: the operator's setting for the plugin (`*_override`, from
/// `host.yaml`'s `plugins.<name>`), then the plugin's proposal held to the operator's
/// ceiling, then the host default.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// Reconciles at once when neither the operator (`concurrency_override`) nor the plugin
    /// says otherwise.
    pub concurrency: usize,
    /// The operator's setting for this plugin; wins over the plugin's own.
    pub concurrency_override: Option<usize>,
    /// The most reconciles at once a plugin may propose for itself.
    pub max_concurrency: usize,
    /// The shortest resync a plugin may propose for itself.
    pub min_resync: Duration,
    /// The queue's backoff and bucket.
    pub queue: QueueConfig,
    /// The plugin's configuration as JSON text.
    pub plugin_config: String,
    /// Requeue every primary this often: the operator's setting, which wins over the
    /// plugin's.
    pub resync: Option<Duration>,
    /// Whom the plugin's requests act as; set by the registry from the source's choice and
    /// `service_account`.
    pub identity: Identity,
    /// The operator's ServiceAccount for this plugin, for plugins loaded from files.
    pub service_account: Option<ServiceAccount>,
    /// The one namespace the operator confines the plugin to (`host.yaml`'s
    /// `plugins.<name>.namespace`): its primaries, children, watches and reads are served from
    /// there only, so its ServiceAccount needs grants there only.
    pub namespace: Option<Namespace>,
    /// The plugin's budget of API writes.
    pub write_budget: WriteBudget,
    /// The shortest `requeue_after` the plugin gets: a plugin asking for less waits this long,
    /// so a requeue storm cannot spin a worker.
    pub min_requeue: Duration,
    /// When the plugin is quarantined, and how it is probed.
    pub quarantine: QuarantinePolicy,
    /// The plugin's weight in the host's CPU budget (the operator's; 1 unless set).
    pub cpu_weight: u32,
}

/// The default floor on `requeue_after`.
pub const DEFAULT_MIN_REQUEUE: Duration = Duration::from_secs(1);

impl ControllerConfig {
    /// Reconciles at once, given what the plugin proposes.
    pub fn concurrency_for(&self, proposed: Option<u32>) -> usize {
        let proposed = proposed.map(|n| (n as usize).min(self.max_concurrency));
        self.concurrency_override.or(proposed).unwrap_or(self.concurrency).max(1)
    }

    /// How often every primary is requeued, given what the plugin proposes.
    pub fn resync_for(&self, proposed_seconds: Option<u32>) -> Option<Duration> {
        let proposed = proposed_seconds.map(|s| Duration::from_secs(s.into()).max(self.min_resync));
        self.resync.or(proposed).filter(|every| !every.is_zero())
    }
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            concurrency: 4,
            concurrency_override: None,
            max_concurrency: 16,
            min_resync: Duration::from_secs(10),
            queue: QueueConfig::default(),
            plugin_config: "{}".into(),
            resync: None,
            identity: Identity::Host,
            service_account: None,
            namespace: None,
            write_budget: WriteBudget::default(),
            min_requeue: DEFAULT_MIN_REQUEUE,
            quarantine: QuarantinePolicy::default(),
            cpu_weight: 1,
        }
    }
}

/// The namespace a plugin is served a kind from, given the one it declares and the one the
/// operator confines it to: the operator's, which a declaration may only repeat.
///
/// # Errors
/// When the two differ, saying what to change.
pub(super) fn effective_namespace(
    declared: Option<&Namespace>,
    operator: Option<&Namespace>,
) -> Result<Option<Namespace>, String> {
    match (declared, operator) {
        (Some(declared), Some(operator)) if declared != operator => Err(format!(
            "declares namespace {declared} but the operator confines the plugin to namespace {operator}; \
             change plugins.<name>.namespace in host.yaml or the plugin's manifest"
        )),
        (declared, operator) => Ok(operator.or(declared).cloned()),
    }
}

/// A plugin the operator confines to one namespace may not be granted writes beyond it: its
/// grants must be `primary-namespace` or list that namespace only. Returns the grant that
/// reaches further, and what to change.
pub(super) fn grants_within(manifest: &Manifest, operator: &Namespace) -> Result<(), (String, String)> {
    for grant in &manifest.writes {
        let beyond = match &grant.scope {
            WriteScope::PrimaryNamespace => continue,
            WriteScope::Any => "every namespace".to_owned(),
            WriteScope::Namespaces(list) => match list.iter().find(|ns| *ns != operator) {
                Some(other) => format!("namespace {other}"),
                None => continue,
            },
        };
        return Err((
            format!("its write grant on {}", grant.kind),
            format!(
                "reaches {beyond}, but the operator confines the plugin to namespace {operator}; narrow the grant to primary-namespace, or change plugins.<name>.namespace in host.yaml"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_namespace_confines_a_plugin_and_a_declaration_may_only_repeat_it() {
        let cases = [
            (None, None, Ok(None)),
            (Some("a"), None, Ok(Some("a"))),
            (None, Some("t"), Ok(Some("t"))),
            (Some("t"), Some("t"), Ok(Some("t"))),
            (Some("a"), Some("t"), Err("declares namespace a but the operator confines the plugin to namespace t")),
        ];
        let ns = |n: Option<&str>| n.map(|n| Namespace::parse(n).unwrap());
        for (declared, operator, expected) in cases {
            let got = effective_namespace(ns(declared).as_ref(), ns(operator).as_ref());
            match (got, expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got.as_deref(), expected, "{declared:?} {operator:?}"),
                (Err(got), Err(expected)) => assert!(got.starts_with(expected), "{got}"),
                (got, expected) => panic!("{declared:?} {operator:?}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn an_operator_confined_plugin_may_only_hold_grants_inside_its_namespace() {
        use wasmloop_sandbox::{Gvk, WriteGrant, WriteVerbs};
        let configmap = Gvk::from_api_version("v1", "ConfigMap").unwrap();
        let manifest = |scope: WriteScope| Manifest {
            writes: vec![WriteGrant {
                kind: configmap.clone(),
                verbs: WriteVerbs { patch: true, ..Default::default() },
                scope,
            }],
            ..Manifest::declaring("p", configmap.clone())
        };
        let list = |l: &[&str]| WriteScope::Namespaces(l.iter().map(|s| Namespace::parse(s).unwrap()).collect());
        let cases = [
            (WriteScope::PrimaryNamespace, None),
            (list(&["t"]), None),
            (list(&["t", "kube-system"]), Some("reaches namespace kube-system")),
            (WriteScope::Any, Some("reaches every namespace")),
        ];
        for (scope, expected) in cases {
            let got =
                grants_within(&manifest(scope.clone()), &Namespace::parse("t").unwrap()).err().map(|(what, reason)| {
                    assert_eq!(what, "its write grant on v1/ConfigMap");
                    reason
                });
            match (got, expected) {
                (None, None) => {}
                (Some(reason), Some(part)) => assert!(reason.starts_with(part), "{reason}"),
                (got, expected) => panic!("{scope:?}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn concurrency_settings_win_in_order_operator_then_capped_plugin_then_default() {
        let config = ControllerConfig { concurrency: 4, max_concurrency: 16, ..ControllerConfig::default() };
        let operator = ControllerConfig { concurrency_override: Some(32), ..config.clone() };
        let cases = [
            (&config, None, 4),
            (&config, Some(2), 2),
            (&config, Some(u32::MAX), 16),
            (&operator, Some(2), 32),
            (&operator, None, 32),
            (&ControllerConfig { concurrency_override: Some(0), ..config.clone() }, None, 1),
        ];
        for (config, proposed, expected) in cases {
            assert_eq!(config.concurrency_for(proposed), expected, "{config:?} {proposed:?}");
        }
    }

    #[test]
    fn the_operators_resync_wins_and_a_plugins_is_held_to_the_floor() {
        let config = ControllerConfig { min_resync: Duration::from_secs(10), ..ControllerConfig::default() };
        let operator = ControllerConfig { resync: Some(Duration::from_secs(300)), ..config.clone() };
        let cases = [
            (&config, None, None),
            (&config, Some(60), Some(Duration::from_secs(60))),
            (&config, Some(1), Some(Duration::from_secs(10))),
            (&operator, Some(1), Some(Duration::from_secs(300))),
            (&operator, None, Some(Duration::from_secs(300))),
        ];
        for (config, proposed, expected) in cases {
            assert_eq!(config.resync_for(proposed), expected, "{config:?} {proposed:?}");
        }
    }
}
