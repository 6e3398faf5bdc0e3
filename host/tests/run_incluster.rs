//! `deploy/` on the real control plane, and the host running as the deployed ServiceAccount:
//! a token from the TokenRequest API, the in-cluster environment (service host and port, the
//! token and CA under /var/run/secrets, bind-mounted in a private mount namespace), and
//! exactly the RBAC in `deploy/`, each plugin impersonating its own ServiceAccount. Needs
//! `kubectl` (to render kustomize: the control plane's own, else one on the PATH) and root for
//! `unshare --mount` (to place the service-account files where kube looks for them).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Host, component};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::pinned_kind;
use serde_json::json;
use wasmloop_testenv::{eventually, shared, wait_for_event};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const SYSTEM: &str = "wasmloop-system";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().map(Result::unwrap) {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `deploy/` and the Foo CRD base in a scratch tree, with the example plugins built into the
/// overlay, as `scripts/example-plugins` leaves them.
fn deploy_tree() -> tempfile::TempDir {
    let tree = tempfile::tempdir().unwrap();
    copy_dir(&Path::new(REPO).join("deploy"), &tree.path().join("deploy"));
    copy_dir(
        &Path::new(REPO).join("plugins/foo-deployment/deploy"),
        &tree.path().join("plugins/foo-deployment/deploy"),
    );
    let plugins = tree.path().join("deploy/overlays/example-plugins/plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for plugin in ["foo_deployment", "pod_logger", "node_image_watch", "configmap_mirror"] {
        let bytes = std::fs::read(component(plugin)).unwrap();
        std::fs::write(plugins.join(format!("{plugin}.wasm")), &bytes).unwrap();
        // The pin, as the script writes it.
        let pin = format!(
            "apiVersion: wasmloop.dev/v1alpha1\nkind: WasmPlugin\nmetadata:\n  name: {}\nspec:\n  signature:\n    digest: sha256:{}\n",
            plugin.replace('_', "-"),
            wasmloop_sandbox::digest(&bytes)
        );
        std::fs::write(plugins.join(format!("pin-{plugin}.yaml")), pin).unwrap();
    }
    tree
}

/// `kubectl kustomize dir`, as objects.
fn render(dir: &Path) -> Vec<DynamicObject> {
    let kubectl = shared().kubectl().map_or_else(|| PathBuf::from("kubectl"), Path::to_path_buf);
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl renders deploy/ with its built-in kustomize: install kubectl");
    assert!(out.status.success(), "kubectl kustomize {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    serde_saphyr::from_slice_multiple_with_options(&out.stdout, wasmloop::input::yaml_options()).unwrap()
}

/// Server-side applies every object: the API server validates each one.
async fn apply_all(objects: &[DynamicObject]) {
    let client = shared().client().await.unwrap();
    for object in objects {
        let types = object.types.as_ref().expect("rendered objects have apiVersion and kind");
        let gvk = GroupVersionKind::try_from(types).unwrap();
        // A kind whose CRD was applied a moment ago (WasmPlugin) is served once established.
        let (resource, capabilities) = eventually(Duration::from_secs(30), &format!("{} served", types.kind), || {
            let (client, gvk) = (client.clone(), gvk.clone());
            async move { pinned_kind(&client, &gvk).await.map_err(|e| e.to_string()) }
        })
        .await;
        let api: Api<DynamicObject> = match &object.metadata.namespace {
            Some(ns) if capabilities.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        let name = object.metadata.name.clone().unwrap();
        let params = PatchParams::apply("wasmloop-deploy-test").force();
        api.patch(&name, &params, &Patch::Apply(object))
            .await
            .unwrap_or_else(|e| panic!("the API server refused {} {name}: {e}", types.kind));
    }
}

/// The in-cluster files of a pod running as the `wasmloop` ServiceAccount.
async fn service_account_files() -> tempfile::TempDir {
    let client = shared().client().await.unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client, SYSTEM);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let issued = accounts.create_token_request("wasmloop", &PostParams::default(), &request).await.unwrap();
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("token"), issued.status.unwrap().token.unwrap()).unwrap();
    std::fs::copy(shared().ca_certificate(), files.path().join("ca.crt")).unwrap();
    std::fs::write(files.path().join("namespace"), SYSTEM).unwrap();
    files
}

/// `wasmloop run ARGS` as a pod of the deployed Deployment runs it, in a private mount
/// namespace where the service-account files sit at the path kube reads them from, with no
/// kubeconfig anywhere.
fn in_cluster_host(secrets: &Path, home: &Path, args: &[&str]) -> Host {
    // A tmpfs over /run (where /var/run points), private to this process tree, holds the
    // mount point: nothing is created on the machine's own filesystem.
    let script = r#"mount -t tmpfs tmpfs /run && mkdir -p "$2" && mount --bind "$1" "$2" && shift 2 && exec "$@""#;
    let port = shared().server().rsplit(':').next().unwrap().to_owned();
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "sh", "-c", script, "sh"])
        .arg(secrets)
        .arg("/run/secrets/kubernetes.io/serviceaccount")
        .arg(env!("CARGO_BIN_EXE_wasmloop"))
        .arg("run")
        .args(args)
        .args(["--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"])
        .env_remove("KUBECONFIG")
        .env("HOME", home)
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", port)
        .env("POD_NAME", "wasmloop-test-0")
        .env("POD_NAMESPACE", SYSTEM)
        .env("WASMLOOP_LOG", "info");
    Host::spawn(command)
}

