//! Plugins as `WasmPlugin`s (`wasmloop.dev/v1alpha1`, `deploy/base/wasmplugin-crd.yaml`),
//! made with `wasmloop bundle --wasmplugin`, on the real control plane: they serve, their
//! conditions are what `kubectl wait` reads, a bad update keeps or stops the old version as the
//! failure policy says, quarantines and shadows show in conditions, and one tenant's
//! `WasmPlugin` is its own plugin, acting as its own namespace's ServiceAccount.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::wasmplugin::{WASMPLUGIN_CRD, apply, bundle, condition, is, status, wasmplugins_resource};
use common::{FOO_CRD, Host, component, create_configmap, deployment_with, foo, minisign, pull_secret, replicas};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmloop_testenv::{TestNamespace, eventually, shared, wait_for_event};

/// The real `kubectl wait --for=condition=Ready` on `wasmplugin/NAME`.
fn kubectl_wait_ready(namespace: &str, name: &str) -> std::process::Output {
    let kubectl = shared().kubectl().expect("the control-plane binaries include kubectl");
    Command::new(kubectl)
        .args(["wait", "--for=condition=Ready", &format!("wasmplugin/{name}"), "-n", namespace, "--timeout=120s"])
        .env("KUBECONFIG", shared().kubeconfig())
        .output()
        .unwrap()
}

/// A host serving the plugins of `plugins`, each confined to `apps`; `extra` arguments last.
fn host(
    plugins: &[&TestNamespace],
    apps: &TestNamespace,
    names: &[&str],
    extra: &[&str],
) -> (Host, tempfile::NamedTempFile) {
    let yaml = tempfile::NamedTempFile::new().unwrap();
    let mut settings = String::from("plugins:\n");
    for ns in plugins {
        for name in names {
            settings.push_str(&format!("  {}/{name}: {{namespace: {}}}\n", ns.name, apps.name));
        }
    }
    std::fs::write(yaml.path(), settings).unwrap();
    let mut args = vec!["--log-format", "json", "run", "--config", yaml.path().to_str().unwrap()];
    for ns in plugins {
        args.extend(["--plugin-namespace", ns.name.as_str()]);
    }
    args.extend(extra);
    (Host::start(args), yaml)
}

async fn event_on(ns: &TestNamespace, kind: &'static str, reason: &'static str, containing: &'static str) {
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), reason, move |e| {
        e.reason.as_deref() == Some(reason)
            && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some(kind)
            && e.note.as_deref().is_some_and(|n| n.contains(containing))
    })
    .await;
}

/// A Foo in `apps` and the Deployment the plugin makes of it.
async fn serves_foo(apps: &TestNamespace, foos: &Api<DynamicObject>, name: &str) {
    foos.create(&PostParams::default(), &foo(name, &format!("{name}-web"), 2)).await.unwrap();
    let deployments: Api<Deployment> = apps.api();
    deployment_with(&deployments, &format!("{name}-web"), "the Deployment of the Foo", |d| replicas(d) == Some(2))
        .await;
}

/// Namespaces `PREFIX-…` for plugins and `PREFIX-…-apps` for Foos, with the Foo and WasmPlugin
/// kinds, and a host serving foo-deployment from the first, confined to the second.
struct Stage {
    plugins: TestNamespace,
    apps: TestNamespace,
    foos: Api<DynamicObject>,
    wasmplugins: Api<DynamicObject>,
    host: Host,
    _settings: tempfile::NamedTempFile,
}

async fn stage(prefix: &str, extra: &[&str]) -> Stage {
    let plugins = shared().namespace(prefix).await.unwrap();
    let apps = shared().namespace(&format!("{prefix}-apps")).await.unwrap();
    let foos = apps.install_crd(Path::new(FOO_CRD)).await;
    let wasmplugins = plugins.install_crd(Path::new(WASMPLUGIN_CRD)).await;
    let (host, _settings) = host(&[&plugins], &apps, &["foo-deployment"], extra);
    Stage { plugins, apps, foos, wasmplugins, host, _settings }
}

