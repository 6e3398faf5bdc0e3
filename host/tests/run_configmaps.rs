//! Plugins shipped as ConfigMaps (`run --plugin-namespace`), made with `wasmloop bundle`,
//! on the real control plane.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{
    FOO_CRD, Host, component, create_configmap, create_deployment, deployment_with, foo, grant_user, kubeconfig_as,
    labelled, minisign, replicas,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmloop_testenv::{TestNamespace, eventually, shared, wait_for_event};

/// `wasmloop bundle <component> --name <name> --namespace <ns> [extra]`, parsed.
fn bundle(component_name: &str, name: &str, namespace: &str, extra: &[&str]) -> ConfigMap {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .arg("bundle")
        .arg(component(component_name))
        .args(["--name", name, "--namespace", namespace])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "bundle failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_saphyr::from_slice_with_options(&out.stdout, wasmloop::input::yaml_options())
        .expect("bundle prints a ConfigMap")
}

/// Replaces the ConfigMap's payload and drops its digest pin: an edit that ships bytes no
/// `bundle` pinned, so that what the host makes of the bytes themselves shows.
async fn replace(api: &Api<ConfigMap>, name: &str, binary: Value) {
    let patch = json!({"metadata": {"annotations": {"wasmloop.dev/digest": null}}, "binaryData": binary});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// Waits until the status annotation passes `check`, and returns it.
async fn status(api: &Api<ConfigMap>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(Duration::from_secs(60), what, || {
        let api = api.clone();
        let check = &check;
        async move {
            let cm = api.get(name).await.map_err(|e| e.to_string())?;
            let text =
                cm.metadata.annotations.unwrap_or_default().remove("wasmloop.dev/status").ok_or("no status yet")?;
            let status: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            if check(&status) { Ok(status) } else { Err(text) }
        }
    })
    .await
}

/// Creates a plugin ConfigMap `name` that ships no component and waits until the host has
/// refused it. The host takes plugin ConfigMap events in order, one at a time, so by then it
/// has handled every earlier change to this namespace's plugin ConfigMaps.
async fn caught_up(api: &Api<ConfigMap>, name: &str) {
    let empty = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("wasmloop.dev/plugin".to_owned(), name.to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &empty).await.unwrap();
    status(api, name, &format!("the host to refuse {name}"), |s| {
        s["lastError"].as_str().is_some_and(|e| e.contains("has neither"))
    })
    .await;
}

async fn event_on(ns: &TestNamespace, reason: &'static str, containing: &'static str) {
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), reason, move |e| {
        e.reason.as_deref() == Some(reason) && e.note.as_deref().is_some_and(|n| n.contains(containing))
    })
    .await;
}