async fn aggregated_rules_cover(resource: &'static str, verb: &'static str, present: bool) {
    let roles: Api<ClusterRole> = Api::all(shared().client().await.unwrap());
    eventually(
        Duration::from_secs(60),
        &format!("the host's role to {} {verb} {resource}", if present { "allow" } else { "deny" }),
        || {
            let roles = roles.clone();
            async move {
                let role = roles.get("wasmloop").await.map_err(|e| e.to_string())?;
                let allows = role.rules.unwrap_or_default().iter().any(|r| {
                    r.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == resource))
                        && r.verbs.iter().any(|v| v == verb)
                });
                if allows == present { Ok(()) } else { Err(format!("allows: {allows}")) }
            }
        },
    )
    .await;
}

#[tokio::test]
async fn deploy_and_its_example_plugins_overlay_are_accepted_by_the_api_server_and_the_host_reconciles_with_exactly_their_rbac()
 {
    let tree = deploy_tree();
    let base = render(&tree.path().join("deploy"));
    assert_eq!(
        base.iter().filter_map(|o| o.types.as_ref().map(|t| t.kind.as_str())).collect::<Vec<_>>(),
        [
            "Namespace",
            "CustomResourceDefinition",
            "ServiceAccount",
            "Role",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "RoleBinding",
            "ClusterRoleBinding",
            "Service",
            "Deployment"
        ]
    );
    apply_all(&base).await;
    let (secrets, home) = (service_account_files().await, tempfile::tempdir().unwrap());

    // The plugins' identities first: the host checks a plugin's ServiceAccount and reviews its
    // reads before it lists anything for it. With the host's own RBAC only (no cache roles
    // aggregated to it yet), pod-logger's cache does not sync and /readyz says so, until the
    // example plugins' cache roles arrive.
    let overlay = render(&tree.path().join("deploy/overlays/example-plugins"));
    let (cache_roles, identities): (Vec<_>, Vec<_>) =
        overlay.into_iter().partition(|o| o.metadata.name.as_deref().is_some_and(|n| n.starts_with("wasmloop-cache-")));
    assert_eq!(cache_roles.len(), 6, "one cache role per example plugin");
    apply_all(&identities).await;
    let pod_logger = component("pod_logger");
    let waiting = in_cluster_host(secrets.path(), home.path(), &["--plugin", pod_logger.to_str().unwrap()]);
    let (status, body) = waiting.get("/readyz").await;
    assert_eq!((status, body.as_str()), (503, "plugin pod-logger: starting: caches not synced yet\n"));
    assert_eq!(waiting.get("/healthz").await.0, 200, "alive while not ready");
    apply_all(&cache_roles).await;
    // The host caches the plugins' kinds and writes none of them: plugins write as their own
    // ServiceAccounts.
    aggregated_rules_cover("foos", "list", true).await;
    aggregated_rules_cover("nodes", "watch", true).await;
    aggregated_rules_cover("nodes", "patch", false).await;
    aggregated_rules_cover("deployments", "create", false).await;
    // WasmPlugins: the host reads them and writes their status, never their spec.
    aggregated_rules_cover("wasmplugins", "watch", true).await;
    aggregated_rules_cover("wasmplugins/status", "patch", true).await;
    aggregated_rules_cover("wasmplugins", "patch", false).await;
    waiting.ready(Duration::from_secs(90), "/readyz to turn ready once Pods can be listed").await;
    drop(waiting);

    let host = in_cluster_host(secrets.path(), home.path(), &["--plugin-namespace", SYSTEM, "--leader-elect"]);
    host.logged("acquired the leader Lease").await;
    let gvk = kube::api::GroupVersionKind::gvk("wasmloop.dev", "v1alpha1", "WasmPlugin");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "wasmplugins");
    let wasmplugins: Api<kube::api::DynamicObject> =
        Api::namespaced_with(shared().client().await.unwrap(), SYSTEM, &resource);
    for plugin in
        ["foo-deployment", "pod-logger", "node-image-watch", "configmap-mirror", "ttl-janitor", "namespace-defaults"]
    {
        eventually(Duration::from_secs(60), &format!("{plugin} ready from its WasmPlugin, pinned"), || {
            let wasmplugins = wasmplugins.clone();
            async move {
                let status = wasmplugins.get(plugin).await.map_err(|e| e.to_string())?.data["status"].clone();
                let ready =
                    status["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready")).cloned();
                let serving = ready.as_ref().is_some_and(|r| r["status"] == "True" && r["reason"] == "Serving");
                // Pinned by the overlay to the component's digest.
                let pinned = status["conditions"].as_array().is_some_and(|c| {
                    c.iter().any(|c| c["type"] == "Pinned" && c["status"] == "True" && c["reason"] == "Digest")
                });
                if serving && pinned { Ok(()) } else { Err(status.to_string()) }
            }
        })
        .await;
    }

    // README's wait on the example plugins, as written, with the plane's kubectl.
    waits_on_a_cluster();

    // foo-deployment, with its role: a Foo gets its Deployment.
    let ns = shared().namespace("incluster").await.unwrap();
    let foos = ns.install_crd(&PathBuf::from(common::FOO_CRD)).await;
    foos.create(&PostParams::default(), &common::foo("in-cluster", "in-cluster", 2)).await.unwrap();
    common::deployment_with(&ns.api(), "in-cluster", "the Foo's Deployment", |d| common::replicas(d) == Some(2)).await;

    // node-image-watch, with its role: the annotation follows the images.
    let nodes: Api<Node> = Api::all(shared().client().await.unwrap());
    let name = format!("incluster-{}", std::process::id());
    nodes
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap())
        .await
        .unwrap();
    let images = |bytes: i64| json!({"status": {"images": [{"names": ["app:1"], "sizeBytes": bytes}]}});
    nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(images(1000))).await.unwrap();
    eventually(Duration::from_secs(60), "the node annotated", || {
        let (nodes, name) = (nodes.clone(), name.clone());
        async move {
            let node = nodes.get(&name).await.map_err(|e| e.to_string())?;
            let value = node.metadata.annotations.unwrap_or_default().remove("wasmloop.dev/image-bytes");
            if value.as_deref() == Some("1000") { Ok(()) } else { Err(format!("{value:?}")) }
        }
    })
    .await;

    // Take patch on nodes away from the plugin's ServiceAccount: the next annotation is an
    // action outside its RBAC, refused with an error that names the plugin, its identity, the
    // object and the fix. The host's own rights never included it.
    let read_only = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "wasmloop-plugin-node-image-watch"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                  {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}]
    });
    let roles: Api<ClusterRole> = Api::all(shared().client().await.unwrap());
    roles
        .patch(
            "wasmloop-plugin-node-image-watch",
            &PatchParams::apply("wasmloop-deploy-test").force(),
            &Patch::Apply(&read_only),
        )
        .await
        .unwrap();
    // The API server's RBAC cache follows the role a moment later; until it does, the patch
    // would still be allowed.
    denied_patching_nodes("system:serviceaccount:wasmloop-system:node-image-watch").await;
    nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(images(2000))).await.unwrap();
    // kube's Recorder files Events about cluster-scoped objects in "default".
    let events: Api<Event> = Api::namespaced(shared().client().await.unwrap(), "default");
    let refused = wait_for_event(&events, Duration::from_secs(60), "the Forbidden Warning", |e| {
        e.reason.as_deref() == Some("Forbidden")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
    })
    .await;
    let note = refused.note.unwrap();
    for part in [
        // A plugin namespace's plugin is named NAMESPACE/NAME.
        "plugin wasmloop-system/node-image-watch",
        "failed as ServiceAccount wasmloop-system/node-image-watch",
        "system:serviceaccount:wasmloop-system:node-image-watch",
        "grant ServiceAccount wasmloop-system/node-image-watch",
    ] {
        assert!(note.contains(part), "{part:?} missing from: {note}");
    }
}

