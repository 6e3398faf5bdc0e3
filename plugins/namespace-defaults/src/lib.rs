//! `namespace-defaults`: gives every Namespace labelled `wasmloop.dev/defaults=enabled` a
//! default NetworkPolicy, ResourceQuota and RoleBinding, as Kyverno's generate rules with
//! `synchronize: true` do (its sample policies `add-networkpolicy`, `add-quota` and
//! `add-rolebinding`), and as HNC propagates a parent's objects:
//!
//! - `default-deny`: a NetworkPolicy selecting every Pod, denying ingress and egress;
//! - `default-resourcequota`: a ResourceQuota, its `hard` limits from the plugin's config
//!   (`quota`, default Kyverno's: 4 CPUs and 16Gi requested and limited);
//! - `default-team`: a RoleBinding of the ClusterRole `edit` (config `role`) to the Group the
//!   Namespace's `wasmloop.dev/team` label names; none without that label.
//!
//! They are the Namespace's children: one deleted is put back (its deletion calls the plugin),
//! one edited has the fields this plugin manages set back by the next apply (fields another
//! manager added are theirs, as server-side apply has it), and all of them are pruned when the
//! label goes or changes. A Namespace being deleted is left alone: its objects go with it.
//!
//! Every Namespace is the plugin's primary, not only labelled ones: the label going away is
//! what prunes, and a Namespace that left a label selection would no longer be reconciled.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::RoleBinding;
use serde::Deserialize;
use serde_json::{Value, json};
use wasmloop_sdk::prelude::*;

/// The label that asks for the defaults, with the value [`ENABLED`].
pub const LABEL: &str = "wasmloop.dev/defaults";
/// The value of [`LABEL`] that asks for them.
pub const ENABLED: &str = "enabled";
/// The label naming the team (a Group) the RoleBinding binds.
pub const TEAM: &str = "wasmloop.dev/team";

/// The plugin.
pub struct NamespaceDefaults;

/// The plugin's configuration.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Defaults {
    /// The ResourceQuota's `hard` limits.
    pub quota: BTreeMap<String, String>,
    /// The ClusterRole the team is bound to.
    pub role: String,
}

impl Default for Defaults {
    fn default() -> Self {
        let quota =
            [("requests.cpu", "4"), ("requests.memory", "16Gi"), ("limits.cpu", "4"), ("limits.memory", "16Gi")];
        Defaults { quota: quota.map(|(k, v)| (k.to_owned(), v.to_owned())).into(), role: "edit".into() }
    }
}

/// The objects a Namespace called `namespace`, of team `team`, gets: (kind, name, object).
pub fn defaults_for(
    namespace: &str,
    team: Option<&str>,
    config: &Defaults,
) -> Vec<(&'static str, &'static str, Value)> {
    let mut wanted = vec![
        (
            "NetworkPolicy",
            "default-deny",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                   "metadata": {"name": "default-deny", "namespace": namespace},
                   "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}),
        ),
        (
            "ResourceQuota",
            "default-resourcequota",
            json!({"apiVersion": "v1", "kind": "ResourceQuota",
                   "metadata": {"name": "default-resourcequota", "namespace": namespace},
                   "spec": {"hard": config.quota}}),
        ),
    ];
    if let Some(team) = team {
        wanted.push((
            "RoleBinding",
            "default-team",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "default-team", "namespace": namespace},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": config.role},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team}]}),
        ));
    }
    wanted
}

fn label<'a>(namespace: &'a Namespace, key: &str) -> Option<&'a str> {
    namespace.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

impl Reconciler for NamespaceDefaults {
    fn manifest() -> Manifest {
        Manifest::new("namespace-defaults", env!("CARGO_PKG_VERSION"))
            .primary::<Namespace>()
            .owns::<NetworkPolicy>()
            .owns::<ResourceQuota>()
            .owns::<RoleBinding>()
            // A Namespace has no namespace, so its children live outside "the primary's":
            // each kind needs a grant, and the operator's confinement narrows it.
            .writes(Grant::of::<NetworkPolicy>().apply().delete().anywhere())
            .writes(Grant::of::<ResourceQuota>().apply().delete().anywhere())
            .writes(Grant::of::<RoleBinding>().apply().delete().anywhere())
            .prune(true)
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let namespace: Namespace = request.object()?;
        if request.phase != Phase::Apply || namespace.metadata.deletion_timestamp.is_some() {
            return Ok(Vec::new());
        }
        if label(&namespace, LABEL) != Some(ENABLED) {
            if request.owned.is_empty() {
                return Ok(Vec::new());
            }
            let gone = request.owned.len();
            return Ok(vec![
                prune(),
                event(
                    EventType::Normal,
                    "DefaultsRemoved",
                    format!("{LABEL} is not {ENABLED}: {gone} default object(s) removed"),
                ),
            ]);
        }
        let config: Defaults = request.config()?;
        let wanted = defaults_for(&request.object.name, label(&namespace, TEAM), &config);
        let missing: Vec<String> = wanted
            .iter()
            .filter(|(kind, name, _)| !request.owned.iter().any(|o| o.kind == *kind && o.name == *name))
            .map(|(kind, name, _)| format!("{kind} {name}"))
            .collect();
        let mut actions: Vec<Action> = wanted.iter().map(|(_, _, object)| apply(object)).collect();
        actions.push(prune());
        if !missing.is_empty() {
            actions.push(event(
                EventType::Normal,
                "DefaultsApplied",
                format!("created or put back: {}", missing.join(", ")),
            ));
        }
        Ok(actions)
    }
}

