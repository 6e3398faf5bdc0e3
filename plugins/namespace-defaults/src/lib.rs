//! `namespace-defaults`: gives every Namespace labelled `wasmloop.dev/defaults=enabled` a
//! default NetworkPolicy, ResourceQuota and RoleBinding, as Kyverno's generate rules with
//! `synchronize: true` do (its sample policies `add-networkpolicy`, `add-quota` and
//! `add-rolebinding`), and as HNC propagates a parent's objects:
//!
//! - `default-deny`: a NetworkPolicy selecting every Pod, denying ingress and egress;
//! - `default-resourcequota`: a ResourceQuota, its `hard` limits from the plugin's config
//!   (`quota`, default Kyverno's: 4 CPUs and 16Gi requested and limited);
//! - `default-team`: a RoleBinding of the ClusterRole `edit` (config `role`) to the Group the
//!   Namespace's `wasmloop.dev/team` label names, only for a Group the config's `teams` lists:
//!   whoever may label a Namespace must not be able to grant a Group of their choosing `edit`
//!   there. An unlisted team gets a Warning Event (`TeamNotAllowed`) and no RoleBinding.
//!
//! They are the Namespace's children: one deleted is put back (its deletion calls the plugin),
//! one edited has the fields this plugin manages set back by the next apply (fields another
//! manager added are theirs, as server-side apply has it), and all of them are pruned when the
//! label goes or changes. A Namespace being deleted is left alone: its objects go with it.
//! An object of the same name that is not the Namespace's own (made by someone else) is never
//! taken over: it is left alone, with a Warning Event (`DefaultExists`). Namespaces the config's
//! `excludedNamespaces` names (default `kube-*` and `wasmloop-system`: a deny-all policy there
//! would cut off the cluster's DNS or the host itself) get nothing, label or not.
//!
//! Every Namespace is the plugin's primary, not only labelled ones: the label going away is
//! what prunes, and a Namespace that left a label selection would no longer be reconciled.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::RoleBinding;
use serde::Deserialize;
use serde_json::{Value, json};
use wasmloop_sdk::Gvk;
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
#[serde(deny_unknown_fields, default, rename_all = "camelCase")]
pub struct Defaults {
    /// The ResourceQuota's `hard` limits.
    pub quota: BTreeMap<String, String>,
    /// The ClusterRole the team is bound to.
    pub role: String,
    /// The Groups a Namespace's team label may name.
    pub teams: Vec<String>,
    /// Namespaces that get nothing: names, or prefixes ending in `*`.
    pub excluded_namespaces: Vec<String>,
}

impl Default for Defaults {
    fn default() -> Self {
        let quota =
            [("requests.cpu", "4"), ("requests.memory", "16Gi"), ("limits.cpu", "4"), ("limits.memory", "16Gi")];
        Defaults {
            quota: quota.map(|(k, v)| (k.to_owned(), v.to_owned())).into(),
            role: "edit".into(),
            teams: Vec::new(),
            excluded_namespaces: vec!["kube-*".into(), "wasmloop-system".into()],
        }
    }
}

impl Defaults {
    /// The configuration, refusing what is not a mapping (serde would read a list as a struct).
    fn of(request: &Request) -> Result<Defaults, Error> {
        let fix = "fix the plugin's configuration (config.yaml or --config)";
        let value: Value = request.config()?;
        if !value.is_object() {
            return Err(Error::permanent(format!("invalid plugin config: expected a mapping; {fix}")));
        }
        serde_json::from_value(value).map_err(|e| Error::permanent(format!("invalid plugin config: {e}; {fix}")))
    }

