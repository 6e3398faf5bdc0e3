//! `roller`: the core of a "roll a Deployment when a ConfigMap it mounts changes" controller,
//! on contract 0.3. It rolls a Deployment by annotating its pod template
//! (`wasmloop.dev/rolled-for`), and writes what it saw into a ConfigMap of its own,
//! `roller-observed-NAME`, for tests to read:
//!
//! - `triggers`: why the call ran (`primary 1->2`, `related ConfigMap/settings`);
//! - `calls`: how many times it was called for the Deployment (counted from the last write);
//! - `deployments`, `secrets`: what its cache holds in the namespace (annotated Deployments
//!   only; the one Secret its watch selects);
//! - `conflict`: the managers and fields of an unforced apply's conflict.
//!
//! (Not on the Deployment: an annotation change bumps a Deployment's generation, and a
//! generation-filtered plugin that wrote one each call would call itself forever.)
//!
//! Only Deployments annotated `wasmloop.dev/roll` are its primaries, and only their generation
//! changes call it. With config `{"replicas": N}` it also sets `spec.replicas`, unforced, and
//! gives the field up once told another manager owns it.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Deserialize;
use wasmloop_sdk::prelude::*;

/// The index of Deployments by the ConfigMaps they mount or take environment from.
pub const MOUNTS: &str = "configmap";
/// The one Secret the plugin watches.
pub const SECRET: &str = "roll-secret";

#[derive(Debug, Default, Deserialize)]
struct Settings {
    #[serde(default)]
    replicas: Option<i32>,
}

/// The plugin.
pub struct Roller;

fn shown(trigger: &Trigger) -> String {
    match trigger {
        Trigger::PrimaryChanged { old, new } => {
            let g = |g: &Option<i64>| g.map_or("-".to_owned(), |g| g.to_string());
            format!("primary {}->{}", g(old), g(new))
        }
        Trigger::OwnedChanged(r) => format!("owned {}/{}", r.kind, r.name),
        Trigger::RelatedChanged(r) => format!("related {}/{}", r.kind, r.name),
        Trigger::Resync => "resync".into(),
        Trigger::Requeue => "requeue".into(),
        Trigger::Retry => "retry".into(),
        Trigger::Conflict(c) => format!("conflict {}", c.target.name),
    }
}

fn names<K: Kind + serde::de::DeserializeOwned>(namespace: Option<&str>) -> Result<String, Error> {
    let objects = cache::list_objects(&K::gvk(), namespace, None)?;
    Ok(objects.iter().map(|o| o.name.as_str()).collect::<Vec<_>>().join(","))
}