wasmloop_sdk::export_plugin!(NamespaceDefaults);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmloop_sdk::testing::TestCase;

    fn namespace(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "ns-uid", "labels": labels}})
    }

    fn child(api_version: &str, kind: &str, name: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind,
               "metadata": {"name": name, "namespace": "team-a", "uid": format!("{name}-uid"),
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "team-a",
                                                 "uid": "ns-uid", "controller": true}]}})
    }

    fn kinds_applied(outcome: &wasmloop_sdk::testing::Outcome) -> Vec<String> {
        outcome
            .actions()
            .iter()
            .filter_map(|a| match a {
                Action::Apply(apply) => {
                    let object: Value = serde_json::from_str(&apply.json).ok()?;
                    Some(format!("{} {}", object["kind"].as_str()?, object["metadata"]["name"].as_str()?))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_labelled_namespace_gets_its_three_defaults_and_an_event() {
        let outcome = TestCase::new(namespace(json!({LABEL: ENABLED, TEAM: "payments"}))).run::<NamespaceDefaults>();
        assert_eq!(
            kinds_applied(&outcome),
            ["NetworkPolicy default-deny", "ResourceQuota default-resourcequota", "RoleBinding default-team"]
        );
        let binding = &outcome.applied::<RoleBinding>()[0];
        assert_eq!(binding.subjects.as_ref().unwrap()[0].name, "payments");
        assert_eq!(binding.role_ref.name, "edit");
        assert!(outcome.prunes());
        assert_eq!(outcome.events()[0].reason, "DefaultsApplied");
    }

    #[test]
    fn without_a_team_there_is_no_rolebinding() {
        let outcome = TestCase::new(namespace(json!({LABEL: ENABLED}))).run::<NamespaceDefaults>();
        assert_eq!(kinds_applied(&outcome), ["NetworkPolicy default-deny", "ResourceQuota default-resourcequota"]);
    }

    #[test]
    fn the_quota_comes_from_the_config() {
        let outcome = TestCase::new(namespace(json!({LABEL: ENABLED})))
            .config(json!({"quota": {"pods": "10"}}))
            .run::<NamespaceDefaults>();
        let quota = &outcome.applied::<ResourceQuota>()[0];
        let hard = quota.spec.as_ref().unwrap().hard.as_ref().unwrap();
        assert_eq!(hard.keys().collect::<Vec<_>>(), ["pods"]);
    }

    #[test]
    fn a_namespace_that_has_its_defaults_is_reapplied_without_an_event() {
        let outcome = TestCase::new(namespace(json!({LABEL: ENABLED})))
            .owned(child("networking.k8s.io/v1", "NetworkPolicy", "default-deny"))
            .owned(child("v1", "ResourceQuota", "default-resourcequota"))
            .run::<NamespaceDefaults>();
        assert_eq!(kinds_applied(&outcome).len(), 2);
        assert!(outcome.events().is_empty());
    }

    #[test]
    fn a_deleted_default_is_put_back_and_named() {
        let outcome = TestCase::new(namespace(json!({LABEL: ENABLED})))
            .owned(child("networking.k8s.io/v1", "NetworkPolicy", "default-deny"))
            .run::<NamespaceDefaults>();
        assert_eq!(outcome.events()[0].message, "created or put back: ResourceQuota default-resourcequota");
    }

    #[test]
    fn the_label_going_prunes_every_default() {
        let outcome = TestCase::new(namespace(json!({LABEL: "disabled"})))
            .owned(child("networking.k8s.io/v1", "NetworkPolicy", "default-deny"))
            .run::<NamespaceDefaults>();
        assert!(outcome.prunes() && kinds_applied(&outcome).is_empty());
        assert_eq!(outcome.events()[0].reason, "DefaultsRemoved");
    }

    #[test]
    fn an_unlabelled_namespace_without_defaults_costs_nothing() {
        assert!(TestCase::new(namespace(json!({}))).run::<NamespaceDefaults>().actions().is_empty());
    }

    #[test]
    fn a_namespace_being_deleted_is_left_alone() {
        let mut ns = namespace(json!({LABEL: ENABLED}));
        ns["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(TestCase::new(ns).run::<NamespaceDefaults>().actions().is_empty());
    }

    #[test]
    fn an_unknown_config_key_is_a_permanent_error_naming_it() {
        let outcome =
            TestCase::new(namespace(json!({LABEL: ENABLED}))).config(json!({"quotas": {}})).run::<NamespaceDefaults>();
        assert!(outcome.error().to_string().contains("quotas"), "{}", outcome.error());
    }
}
