//! Plugins delivered through a real OCI registry on loopback (Debian's `docker-registry`, see
//! `wasmloop_testenv::registry`): `wasmloop push`, a plugin ConfigMap naming the pushed
//! reference with a pull secret, and pulls that fail.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{FOO_CRD, Host, deployment_with, foo, minisign, pull_secret, replicas};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use wasmloop_testenv::registry::TestRegistry;
use wasmloop_testenv::{TestNamespace, eventually, shared, wait_for_event};

fn wasmloop(args: &[&str], stdin: &str) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// `wasmloop push` of `component` to `repository:tag` on the test registry, as its user;
/// returns the pinned reference it printed.
fn push(registry: &TestRegistry, component: &Path, repository: &str) -> String {
    let target = format!("oci://{}/{repository}:1.0", registry.address);
    let out = wasmloop(
        &[
            "push",
            component.to_str().unwrap(),
            &target,
            "--plain-http",
            "--username",
            &registry.username,
            "--password-stdin",
        ],
        &format!("{}\n", registry.password),
    );
    assert!(out.status.success(), "push failed: {}", String::from_utf8_lossy(&out.stderr));
    let reference = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(reference.starts_with(&format!("oci://{}/{repository}@sha256:", registry.address)), "{reference}");
    reference
}

/// `wasmloop bundle COMPONENT --name NAME --ref REFERENCE [--pull-secret SECRET]`, parsed.
fn bundle_ref(component: &Path, name: &str, namespace: &str, reference: &str, secret: Option<&str>) -> ConfigMap {
    let mut args =
        vec!["bundle", component.to_str().unwrap(), "--name", name, "--namespace", namespace, "--ref", reference];
    if let Some(secret) = secret {
        args.extend(["--pull-secret", secret]);
    }
    let out = wasmloop(&args, "");
    assert!(out.status.success(), "bundle failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_saphyr::from_slice_with_options(&out.stdout, wasmloop::input::yaml_options()).expect("a ConfigMap")
}

/// Waits until the ConfigMap's status annotation passes `check`, and returns it.
async fn status(api: &Api<ConfigMap>, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(Duration::from_secs(90), what, || {
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

fn python_foo() -> std::path::PathBuf {
    wasmloop_testenv::components::python_component("plugins/foo-deployment-py")
}

#[tokio::test]
async fn a_python_plugin_pushed_to_a_registry_reconciles_from_a_configmap_reference_and_a_failed_pull_keeps_it_serving()
{
    let registry = wasmloop_testenv::registry::shared();
    let plugins = shared().namespace("oci-plugins").await.unwrap();
    let apps = shared().namespace("oci-apps").await.unwrap();
    let foos = apps.install_crd(Path::new(FOO_CRD)).await;
    let component = python_foo();
    let reference = push(registry, &component, "plugins/foo-deployment");
    pull_secret(&plugins, "registry-creds", registry).await;
    let configmap = bundle_ref(&component, "foo-deployment", &plugins.name, &reference, Some("registry-creds"));
    assert!(configmap.binary_data.is_none(), "a 20 MB component ships by reference");
    let configmaps: Api<ConfigMap> = plugins.api();
    configmaps.create(&PostParams::default(), &configmap).await.unwrap();
    let _host = Host::start(["run", "--plugin-namespace", &plugins.name, "--insecure-registry", &registry.address]);

    // The pulled component serves: its digest is the pushed file's, and it reconciles.
    let loaded = status(&configmaps, "foo-deployment", "the pulled plugin active", |s| s["version"] == "0.1.0").await;
    let digest = wasmloop_sandbox::digest(&std::fs::read(&component).unwrap());
    assert_eq!(loaded["activeDigest"], digest.as_str(), "{loaded}");
    foos.create(&PostParams::default(), &foo("first", "first", 2)).await.unwrap();
    deployment_with(&apps.api(), "first", "the first Foo's Deployment", |d| replicas(d) == Some(2)).await;

    // A reference the registry does not hold: refused, saying why, and the pulled version
    // keeps serving.
    let missing = format!("{}@sha256:{}", reference.split('@').next().unwrap(), "0".repeat(64));
    let patch = json!({"data": {"plugin.ref": missing}});
    configmaps.patch("foo-deployment", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let refused =
        status(&configmaps, "foo-deployment", "the failed pull reported", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(error.contains(&format!("cannot pull {missing}")), "{error}");
    assert!(error.contains("(plugin foo-deployment 0.1.0 keeps serving)"), "{error}");
    assert_eq!(refused["activeDigest"], digest.as_str());
    let events: Api<Event> = plugins.api();
    wait_for_event(&events, Duration::from_secs(60), "a PullFailed Warning", |e| {
        e.reason.as_deref() == Some("PluginRejected") && e.note.as_deref().is_some_and(|n| n.starts_with("PullFailed"))
    })
    .await;
    foos.create(&PostParams::default(), &foo("second", "second", 1)).await.unwrap();
    deployment_with(&apps.api(), "second", "the second Foo's Deployment", |d| replicas(d) == Some(1)).await;
}

#[tokio::test]
async fn a_reference_without_usable_credentials_is_refused_saying_what_to_fix() {
    let registry = wasmloop_testenv::registry::shared();
    let plugins = shared().namespace("oci-refused").await.unwrap();
    let component = python_foo();
    let reference = push(registry, &component, "plugins/refused");
    let configmaps: Api<ConfigMap> = plugins.api();
    let mut anonymous = bundle_ref(&component, "foo-deployment", &plugins.name, &reference, None);
    anonymous.metadata.name = Some("anonymous".into());
    configmaps.create(&PostParams::default(), &anonymous).await.unwrap();
    let mut unknown = bundle_ref(&component, "foo-deployment", &plugins.name, &reference, Some("no-such-secret"));
    unknown.metadata.name = Some("unknown-secret".into());
    configmaps.create(&PostParams::default(), &unknown).await.unwrap();
    // A Secret of the namespace that is not a pull secret (a token, say) is not read as one.
    let opaque = Secret {
        metadata: ObjectMeta { name: Some("a-token".into()), ..ObjectMeta::default() },
        string_data: Some([(".dockerconfigjson".to_owned(), "{}".to_owned())].into()),
        ..Secret::default()
    };
    plugins.api::<Secret>().create(&PostParams::default(), &opaque).await.unwrap();
    let mut not_pull = bundle_ref(&component, "foo-deployment", &plugins.name, &reference, Some("a-token"));
    not_pull.metadata.name = Some("opaque-secret".into());
    configmaps.create(&PostParams::default(), &not_pull).await.unwrap();
    // A registry the operator did not name: refused before any connection is made to it.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere_ref = format!("oci://{}/plugins/p@sha256:{}", elsewhere.local_addr().unwrap(), "2".repeat(64));
    let mut disallowed = bundle_ref(&component, "foo-deployment", &plugins.name, &elsewhere_ref, None);
    disallowed.metadata.name = Some("disallowed".into());
    configmaps.create(&PostParams::default(), &disallowed).await.unwrap();
    let _host = Host::start(["run", "--plugin-namespace", &plugins.name, "--insecure-registry", &registry.address]);

    let refused = status(&configmaps, "anonymous", "the anonymous pull refused", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(error.contains(&format!("cannot pull {reference}: registry {}", registry.address)), "{error}");
    let refused =
        status(&configmaps, "unknown-secret", "the missing secret named", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(error.contains(&format!("pull secret {}/no-such-secret does not exist", plugins.name)), "{error}");
    let refused = status(&configmaps, "opaque-secret", "the token refused", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(error.contains("is of type Opaque, not kubernetes.io/dockerconfigjson"), "{error}");
    let refused =
        status(&configmaps, "disallowed", "the unnamed registry refused", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(error.contains("is not one this host pulls from; push the plugin to one of"), "{error}");
    let events: Api<Event> = plugins.api();
    wait_for_event(&events, Duration::from_secs(60), "a PullRefused Warning", |e| {
        e.note.as_deref().is_some_and(|n| n.starts_with("PullRefused"))
    })
    .await;
    // The refusal is made before a pull would start, so the registry heard nothing by now.
    let connected = tokio::time::timeout(Duration::ZERO, elsewhere.accept()).await;
    assert!(connected.is_err(), "the host connected to a registry it may not pull from");
}

// deploy/ lets the host read only the Secrets its Role names; a ConfigMap naming another one
// is refused with the change to make, not a bare 403.
#[tokio::test]
async fn a_pull_secret_the_host_may_not_read_is_refused_naming_the_role_to_change() {
    let registry = wasmloop_testenv::registry::shared();
    let plugins = shared().namespace("oci-forbidden").await.unwrap();
    let user = format!("host-{}", plugins.name);
    let rules = json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["registry-creds"], "verbs": ["get"]},
    ]);
    common::grant_user(&plugins, "wasmloop", &user, rules).await;
    pull_secret(&plugins, "team-creds", registry).await;
    let reference = format!("oci://{}/plugins/forbidden@sha256:{}", registry.address, "3".repeat(64));
    let mut configmap = bundle_ref(&python_foo(), "foo-deployment", &plugins.name, &reference, Some("team-creds"));
    configmap.metadata.name = Some("forbidden".into());
    let configmaps: Api<ConfigMap> = plugins.api();
    configmaps.create(&PostParams::default(), &configmap).await.unwrap();
    let kubeconfig = common::kubeconfig_as(&user);
    let _host = Host::start_with(
        kubeconfig.path(),
        ["run", "--plugin-namespace", &plugins.name, "--insecure-registry", &registry.address],
    );

    let refused =
        status(&configmaps, "forbidden", "the unreadable secret refused", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "pull secret {}/team-creds: the host may not read it (secrets \"team-creds\" is forbidden",
            plugins.name
        )),
        "{error}"
    );
    assert!(error.contains("add team-creds to the resourceNames of Role wasmloop's rule on Secrets"), "{error}");
}

#[tokio::test]
async fn with_trusted_keys_a_reference_is_signed_or_never_pulled_and_a_restart_reads_the_disk_cache() {
    let registry = wasmloop_testenv::registry::shared();
    let plugins = shared().namespace("oci-signed").await.unwrap();
    let apps = shared().namespace("oci-signed-apps").await.unwrap();
    apps.install_crd(Path::new(FOO_CRD)).await;
    let keys = tempfile::tempdir().unwrap();
    minisign(keys.path(), &["-G", "-W", "-p", "trusted.pub", "-s", "trusted.key"]);
    let wasm = keys.path().join("plugin.wasm");
    std::fs::copy(common::component("foo_deployment"), &wasm).unwrap();
    minisign(keys.path(), &["-S", "-s", "trusted.key", "-m", "plugin.wasm", "-x", "plugin.wasm.minisig"]);
    let reference = push(registry, &wasm, "plugins/signed");
    let configmaps: Api<ConfigMap> = plugins.api();
    pull_secret(&plugins, "registry-creds", registry).await;
    let signature = keys.path().join("plugin.wasm.minisig");
    let out = wasmloop(
        &[
            "bundle",
            wasm.to_str().unwrap(),
            "--name",
            "foo-deployment",
            "--namespace",
            &plugins.name,
            "--ref",
            &reference,
            "--pull-secret",
            "registry-creds",
            "--signature",
            signature.to_str().unwrap(),
        ],
        "",
    );
    assert!(out.status.success(), "bundle failed: {}", String::from_utf8_lossy(&out.stderr));
    let signed: ConfigMap =
        serde_saphyr::from_slice_with_options(&out.stdout, wasmloop::input::yaml_options()).unwrap();
    configmaps.create(&PostParams::default(), &signed).await.unwrap();
    // An unsigned reference, to a registry the host may pull from: refused before the pull.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_address = silent.local_addr().unwrap().to_string();
    let unsigned_ref = format!("oci://{silent_address}/plugins/unsigned@sha256:{}", "3".repeat(64));
    let mut unsigned = bundle_ref(&wasm, "foo-deployment", &plugins.name, &unsigned_ref, None);
    unsigned.metadata.name = Some("unsigned".into());
    configmaps.create(&PostParams::default(), &unsigned).await.unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = |plugins: &str| {
        let trusted = keys.path().join("trusted.pub");
        Host::start([
            "run",
            "--plugin-namespace",
            plugins,
            "--insecure-registry",
            &registry.address,
            "--insecure-registry",
            &silent_address,
            "--trusted-keys",
            trusted.to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
        ])
    };
    let mut host = run(&plugins.name);

    let digest = wasmloop_sandbox::digest(&std::fs::read(&wasm).unwrap());
    let loaded =
        status(&configmaps, "foo-deployment", "the signed reference active", |s| s["activeDigest"].is_string()).await;
    assert_eq!(loaded["activeDigest"], digest.as_str(), "{loaded}");
    let refused =
        status(&configmaps, "unsigned", "the unsigned reference refused", |s| s["lastError"].is_string()).await;
    let error = refused["lastError"].as_str().unwrap();
    assert!(error.contains("requires a minisign signature"), "{error}");
    let connected = tokio::time::timeout(Duration::ZERO, silent.accept()).await;
    assert!(connected.is_err(), "the host pulled a reference it would refuse unsigned");

    // A restart serves the signed component from the disk cache, without a pull.
    host.kill();
    let host = run(&plugins.name);
    host.logged(&format!("the component is in the disk cache: no pull reference={reference}")).await;
    host.ready(Duration::from_secs(90), "/readyz once the cached plugin serves").await;
}

#[test]
fn a_push_with_a_wrong_password_fails_naming_the_registry() {
    let registry = wasmloop_testenv::registry::shared();
    let target = format!("oci://{}/plugins/denied:1", registry.address);
    let component = python_foo();
    let out = wasmloop(
        &[
            "push",
            component.to_str().unwrap(),
            &target,
            "--plain-http",
            "--username",
            &registry.username,
            "--password-stdin",
        ],
        "wrong\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&format!("cannot push {target}: registry {}", registry.address)), "{stderr}");
}

#[tokio::test]
async fn a_registry_that_never_answers_holds_up_only_its_own_configmap() {
    // A listening socket that never answers, as a registry that hangs.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = silent.local_addr().unwrap().to_string();
    let plugins = shared().namespace("oci-stalled").await.unwrap();
    let apps = shared().namespace("oci-stalled-apps").await.unwrap();
    let foos = apps.install_crd(Path::new(FOO_CRD)).await;
    let configmaps: Api<ConfigMap> = plugins.api();
    let stalled_ref = format!("oci://{address}/plugins/stalled@sha256:{}", "1".repeat(64));
    let mut stalled = bundle_ref(&python_foo(), "foo-deployment", &plugins.name, &stalled_ref, None);
    stalled.metadata.name = Some("stalled".into());
    configmaps.create(&PostParams::default(), &stalled).await.unwrap();
    let host = Host::start([
        "run",
        "--plugin-namespace",
        &plugins.name,
        "--insecure-registry",
        &address,
        "--pull-timeout-seconds",
        "3600",
    ]);
    host.logged(&format!("pulling the plugin this object names source=ConfigMap {}/stalled", plugins.name)).await;
    let (mut pull, _) = silent.accept().await.unwrap();

    // The host is not ready while a plugin it started with is still on its way, and says which.
    let (code, body) = host.get("/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains(&format!("ConfigMap {}/stalled: pull: pulling the component it names", plugins.name)),
        "{body}"
    );

    // Another ConfigMap loads and reconciles meanwhile.
    let out = wasmloop(
        &[
            "bundle",
            common::component("foo_deployment").to_str().unwrap(),
            "--name",
            "foo-deployment",
            "--namespace",
            &plugins.name,
        ],
        "",
    );
    assert!(out.status.success(), "bundle failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut inline: ConfigMap =
        serde_saphyr::from_slice_with_options(&out.stdout, wasmloop::input::yaml_options()).unwrap();
    inline.metadata.name = Some("inline".into());
    configmaps.create(&PostParams::default(), &inline).await.unwrap();
    status(&configmaps, "inline", "the inline plugin active", |s| s["activeDigest"].is_string()).await;
    foos.create(&PostParams::default(), &foo("served", "served", 1)).await.unwrap();
    deployment_with(&apps.api(), "served", "the Foo's Deployment", |d| replicas(d) == Some(1)).await;

    // Deleting the stalled ConfigMap ends its pull (the host hangs up), and the host turns
    // ready.
    configmaps.delete("stalled", &Default::default()).await.unwrap();
    let hung_up =
        tokio::time::timeout(Duration::from_secs(60), tokio::io::copy(&mut pull, &mut tokio::io::sink())).await;
    assert!(matches!(hung_up, Ok(Ok(_))), "the pull still runs: {hung_up:?}");
    host.ready(Duration::from_secs(60), "/readyz to turn ready once the stalled ConfigMap is gone").await;
}

/// The walkthrough's `kubectl` steps for the labeller's identity, through the API: its
/// ServiceAccount in `plugins`, marked for plugin use, reading and patching ConfigMaps and
/// recording Events anywhere (the cluster-scoped names carry the namespace's, to stay apart).
async fn labeller_identity(plugins: &TestNamespace) {
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {
        "name": "labeller", "annotations": {"wasmloop.dev/plugin-identity": "true"}}}))
    .unwrap();
    plugins.api::<ServiceAccount>().create(&PostParams::default(), &account).await.unwrap();
    let client = shared().client().await.unwrap();
    let name = format!("labeller-{}", plugins.name);
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]}))
    .unwrap();
    Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "labeller", "namespace": plugins.name}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(client).create(&PostParams::default(), &binding).await.unwrap();
}

