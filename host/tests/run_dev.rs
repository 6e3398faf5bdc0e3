//! `wasmloop dev` on the real control plane: a plugin's file replaced while it runs.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Host, component, create_deployment, labelled};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;
use wasmloop_testenv::{eventually, shared};

const DEPLOYMENTS: &str = r#"{kind="apps/v1/Deployment",namespace="",view="full",selector=""}"#;

/// `wasmloop dev` on a copy of labeler v1 in a fresh directory.
fn dev_on_labeler_v1() -> (Host, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("labeler.wasm");
    std::fs::copy(component("labeler_plugin"), &file).unwrap();
    let host = Host::start(["dev".as_ref(), file.as_os_str()]);
    (host, dir, file)
}

fn write(file: &Path, bytes: &[u8]) {
    // In place, not by rename: the watcher sees the partial file too and must cope.
    std::fs::write(file, bytes).unwrap();
}

// One test, one host: the labeler labels every Deployment in the cluster, so two dev hosts
// running different versions side by side would fight over each other's objects.
#[tokio::test]
async fn a_replaced_wasm_is_validated_before_it_serves_then_converges_existing_objects_on_the_warm_watch() {
    let ns = shared().namespace("dev-swap").await.unwrap();
    let (mut host, _dir, file) = dev_on_labeler_v1();
    create_deployment(&ns, "web").await;
    labelled(&ns, "web", "v1").await;
    assert_eq!(host.metric(&format!("wasmloop_watches_started_total{DEPLOYMENTS}")).await, 1.0);

    // A broken version is refused, with its cause, and v1 keeps serving.
    write(&file, b"not a component at all");
    host.logged("is not a WebAssembly file").await;
    host.logged("(version 1.0.0 keeps serving)").await;
    assert!(host.metric(r#"wasmloop_plugin_rejections_total{plugin="labeler",reason="NotWasm"}"#).await >= 1.0);
    create_deployment(&ns, "second").await;
    labelled(&ns, "second", "v1").await;

    // v2 replaces it: existing objects converge, on the same process, watch and cache.
    write(&file, &std::fs::read(component("labeler_v2_plugin")).unwrap());
    labelled(&ns, "web", "v2").await;
    labelled(&ns, "second", "v2").await;
    assert!(host.is_running(), "the host kept running");
    assert_eq!(host.metric(r#"wasmloop_plugin_loads_total{plugin="labeler"}"#).await, 2.0);
    assert_eq!(
        host.metric(&format!("wasmloop_watches_started_total{DEPLOYMENTS}")).await,
        1.0,
        "the new version shares the warm watch"
    );
    assert_eq!(
        host.metric(&format!("wasmloop_watch_relists_total{DEPLOYMENTS}")).await,
        1.0,
        "and its cache: no relist"
    );
}

/// Waits until one foo-deployment reconcile has ended, its writes (or their reports) done.
async fn a_reconcile_ended(host: &Host) {
    eventually(Duration::from_secs(60), "a foo-deployment reconcile to end", || async {
        let ended = host.reconciles("foo-deployment").await;
        if ended >= 1.0 { Ok(()) } else { Err(format!("{ended} reconciles ended")) }
    })
    .await;
}

#[tokio::test]
async fn a_dry_run_prints_each_write_as_a_diff_and_writes_nothing() {
    let ns = shared().namespace("dev-dry").await.unwrap();
    let foos = ns.install_crd(Path::new(common::FOO_CRD)).await;
    foos.create(&PostParams::default(), &common::foo("dry", "dry", 2)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("foo.wasm");
    std::fs::copy(component("foo_deployment"), &file).unwrap();
    let host = Host::start(["dev".as_ref(), file.as_os_str(), "--dry-run".as_ref()]);

    // The last lines the dry run prints for this Foo's reconcile (a dev host serves every
    // namespace, other tests' Foos too): the block above them is complete.
    let event = format!("would event Foo {}/dry\n#   Normal Synced: Foo synced successfully", ns.name);
    let printed = host.printed(&event).await;
    assert!(printed.contains(&format!("would event Foo {}/dry", ns.name)), "{printed}");
    let apply = format!("# dry run: plugin foo-deployment would apply Deployment {}/dry\n", ns.name);
    assert!(printed.contains(&apply), "{printed}");
    assert!(printed.contains("--- /dev/null (does not exist)") && printed.contains("+  replicas: 2"), "{printed}");
    assert!(printed.contains(&format!("would status Foo {}/dry", ns.name)), "{printed}");
    assert!(printed.contains("+  availableReplicas: 0"), "{printed}");

    // A reconcile counts once its writes are done: had the dry run let one through, the API
    // server would hold it by then.
    a_reconcile_ended(&host).await;
    assert!(ns.api::<Deployment>().get_opt("dry").await.unwrap().is_none(), "a dry run created the Deployment");
    assert!(foos.get("dry").await.unwrap().data.get("status").is_none(), "a dry run wrote the status");
}

#[tokio::test]
async fn record_captures_cases_from_the_cluster_and_writes_nothing_to_it() {
    let ns = shared().namespace("dev-record").await.unwrap();
    let foos = ns.install_crd(Path::new(common::FOO_CRD)).await;
    foos.create(&PostParams::default(), &common::foo("rec", "rec", 1)).await.unwrap();
    let cases = tempfile::tempdir().unwrap();
    let plugin = component("foo_deployment");
    let host = Host::start(["record".as_ref(), plugin.as_os_str(), "--record-dir".as_ref(), cases.path().as_os_str()]);
    // The case of the reconcile that would create the Deployment.
    let dir = cases.path().join("foo-deployment");
    let marker = format!("-{}-rec.yaml", ns.name);
    let case = eventually(Duration::from_secs(60), "a recorded case for Foo rec", || {
        let found = std::fs::read_dir(&dir).ok().and_then(|files| {
            files.filter_map(|f| f.ok()).find(|f| f.file_name().to_string_lossy().ends_with(&marker))
        });
        async move {
            let file = found.ok_or("not yet")?;
            let text = std::fs::read_to_string(file.path()).map_err(|e| e.to_string())?;
            serde_saphyr::from_str_with_options::<serde_json::Value>(&text, wasmloop::input::yaml_options())
                .map_err(|e| e.to_string())
        }
    })
    .await;
    let actions = case["outcome"]["response"]["actions"].to_string();
    assert!(actions.contains("Deployment") && actions.contains("\"rec\""), "{case}");
    host.printed(&format!("would apply Deployment {}/rec", ns.name)).await;
    // A reconcile counts once its writes are done: had one gone through, the API server would
    // hold it by then.
    a_reconcile_ended(&host).await;
    assert!(ns.api::<Deployment>().get_opt("rec").await.unwrap().is_none(), "record created the Deployment");
    assert!(foos.get("rec").await.unwrap().data.get("status").is_none(), "record wrote the status");
}

#[tokio::test]
async fn a_secret_the_plugin_reads_is_recorded_redacted() {
    let ns = shared().namespace("dev-record-secret").await.unwrap();
    // The password, base64 in `data`, and a whole copy in the last-applied annotation.
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": r#"{"stringData":{"password":"hunter2"}}"#
        }},
        "data": {"password": "aHVudGVyMg=="}
    }))
    .unwrap();
    ns.api::<Secret>().create(&PostParams::default(), &secret).await.unwrap();
    let wants: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "wants-db", "labels": {"wasmloop.dev/secret-reader": "yes"}},
        "data": {"secret": "db"}
    }))
    .unwrap();
    ns.api::<ConfigMap>().create(&PostParams::default(), &wants).await.unwrap();
    let cases = tempfile::tempdir().unwrap();
    let plugin = component("secret_reader_plugin");
    let host = Host::start(["record".as_ref(), plugin.as_os_str(), "--record-dir".as_ref(), cases.path().as_os_str()]);
    // The case of a reconcile that found the Secret, and told how many keys it holds.
    host.printed(&format!("ConfigMap {}/wants-db", ns.name)).await;
    let dir = cases.path().join("secret-reader");
    let marker = format!("-{}-wants-db.yaml", ns.name);
    let text = eventually(Duration::from_secs(60), "a recorded case for wants-db", || {
        let found = std::fs::read_dir(&dir).ok().and_then(|files| {
            files.filter_map(|f| f.ok()).find(|f| f.file_name().to_string_lossy().ends_with(&marker))
        });
        async move { std::fs::read_to_string(found.ok_or("not yet")?.path()).map_err(|e| e.to_string()) }
    })
    .await;
    let case: serde_json::Value = serde_saphyr::from_str_with_options(&text, wasmloop::input::yaml_options()).unwrap();
    let found = &case["lookups"][0]["found"];
    assert_eq!((&found["kind"], &found["metadata"]["name"]), (&json!("Secret"), &json!("db")), "{text}");
    // Still bytes, in base64: a digest under the directory's key, never the value.
    let digest = found["data"]["password"].as_str().unwrap_or_default();
    assert_eq!(digest.len(), 24, "16 bytes, in base64: {text}");
    assert!(found["metadata"]["annotations"].get("kubectl.kubernetes.io/last-applied-configuration").is_none());
    assert!(case["outcome"].to_string().contains("holds 1 keys"), "{text}");
    assert!(!text.contains("aHVudGVyMg==") && !text.contains("hunter2"), "a Secret in clear:\n{text}");
    drop(host);
    // The case replays: the plugin parses the redacted Secret as it parsed the real one.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .args(["replay", "-o", "json", "--plugin"])
        .arg(&plugin)
        .arg(cases.path())
        .output()
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let replayed = report["cases"].as_array().unwrap();
    assert!(!replayed.is_empty() && replayed.iter().all(|c| c["result"] == "same"), "{report:#}");
}

#[test]
fn record_without_a_directory_is_refused_saying_what_it_needs() {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_wasmloop")).args(["record", "plugin.wasm"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --record-dir DIR"), "{out:?}");
}

#[tokio::test]
async fn a_plugin_crate_is_built_with_cargo_and_served() {
    let ns = shared().namespace("dev-crate").await.unwrap();
    let krate = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/pod-logger");
    let host = Host::start(["dev".as_ref(), krate.as_os_str()]);
    host.logged("building").await;
    host.logged("plugin pod-logger 0.1.0 serving").await;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "built"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .unwrap();
    // The namespace's default service account is made by the controller manager.
    let pods: Api<Pod> = ns.api();
    eventually(Duration::from_secs(60), "the pod to be admitted", || {
        let (pods, pod) = (pods.clone(), pod.clone());
        async move { pods.create(&PostParams::default(), &pod).await.map(drop).map_err(|e| e.to_string()) }
    })
    .await;
    host.logged(&format!("pod {}/built seen (phase", ns.name)).await;
}