/// Returns once the API server says `user` may not patch nodes.
async fn denied_patching_nodes(user: &str) {
    let reviews: Api<SubjectAccessReview> = Api::all(shared().client().await.unwrap());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(vec!["system:serviceaccounts".to_owned(), "system:authenticated".to_owned()]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("patch".to_owned()),
                resource: Some("nodes".to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    eventually(Duration::from_secs(60), &format!("{user} denied patching nodes"), || {
        let (reviews, review) = (reviews.clone(), review.clone());
        async move {
            let answer = reviews.create(&PostParams::default(), &review).await.map_err(|e| e.to_string())?;
            match answer.status {
                Some(status) if !status.allowed => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
}

/// README's second command block under "On a cluster" (`kubectl wait` on the example
/// WasmPlugins, `kubectl get wasmplugins`), run as written with the plane's kubectl first on
/// the PATH.
fn waits_on_a_cluster() {
    let readme = std::fs::read_to_string(Path::new(REPO).join("README.md")).unwrap();
    let (_, after) = readme.split_once("\n## On a cluster\n").expect("an \"On a cluster\" section");
    let section = after.split("\n## ").next().unwrap();
    let block = section.split("```sh\n").nth(2).expect("a second sh block").split("```").next().unwrap();
    let kubectl = shared().kubectl().expect("the control-plane binaries include kubectl");
    let path = format!("{}:{}", kubectl.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", block])
        .env("PATH", path)
        .env("KUBECONFIG", shared().kubeconfig())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "README's wait failed:\n{block}\n{printed}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(printed.contains("wasmplugin.wasmloop.dev/foo-deployment condition met"), "{printed}");
    let header: Vec<&str> =
        printed.lines().find(|l| l.starts_with("NAME")).unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "VERSION", "REPLICA", "ERRORS", "AGE"], "{printed}");
}
