//! `wasmloop run` with the other example plugins on the real control plane.

mod common;

use common::Host;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;
use wasmloop_testenv::{eventually, shared, wait_for_event};

#[tokio::test]
async fn pod_logger_logs_each_pods_lifecycle() {
    let ns = shared().namespace("run-pods").await.unwrap();
    let host = Host::run(&["pod_logger"]);
    let pods: Api<Pod> = ns.api();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]}
    }))
    .unwrap();
    // The namespace's default service account is made by the controller manager.
    eventually(Duration::from_secs(60), "the pod to be admitted", || {
        let (pods, pod) = (pods.clone(), pod.clone());
        async move { pods.create(&PostParams::default(), &pod).await.map(drop).map_err(|e| e.to_string()) }
    })
    .await;
    let name = format!("pod {}/web-0", ns.name);
    host.logged(&format!("{name} seen (phase")).await;
    // No kubelet runs here: set the phase as a kubelet would.
    pods.patch_status("web-0", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running"}})))
        .await
        .unwrap();
    host.logged(&format!("{name} phase changed Pending -> Running")).await;
    pods.delete("web-0", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.unwrap();
    host.logged(&format!("{name} deleted (last phase Running)")).await;
}

#[tokio::test]
async fn node_image_watch_annotates_the_total_and_reports_the_change() {
    let client = shared().client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let name = format!("worker-{}", std::process::id());
    let node: Node =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let images = |sizes: &[i64]| json!({"status": {"images": sizes.iter().map(|s| json!({"names": [format!("img-{s}")], "sizeBytes": s})).collect::<Vec<_>>()}});
    nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(images(&[100, 250]))).await.unwrap();
    let _host = Host::run(&["node_image_watch"]);
    let annotation = |expected: &'static str| {
        let (nodes, name) = (nodes.clone(), name.clone());
        async move {
            eventually(Duration::from_secs(60), &format!("annotation {expected}"), || {
                let (nodes, name) = (nodes.clone(), name.clone());
                async move {
                    let node = nodes.get(&name).await.map_err(|e| e.to_string())?;
                    let value = node.metadata.annotations.unwrap_or_default().get("wasmloop.dev/image-bytes").cloned();
                    if value.as_deref() == Some(expected) { Ok(()) } else { Err(format!("{value:?}")) }
                }
            })
            .await
        }
    };
    annotation("350").await;
    nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(images(&[100]))).await.unwrap();
    annotation("100").await;
    let events: Api<Event> = Api::all(client);
    wait_for_event(&events, Duration::from_secs(30), "the ImageStorageChanged Event", |e| {
        e.reason.as_deref() == Some("ImageStorageChanged")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
            && e.note.as_deref() == Some("image storage changed from 350 to 100 bytes (delta -250)")
    })
    .await;
    nodes.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn configmap_mirror_copies_prunes_and_cleans_up_behind_its_finalizer() {
    let client = shared().client().await.unwrap();
    let source_ns = shared().namespace("mirror-src").await.unwrap();
    let (a, b) = (shared().namespace("mirror-a").await.unwrap(), shared().namespace("mirror-b").await.unwrap());
    let _host = Host::run(&["configmap_mirror"]);
    let sources: Api<ConfigMap> = source_ns.api();
    let source = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            labels: Some([("wasmloop.dev/mirror".to_owned(), "true".to_owned())].into()),
            annotations: Some([("wasmloop.dev/mirror-to".to_owned(), format!("{},{}", a.name, b.name))].into()),
            ..ObjectMeta::default()
        },
        data: Some([("level".to_owned(), "debug".to_owned())].into()),
        ..ConfigMap::default()
    };
    sources.create(&PostParams::default(), &source).await.unwrap();
    let copy_in = |ns: String, present: bool| {
        let client = client.clone();
        async move {
            eventually(Duration::from_secs(60), &format!("copy in {ns} present={present}"), || {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
                async move {
                    let found = api.get_opt("settings").await.map_err(|e| e.to_string())?;
                    if found.is_some() == present { Ok(()) } else { Err(format!("{found:?}")) }
                }
            })
            .await
        }
    };
    copy_in(a.name.clone(), true).await;
    copy_in(b.name.clone(), true).await;

    // Take b off the list: its copy goes.
    let patch = json!({"metadata": {"annotations": {"wasmloop.dev/mirror-to": a.name}}});
    sources.patch("settings", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    copy_in(b.name.clone(), false).await;

    // The source holds the finalizer; deleting it runs cleanup, then releases it.
    let live = sources.get("settings").await.unwrap();
    assert!(live.metadata.finalizers.unwrap_or_default().contains(&"wasmloop.dev/mirror-cleanup".to_owned()));
    sources.delete("settings", &DeleteParams::default()).await.unwrap();
    copy_in(a.name.clone(), false).await;
    eventually(Duration::from_secs(60), "the source to be gone", || {
        let sources = sources.clone();
        async move {
            match sources.get_opt("settings").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(s) => Err(format!("finalizers {:?}", s.metadata.finalizers)),
            }
        }
    })
    .await;
}