#[tokio::test]
async fn a_wasmplugin_naming_a_configmap_serves_foo_deployment_and_kubectl_wait_sees_it_ready() {
    let Stage { plugins, apps, foos, wasmplugins, .. } = &stage("wp-plugins", &[]).await;
    let bundled = bundle("foo_deployment", "foo-deployment", &plugins.name, &[]);
    let configmap = bundled.0.as_ref().expect("the component ships in a ConfigMap");
    assert_eq!(configmap.metadata.name.as_deref(), Some("foo-deployment-component"));
    assert!(configmap.metadata.labels.is_none(), "the component's ConfigMap is no plugin ConfigMap of its own");
    apply(&plugins, &wasmplugins, bundled).await;

    let waited = kubectl_wait_ready(&plugins.name, "foo-deployment");
    assert!(waited.status.success(), "kubectl wait: {}", String::from_utf8_lossy(&waited.stderr));
    let plugin = wasmplugins.get("foo-deployment").await.unwrap();
    let status = &plugin.data["status"];
    assert_eq!(status["observedGeneration"], json!(plugin.metadata.generation), "{status:#}");
    assert!(is(status, "Loaded", "True", "Loaded") && is(status, "Degraded", "False", "AsExpected"), "{status:#}");
    assert!(is(status, "Pinned", "True", "Digest"), "bundle pins the component's digest: {status:#}");
    assert_eq!(condition(status, "Ready")["observedGeneration"], json!(plugin.metadata.generation));
    assert!(status["version"].is_string() && status["digest"].as_str().is_some_and(|d| d.len() == 64), "{status:#}");
    serves_foo(&apps, &foos, "made").await;
    event_on(&plugins, "WasmPlugin", "PluginLoaded", "plugin foo-deployment").await;
}

