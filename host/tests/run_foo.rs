//! `wasmloop run` with foo-deployment on the real control plane: sample-controller parity.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, eventually, shared};

fn component(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("wasm32-wasip2/release").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: run scripts/build-plugins first", path.display());
    path
}

/// The host process; killed when the test ends.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_host(plugins: &[&str]) -> Host {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmloop"));
    command.arg("run").env("KUBECONFIG", shared().kubeconfig()).env("WASMLOOP_LOG", "info");
    for plugin in plugins {
        command.arg("--plugin").arg(component(plugin));
    }
    Host(command.stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().expect("wasmloop starts"))
}

async fn install_foo_crd(ns: &TestNamespace) -> Api<DynamicObject> {
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

fn foo(name: &str, deployment: &str, replicas: i32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": name},
        "spec": {"deploymentName": deployment, "replicas": replicas}
    }))
    .unwrap()
}

async fn deployment_with(
    deployments: &Api<Deployment>,
    name: &str,
    what: &str,
    check: impl Fn(&Deployment) -> bool,
) -> Deployment {
    eventually(Duration::from_secs(60), what, || {
        let deployments = deployments.clone();
        let check = &check;
        async move {
            match deployments.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(d) if check(&d) => Ok(d),
                Some(d) => Err(format!("{:?}", d.spec.map(|s| s.replicas))),
                None => Err("no deployment yet".into()),
            }
        }
    })
    .await
}

#[tokio::test]
async fn foo_deployment_has_sample_controller_parity() {
    let ns = shared().namespace("run-foo").await.unwrap();
    let foos = install_foo_crd(&ns).await;
    let _host = start_host(&["foo_deployment"]);
    let deployments: Api<Deployment> = ns.api();

    // Create a Foo: the Deployment exists with owner reference, labels and replicas.
    let created = foos.create(&PostParams::default(), &foo("example-foo", "example-foo", 2)).await.unwrap();
    let d = deployment_with(&deployments, "example-foo", "the Deployment", |d| {
        d.spec.as_ref().and_then(|s| s.replicas) == Some(2)
    })
    .await;
    let owner = &d.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Foo", created.metadata.uid.as_deref().unwrap(), Some(true))
    );
    let labels = d.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
    assert_eq!((labels["app"].as_str(), labels["controller"].as_str()), ("nginx", "example-foo"));

    // Change spec.replicas: the Deployment follows.
    foos.patch("example-foo", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.unwrap();
    deployment_with(&deployments, "example-foo", "3 replicas", |d| d.spec.as_ref().and_then(|s| s.replicas) == Some(3))
        .await;

    // Set the Deployment's available replicas by hand: the Foo's status mirrors it.
    deployments
        .patch_status(
            "example-foo",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"availableReplicas": 3, "readyReplicas": 3, "replicas": 3}})),
        )
        .await
        .unwrap();
    eventually(Duration::from_secs(60), "the Foo status to mirror availableReplicas", || {
        let foos = foos.clone();
        async move {
            let foo = foos.get("example-foo").await.map_err(|e| e.to_string())?;
            if foo.data["status"]["availableReplicas"] == 3 { Ok(()) } else { Err(foo.data["status"].to_string()) }
        }
    })
    .await;

    // The Synced Event appears.
    let events: Api<Event> = ns.api();
    eventually(Duration::from_secs(30), "the Synced Event", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            list.items
                .iter()
                .find(|e| e.reason.as_deref() == Some("Synced") && e.note.as_deref() == Some("Foo synced successfully"))
                .map(drop)
                .ok_or_else(|| "no Synced event yet".to_owned())
        }
    })
    .await;

    // Delete the Foo: the garbage collector removes the Deployment.
    foos.delete("example-foo", &DeleteParams::background()).await.unwrap();
    eventually(Duration::from_secs(60), "the garbage collector to remove the Deployment", || {
        let deployments = deployments.clone();
        async move {
            match deployments.get_opt("example-foo").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_foreign_deployment_is_left_untouched_with_err_resource_exists() {
    let ns = shared().namespace("run-foreign").await.unwrap();
    let foos = install_foo_crd(&ns).await;
    let deployments: Api<Deployment> = ns.api();
    let foreign: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "taken"},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "other"}},
                 "template": {"metadata": {"labels": {"app": "other"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap();
    let before = deployments.create(&PostParams::default(), &foreign).await.unwrap();
    let _host = start_host(&["foo_deployment"]);
    foos.create(&PostParams::default(), &foo("claimer", "taken", 1)).await.unwrap();

    let events: Api<Event> = ns.api();
    let warning = eventually(Duration::from_secs(60), "the ErrResourceExists Warning", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            list.items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("ErrResourceExists"))
                .ok_or_else(|| "none yet".to_owned())
        }
    })
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(warning.note.unwrap().contains("Resource \"taken\" already exists and is not managed by Foo"));
    let after = deployments.get("taken").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "the foreign Deployment was written");
}