// One host for the whole story. Its labeler is held to `apps`: other tests here run labelers
// of other versions, which would otherwise fight over each other's Deployments.
#[tokio::test]
async fn a_bundled_plugin_loads_swaps_keeps_serving_through_bad_versions_and_unloads() {
    let plugins = shared().namespace("cm-plugins").await.unwrap();
    let apps = shared().namespace("cm-apps").await.unwrap();
    let yaml = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(yaml.path(), format!("plugins:\n  {}/labeler: {{namespace: {}}}\n", plugins.name, apps.name))
        .unwrap();
    let host =
        Host::start(["run", "--plugin-namespace", plugins.name.as_str(), "--config", yaml.path().to_str().unwrap()]);
    let configmaps: Api<ConfigMap> = plugins.api();

    // Create: the plugin reconciles, and says so on its ConfigMap.
    let v1 = bundle("labeler_plugin", "labeler", &plugins.name, &[]);
    assert!(v1.binary_data.as_ref().unwrap().contains_key("plugin.wasm.gz"), "1.1 MB only fits compressed");
    configmaps.create(&PostParams::default(), &v1).await.unwrap();
    create_deployment(&apps, "web").await;
    labelled(&apps, "web", "v1").await;
    let loaded = status(&configmaps, "labeler", "version 1.0.0 active", |s| s["version"] == "1.0.0").await;
    assert!(
        loaded["activeDigest"].as_str().is_some_and(|d| d.len() == 64) && loaded["lastError"].is_null(),
        "{loaded}"
    );
    event_on(&plugins, "PluginLoaded", "plugin labeler 1.0.0 serving").await;
    // A plugin ConfigMap's plugin is known by NAMESPACE/NAME, in metrics as elsewhere.
    let series = format!(r#"plugin="{}/labeler""#, plugins.name);
    assert!(host.get("/metrics").await.1.contains(&series), "no series of {series}");

    // Update: the new behaviour, on existing objects too.
    // As `bundle | kubectl apply` ships it: the new component and its pin.
    let v2 = bundle("labeler_v2_plugin", "labeler", &plugins.name, &[]);
    let patch = json!({"metadata": {"annotations": v2.metadata.annotations}, "binaryData": v2.binary_data});
    configmaps.patch("labeler", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    labelled(&apps, "web", "v2").await;
    status(&configmaps, "labeler", "version 2.0.0 active", |s| s["version"] == "2.0.0").await;

    // Garbage, then a component built for another contract: refused, v2 keeps serving.
    replace(&configmaps, "labeler", json!({"plugin.wasm.gz": null, "plugin.wasm": ByteString(b"garbage".to_vec())}))
        .await;
    let refused = status(&configmaps, "labeler", "the garbage refused", |s| s["lastError"].is_string()).await;
    assert!(refused["lastError"].as_str().unwrap().contains("is not a WebAssembly file"), "{refused}");
    assert_eq!(refused["version"], "2.0.0", "the serving version stays in the status");
    event_on(&plugins, "PluginRejected", "NotWasm").await;
    let future = std::fs::read(component("future_contract_plugin")).unwrap();
    replace(&configmaps, "labeler", json!({"plugin.wasm": ByteString(future)})).await;
    let refused = status(&configmaps, "labeler", "the future contract refused", |s| {
        s["lastError"].as_str().is_some_and(|e| e.contains("was built for contract"))
    })
    .await;
    assert!(refused["lastError"].as_str().unwrap().contains("(version 2.0.0 keeps serving)"), "{refused}");
    event_on(&plugins, "PluginRejected", "IncompatibleContract").await;
    create_deployment(&apps, "after-bad").await;
    labelled(&apps, "after-bad", "v2").await;

    // Delete: reconciles stop and the Deployment watch goes, since no other plugin holds it.
    configmaps.delete("labeler", &DeleteParams::default()).await.unwrap();
    let deployments = format!(
        r#"wasmloop_watches_active{{kind="apps/v1/Deployment",namespace="{}",view="full",selector=""}}"#,
        apps.name
    );
    eventually(Duration::from_secs(60), "the plugin unloaded and its watch released", || {
        let (host, deployments) = (&host, &deployments);
        async move {
            let (active, watches) = (host.metric("wasmloop_plugins_active").await, host.metric(deployments).await);
            if active == 0.0 && watches == 0.0 { Ok(()) } else { Err(format!("{active} plugins, {watches} watches")) }
        }
    })
    .await;
    create_deployment(&apps, "after-delete").await;
    // With no Deployment watch left, nothing can bring the new Deployment to a plugin; the
    // host refusing a plugin ConfigMap made after it shows the host is live and past it (it
    // handles plugin ConfigMaps one at a time, the unload included).
    caught_up(&configmaps, "after-delete-marker").await;
    assert_eq!(host.metric(&deployments).await, 0.0, "a Deployment watch came back");
    let text = host.get("/metrics").await.1;
    assert!(
        !text.contains(&series) && !text.contains(r#"plugin="labeler""#),
        "the unloaded labeler's series stay: {text}"
    );
    let untouched = apps.api::<Deployment>().get("after-delete").await.unwrap();
    assert!(!untouched.metadata.labels.unwrap_or_default().contains_key("wasmloop.dev/labeled-by"));
}

/// A json log line's message.
fn message(line: &Value) -> &str {
    line["fields"]["message"].as_str().unwrap_or_default()
}

// A reload holds the registry until its new version's caches sync. This one cannot sync until
// the test allows it (the host may not list Pods yet), so the test sees the reload in progress
// for as long as it likes, instead of hoping a compile outlasts a tick.
#[tokio::test]
async fn a_reload_held_open_in_its_cache_sync_pauses_no_other_plugin_and_the_old_version_serves() {
    let plugins = shared().namespace("cm-hold").await.unwrap();
    let apps = shared().namespace("cm-hold-apps").await.unwrap();
    let user = format!("host-{}", plugins.name);
    let plugin_configmaps = json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]);
    grant_user(&plugins, "host", &user, plugin_configmaps).await;
    // What hostile and labeler need in `apps`; not Pods, which the reload's new version watches.
    let apps_rules = json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]);
    grant_user(&apps, "host", &user, apps_rules).await;
    let kubeconfig = kubeconfig_as(&user);
    let yaml = tempfile::NamedTempFile::new().unwrap();
    let settings = format!(
        "plugins:\n  hostile: {{namespace: {a}, minRequeueAfterMs: 10, config: {{mode: requeue, intervalMs: 20}}}}\n  \
         {p}/labeler: {{namespace: {a}}}\n  {p}/pod-logger: {{namespace: {a}}}\n",
        a = apps.name,
        p = plugins.name
    );
    std::fs::write(yaml.path(), settings).unwrap();
    let hostile = component("hostile_plugin");
    let args: [&std::ffi::OsStr; 9] = [
        "--log-format".as_ref(),
        "json".as_ref(),
        "run".as_ref(),
        "--plugin".as_ref(),
        hostile.as_os_str(),
        "--config".as_ref(),
        yaml.path().as_os_str(),
        "--plugin-namespace".as_ref(),
        plugins.name.as_ref(),
    ];
    let host = Host::start_with(kubeconfig.path(), args);
    create_configmap(&apps, "ticker").await;
    let object = format!("{}/ticker", apps.name);
    let configmaps: Api<ConfigMap> = plugins.api();
    let mut labeler = bundle("labeler_plugin", "labeler", &plugins.name, &[]);
    labeler.metadata.name = Some("swap".into());
    configmaps.create(&PostParams::default(), &labeler).await.unwrap();
    status(&configmaps, "swap", "labeler serving", |s| s["plugin"] == "labeler").await;
    host.wait_reconcile_lines(&object, "tick ticker", 3).await;

    // The ConfigMap now ships pod-logger, whose Pod cache cannot sync yet.
    let pod_logger = bundle("pod_logger", "pod-logger", &plugins.name, &[]);
    let mut binary = json!({"plugin.wasm": null, "plugin.wasm.gz": null});
    for (key, value) in pod_logger.binary_data.unwrap() {
        binary[key] = serde_json::to_value(value).unwrap();
    }
    let metadata =
        json!({"labels": {"wasmloop.dev/plugin": "pod-logger"}, "annotations": pod_logger.metadata.annotations});
    let patch = json!({"metadata": metadata, "binaryData": binary});
    configmaps.patch("swap", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let held = |l: &Value| l["fields"]["kind"] == "v1/Pod" && message(l).contains("watch failed");
    eventually(Duration::from_secs(60), "the new version's Pod watch refused", || {
        let found = host.json_lines().iter().any(held);
        async move { if found { Ok(()) } else { Err("not yet".to_owned()) } }
    })
    .await;
    // Held open: hostile ticks on...
    let before = host.reconcile_lines(&object, "tick ticker").len();
    host.wait_reconcile_lines(&object, "tick ticker", before + 5).await;
    // ...the old version still serves...
    create_deployment(&apps, "during").await;
    labelled(&apps, "during", "v1").await;
    // ...and the reload has neither ended nor failed: it cannot before Pods may be listed
    // (or its caches' 120 s sync timeout, far beyond this test).
    let cm = configmaps.get("swap").await.unwrap();
    let now: Value = serde_json::from_str(&cm.metadata.annotations.unwrap()["wasmloop.dev/status"]).unwrap();
    assert_eq!((&now["plugin"], &now["lastError"]), (&json!("labeler"), &Value::Null), "{now}");

    let pods = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]);
    grant_user(&apps, "pods", &user, pods).await;
    status(&configmaps, "swap", "pod-logger serving", |s| s["plugin"] == "pod-logger").await;
    host.logged(&format!("plugin {}/pod-logger", plugins.name)).await;
}