impl Reconciler for Roller {
    fn manifest() -> Manifest {
        Manifest::new("roller", env!("CARGO_PKG_VERSION"))
            .primary_selector(KindSelector::of::<Deployment>().annotated("wasmloop.dev/roll").generation_changed())
            .watches(KindSelector::of::<ConfigMap>())
            .watches(KindSelector::of::<Secret>().fields(format!("metadata.name={SECRET}")))
            .index::<Deployment>(
                MOUNTS,
                [
                    "spec.template.spec.volumes[*].configMap.name",
                    "spec.template.spec.containers[*].envFrom[*].configMapRef.name",
                ],
            )
            .writes(Grant::of::<Deployment>().apply())
            .writes(Grant::of::<ConfigMap>().apply())
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        if request.phase != Phase::Apply {
            return Ok(Vec::new());
        }
        let settings: Settings = request.config()?;
        let namespace = request.object.namespace.as_deref();
        let triggers: Vec<String> = request.triggers.iter().map(shown).collect();
        let rolled: Vec<&str> = request
            .triggers
            .iter()
            .filter_map(|t| match t {
                Trigger::RelatedChanged(r) if r.kind == "ConfigMap" => Some(r.name.as_str()),
                _ => None,
            })
            .collect();
        let conflict: Vec<String> = request
            .triggers
            .iter()
            .filter_map(|t| match t {
                Trigger::Conflict(c) => Some(c.fields.iter().map(|f| format!("{} {}", f.manager, f.field))),
                _ => None,
            })
            .flatten()
            .collect();
        // Its calls, counted from what it last wrote (its cache holds its own ConfigMap).
        let observation = format!("roller-observed-{}", request.object.name);
        let last: Option<ConfigMap> = cache::get(namespace, &observation)?;
        let calls =
            last.and_then(|c| c.data).and_then(|d| d.get("calls").and_then(|n| n.parse::<u64>().ok())).unwrap_or(0);
        let observed = Partial::of::<ConfigMap>(observation)
            .set_at(&["data", "calls"], (calls + 1).to_string())
            .set_at(&["data", "triggers"], triggers.join(";"))
            .set_at(&["data", "deployments"], names::<Deployment>(namespace)?)
            .set_at(&["data", "secrets"], names::<Secret>(namespace)?)
            .set_at(&["data", "conflict"], conflict.join(";"));
        let mut actions = vec![apply(&observed)];
        let mut desired = Partial::of::<Deployment>(&request.object.name);
        let mut sets = false;
        if let Some(replicas) = settings.replicas.filter(|_| conflict.is_empty()) {
            desired = desired.set("spec.replicas", replicas);
            sets = true;
        }
        // The roll is kept once made: an apply that left it out would take it back.
        let path = ["spec", "template", "metadata", "annotations", "wasmloop.dev/rolled-for"];
        let current: serde_json::Value = request.object.parse()?;
        let pointer = "/spec/template/metadata/annotations/wasmloop.dev~1rolled-for";
        let kept = current.pointer(pointer).and_then(serde_json::Value::as_str).map(str::to_owned);
        let roll = if rolled.is_empty() { kept } else { Some(rolled.join(",")) };
        if let Some(roll) = roll {
            desired = desired.set_at(&path, roll);
            sets = true;
        }
        if sets {
            actions.push(Apply::of(&desired).unforced().into());
        }
        Ok(actions)
    }

    fn map(related: &Object, _config: &Config) -> Vec<ObjectRef> {
        let namespace = related.namespace.as_deref();
        let users = if related.kind == "ConfigMap" {
            cache::list_by_index_objects(&Deployment::gvk(), MOUNTS, &related.name, namespace)
        } else {
            // The Secret: every primary in its namespace reports what its cache holds.
            cache::list_objects(&Deployment::gvk(), namespace, None)
        };
        let users = users.unwrap_or_default();
        wasmloop_sdk::info!("map of {} {} found {}", related.kind, related.name, users.len());
        users.iter().map(Object::to_ref).collect()
    }
}

wasmloop_sdk::export_plugin!(Roller);

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wasmloop_sdk::testing::TestCase;

    use super::*;

    fn deployment(name: &str, mounts: &str) -> serde_json::Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop", "uid": format!("u-{name}"), "generation": 1,
                         "annotations": {"wasmloop.dev/roll": "yes"}},
            "spec": {"template": {"spec": {"volumes": [{"name": "v", "configMap": {"name": mounts}}]}}}
        })
    }

    #[test]
    fn map_finds_the_deployments_that_mount_the_configmap_through_the_index() {
        let configmap =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "shop"}});
        let refs =
            TestCase::new(deployment("web", "settings")).cached(deployment("api", "other")).map::<Roller>(configmap);
        assert_eq!(refs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), vec!["web"]);
    }

    #[test]
    fn a_related_change_rolls_the_pod_template_unforced() {
        let changed = ObjectRef::new::<ConfigMap>("settings").namespace("shop");
        let outcome =
            TestCase::new(deployment("web", "settings")).trigger(Trigger::RelatedChanged(changed)).run::<Roller>();
        let observed = &outcome.applied::<ConfigMap>()[0];
        let data = observed.data.clone().unwrap_or_default();
        assert_eq!((data["triggers"].as_str(), data["calls"].as_str()), ("related ConfigMap/settings", "1"));
        let Action::Apply(roll) = &outcome.actions()[1] else { panic!("an apply") };
        assert!(!roll.force);
        let body: serde_json::Value = serde_json::from_str(&roll.json).unwrap();
        assert_eq!(body["spec"]["template"]["metadata"]["annotations"]["wasmloop.dev/rolled-for"], "settings");
    }
}