/// The fenced blocks of `language` in `markdown`, in order.
fn fenced<'a>(markdown: &'a str, language: &str) -> Vec<&'a str> {
    let open = format!("```{language}\n");
    markdown.split(open.as_str()).skip(1).map(|rest| rest.split("```").next().unwrap()).collect()
}

/// Runs `program args` in `dir` with the Python SDK importable, and returns its stdout.
fn python_step(dir: &Path, args: &[&str], what: &str) -> String {
    let python = wasmloop_testenv::components::python();
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/python");
    let out = Command::new(python).args(args).current_dir(dir).env("PYTHONPATH", sdk).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[tokio::test]
async fn the_python_readme_walkthrough_goes_from_an_empty_directory_to_a_label_on_the_cluster() {
    let readme = include_str!("../../guest-sdk/python/README.md");
    let (python, yaml) = (fenced(readme, "python"), fenced(readme, "yaml"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plugin.py"), python[0]).unwrap();
    std::fs::write(dir.path().join("test_plugin.py"), python[1]).unwrap();
    std::fs::write(dir.path().join("configmap.yaml"), yaml[0]).unwrap();

    // Its native tests pass; it builds; it runs offline.
    let tested = python_step(dir.path(), &["-m", "pytest", "-q", "-p", "no:cacheprovider"], "pytest");
    assert!(tested.contains("1 passed"), "{tested}");
    python_step(dir.path(), &["-m", "wasmloop", "build", ".", "-o", "labeller.wasm"], "the build");
    let component = dir.path().join("labeller.wasm");
    let configmap_yaml = dir.path().join("configmap.yaml");
    let offline = wasmloop(
        &["reconcile", "--plugin", component.to_str().unwrap(), "--object", configmap_yaml.to_str().unwrap()],
        "",
    );
    let printed = String::from_utf8_lossy(&offline.stdout);
    assert!(offline.status.success(), "{printed}\n{}", String::from_utf8_lossy(&offline.stderr));
    assert!(printed.contains("keys: '2'") || printed.contains("keys: \"2\""), "{printed}");

    // Pushed, named from a ConfigMap with a pull secret, and reconciling on the cluster.
    let registry = wasmloop_testenv::registry::shared();
    let reference = push(registry, &component, "team/labeller");
    let plugins = shared().namespace("walkthrough").await.unwrap();
    let apps = shared().namespace("walkthrough-apps").await.unwrap();
    pull_secret(&plugins, "registry-creds", registry).await;
    let configmap = bundle_ref(&component, "labeller", &plugins.name, &reference, Some("registry-creds"));
    let configmaps: Api<ConfigMap> = plugins.api();
    configmaps.create(&PostParams::default(), &configmap).await.unwrap();
    labeller_identity(&plugins).await;
    let _host = Host::start([
        "run",
        "--plugin-identity",
        "impersonate",
        "--plugin-namespace",
        &plugins.name,
        "--insecure-registry",
        &registry.address,
    ]);
    status(&configmaps, "labeller", "the labeller active", |s| s["version"] == "0.1.0").await;
    let mut settings: ConfigMap =
        serde_saphyr::from_slice_with_options(yaml[0].as_bytes(), wasmloop::input::yaml_options()).unwrap();
    settings.metadata.namespace = Some(apps.name.clone());
    let settings_api: Api<ConfigMap> = apps.api();
    settings_api.create(&PostParams::default(), &settings).await.unwrap();
    eventually(Duration::from_secs(90), "the keys label on the settings ConfigMap", || {
        let settings_api = settings_api.clone();
        async move {
            let cm = settings_api.get("settings").await.map_err(|e| e.to_string())?;
            let keys = cm.metadata.labels.unwrap_or_default().remove("keys");
            if keys.as_deref() == Some("2") { Ok(()) } else { Err(format!("keys label {keys:?}")) }
        }
    })
    .await;
}
