//! `deploy/` on a current Kubernetes, as README's "On a cluster" applies it: on a control
//! plane of its own whose kube-controller-manager also runs the Deployment and ReplicaSet
//! controllers, so the host's Deployment gets a ReplicaSet and the ReplicaSet its Pods
//! (created, never run: there is no kubelet) through PodSecurity admission.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod};
use kube::api::{Api, ListParams};
use wasmloop_testenv::{ControlPlane, Controllers, eventually};

fn plane() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(|| {
        ControlPlane::start_blocking_with(Controllers::WithWorkloads)
            .unwrap_or_else(|e| panic!("cannot start the test control plane: {e}"))
    })
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

/// README's "On a cluster" commands, run as written with `kubectl` of the control plane's
/// release first on the PATH and the plane's kubeconfig.
fn apply_as_the_readme_says() -> Result<(), String> {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let (_, after) = readme.split_once("\n## On a cluster\n").expect("README has an \"On a cluster\" section");
    let (_, block) = after.split_once("```sh\n").expect("with a sh block");
    let commands = block.split("```").next().unwrap();
    let kubectl =
        plane().kubectl().expect("the control-plane binaries include kubectl (scripts/kube-binaries builds it)");
    let path = format!("{}:{}", kubectl.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", commands])
        .current_dir(workspace())
        .env("PATH", path)
        .env("KUBECONFIG", plane().kubeconfig())
        .output()
        .unwrap();
    if out.status.success() {
        return Ok(());
    }
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Err(format!("README's cluster commands failed:\n{commands}\n{stdout}\n{stderr}"))
}

/// Applies once per test binary; both tests read what it made.
async fn applied() -> kube::Client {
    static APPLIED: OnceLock<Result<(), String>> = OnceLock::new();
    let applied = tokio::task::spawn_blocking(|| APPLIED.get_or_init(apply_as_the_readme_says).clone()).await.unwrap();
    if let Err(why) = applied {
        panic!("{why}");
    }
    plane().client().await.unwrap()
}

const SYSTEM: &str = "wasmloop-system";

#[tokio::test]
async fn the_hosts_pod_is_admitted_where_pod_security_enforces_the_restricted_profile() {
    let client = applied().await;
    let namespace = Api::<Namespace>::all(client.clone()).get(SYSTEM).await.unwrap();
    let labels = namespace.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("restricted"));
    // Admission enforces it here: a privileged Pod is refused (a dry run, so nothing is made).
    let privileged: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "privileged"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]}
    }))
    .unwrap();
    let dry_run = kube::api::PostParams { dry_run: true, ..Default::default() };
    let refused = Api::<Pod>::namespaced(client.clone(), SYSTEM).create(&dry_run, &privileged).await.unwrap_err();
    assert!(refused.to_string().contains("violates PodSecurity \"restricted:latest\""), "{refused}");

    // The Deployment's ReplicaSet creates its Pods only where admission lets them in.
    let pods: Api<Pod> = Api::namespaced(client.clone(), SYSTEM);
    let selector = ListParams::default().labels("app.kubernetes.io/name=wasmloop");
    let events: Api<Event> = Api::namespaced(client.clone(), SYSTEM);
    let created = eventually(Duration::from_secs(120), "the host's Pods created", || {
        let (pods, selector, events) = (pods.clone(), selector.clone(), events.clone());
        async move {
            let list = pods.list(&selector).await.map_err(|e| e.to_string())?;
            if list.items.len() >= 2 {
                return Ok(list.items);
            }
            Err(format!("{} pods; FailedCreate: {:?}", list.items.len(), failed_creates(&events, None).await))
        }
    })
    .await;
    let replicasets: Api<ReplicaSet> = Api::namespaced(client, SYSTEM);
    let owner = created[0].metadata.owner_references.as_ref().unwrap()[0].name.clone();
    let failed = failed_creates(&events, Some(&owner)).await;
    assert!(failed.is_empty(), "ReplicaSet {owner} could not create Pods: {failed:?}");
    // Its status follows the Pods it made, once its controller has seen them.
    eventually(Duration::from_secs(60), "the ReplicaSet counting 2 replicas", || {
        let (replicasets, owner) = (replicasets.clone(), owner.clone());
        async move {
            let replicaset = replicasets.get(&owner).await.map_err(|e| e.to_string())?;
            let counted = replicaset.status.map(|s| s.replicas);
            if counted == Some(2) { Ok(()) } else { Err(format!("{counted:?}")) }
        }
    })
    .await;
}