/// Held by every test here that needs the Foo CRD present or absent: CRDs are cluster-wide.
static FOO_KIND: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_plugin_whose_kind_is_not_served_yet_waits_quietly_and_loads_once_it_is() {
    let _kind = FOO_KIND.lock().await;
    let plugins = shared().namespace("cm-early").await.unwrap();
    // Another test may have installed it earlier in this run.
    plugins.remove_crd(Path::new(FOO_CRD)).await;
    let _host = Host::start(["run", "--plugin-namespace", plugins.name.as_str()]);
    let configmaps: Api<ConfigMap> = plugins.api();
    configmaps
        .create(&PostParams::default(), &bundle("foo_deployment", "foo-deployment", &plugins.name, &[]))
        .await
        .unwrap();
    let refused = status(&configmaps, "foo-deployment", "the plugin refused: no Foo kind yet", |s| {
        s["lastError"].as_str().is_some_and(|e| e.contains("samplecontroller.k8s.io"))
    })
    .await;
    assert!(refused["activeDigest"].is_null(), "{refused}");
    // Refused once, said once: the host's own status write must not set off another attempt.
    let version = |cm: ConfigMap| cm.metadata.resource_version.unwrap();
    let settled = version(configmaps.get("foo-deployment").await.unwrap());
    // Made after the status write, so handled after the write's echo.
    caught_up(&configmaps, "later").await;
    assert_eq!(version(configmaps.get("foo-deployment").await.unwrap()), settled, "the ConfigMap kept changing");

    plugins.install_crd(Path::new(FOO_CRD)).await;
    // Retried every 15 s.
    let loaded = eventually(Duration::from_secs(60), "the plugin loaded once Foos are served", || {
        let configmaps = configmaps.clone();
        async move {
            let cm = configmaps.get("foo-deployment").await.map_err(|e| e.to_string())?;
            let text = cm.metadata.annotations.unwrap_or_default().remove("wasmloop.dev/status").ok_or("no status")?;
            let status: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            if status["activeDigest"].is_string() { Ok(status) } else { Err(text) }
        }
    })
    .await;
    assert!(loaded["lastError"].is_null(), "{loaded}");
}

#[tokio::test]
async fn a_quarantined_configmap_plugin_says_so_on_its_status_until_a_success_lifts_it() {
    let plugins = shared().namespace("cm-quarantine").await.unwrap();
    let apps = shared().namespace("cm-quarantine-apps").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (host_yaml, plugin_yaml) = (dir.path().join("host.yaml"), dir.path().join("config.yaml"));
    let settings = format!(
        "quarantine: {{afterSeconds: 1, minFailures: 3, firstProbeSeconds: 1, maxProbeSeconds: 2}}\nplugins:\n  {}/hostile: {{namespace: {}}}\n",
        plugins.name, apps.name
    );
    std::fs::write(&host_yaml, settings).unwrap();
    std::fs::write(&plugin_yaml, "mode: panic-until-healed\n").unwrap();
    let config = plugin_yaml.to_str().unwrap();
    let _host =
        Host::start(["run", "--plugin-namespace", plugins.name.as_str(), "--config", host_yaml.to_str().unwrap()]);
    let configmaps: Api<ConfigMap> = plugins.api();
    configmaps
        .create(&PostParams::default(), &bundle("hostile_plugin", "hostile", &plugins.name, &["--config", config]))
        .await
        .unwrap();
    create_configmap(&apps, "sick").await;

    let sick = status(&configmaps, "hostile", "the plugin quarantined", |s| {
        s["quarantined"].as_str().is_some_and(|q| q.contains("calls failed"))
    })
    .await;
    assert_eq!(sick["version"], "0.1.0", "the quarantined version is the serving one: {sick}");

    let healed = json!({"metadata": {"labels": {"wasmloop.dev/healed": "true"}}});
    apps.api::<ConfigMap>().patch("sick", &PatchParams::default(), &Patch::Merge(&healed)).await.unwrap();
    status(&configmaps, "hostile", "the quarantine lifted", |s| {
        s.get("quarantined").is_none() && s["version"] == "0.1.0"
    })
    .await;
}