#[tokio::test]
async fn a_wasmplugin_naming_an_image_serves_foo_deployment_and_kubectl_wait_sees_it_ready() {
    let registry = wasmloop_testenv::registry::shared();
    let file = component("foo_deployment");
    let pushed = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .args([
            "push",
            file.to_str().unwrap(),
            &format!("oci://{}/plugins/wp-foo:1.0", registry.address),
            "--plain-http",
        ])
        .args(["--username", &registry.username, "--password-stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(format!("{}\n", registry.password).as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(pushed.status.success(), "push: {}", String::from_utf8_lossy(&pushed.stderr));
    let reference = String::from_utf8(pushed.stdout).unwrap().trim().to_owned();
    let extra = ["--insecure-registry", registry.address.as_str()];
    let Stage { plugins, apps, foos, wasmplugins, .. } = &stage("wp-image", &extra).await;
    pull_secret(plugins, "registry-creds", registry).await;
    let bundled = bundle(
        "foo_deployment",
        "foo-deployment",
        &plugins.name,
        &["--ref", &reference, "--pull-secret", "registry-creds"],
    );
    assert!(bundled.0.is_none(), "an image needs no ConfigMap");
    assert_eq!(bundled.1.data["spec"]["image"]["reference"], json!(reference));
    apply(&plugins, &wasmplugins, bundled).await;

    let waited = kubectl_wait_ready(&plugins.name, "foo-deployment");
    assert!(waited.status.success(), "kubectl wait: {}", String::from_utf8_lossy(&waited.stderr));
    let status = wasmplugins.get("foo-deployment").await.unwrap().data["status"].clone();
    let pinned = condition(&status, "Pinned")["message"].as_str().unwrap_or_default().to_owned();
    assert!(pinned.contains(&reference), "pinned by the image's digest: {status:#}");
    serves_foo(&apps, &foos, "pulled").await;
}

/// Points WasmPlugin foo-deployment at a new ConfigMap holding a component built for a
/// contract the host does not serve, pinned as a user would pin it: a version that fails to
/// load.
async fn bad_update(plugins: &TestNamespace, wasmplugins: &Api<DynamicObject>) {
    let future = std::fs::read(component("future_contract_plugin")).unwrap();
    let digest = format!("sha256:{}", wasmloop_sandbox::digest(&future));
    let configmap: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "foo-deployment-bad"},
        "binaryData": {"plugin.wasm": k8s_openapi::ByteString(future)},
    }))
    .unwrap();
    plugins.api::<ConfigMap>().create(&PostParams::default(), &configmap).await.unwrap();
    let patch = json!({"spec": {"configMapRef": {"name": "foo-deployment-bad"}, "signature": {"digest": digest}}});
    wasmplugins.patch("foo-deployment", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// A WasmPlugin serving foo-deployment under `policy`, ready, in a namespace of its own.
async fn serving_under(prefix: &str, policy: &str) -> Stage {
    let stage = stage(prefix, &[]).await;
    let (configmap, mut plugin) = bundle("foo_deployment", "foo-deployment", &stage.plugins.name, &[]);
    plugin.data["spec"]["failurePolicy"] = json!(policy);
    apply(&stage.plugins, &stage.wasmplugins, (configmap, plugin)).await;
    status(&stage.wasmplugins, "foo-deployment", "the first version ready", |s| is(s, "Ready", "True", "Serving"))
        .await;
    stage
}

#[tokio::test]
async fn a_bad_update_under_keep_previous_keeps_the_old_version_serving_ready_and_degraded() {
    let Stage { plugins, wasmplugins, .. } = &serving_under("wp-keep", "KeepPrevious").await;
    let before = wasmplugins.get("foo-deployment").await.unwrap().data["status"]["version"].clone();
    bad_update(&plugins, &wasmplugins).await;
    let generation = wasmplugins.get("foo-deployment").await.unwrap().metadata.generation;
    let degraded = status(&wasmplugins, "foo-deployment", "the bad version refused", |s| {
        s["observedGeneration"] == json!(generation) && is(s, "Degraded", "True", "IncompatibleContract")
    })
    .await;
    assert!(is(&degraded, "Ready", "True", "Serving"), "the old version serves: {degraded:#}");
    assert_eq!(degraded["version"], before, "{degraded:#}");
    let message = condition(&degraded, "Degraded")["message"].as_str().unwrap_or_default();
    assert!(message.contains("was built for contract") && message.contains("keeps serving"), "{degraded:#}");
    let waited = kubectl_wait_ready(&plugins.name, "foo-deployment");
    assert!(waited.status.success(), "still ready for kubectl: {}", String::from_utf8_lossy(&waited.stderr));
}

#[tokio::test]
async fn a_bad_update_under_stop_stops_the_plugin_with_ready_false_and_the_reason() {
    let Stage { plugins, wasmplugins, host, .. } = &serving_under("wp-stop", "Stop").await;
    bad_update(&plugins, &wasmplugins).await;
    let stopped = status(&wasmplugins, "foo-deployment", "the plugin stopped", |s| {
        is(s, "Ready", "False", "IncompatibleContract")
    })
    .await;
    assert!(is(&stopped, "Loaded", "False", "IncompatibleContract"), "{stopped:#}");
    assert!(stopped["version"].is_null(), "nothing serves: {stopped:#}");
    assert!(condition(&stopped, "Ready")["message"].as_str().unwrap_or_default().contains("failurePolicy Stop"));
    host.metric_until("wasmloop_plugins_active", "the plugin unloaded", |n| n == 0.0).await;
    event_on(&plugins, "WasmPlugin", "PluginStopped", "failurePolicy Stop").await;
}

#[tokio::test]
async fn a_wasmplugin_in_another_namespace_neither_takes_over_a_plugin_nor_acts_as_its_service_account() {
    let tenant_a = shared().namespace("wp-tenant-a").await.unwrap();
    let tenant_b = shared().namespace("wp-tenant-b").await.unwrap();
    let apps = shared().namespace("wp-tenant-apps").await.unwrap();
    let foos = apps.install_crd(Path::new(FOO_CRD)).await;
    let a_plugins = tenant_a.install_crd(Path::new(WASMPLUGIN_CRD)).await;
    let b_plugins: Api<DynamicObject> =
        Api::namespaced_with(tenant_b.client.clone(), &tenant_b.name, &wasmplugins_resource());
    // Tenant A's ServiceAccount, marked for plugin use and bound to what foo-deployment does.
    let account =
        json!({"metadata": {"name": "foo-deployment", "annotations": {"wasmloop.dev/plugin-identity": "true"}}});
    tenant_a
        .api::<k8s_openapi::api::core::v1::ServiceAccount>()
        .create(&PostParams::default(), &serde_json::from_value(account).unwrap())
        .await
        .unwrap();
    let user = format!("system:serviceaccount:{}:foo-deployment", tenant_a.name);
    let rules = json!([
        {"apiGroups": ["samplecontroller.k8s.io"], "resources": ["foos", "foos/status"], "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]);
    common::grant_user(&apps, "tenant-a-foo", &user, rules).await;
    let (host, _yaml) = host(
        &[&tenant_a, &tenant_b],
        &apps,
        &["foo-deployment"],
        &["--plugin-identity", "impersonate", "--plugin-identity-namespace", &tenant_a.name],
    );
    let (configmap, mut plugin) = bundle("foo_deployment", "foo-deployment", &tenant_a.name, &[]);
    plugin.data["spec"]["serviceAccountName"] = json!("foo-deployment");
    apply(&tenant_a, &a_plugins, (configmap, plugin)).await;
    let a_ready =
        status(&a_plugins, "foo-deployment", "tenant A's plugin ready", |s| is(s, "Ready", "True", "Serving")).await;

    // Tenant B ships a plugin of the same name, naming A's ServiceAccount's name.
    let (configmap, mut plugin) = bundle("foo_deployment", "foo-deployment", &tenant_b.name, &[]);
    plugin.data["spec"]["serviceAccountName"] = json!("foo-deployment");
    apply(&tenant_b, &b_plugins, (configmap, plugin)).await;
    let b_status = status(&b_plugins, "foo-deployment", "tenant B's plugin refused", |s| {
        condition(s, "Ready")["status"] == "False"
            && condition(s, "Ready")["message"].as_str().is_some_and(|m| m.contains("does not exist"))
    })
    .await;
    let said = condition(&b_status, "Ready")["message"].as_str().unwrap_or_default().to_owned();
    assert!(said.contains(&format!("{}/foo-deployment", tenant_b.name)), "B's own account is named: {b_status:#}");
    assert!(!said.contains(&tenant_a.name), "B's plugin is never A's: {b_status:#}");

    // A's plugin is untouched: the same version and transition, and it still serves.
    let a_after = a_plugins.get("foo-deployment").await.unwrap().data["status"].clone();
    assert_eq!(a_after["digest"], a_ready["digest"]);
    assert_eq!(condition(&a_after, "Ready")["lastTransitionTime"], condition(&a_ready, "Ready")["lastTransitionTime"]);
    assert_eq!(host.metric("wasmloop_plugins_active").await, 1.0, "only A's plugin runs");
    serves_foo(&apps, &foos, "tenant-a").await;
}

#[tokio::test]
async fn a_quarantined_wasmplugin_says_so_in_its_conditions_with_the_time_the_metric_shows() {
    let plugins = shared().namespace("wp-quarantine").await.unwrap();
    let apps = shared().namespace("wp-quarantine-apps").await.unwrap();
    let wasmplugins = plugins.install_crd(Path::new(WASMPLUGIN_CRD)).await;
    let dir = tempfile::tempdir().unwrap();
    let host_yaml = dir.path().join("host.yaml");
    let settings = format!(
        "quarantine: {{afterSeconds: 1, minFailures: 3, firstProbeSeconds: 1, maxProbeSeconds: 2}}\nplugins:\n  {}/hostile: {{namespace: {}}}\n",
        plugins.name, apps.name
    );
    std::fs::write(&host_yaml, settings).unwrap();
    let host =
        Host::start(["run", "--plugin-namespace", plugins.name.as_str(), "--config", host_yaml.to_str().unwrap()]);
    let (configmap, mut plugin) = bundle("hostile_plugin", "hostile", &plugins.name, &[]);
    plugin.data["spec"]["config"] = json!({"mode": "panic-until-healed"});
    apply(&plugins, &wasmplugins, (configmap, plugin)).await;
    create_configmap(&apps, "sick").await;

    let series = format!(r#"wasmloop_plugin_quarantined{{plugin="{}/hostile"}}"#, plugins.name);
    host.metric_until(&series, "the quarantine metric", |q| q == 1.0).await;
    let sick =
        status(&wasmplugins, "hostile", "the Quarantined condition", |s| is(s, "Quarantined", "True", "FailureRate"))
            .await;
    assert!(is(&sick, "Ready", "False", "Quarantined"), "{sick:#}");
    let message = condition(&sick, "Quarantined")["message"].as_str().unwrap_or_default();
    assert!(message.contains("until a probe call succeeds") && message.contains("calls failed"), "{sick:#}");
    let since = condition(&sick, "Quarantined")["lastTransitionTime"].as_str().unwrap_or_default().to_owned();

    let healed = json!({"metadata": {"labels": {"wasmloop.dev/healed": "true"}}});
    apps.api::<ConfigMap>().patch("sick", &PatchParams::default(), &Patch::Merge(&healed)).await.unwrap();
    host.metric_until(&series, "the quarantine lifted in the metric", |q| q == 0.0).await;
    let well =
        status(&wasmplugins, "hostile", "the quarantine lifted", |s| is(s, "Quarantined", "False", "Healthy")).await;
    assert!(is(&well, "Ready", "True", "Serving"), "{well:#}");
    let lifted = condition(&well, "Quarantined")["lastTransitionTime"].as_str().unwrap_or_default().to_owned();
    assert!(lifted > since, "the lift comes after the quarantine: {since} then {lifted}");
}

#[tokio::test]
async fn a_shadow_wasmplugin_counts_same_and_differing_calls_as_the_metrics_do() {
    let Stage { plugins, apps, foos, wasmplugins, host, .. } = &stage("wp-shadow", &[]).await;
    apply(&plugins, &wasmplugins, bundle("foo_deployment", "foo-deployment", &plugins.name, &[])).await;
    status(&wasmplugins, "foo-deployment", "the serving version ready", |s| is(s, "Ready", "True", "Serving")).await;
    let candidate = bundle("foo_deployment_next", "foo-deployment", &plugins.name, &["--shadow"]);
    assert_eq!(candidate.1.metadata.name.as_deref(), Some("foo-deployment-shadow"));
    apply(&plugins, &wasmplugins, candidate).await;
    let waited = kubectl_wait_ready(&plugins.name, "foo-deployment-shadow");
    assert!(waited.status.success(), "a seated shadow is ready: {}", String::from_utf8_lossy(&waited.stderr));

    for name in ["one", "two", "three"] {
        serves_foo(&apps, &foos, name).await;
    }
    let series = |result: &str| {
        format!(r#"wasmloop_shadow_reconciles_total{{plugin="{}/foo-deployment",result="{result}"}}"#, plugins.name)
    };
    host.metric_until(&series("differing"), "three differences", |n| n >= 3.0).await;
    // The status follows the findings within a second; the metrics and it agree once both
    // are read between two calls.
    let shown = eventually(Duration::from_secs(60), "the counts the metrics show", || {
        let series = &series;
        async move {
            let (same, differing) =
                (host.metric_or_zero(&series("same")).await, host.metric_or_zero(&series("differing")).await);
            let status =
                wasmplugins.get("foo-deployment-shadow").await.map_err(|e| e.to_string())?.data["status"].clone();
            let message = condition(&status, "Shadowing")["message"].as_str().unwrap_or_default().to_owned();
            let agree = message.contains(&format!("{same} same, {differing} differing"))
                && status["shadow"]["findings"]["differing"].as_f64() == Some(differing);
            if agree { Ok(status) } else { Err(format!("metrics {same} same, {differing} differing; {message}")) }
        }
    })
    .await;
    assert!(is(&shown, "Shadowing", "True", "Differing"), "{shown:#}");
}

#[tokio::test]
async fn a_wasmplugin_follows_edits_of_the_configmap_it_names() {
    let Stage { plugins, wasmplugins, .. } = &stage("wp-follow", &[]).await;
    let (configmap, mut plugin) = bundle("foo_deployment", "foo-deployment", &plugins.name, &[]);
    // Unpinned: the ConfigMap alone says which component serves.
    plugin.data["spec"].as_object_mut().unwrap().remove("signature");
    apply(&plugins, &wasmplugins, (configmap, plugin)).await;
    let first =
        status(&wasmplugins, "foo-deployment", "the first version", |s| is(s, "Ready", "True", "Serving")).await;
    assert!(is(&first, "Pinned", "False", "NotPinned"), "{first:#}");

    let next = std::fs::read(component("foo_deployment_next")).unwrap();
    let patch = json!({"binaryData": {"plugin.wasm": k8s_openapi::ByteString(next)}});
    plugins
        .api::<ConfigMap>()
        .patch("foo-deployment-component", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let swapped = status(&wasmplugins, "foo-deployment", "the ConfigMap's new component serving", |s| {
        s["digest"] != first["digest"] && is(s, "Ready", "True", "Serving")
    })
    .await;
    assert_eq!(swapped["observedGeneration"], first["observedGeneration"], "the WasmPlugin itself did not change");
}

#[tokio::test]
async fn a_suspended_wasmplugin_stops_its_plugin_until_it_is_resumed() {
    let Stage { plugins, wasmplugins, host, .. } = &serving_under("wp-suspend", "KeepPrevious").await;
    let suspend = |on: bool| json!({"spec": {"suspend": on}});
    wasmplugins.patch("foo-deployment", &PatchParams::default(), &Patch::Merge(&suspend(true))).await.unwrap();
    let suspended =
        status(&wasmplugins, "foo-deployment", "the plugin suspended", |s| is(s, "Ready", "False", "Suspended")).await;
    assert!(suspended["version"].is_null(), "{suspended:#}");
    host.metric_until("wasmloop_plugins_active", "the plugin unloaded", |n| n == 0.0).await;
    event_on(&plugins, "WasmPlugin", "PluginStopped", "spec.suspend is true").await;

    wasmplugins.patch("foo-deployment", &PatchParams::default(), &Patch::Merge(&suspend(false))).await.unwrap();
    status(&wasmplugins, "foo-deployment", "the plugin resumed", |s| is(s, "Ready", "True", "Serving")).await;
    host.metric_until("wasmloop_plugins_active", "the plugin loaded again", |n| n == 1.0).await;
}

/// The key id minisign wrote in the first line of public key file `name`.
fn key_id(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    text.lines().next().unwrap().rsplit(' ').next().unwrap().to_owned()
}

#[tokio::test]
async fn a_signed_wasmplugin_loads_only_when_signed_by_the_key_its_key_ref_names() {
    let keys = tempfile::tempdir().unwrap();
    let dir = keys.path();
    minisign(dir, &["-G", "-W", "-p", "first.pub", "-s", "first.key"]);
    minisign(dir, &["-G", "-W", "-p", "second.pub", "-s", "second.key"]);
    std::fs::copy(component("foo_deployment"), dir.join("plugin.wasm")).unwrap();
    minisign(dir, &["-S", "-s", "first.key", "-m", "plugin.wasm", "-x", "first.minisig"]);
    minisign(dir, &["-S", "-s", "second.key", "-m", "plugin.wasm", "-x", "second.minisig"]);
    let both = [
        std::fs::read_to_string(dir.join("first.pub")).unwrap(),
        std::fs::read_to_string(dir.join("second.pub")).unwrap(),
    ];
    std::fs::write(dir.join("trusted.pub"), both.concat()).unwrap();
    let (first, second) = (key_id(dir, "first.pub"), key_id(dir, "second.pub"));
    let trusted = dir.join("trusted.pub");
    let Stage { plugins, wasmplugins, .. } = &stage("wp-signed", &["--trusted-keys", trusted.to_str().unwrap()]).await;

    // Signed by a trusted key, but not the one keyRef names: refused, naming both.
    let signed_by_second = dir.join("second.minisig");
    let (configmap, mut plugin) =
        bundle("foo_deployment", "foo-deployment", &plugins.name, &["--signature", signed_by_second.to_str().unwrap()]);
    assert_eq!(plugin.data["spec"]["signature"]["keyRef"], json!(second), "bundle names the signing key");
    plugin.data["spec"]["signature"]["keyRef"] = json!(first);
    apply(plugins, wasmplugins, (configmap, plugin)).await;
    let refused = status(wasmplugins, "foo-deployment", "the wrong signer refused", |s| {
        is(s, "Ready", "False", "SignatureRejected")
    })
    .await;
    let message = condition(&refused, "Ready")["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("signed by key {second}")) && message.contains(&first), "{refused:#}");

    // The signature of the key named: it serves.
    let good = std::fs::read_to_string(dir.join("first.minisig")).unwrap();
    let patch = json!({"data": {"plugin.wasm.minisig": good}});
    plugins
        .api::<ConfigMap>()
        .patch("foo-deployment-component", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let serving =
        status(wasmplugins, "foo-deployment", "the right signer serving", |s| is(s, "Ready", "True", "Serving")).await;
    assert!(is(&serving, "Pinned", "True", "Digest"), "{serving:#}");
}

/// A host serving the hostile test plugin from a WasmPlugin of namespace `PREFIX-…`, confined
/// to `PREFIX-…-apps`, its spec's `config` and `settings` given; once it serves.
async fn hostile(prefix: &str, config: Value, settings: Option<Value>) -> Stage {
    let plugins = shared().namespace(prefix).await.unwrap();
    let apps = shared().namespace(&format!("{prefix}-apps")).await.unwrap();
    let wasmplugins = plugins.install_crd(Path::new(WASMPLUGIN_CRD)).await;
    let (host, _settings) = host(&[&plugins], &apps, &["hostile"], &[]);
    let (configmap, mut plugin) = bundle("hostile_plugin", "hostile", &plugins.name, &[]);
    plugin.data["spec"]["config"] = config;
    if let Some(settings) = settings {
        plugin.data["spec"]["settings"] = settings;
    }
    apply(&plugins, &wasmplugins, (configmap, plugin)).await;
    status(&wasmplugins, "hostile", "the plugin serving", |s| is(s, "Ready", "True", "Serving")).await;
    // Foos are not its kind, but a Stage has their API: the kind is installed once per plane.
    let foos = apps.install_crd(Path::new(FOO_CRD)).await;
    Stage { plugins, apps, foos, wasmplugins, host, _settings }
}

#[tokio::test]
async fn failed_reconciles_show_in_the_errors_column_and_degrade_the_wasmplugin() {
    let Stage { plugins, apps, wasmplugins, host, .. } =
        &hostile("wp-errors", json!({"mode": "panic-until-healed"}), None).await;
    create_configmap(apps, "sick").await;

    let failing =
        status(&wasmplugins, "hostile", "failures counted", |s| s["errors"].as_u64().is_some_and(|n| n > 0)).await;
    assert!(is(&failing, "Degraded", "True", "ReconcileErrors"), "{failing:#}");
    let errors = failing["errors"].as_u64().unwrap();
    let series =
        |result: &str| format!(r#"wasmloop_reconciles_total{{plugin="{}/hostile",result="{result}"}}"#, plugins.name);
    let counted = host.metric_or_zero(&series("retry")).await + host.metric_or_zero(&series("failed")).await;
    assert!(errors as f64 <= counted, "{errors} errors shown, {counted} failures counted by the metrics");

    let kubectl = shared().kubectl().expect("the control-plane binaries include kubectl");
    let out = Command::new(kubectl)
        .args(["get", "wasmplugin", "hostile", "-n", &plugins.name, "-o", "custom-columns=ERRORS:.status.errors"])
        .env("KUBECONFIG", shared().kubeconfig())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap_or_default().trim().parse::<u64>();
    assert!(printed.is_ok_and(|n| n >= errors), "kubectl shows the count: {}", String::from_utf8_lossy(&out.stdout));
}

#[tokio::test]
async fn a_wasmplugin_s_settings_set_its_plugin_s_deadline_and_a_settings_edit_is_a_new_version() {
    let Stage { apps, wasmplugins, .. } =
        &hostile("wp-settings", json!({"mode": "loop"}), Some(json!({"deadlineMs": 300}))).await;
    let first = wasmplugins.get("hostile").await.unwrap().data["status"].clone();
    create_configmap(apps, "spin").await;
    let events: Api<Event> = apps.api();
    wait_for_event(&events, Duration::from_secs(60), "the deadline the settings set", |e| {
        e.note.as_deref().is_some_and(|n| n.contains("ran past its 300 ms deadline"))
    })
    .await;

    let patch = json!({"spec": {"settings": {"deadlineMs": 400}}});
    wasmplugins.patch("hostile", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let generation = wasmplugins.get("hostile").await.unwrap().metadata.generation;
    let edited = status(&wasmplugins, "hostile", "the new settings serving", |s| {
        s["observedGeneration"] == json!(generation) && s["digest"] != first["digest"]
    })
    .await;
    assert!(is(&edited, "Ready", "True", "Serving"), "{edited:#}");
    wait_for_event(&events, Duration::from_secs(60), "the deadline the new settings set", |e| {
        e.note.as_deref().is_some_and(|n| n.contains("ran past its 400 ms deadline"))
    })
    .await;
}

#[tokio::test]
async fn the_operator_s_command_line_limits_win_over_a_wasmplugin_s_settings() {
    let plugins = shared().namespace("wp-flags").await.unwrap();
    let apps = shared().namespace("wp-flags-apps").await.unwrap();
    let wasmplugins = plugins.install_crd(Path::new(WASMPLUGIN_CRD)).await;
    let (_host, _settings) = host(&[&plugins], &apps, &["hostile"], &["--deadline-ms", "250"]);
    let (configmap, mut plugin) = bundle("hostile_plugin", "hostile", &plugins.name, &[]);
    plugin.data["spec"]["config"] = json!({"mode": "loop"});
    plugin.data["spec"]["settings"] = json!({"deadlineMs": 5000});
    apply(&plugins, &wasmplugins, (configmap, plugin)).await;
    status(&wasmplugins, "hostile", "the plugin serving", |s| is(s, "Ready", "True", "Serving")).await;
    create_configmap(&apps, "spin").await;
    let events: Api<Event> = apps.api();
    wait_for_event(&events, Duration::from_secs(60), "the operator's deadline", |e| {
        e.note.as_deref().is_some_and(|n| n.contains("ran past its 250 ms deadline"))
    })
    .await;
}

#[tokio::test]
async fn a_wasmplugin_wins_its_name_over_a_plugin_configmap_on_every_restart() {
    let plugins = shared().namespace("wp-same-name").await.unwrap();
    let apps = shared().namespace("wp-same-name-apps").await.unwrap();
    let wasmplugins = plugins.install_crd(Path::new(WASMPLUGIN_CRD)).await;
    let configmaps: Api<ConfigMap> = plugins.api();
    // Both kinds ship plugin labeler in one namespace: a plugin ConfigMap and a WasmPlugin.
    let bytes = std::fs::read(component("labeler_plugin")).unwrap();
    let shipped = wasmloop::plugin_configmap::build(
        "labeler",
        &plugins.name,
        &bytes,
        None,
        None,
        wasmloop::plugin_configmap::Track::Serving,
        None,
    )
    .unwrap();
    configmaps.create(&PostParams::default(), &shipped).await.unwrap();
    apply(&plugins, &wasmplugins, bundle("labeler_plugin", "labeler", &plugins.name, &[])).await;
    for restart in 0..10 {
        // Each start is judged by what it writes itself: the last start's statuses go first.
        let cleared = json!({"metadata": {"annotations": {"wasmloop.dev/status": null}}});
        configmaps.patch("labeler", &PatchParams::default(), &Patch::Merge(&cleared)).await.unwrap();
        wasmplugins
            .patch_status("labeler", &PatchParams::default(), &Patch::Merge(json!({"status": null})))
            .await
            .unwrap();
        let (host, _settings) = host(&[&plugins], &apps, &["labeler"], &[]);
        status(&wasmplugins, "labeler", &format!("start {restart}: the WasmPlugin serving"), |s| {
            is(s, "Ready", "True", "Serving")
        })
        .await;
        eventually(Duration::from_secs(60), &format!("start {restart}: the ConfigMap refused, naming it"), || {
            let configmaps = configmaps.clone();
            async move {
                let cm = configmaps.get("labeler").await.map_err(|e| e.to_string())?;
                let text =
                    cm.metadata.annotations.unwrap_or_default().remove("wasmloop.dev/status").unwrap_or_default();
                let status: Value = serde_json::from_str(&text).unwrap_or_default();
                let claimed = status["lastError"].as_str().is_some_and(|e| e.contains("claimed by WasmPlugin"));
                if claimed && status["activeDigest"].is_null() { Ok(()) } else { Err(text) }
            }
        })
        .await;
        assert_eq!(host.metric("wasmloop_plugins_active").await, 1.0, "start {restart}: one plugin runs");
        drop(host);
    }
}

#[tokio::test]
async fn a_wasmplugin_s_config_past_its_limit_is_refused_by_the_api_server_or_the_host() {
    let Stage { plugins, wasmplugins, .. } = &stage("wp-config-size", &[]).await;
    let (configmap, mut plugin) = bundle("foo_deployment", "foo-deployment", &plugins.name, &[]);
    // 2 MB: past what the API server stores.
    plugin.data["spec"]["config"] = json!({"blob": "x".repeat(2_000_000)});
    let refused = wasmplugins.create(&PostParams::default(), &plugin).await.expect_err("2 MB is refused");
    assert!(refused.to_string().contains("too large"), "{refused}");
    // 100 KiB: stored, and refused by the host, which keeps and hands on 64 KiB at most.
    plugin.data["spec"]["config"] = json!({"blob": "x".repeat(100 << 10)});
    apply(plugins, wasmplugins, (configmap, plugin)).await;
    let status =
        status(wasmplugins, "foo-deployment", "the config refused", |s| is(s, "Ready", "False", "InvalidWasmPlugin"))
            .await;
    let message = condition(&status, "Ready")["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("over the 64 KiB"), "{status:#}");
    // Past 256 keys: the schema refuses it.
    let keys: serde_json::Map<String, Value> = (0..257).map(|i| (format!("k{i}"), json!(i))).collect();
    let patch = json!({"spec": {"config": keys}});
    let refused = wasmplugins.patch("foo-deployment", &PatchParams::default(), &Patch::Merge(&patch)).await;
    assert!(refused.is_err_and(|e| e.to_string().contains("256")), "more than 256 keys refused");
}