/// The messages of the `FailedCreate` Events in the host's namespace, about `replicaset` or
/// any object.
async fn failed_creates(events: &Api<Event>, replicaset: Option<&str>) -> Vec<String> {
    let about = match replicaset {
        Some(name) => ListParams::default().fields(&format!("involvedObject.name={name},reason=FailedCreate")),
        None => ListParams::default().fields("reason=FailedCreate"),
    };
    let listed = events.list(&about).await.expect("the Events list").items;
    listed.into_iter().map(|e| e.message.unwrap_or_default()).collect()
}

#[tokio::test]
async fn the_example_overlay_ships_the_six_plugins_as_wasmplugins_naming_their_components() {
    let client = applied().await;
    let plugins = wasmplugins(&client, SYSTEM).await;
    let shipped = plugins.list(&ListParams::default()).await.unwrap();
    let mut names: Vec<String> = shipped.items.iter().filter_map(|p| p.metadata.name.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        ["configmap-mirror", "foo-deployment", "namespace-defaults", "node-image-watch", "pod-logger", "ttl-janitor"]
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), SYSTEM);
    for plugin in &names {
        let shipped = plugins.get(plugin).await.unwrap();
        let component = shipped.data["spec"]["configMapRef"]["name"].as_str().unwrap().to_owned();
        assert_eq!(shipped.data["spec"]["serviceAccountName"], serde_json::json!(plugin), "acts as its own account");
        let configmap = configmaps.get(&component).await.unwrap();
        let bytes = configmap.binary_data.as_ref().and_then(|d| d.get("plugin.wasm")).expect("a component");
        assert!(bytes.0.starts_with(b"\0asm"), "{component} holds no WebAssembly");
        let labels = configmap.metadata.labels.unwrap_or_default();
        assert!(!labels.contains_key("wasmloop.dev/plugin"), "{component} would ship a plugin of its own");
    }
    let deployment = Api::<Deployment>::namespaced(client, SYSTEM).get("wasmloop").await.unwrap();
    assert_eq!(deployment.spec.replicas, Some(2));
}

/// WasmPlugins of namespace `ns`, through the CRD `deploy/` installs (once it is served).
async fn wasmplugins(client: &kube::Client, ns: &str) -> Api<kube::api::DynamicObject> {
    use kube::core::{ApiResource, GroupVersionKind};
    let gvk = GroupVersionKind::gvk("wasmloop.dev", "v1alpha1", "WasmPlugin");
    let api = Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk_with_plural(&gvk, "wasmplugins"));
    // Established a moment after the apply: wait until a list answers.
    eventually(Duration::from_secs(60), "the WasmPlugin kind served", || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.map(drop).map_err(|e| e.to_string()) }
    })
    .await;
    api
}

fn wasmplugin(name: &str, spec: serde_json::Value) -> kube::api::DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "wasmloop.dev/v1alpha1",
        "kind": "WasmPlugin",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test]