/// An outside probe's plugin, built without the SDK: its manifest watches ConfigMaps in the
/// namespace `tenant-a/secrets?x=` and reads Secrets of the version
/// `v1/namespaces/wasmloop-system/secrets/registry-creds`. Put into a path as they are, both
/// address Secrets with the host's credentials.
#[tokio::test]
async fn a_manifest_smuggling_a_path_is_refused_at_load_and_the_host_requests_neither_string() {
    let plugins = shared().namespace("cm-smuggle").await.unwrap();
    let _host = Host::start(["run", "--plugin-namespace", plugins.name.as_str()]);
    let configmaps: Api<ConfigMap> = plugins.api();
    let wasm = std::fs::read(component("smuggler_plugin")).unwrap();
    let smuggler = ConfigMap {
        metadata: ObjectMeta {
            name: Some("smuggler".into()),
            labels: Some([("wasmloop.dev/plugin".to_owned(), "smuggler".to_owned())].into()),
            ..ObjectMeta::default()
        },
        binary_data: Some([("plugin.wasm".to_owned(), ByteString(wasm))].into()),
        ..ConfigMap::default()
    };
    configmaps.create(&PostParams::default(), &smuggler).await.unwrap();
    let refused = status(&configmaps, "smuggler", "the smuggled manifest refused", |s| {
        s["lastError"].as_str().is_some_and(|e| e.contains("is not a valid namespace"))
    })
    .await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(error.contains("the watched kind v1/ConfigMap: namespace \"tenant-a/secrets?x=\""), "{error}");
    assert!(refused["activeDigest"].is_null(), "a smuggling plugin serves: {refused}");
    // The host wrote that status after loading the plugin: any request it made for the plugin
    // came before, and the log has caught up once a later request of the test's is in it.
    let status_write = format!("/api/v1/namespaces/{}/configmaps/smuggler", plugins.name);
    let audited = shared().audited_after_marker("").await;
    assert!(audited.iter().any(|r| r.contains("patch") && r.contains(&status_write)), "the status write is audited");
    let smuggled: Vec<&String> = audited
        .iter()
        .filter(|r| ["secrets?x", "secrets%3F", "tenant-a/secrets", "registry-creds"].iter().any(|s| r.contains(s)))
        .collect();
    assert!(smuggled.is_empty(), "the host made a request with a smuggled string: {smuggled:?}");
}

/// `bundle`'s ConfigMap, renamed to `cm_name` and labelled as plugin `label`.
fn relabelled(component_name: &str, plugin: &str, namespace: &str, cm_name: &str, label: &str) -> ConfigMap {
    let mut cm = bundle(component_name, plugin, namespace, &[]);
    cm.metadata.name = Some(cm_name.into());
    cm.metadata.labels = Some([("wasmloop.dev/plugin".to_owned(), label.to_owned())].into());
    cm
}

