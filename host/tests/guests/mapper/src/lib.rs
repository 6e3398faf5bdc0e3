//! `mapper`: the index benchmark's plugin (`host/baseline/benches/index.rs`). Its primaries are
//! Deployments, whose reconcile does nothing; a changed ConfigMap maps to the Deployments that
//! mount it, found one of two ways (config `{"mode": "index"}` or `{"mode": "scan"}`):
//!
//! - `index`: `cache::list_by_index` of the manifest's index over the volumes' ConfigMap names,
//!   which costs what its answer holds;
//! - `scan`: every Deployment in the namespace, each read and its volumes looked at, as a 0.2
//!   plugin had to (and as a kube-rs mapper over its reflector's store does).
//!
//! It logs `mapped ConfigMap NAME: K found, M read` for the benchmark to count what it touched.

// Natively the export macro expands to nothing, leaving the plugin unused.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use serde::Deserialize;
use wasmloop_sdk::prelude::*;

/// The index of Deployments by the ConfigMaps their volumes mount.
pub const MOUNTS: &str = "configmap";
const PATH: &str = "spec.template.spec.volumes[*].configMap.name";

#[derive(Debug, Default, Deserialize)]
struct Settings {
    #[serde(default)]
    mode: Mode,
}

#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    Index,
    Scan,
}

/// Whether the Deployment (JSON) mounts ConfigMap `name`.
fn mounts(deployment: &serde_json::Value, name: &str) -> bool {
    deployment.pointer("/spec/template/spec/volumes").and_then(serde_json::Value::as_array).is_some_and(|volumes| {
        volumes.iter().any(|v| v.pointer("/configMap/name").and_then(|n| n.as_str()) == Some(name))
    })
}

/// The plugin.
pub struct Mapper;

impl Reconciler for Mapper {
    fn manifest() -> Manifest {
        Manifest::new("mapper", env!("CARGO_PKG_VERSION"))
            .primary::<Deployment>()
            .watches(KindSelector::of::<ConfigMap>())
            .index::<Deployment>(MOUNTS, [PATH])
    }

    fn reconcile(_request: &Request) -> Result<Vec<Action>, Error> {
        Ok(Vec::new())
    }

    fn map(related: &Object, config: &Config) -> Vec<ObjectRef> {
        let settings: Settings = config.parse().unwrap_or_default();
        let namespace = related.namespace.as_deref();
        let (found, read) = match settings.mode {
            Mode::Index => {
                let found = cache::list_by_index_objects(&Deployment::gvk(), MOUNTS, &related.name, namespace)
                    .unwrap_or_default();
                let read = found.len();
                (found, read)
            }
            Mode::Scan => {
                let all = cache::list_objects(&Deployment::gvk(), namespace, None).unwrap_or_default();
                let read = all.len();
                let found = all
                    .into_iter()
                    .filter(|d| serde_json::from_str(d.json()).is_ok_and(|v| mounts(&v, &related.name)))
                    .collect::<Vec<_>>();
                (found, read)
            }
        };
        wasmloop_sdk::info!("mapped ConfigMap {}: {} found, {read} read", related.name, found.len());
        found.iter().map(Object::to_ref).collect()
    }
}

wasmloop_sdk::export_plugin!(Mapper);

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wasmloop_sdk::testing::TestCase;

    use super::*;

    fn deployment(name: &str, mounts: &str) -> serde_json::Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": "shop", "uid": format!("u-{name}")},
               "spec": {"template": {"spec": {"volumes": [{"name": "v", "configMap": {"name": mounts}}]}}}})
    }

    fn settings() -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "shop", "uid": "cm"}})
    }

    #[test]
    fn both_modes_find_the_deployments_that_mount_the_configmap() {
        for mode in ["index", "scan"] {
            let case = TestCase::new(deployment("a", "settings"))
                .cached(deployment("b", "other"))
                .cached(deployment("c", "settings"))
                .config(json!({"mode": mode}));
            let found: Vec<String> = case.map::<Mapper>(settings()).into_iter().map(|r| r.name).collect();
            assert_eq!(found, ["a", "c"], "{mode}");
        }
    }
}