async fn the_api_server_refuses_a_wasmplugin_with_two_sources_or_none_an_unpinned_image_or_a_signature_without_a_digest()
 {
    let client = applied().await;
    let api = wasmplugins(&client, SYSTEM).await;
    let post = kube::api::PostParams { dry_run: true, ..Default::default() };
    let digest = format!("sha256:{}", "a".repeat(64));
    let pinned = format!("registry.example/plugins/hello@{digest}");
    let refused = [
        (
            serde_json::json!({"configMapRef": {"name": "hello"}, "image": {"reference": pinned}}),
            "give exactly one source",
        ),
        (serde_json::json!({"serviceAccountName": "hello"}), "give exactly one source"),
        (
            serde_json::json!({"configMapRef": {"name": "hello"}, "signature": {"keyRef": "k"}}),
            "a signed plugin needs a digest",
        ),
        (
            serde_json::json!({"image": {"reference": "registry.example/plugins/hello:1.0"}}),
            "pin the image by its digest",
        ),
        (
            serde_json::json!({"configMapRef": {"name": "hello"}, "track": {"mode": "shadow"}}),
            "a shadow names the plugin it shadows",
        ),
        (
            serde_json::json!({"configMapRef": {"name": "hello"}, "track": {"shadows": "other"}}),
            "only a shadow names a plugin to shadow",
        ),
        (serde_json::json!({"configMapRef": {"name": "Hello/../x"}}), "should match"),
    ];
    for (spec, words) in refused {
        let error = api.create(&post, &wasmplugin("refused", spec.clone())).await.unwrap_err();
        assert!(error.to_string().contains(words), "{spec}: {error}");
    }
    let accepted = [
        serde_json::json!({"configMapRef": {"name": "hello"}}),
        serde_json::json!({"image": {"reference": pinned}, "signature": {"keyRef": "k"}}),
        serde_json::json!({"configMapRef": {"name": "hello"}, "signature": {"digest": digest}}),
        serde_json::json!({"configMapRef": {"name": "hello-next"}, "track": {"mode": "shadow", "shadows": "hello"}}),
    ];
    for spec in accepted {
        let made = api.create(&post, &wasmplugin("accepted", spec.clone())).await;
        assert!(made.is_ok(), "{spec}: {made:?}");
        let made = made.unwrap();
        assert_eq!(made.data["spec"]["failurePolicy"], "KeepPrevious", "the default failure policy");
    }
}

#[tokio::test]
async fn kubectl_get_wasmplugins_shows_ready_version_replica_errors_and_age_from_the_table_format() {
    let client = applied().await;
    let ns = "default";
    let api = wasmplugins(&client, ns).await;
    let made = api
        .create(&Default::default(), &wasmplugin("columns", serde_json::json!({"configMapRef": {"name": "columns"}})))
        .await
        .unwrap();
    let status = serde_json::json!({"status": {
        "observedGeneration": made.metadata.generation,
        "version": "0.1.0",
        "replica": "wasmloop-0",
        "errors": 2,
        "conditions": [{
            "type": "Ready", "status": "True", "reason": "Serving", "message": "plugin columns 0.1.0 serving",
            "lastTransitionTime": "2026-11-27T12:00:00Z",
        }],
    }});
    let params = kube::api::PatchParams::default();
    api.patch_status("columns", &params, &kube::api::Patch::Merge(&status)).await.unwrap();

    // The Table the API server renders for `kubectl get`, read as kubectl asks for it.
    let request = http::Request::get(format!("/apis/wasmloop.dev/v1alpha1/namespaces/{ns}/wasmplugins/columns"))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    let table: serde_json::Value = client.request(request).await.unwrap();
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Name", "Ready", "Version", "Replica", "Errors", "Age"]);
    let cells = &table["rows"][0]["cells"];
    assert_eq!(
        cells.as_array().unwrap()[..5],
        [json_str("columns"), json_str("True"), json_str("0.1.0"), json_str("wasmloop-0"), 2.into()]
    );

    // And the real kubectl, across namespaces.
    let kubectl = plane().kubectl().expect("the control-plane binaries include kubectl");
    let out = Command::new(kubectl)
        .args(["get", "wasmplugins", "-A"])
        .env("KUBECONFIG", plane().kubeconfig())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = printed.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAMESPACE", "NAME", "READY", "VERSION", "REPLICA", "ERRORS", "AGE"], "{printed}");
    let row: Vec<&str> =
        printed.lines().find(|l| l.contains("columns")).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row[..6], [ns, "columns", "True", "0.1.0", "wasmloop-0", "2"], "{printed}");
}

fn json_str(text: &str) -> serde_json::Value {
    serde_json::Value::String(text.to_owned())
}
