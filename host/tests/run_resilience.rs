//! `wasmloop run` survives an API-server outage. Its own test binary, so restarting the
//! API server disturbs no other test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, eventually, shared};

fn component(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("wasm32-wasip2/release").join(format!("{name}.wasm"))
}

struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn foos(ns: &TestNamespace) -> Api<DynamicObject> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../plugins/foo-deployment/deploy/crd.yaml");
    let crd: CustomResourceDefinition = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    match Api::<CustomResourceDefinition>::all(ns.client.clone()).create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(e) => panic!("installing the Foo CRD: {e}"),
    }
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo"), "foos");
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    eventually(Duration::from_secs(30), "the Foo CRD to be served", || {
        let foos = foos.clone();
        async move { foos.list(&ListParams::default()).await.map(drop).map_err(|e| e.to_string()) }
    })
    .await;
    foos
}

async fn replicas_become(deployments: &Api<Deployment>, name: &str, replicas: i32) {
    eventually(Duration::from_secs(90), &format!("{name} at {replicas} replicas"), || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get_opt(name).await.map_err(|e| e.to_string())?;
            match d.and_then(|d| d.spec).and_then(|s| s.replicas) {
                Some(r) if r == replicas => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn the_host_recovers_from_an_api_server_outage_and_converges_afterwards() {
    let plane = shared();
    let ns = plane.namespace("outage").await.unwrap();
    let foos = foos(&ns).await;
    let _host = Host(
        Command::new(env!("CARGO_BIN_EXE_wasmloop"))
            .args(["run", "--plugin"])
            .arg(component("foo_deployment"))
            .env("KUBECONFIG", plane.kubeconfig())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let foo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": "steady"}, "spec": {"deploymentName": "steady", "replicas": 1}
    }))
    .unwrap();
    foos.create(&PostParams::default(), &foo).await.unwrap();
    let deployments: Api<Deployment> = ns.api();
    replicas_become(&deployments, "steady", 1).await;

    plane.stop_apiserver();
    tokio::time::sleep(Duration::from_secs(10)).await;
    plane.restart_apiserver().await.unwrap();

    // A client made before the outage reconnects; the host's watches must have resumed.
    let foos = {
        let ns = plane.namespace("outage-after").await.unwrap();
        let _ = ns;
        foos
    };
    foos.patch("steady", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 4}}))).await.unwrap();
    replicas_become(&deployments, "steady", 4).await;
}
