//! The control plane is real: CRDs, owner-reference garbage collection and watches work.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use wasmloop_testenv::{eventually, shared};

fn crd() -> CustomResourceDefinition {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../plugins/foo-deployment/deploy/crd.yaml");
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn configmap(name: &str) -> ConfigMap {
    ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, ..ConfigMap::default() }
}

#[tokio::test]
async fn a_crd_can_be_installed_and_an_object_of_it_created() {
    let ns = shared().namespace("smoke-crd").await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    match crds.create(&PostParams::default(), &crd()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {} // another test installed it
        Err(e) => panic!("creating the Foo CRD failed: {e}"),
    }
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo"), "foos");
    let foos: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let foo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": "example-foo"},
        "spec": {"deploymentName": "example-foo", "replicas": 1}
    }))
    .unwrap();
    // The CRD is served shortly after it is established.
    let created = eventually(Duration::from_secs(30), "the Foo CRD to be served", || {
        let (foos, foo) = (foos.clone(), foo.clone());
        async move { foos.create(&PostParams::default(), &foo).await.map_err(|e| e.to_string()) }
    })
    .await;
    assert_eq!(created.data["spec"]["replicas"], 1);
    assert!(created.metadata.uid.is_some());
}

#[tokio::test]
async fn deleting_a_parent_lets_the_garbage_collector_delete_its_child() {
    let ns = shared().namespace("smoke-gc").await.unwrap();
    let cms: Api<ConfigMap> = ns.api();
    let parent = cms.create(&PostParams::default(), &configmap("parent")).await.unwrap();
    let mut child = configmap("child");
    child.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "parent".into(),
        uid: parent.metadata.uid.clone().unwrap(),
        ..Default::default()
    }]);
    cms.create(&PostParams::default(), &child).await.unwrap();
    cms.delete("parent", &DeleteParams::background()).await.unwrap();
    eventually(Duration::from_secs(60), "the garbage collector to delete the child", || {
        let cms = cms.clone();
        async move {
            match cms.get_opt("child").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("child still exists".to_owned()),
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_watch_receives_an_event() {
    let ns = shared().namespace("smoke-watch").await.unwrap();
    let cms: Api<ConfigMap> = ns.api();
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    let created_name = "watched";
    let creator = {
        let cms = cms.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cms.create(&PostParams::default(), &configmap(created_name)).await.unwrap();
        })
    };
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = events.next().await {
            match event.unwrap() {
                watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)
                    if cm.metadata.name.as_deref() == Some(created_name) =>
                {
                    return cm;
                }
                _ => {}
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("an event for the created ConfigMap within 30 s");
    creator.await.unwrap();
    assert_eq!(seen.metadata.namespace.as_deref(), Some(ns.name.as_str()));
}