    fn excludes(&self, namespace: &str) -> bool {
        self.excluded_namespaces.iter().any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => namespace.starts_with(prefix),
            None => namespace == pattern,
        })
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
        let config = Defaults::of(request)?;
        let name = request.object.name.as_str();
        if label(&namespace, LABEL) != Some(ENABLED) || config.excludes(name) {
            if request.owned.is_empty() {
                return Ok(Vec::new());
            }
            let gone = request.owned.len();
            let message = format!("{LABEL} is not {ENABLED} here: {gone} default object(s) removed");
            return Ok(vec![prune(), event(EventType::Normal, "DefaultsRemoved", message)]);
        }
        let team = label(&namespace, TEAM);
        let allowed = team.filter(|t| config.teams.iter().any(|listed| listed == t));
        let (mut actions, mut created, mut taken) = (Vec::new(), Vec::new(), Vec::new());
        for (kind, child, object) in defaults_for(name, allowed, &config) {
            let ours = request.owned.iter().any(|o| o.kind == kind && o.name == child);
            if !ours {
                let gvk = Gvk::from_api_version(object["apiVersion"].as_str().unwrap_or_default(), kind);
                if cache::get_object(&gvk, Some(name), child)?.is_some() {
                    taken.push(format!("{kind} {child}"));
                    continue;
                }
                created.push(format!("{kind} {child}"));
            }
            actions.push(apply(&object));
        }
        actions.push(prune());
        if !taken.is_empty() {
            let message = format!(
                "{} exist(s) and are not this Namespace's; left alone: rename or remove them",
                taken.join(", ")
            );
            actions.push(event(EventType::Warning, "DefaultExists", message));
        }
        if let Some(team) = team.filter(|_| allowed.is_none()) {
            let message =
                format!("team {team:?} is not in the plugin's teams; no RoleBinding: list it in the config's teams");
            actions.push(event(EventType::Warning, "TeamNotAllowed", message));
        }
        if !created.is_empty() {
            actions.push(event(
                EventType::Normal,
                "DefaultsApplied",
                format!("created or put back: {}", created.join(", ")),
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
        let outcome = TestCase::new(namespace(json!({LABEL: ENABLED, TEAM: "payments"})))
            .config(json!({"teams": ["payments"]}))
            .run::<NamespaceDefaults>();
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
    fn a_team_the_config_does_not_list_gets_no_rolebinding_and_a_warning() {
        let outcome = TestCase::new(namespace(json!({LABEL: ENABLED, TEAM: "everyone"}))).run::<NamespaceDefaults>();
        assert_eq!(kinds_applied(&outcome), ["NetworkPolicy default-deny", "ResourceQuota default-resourcequota"]);
        assert_eq!(outcome.events()[0].reason, "TeamNotAllowed");
    }

    #[test]
    fn an_object_of_the_same_name_made_by_someone_else_is_never_taken_over() {
        let mut theirs = child("networking.k8s.io/v1", "NetworkPolicy", "default-deny");
        theirs["metadata"]["ownerReferences"] = json!([]);
        let outcome = TestCase::new(namespace(json!({LABEL: ENABLED}))).cached(theirs).run::<NamespaceDefaults>();
        assert_eq!(kinds_applied(&outcome), ["ResourceQuota default-resourcequota"]);
        assert_eq!(outcome.events()[0].reason, "DefaultExists");
        assert!(
            outcome.events()[0].message.starts_with("NetworkPolicy default-deny exist(s)"),
            "{}",
            outcome.events()[0].message
        );
    }

    #[test]
    fn an_excluded_namespace_gets_nothing_and_loses_what_it_had() {
        let mut system = namespace(json!({LABEL: ENABLED}));
        system["metadata"]["name"] = json!("kube-system");
        assert!(TestCase::new(system.clone()).run::<NamespaceDefaults>().actions().is_empty());
        let outcome = TestCase::new(system)
            .owned(child("networking.k8s.io/v1", "NetworkPolicy", "default-deny"))
            .run::<NamespaceDefaults>();
        assert!(outcome.prunes() && kinds_applied(&outcome).is_empty());
    }

    #[test]
    fn a_config_that_is_no_mapping_is_refused() {
        let outcome =
            TestCase::new(namespace(json!({LABEL: ENABLED}))).config(json!([{"quota": {}}])).run::<NamespaceDefaults>();
        assert!(outcome.error().to_string().contains("expected a mapping"), "{}", outcome.error());
    }

    #[test]
    fn an_unknown_config_key_is_a_permanent_error_naming_it() {
        let outcome =
            TestCase::new(namespace(json!({LABEL: ENABLED}))).config(json!({"quotas": {}})).run::<NamespaceDefaults>();
        assert!(outcome.error().to_string().contains("quotas"), "{}", outcome.error());
    }
}