#[tokio::test]
async fn a_configmap_labelled_as_another_plugin_is_refused_naming_both() {
    let plugins = shared().namespace("cm-mismatch").await.unwrap();
    let _host = Host::start(["run", "--plugin-namespace", plugins.name.as_str()]);
    let configmaps: Api<ConfigMap> = plugins.api();
    let mislabelled = relabelled("configmap_mirror", "configmap-mirror", &plugins.name, "mirror", "mirror-two");
    configmaps.create(&PostParams::default(), &mislabelled).await.unwrap();
    let refused = status(&configmaps, "mirror", "the name mismatch refused", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(
        error.contains("labelled plugin \"mirror-two\" but the component's manifest names plugin \"configmap-mirror\""),
        "{error}"
    );
    assert!(refused["activeDigest"].is_null(), "a mismatched plugin serves: {refused}");
}

#[tokio::test]
async fn a_second_source_of_a_served_plugin_is_refused_and_the_first_keeps_serving() {
    let plugins = shared().namespace("cm-taken").await.unwrap();
    let _host = Host::start(["run", "--plugin-namespace", plugins.name.as_str()]);
    let configmaps: Api<ConfigMap> = plugins.api();
    let first = bundle("configmap_mirror", "configmap-mirror", &plugins.name, &[]);
    configmaps.create(&PostParams::default(), &first).await.unwrap();
    let serving =
        status(&configmaps, "configmap-mirror", "the first source loaded", |s| s["activeDigest"].is_string()).await;
    let copy = relabelled("configmap_mirror", "configmap-mirror", &plugins.name, "mirror-copy", "configmap-mirror");
    configmaps.create(&PostParams::default(), &copy).await.unwrap();
    let refused = status(&configmaps, "mirror-copy", "the copy refused", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    let taken = format!(
        "offers plugin \"{}/configmap-mirror\", which ConfigMap {}/configmap-mirror already serves",
        plugins.name, plugins.name
    );
    assert!(error.contains(&taken), "{error}");
    // Read after the refusal: the first source's version is untouched by it.
    let still = configmaps.get("configmap-mirror").await.unwrap().metadata.annotations.unwrap_or_default();
    let still: Value = serde_json::from_str(&still["wasmloop.dev/status"]).unwrap();
    assert_eq!((&still["activeDigest"], &still["lastError"]), (&serving["activeDigest"], &Value::Null), "{still}");
}

/// A host loading plugins from `plugins`, pod-logger confined to `apps`, with `extra` flags.
fn pod_logger_host(plugins: &TestNamespace, apps: &TestNamespace, extra: &[&str]) -> (Host, tempfile::NamedTempFile) {
    let yaml = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(yaml.path(), format!("plugins:\n  {}/pod-logger: {{namespace: {}}}\n", plugins.name, apps.name))
        .unwrap();
    let mut args: Vec<std::ffi::OsString> =
        ["--log-format", "json", "run", "--plugin-namespace"].map(Into::into).into();
    args.push(plugins.name.clone().into());
    args.extend(["--config".into(), yaml.path().into()]);
    args.extend(extra.iter().map(Into::into));
    (Host::start(args), yaml)
}

/// Creates Pod `name` in `ns` (once the namespace's default ServiceAccount exists) and waits
/// until pod-logger has logged it: the version serving then is the one that saw it.
async fn seen_by_pod_logger(host: &Host, ns: &TestNamespace, name: &str) {
    common::create_pod(ns, name).await;
    host.logged(&format!("pod {}/{name} seen (phase", ns.name)).await;
}

#[tokio::test]
async fn a_component_other_than_the_pinned_one_is_refused_and_the_pinned_version_serves() {
    let plugins = shared().namespace("cm-pin").await.unwrap();
    let apps = shared().namespace("cm-pin-apps").await.unwrap();
    let (host, _config) = pod_logger_host(&plugins, &apps, &[]);
    let configmaps: Api<ConfigMap> = plugins.api();
    let pinned = bundle("pod_logger", "pod-logger", &plugins.name, &[]);
    let pin = pinned.metadata.annotations.as_ref().unwrap()["wasmloop.dev/digest"].clone();
    let digest = wasmloop_sandbox::digest(&std::fs::read(component("pod_logger")).unwrap());
    assert_eq!(pin, format!("sha256:{digest}"), "bundle pins the component it ships");
    configmaps.create(&PostParams::default(), &pinned).await.unwrap();
    status(&configmaps, "pod-logger", "the pinned version serving", |s| s["activeDigest"] == digest.as_str()).await;

    // Other bytes under the same pin: refused for the pin, before anything reads them.
    let other = b"not the pinned component".to_vec();
    let other_digest = wasmloop_sandbox::digest(&other);
    let patch = json!({"binaryData": {"plugin.wasm": ByteString(other), "plugin.wasm.gz": null}});
    configmaps.patch("pod-logger", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let refused =
        status(&configmaps, "pod-logger", "the other component refused", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(error.contains(&pin) && error.contains(&other_digest), "{error}");
    assert!(error.contains("plugin pod-logger") && error.contains("keeps serving"), "{error}");
    assert_eq!(refused["activeDigest"], digest.as_str(), "{refused}");
    event_on(&plugins, "PluginRejected", "DigestMismatch").await;
    seen_by_pod_logger(&host, &apps, "after-the-refusal").await;
}

#[tokio::test]
async fn with_trusted_keys_only_a_component_signed_by_one_of_them_loads() {
    let plugins = shared().namespace("cm-signed").await.unwrap();
    let apps = shared().namespace("cm-signed-apps").await.unwrap();
    let keys = tempfile::tempdir().unwrap();
    minisign(keys.path(), &["-G", "-W", "-p", "trusted.pub", "-s", "trusted.key"]);
    minisign(keys.path(), &["-G", "-W", "-p", "other.pub", "-s", "other.key"]);
    let wasm = keys.path().join("plugin.wasm");
    std::fs::copy(component("pod_logger"), &wasm).unwrap();
    std::fs::write(keys.path().join("else.wasm"), b"another file").unwrap();
    let sign = |key: &str, file: &str, out: &str| minisign(keys.path(), &["-S", "-s", key, "-m", file, "-x", out]);
    sign("trusted.key", "plugin.wasm", "good.minisig");
    sign("other.key", "plugin.wasm", "untrusted.minisig");
    sign("trusted.key", "else.wasm", "elsewhere.minisig");
    let trusted = keys.path().join("trusted.pub");
    let trusted_id =
        std::fs::read_to_string(&trusted).unwrap().lines().next().unwrap().rsplit(' ').next().unwrap().to_owned();
    let (_host, _config) = pod_logger_host(&plugins, &apps, &["--trusted-keys", trusted.to_str().unwrap()]);
    let configmaps: Api<ConfigMap> = plugins.api();

    // Each refusal names the keys involved and what to do; nothing serves.
    configmaps.create(&PostParams::default(), &bundle("pod_logger", "pod-logger", &plugins.name, &[])).await.unwrap();
    let refusals = [
        (None, "requires a minisign signature"),
        (Some("untrusted.minisig"), "which is not trusted"),
        (Some("elsewhere.minisig"), "does not verify over this component"),
    ];
    for (signature, says) in refusals {
        if let Some(file) = signature {
            let text = std::fs::read_to_string(keys.path().join(file)).unwrap();
            let patch = json!({"data": {"plugin.wasm.minisig": text}});
            configmaps.patch("pod-logger", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        }
        let refused =
            status(&configmaps, "pod-logger", says, |s| s["lastError"].as_str().is_some_and(|e| e.contains(says)))
                .await;
        assert!(refused["lastError"].as_str().unwrap().contains(&trusted_id), "{refused}");
        assert!(refused["activeDigest"].is_null(), "{refused}");
    }
    event_on(&plugins, "PluginRejected", "SignatureRejected").await;

    // Signed by the trusted key, bundled by `bundle --signature`: it loads.
    let good = keys.path().join("good.minisig");
    let signed = bundle("pod_logger", "pod-logger", &plugins.name, &["--signature", good.to_str().unwrap()]);
    configmaps
        .replace(
            "pod-logger",
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    resource_version: configmaps.get("pod-logger").await.unwrap().metadata.resource_version,
                    ..signed.metadata
                },
                ..signed
            },
        )
        .await
        .unwrap();
    let digest = wasmloop_sandbox::digest(&std::fs::read(&wasm).unwrap());
    status(&configmaps, "pod-logger", "the signed component serving", |s| s["activeDigest"] == digest.as_str()).await;
}

fn image(d: &Deployment) -> Option<String> {
    d.spec.template.spec.as_ref()?.containers.first()?.image.clone()
}

/// The shadow's findings on its status, once they pass `check`.
async fn findings(api: &Api<ConfigMap>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    status(api, name, what, |s| check(&s["shadow"]["findings"])).await["shadow"]["findings"].clone()
}

fn count(findings: &Value, what: &str) -> u64 {
    findings[what].as_u64().unwrap_or_default()
}

// One story, one host: the promotion at the end changes what serves.
#[tokio::test]
async fn a_shadow_configmap_is_compared_on_every_reconcile_writes_nothing_and_is_promoted_by_dropping_its_annotation() {
    let _kind = FOO_KIND.lock().await;
    let plugins = shared().namespace("cm-shadow").await.unwrap();
    let apps = shared().namespace("cm-shadow-apps").await.unwrap();
    let foos = apps.install_crd(Path::new(FOO_CRD)).await;
    let yaml = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(yaml.path(), format!("plugins:\n  {}/foo-deployment: {{namespace: {}}}\n", plugins.name, apps.name))
        .unwrap();
    let host =
        Host::start(["run", "--plugin-namespace", plugins.name.as_str(), "--config", yaml.path().to_str().unwrap()]);
    let configmaps: Api<ConfigMap> = plugins.api();
    let serving = bundle("foo_deployment", "foo-deployment", &plugins.name, &[]);
    configmaps.create(&PostParams::default(), &serving).await.unwrap();
    status(&configmaps, "foo-deployment", "the serving version", |s| s["version"].is_string()).await;
    let candidate = bundle("foo_deployment_next", "foo-deployment", &plugins.name, &["--shadow"]);
    assert_eq!(candidate.metadata.name.as_deref(), Some("foo-deployment-shadow"));
    configmaps.create(&PostParams::default(), &candidate).await.unwrap();
    status(&configmaps, "foo-deployment-shadow", "the shadow seated", |s| s["shadow"]["plugin"] == "foo-deployment")
        .await;

    let deployments: Api<Deployment> = apps.api();
    for name in ["one", "two", "three"] {
        foos.create(&PostParams::default(), &foo(name, &format!("{name}-web"), 1)).await.unwrap();
    }
    let found =
        findings(&configmaps, "foo-deployment-shadow", "three differences", |f| count(f, "differing") >= 3).await;
    let diff = found["latest"]["diff"].as_str().unwrap_or_default();
    assert!(diff.contains("nginx:latest") && diff.contains("nginx:1.27"), "{found:#}");
    assert!(found["latest"]["object"].as_str().is_some_and(|o| o.starts_with("Foo ")), "{found:#}");
    assert_eq!(count(&found, "failed"), 0, "{found:#}");
    let series =
        format!(r#"wasmloop_shadow_reconciles_total{{plugin="{}/foo-deployment",result="differing"}}"#, plugins.name);
    assert!(host.metric(&series).await >= 3.0);
    event_on(&plugins, "ShadowDiffers", "differs from the serving version").await;
    // Each Foo was compared after the serving version's call, whose apply is all that wrote.
    for name in ["one", "two", "three"] {
        let d =
            deployment_with(&deployments, &format!("{name}-web"), "the Deployment", |d| replicas(d) == Some(1)).await;
        assert_eq!(image(&d).as_deref(), Some("nginx:latest"), "the serving image, never the shadow's");
    }

    // Promotion: the annotation goes, the candidate serves, the old ConfigMap is told.
    let promote = json!({"metadata": {"annotations": {"wasmloop.dev/track": null}}});
    configmaps.patch("foo-deployment-shadow", &PatchParams::default(), &Patch::Merge(&promote)).await.unwrap();
    for name in ["one", "two", "three"] {
        deployment_with(&deployments, &format!("{name}-web"), "the promoted image", |d| {
            image(d).as_deref() == Some("nginx:1.27")
        })
        .await;
    }
    let promoted = status(&configmaps, "foo-deployment-shadow", "the promoted status", |s| {
        s["plugin"] == "foo-deployment" && s.get("shadow").is_none()
    })
    .await;
    assert!(promoted["activeDigest"].is_string(), "{promoted}");
    // Told who serves now, in the one write that marks it (never the generic words a mark
    // without the promotion's status would bring).
    let by = format!(
        "superseded: plugin foo-deployment is served from ConfigMap {}/foo-deployment-shadow now",
        plugins.name
    );
    status(&configmaps, "foo-deployment", "the old ConfigMap superseded", |s| {
        s["lastError"].as_str().is_some_and(|e| e.starts_with(&by))
    })
    .await;
    let old = configmaps.get("foo-deployment").await.unwrap();
    assert_eq!(old.metadata.annotations.unwrap()["wasmloop.dev/track"], "superseded");

    // A restart lists the old ConfigMap first; it is marked, so the promoted version serves.
    drop(host);
    let host =
        Host::start(["run", "--plugin-namespace", plugins.name.as_str(), "--config", yaml.path().to_str().unwrap()]);
    host.logged(&format!("plugin {}/foo-deployment 0.1.0 serving", plugins.name)).await;
    foos.create(&PostParams::default(), &foo("four", "four-web", 1)).await.unwrap();
    let four = deployment_with(&deployments, "four-web", "the Deployment", |d| replicas(d) == Some(1)).await;
    assert_eq!(image(&four).as_deref(), Some("nginx:1.27"), "the promoted version, after a restart");

    // The next candidate beside it needs a name of its own.
    let next =
        bundle("foo_deployment", "foo-deployment", &plugins.name, &["--shadow", "--configmap", "foo-deployment-next"]);
    configmaps.create(&PostParams::default(), &next).await.unwrap();
    status(&configmaps, "foo-deployment-next", "the next shadow seated", |s| s["shadow"]["plugin"] == "foo-deployment")
        .await;
    foos.create(&PostParams::default(), &foo("five", "five-web", 1)).await.unwrap();
    let found = findings(&configmaps, "foo-deployment-next", "a difference", |f| count(f, "differing") >= 1).await;
    let diff = found["latest"]["diff"].as_str().unwrap_or_default();
    assert!(diff.contains("--- serving") && diff.contains("-") && diff.contains("nginx:1.27"), "{found:#}");
}

#[tokio::test]
async fn a_panicking_shadow_changes_nothing_for_the_serving_version() {
    let plugins = shared().namespace("cm-shadow-panic").await.unwrap();
    let apps = shared().namespace("cm-shadow-panic-apps").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host_yaml = dir.path().join("host.yaml");
    let settings = format!(
        "quarantine: {{afterSeconds: 1, minFailures: 2, firstProbeSeconds: 1, maxProbeSeconds: 2}}\nplugins:\n  {}/hostile: {{namespace: {}}}\n",
        plugins.name, apps.name
    );
    std::fs::write(&host_yaml, settings).unwrap();
    let (greet, panic) = (dir.path().join("event.yaml"), dir.path().join("panic.yaml"));
    std::fs::write(&greet, "mode: event\n").unwrap();
    std::fs::write(&panic, "mode: panic\n").unwrap();
    let host =
        Host::start(["run", "--plugin-namespace", plugins.name.as_str(), "--config", host_yaml.to_str().unwrap()]);
    let configmaps: Api<ConfigMap> = plugins.api();
    let serving = bundle("hostile_plugin", "hostile", &plugins.name, &["--config", greet.to_str().unwrap()]);
    configmaps.create(&PostParams::default(), &serving).await.unwrap();
    status(&configmaps, "hostile", "the serving version", |s| s["version"].is_string()).await;
    let shadow = bundle("hostile_plugin", "hostile", &plugins.name, &["--shadow", "--config", panic.to_str().unwrap()]);
    configmaps.create(&PostParams::default(), &shadow).await.unwrap();
    status(&configmaps, "hostile-shadow", "the shadow seated", |s| s["shadow"]["plugin"] == "hostile").await;

    let names = ["a", "b", "c", "d"];
    for name in names {
        create_configmap(&apps, name).await;
    }
    let found = findings(&configmaps, "hostile-shadow", "four failures", |f| count(f, "failed") >= 4).await;
    assert!(found["latest"]["diff"].as_str().is_some_and(|d| d.contains("panicked")), "{found:#}");
    let plugin = format!("{}/hostile", plugins.name);
    let failed = format!(r#"wasmloop_shadow_reconciles_total{{plugin="{plugin}",result="failed"}}"#);
    assert!(host.metric(&failed).await >= 4.0);

    // Every shadow call has ended: the serving version greeted each object, succeeded every
    // time, and is neither failing nor quarantined.
    let events: Api<Event> = apps.api();
    for name in names {
        wait_for_event(&events, Duration::from_secs(60), "Hello", move |e| {
            e.reason.as_deref() == Some("Hello") && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .await;
    }
    let text = host.get("/metrics").await.1;
    let succeeded = format!(r#"wasmloop_reconciles_total{{plugin="{plugin}",result="success"}}"#);
    assert!(host.metric(&succeeded).await >= 4.0);
    assert!(!text.contains(&format!(r#"wasmloop_reconcile_errors_total{{plugin="{plugin}""#)), "{text}");
    assert_eq!(host.metric_or_zero(&format!(r#"wasmloop_plugin_quarantined{{plugin="{plugin}"}}"#)).await, 0.0);
    let warnings = events.list(&Default::default()).await.unwrap();
    assert!(warnings.items.iter().all(|e| e.type_.as_deref() != Some("Warning")), "{:?}", warnings.items);
    let serving = status(&configmaps, "hostile", "the serving status", |s| s["version"].is_string()).await;
    assert!(serving.get("quarantined").is_none() && serving["lastError"].is_null(), "{serving}");
}

#[tokio::test]
async fn a_plugin_named_like_another_namespace_s_is_its_own_and_neither_blocks_nor_replaces_it() {
    let (ours, theirs) =
        (shared().namespace("cm-realm-ours").await.unwrap(), shared().namespace("cm-realm-theirs").await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let ok = dir.path().join("ok.yaml");
    std::fs::write(&ok, "mode: ok\n").unwrap();
    let host_yaml = dir.path().join("host.yaml");
    let settings = format!(
        "plugins:\n  {o}/hostile: {{namespace: {o}}}\n  {t}/hostile: {{namespace: {t}}}\n",
        o = ours.name,
        t = theirs.name
    );
    std::fs::write(&host_yaml, settings).unwrap();
    let host = Host::start([
        "run",
        "--plugin-namespace",
        ours.name.as_str(),
        "--plugin-namespace",
        theirs.name.as_str(),
        "--config",
        host_yaml.to_str().unwrap(),
    ]);
    // The other namespace names its plugin first: a first claimant does not take the name.
    let squatter = bundle("hostile_plugin", "hostile", &theirs.name, &["--config", ok.to_str().unwrap()]);
    let their_configmaps: Api<ConfigMap> = theirs.api();
    their_configmaps.create(&PostParams::default(), &squatter).await.unwrap();
    status(&their_configmaps, "hostile", "theirs serving", |s| s["activeDigest"].is_string()).await;
    let serving = bundle("hostile_plugin", "hostile", &ours.name, &["--config", ok.to_str().unwrap()]);
    ours.api::<ConfigMap>().create(&PostParams::default(), &serving).await.unwrap();
    let loaded = |s: &Value| s["activeDigest"].is_string() && s["plugin"] == "hostile";
    let ours_status = status(&ours.api(), "hostile", "ours serving beside theirs", loaded).await;
    assert!(ours_status["lastError"].is_null(), "{ours_status}");
    assert_eq!(host.metric("wasmloop_plugins_active").await, 2.0, "one plugin per namespace");
    for realm in [&ours.name, &theirs.name] {
        let loads = format!(r#"wasmloop_plugin_loads_total{{plugin="{realm}/hostile"}}"#);
        assert_eq!(host.metric(&loads).await, 1.0, "{loads}");
    }

    // Theirs ships a shadow of "hostile": it stands beside theirs, never beside ours.
    let their_shadow =
        bundle("hostile_plugin", "hostile", &theirs.name, &["--shadow", "--config", ok.to_str().unwrap()]);
    their_configmaps.create(&PostParams::default(), &their_shadow).await.unwrap();
    status(&their_configmaps, "hostile-shadow", "theirs' shadow seated", |s| s["shadow"]["plugin"] == "hostile").await;
    let ours_reconciled = format!(r#"wasmloop_reconciles_total{{plugin="{}/hostile",result="success"}}"#, ours.name);
    let before = host.metric_or_zero(&ours_reconciled).await;
    create_configmap(&theirs, "their-object").await;
    create_configmap(&ours, "our-object").await;
    let compared = format!(r#"wasmloop_shadow_reconciles_total{{plugin="{}/hostile",result="same"}}"#, theirs.name);
    eventually(Duration::from_secs(60), "theirs compared and ours reconciled since", || {
        let (host, compared, ours_reconciled) = (&host, &compared, &ours_reconciled);
        async move {
            let (compared, reconciled) =
                (host.metric_or_zero(compared).await, host.metric_or_zero(ours_reconciled).await);
            if compared >= 1.0 && reconciled > before {
                Ok(())
            } else {
                Err(format!("{compared} compared, {reconciled} reconciled"))
            }
        }
    })
    .await;
    let text = host.get("/metrics").await.1;
    let beside_ours = format!(r#"wasmloop_shadow_reconciles_total{{plugin="{}/hostile""#, ours.name);
    assert!(!text.contains(&beside_ours), "theirs' shadow was called beside ours: {text}");

    // Theirs deleted: ours serves on, untouched.
    their_configmaps.delete("hostile-shadow", &DeleteParams::default()).await.unwrap();
    their_configmaps.delete("hostile", &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(60), "theirs unloaded", || {
        let host = &host;
        async move {
            let active = host.metric("wasmloop_plugins_active").await;
            if active == 1.0 { Ok(()) } else { Err(format!("{active} plugins")) }
        }
    })
    .await;
    let ours_status = status(&ours.api(), "hostile", "ours serving", loaded).await;
    assert!(ours_status["lastError"].is_null(), "{ours_status}");
    let loads = format!(r#"wasmloop_plugin_loads_total{{plugin="{}/hostile"}}"#, ours.name);
    assert_eq!(host.metric(&loads).await, 1.0, "ours was never reloaded");
}
