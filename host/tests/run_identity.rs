//! Plugins acting as their own ServiceAccounts (`run --plugin-identity impersonate`), on the
//! real control plane: Kubernetes RBAC, not the host, decides what each plugin may read and
//! write.

mod common;

use std::ffi::OsStr;
use std::time::Duration;

use common::{Host, component, create_configmap, create_deployment, labelled};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, eventually, shared, wait_for_event};

/// Creates ServiceAccount `name` in `ns`, marked for plugin use.
async fn service_account(ns: &TestNamespace, name: &str) {
    let annotations = json!({"wasmloop.dev/plugin-identity": "true"});
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations}})).unwrap();
    ns.api::<ServiceAccount>().create(&PostParams::default(), &account).await.unwrap();
}

/// Creates ServiceAccount `name` in `ns`, not marked for plugin use (a workload's, say).
async fn unmarked_service_account(ns: &TestNamespace, name: &str) {
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    ns.api::<ServiceAccount>().create(&PostParams::default(), &account).await.unwrap();
}

/// Grants ServiceAccount `account` in `plugins` the `rules` in `ns`, through a Role and a
/// RoleBinding both named `name`.
async fn grant(ns: &TestNamespace, name: &str, plugins: &TestNamespace, account: &str, rules: serde_json::Value) {
    let role: Role = serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).unwrap();
    ns.api::<Role>().create(&PostParams::default(), &role).await.unwrap();
    bind(ns, name, plugins, account).await;
}

async fn bind(ns: &TestNamespace, name: &str, plugins: &TestNamespace, account: &str) {
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": plugins.name}],
    }))
    .unwrap();
    ns.api::<RoleBinding>().create(&PostParams::default(), &binding).await.unwrap();
}

/// Replaces the rules of Role `name` in `ns`.
async fn set_rules(ns: &TestNamespace, name: &str, rules: serde_json::Value) {
    let patch = json!({"rules": rules});
    ns.api::<Role>().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// Rules a plugin needs to record its own Events.
fn events() -> serde_json::Value {
    json!({"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]})
}

/// `wasmloop --log-format json run --plugin-identity impersonate ...` with `plugins` (test
/// components) and a host.yaml holding `settings` (its `plugins:` mapping), reviewing access
/// every 2 s. The config file lives as long as the host.
fn run_as_service_accounts(
    identity_namespace: &TestNamespace,
    plugins: &[&str],
    settings: &str,
) -> (Host, tempfile::NamedTempFile) {
    run_as_service_accounts_with(identity_namespace, plugins, settings, &[])
}

/// [`run_as_service_accounts`] with more arguments to `run`.
fn run_as_service_accounts_with(
    identity_namespace: &TestNamespace,
    plugins: &[&str],
    settings: &str,
    more: &[&str],
) -> (Host, tempfile::NamedTempFile) {
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), format!("plugins:\n{settings}")).unwrap();
    let mut args: Vec<std::ffi::OsString> =
        ["--log-format", "json", "run", "--plugin-identity", "impersonate"].into_iter().map(Into::into).collect();
    args.extend(["--plugin-identity-namespace".into(), identity_namespace.name.clone().into()]);
    args.extend(["--access-review-seconds".into(), "2".into(), "--config".into(), config.path().into()]);
    for plugin in plugins {
        args.extend(["--plugin".into(), component(plugin).into()]);
    }
    args.extend(more.iter().map(Into::into));
    (Host::start(args.iter().map(|a| a as &OsStr)), config)
}

/// Waits for an Event in `ns` with `reason` whose note contains every one of `parts`.
async fn event_with(ns: &TestNamespace, reason: &'static str, parts: &[&str]) -> String {
    let events: Api<Event> = ns.api();
    let parts: Vec<String> = parts.iter().map(|p| (*p).to_owned()).collect();
    let event = wait_for_event(&events, Duration::from_secs(60), reason, move |e| {
        e.reason.as_deref() == Some(reason) && e.note.as_deref().is_some_and(|n| parts.iter().all(|p| n.contains(p)))
    })
    .await;
    event.note.unwrap_or_default()
}

/// Waits until the host has logged a line with `message` for object `key`.
async fn logged_for(host: &Host, message: &str, key: &str) {
    eventually(Duration::from_secs(60), &format!("{message:?} for {key}"), || {
        let found = host
            .json_lines()
            .iter()
            .any(|l| l["fields"]["message"].as_str().is_some_and(|m| m.contains(message)) && l["fields"]["key"] == key);
        async move { if found { Ok(()) } else { Err("not yet".to_owned()) } }
    })
    .await;
}

/// Waits for the process to end.
async fn exited(host: &mut Host) {
    host.exited_within(Duration::from_secs(60), "the host to exit").await;
}

fn labeler_rules() -> serde_json::Value {
    json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "watch", "patch"]}, events()])
}

#[tokio::test]
async fn a_write_beyond_the_plugins_grants_is_refused_by_the_host_and_one_within_them_by_rbac() {
    let plugins = shared().namespace("id-plugins").await.unwrap();
    let tenant = shared().namespace("id-tenant").await.unwrap();
    service_account(&plugins, "hostile").await;
    service_account(&plugins, "labeler").await;
    // hostile may read ConfigMaps and Deployments in its tenant's namespace, and nothing else.
    let reads =
        json!({"apiGroups": ["", "apps"], "resources": ["configmaps", "deployments"], "verbs": ["list", "watch"]});
    grant(&tenant, "hostile", &plugins, "hostile", json!([reads, events()])).await;
    grant(&tenant, "labeler", &plugins, "labeler", labeler_rules()).await;
    let configmap = |name: &str, data: serde_json::Value| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
    };
    // Another plugin's ConfigMap in the plugin namespace, and one in hostile's own namespace.
    plugins
        .api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("victim", json!({"owner": "other"})))
        .await
        .unwrap();
    tenant
        .api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("neighbour", json!({"owner": "other"})))
        .await
        .unwrap();
    let settings = format!(
        "  hostile: {{namespace: {t}, config: {{mode: steal, target: {p}/victim}}}}\n  labeler: {{namespace: {t}}}\n",
        t = tenant.name,
        p = plugins.name
    );
    let (host, _config) = run_as_service_accounts(&plugins, &["hostile_plugin", "labeler_plugin"], &settings);

    // Outside its namespace: the cache says out of scope, and the host refuses the patch,
    // which its grant (primary-namespace) does not cover, before any API call.
    create_configmap(&tenant, "trigger").await;
    host.logged("out of scope").await;
    let refusal = format!("patch v1/ConfigMap in namespace {}", plugins.name);
    let note = event_with(&tenant, "PluginNotGranted", &["plugin hostile", &refusal, "under writes"]).await;
    assert!(!note.contains("Forbidden"), "the API server was asked: {note}");

    // In its namespace the grant covers the patch, and its ServiceAccount's RBAC forbids it,
    // in a Warning that names the plugin and the ServiceAccount.
    let local = format!("{}/neighbour", tenant.name);
    tenant
        .api::<ConfigMap>()
        .create(&PostParams::default(), &configmap("trigger-local", json!({"target": local})))
        .await
        .unwrap();
    event_with(&tenant, "Read", &["visible: true"]).await;
    let account = format!("ServiceAccount {}/hostile", plugins.name);
    let note = event_with(&tenant, "Forbidden", &["plugin hostile", &format!("failed as {account}")]).await;
    assert!(note.contains(&format!("grant {account}")), "{note}");

    for (ns, name) in [(&plugins, "victim"), (&tenant, "neighbour")] {
        let live = ns.api::<ConfigMap>().get(name).await.unwrap();
        assert_eq!(live.data.unwrap_or_default().get("stolen"), None, "{name} was overwritten");
    }
    // The other plugin, granted what it needs, keeps working in the same process.
    create_deployment(&tenant, "web").await;
    labelled(&tenant, "web", "v1").await;
    drop(host);
}

#[tokio::test]
async fn revoking_a_grant_stops_the_plugin_within_the_review_interval_and_restoring_it_resumes() {
    let plugins = shared().namespace("id-revoke").await.unwrap();
    let tenant = shared().namespace("id-revoke-apps").await.unwrap();
    service_account(&plugins, "labeler").await;
    grant(&tenant, "labeler", &plugins, "labeler", labeler_rules()).await;
    let settings = format!("  labeler: {{namespace: {}}}\n", tenant.name);
    let (host, _config) = run_as_service_accounts(&plugins, &["labeler_plugin"], &settings);
    create_deployment(&tenant, "before").await;
    labelled(&tenant, "before", "v1").await;

    // Only the reads go: the plugin could still patch, so only the review stops it.
    set_rules(
        &tenant,
        "labeler",
        json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]}, events()]),
    )
    .await;
    host.logged("access revoked").await;
    create_deployment(&tenant, "during").await;
    // The host saw the new Deployment and chose not to serve it.
    logged_for(&host, "skipped: access revoked", &format!("{}/during", tenant.name)).await;
    let during = tenant.api::<Deployment>().get("during").await.unwrap();
    assert!(!during.metadata.labels.unwrap_or_default().contains_key("wasmloop.dev/labeled-by"));

    set_rules(&tenant, "labeler", labeler_rules()).await;
    host.logged("access granted again").await;
    labelled(&tenant, "during", "v1").await;
}

#[tokio::test]
async fn a_plugin_whose_service_account_is_missing_is_refused_with_how_to_create_it() {
    let plugins = shared().namespace("id-missing").await.unwrap();
    let (mut host, _config) = run_as_service_accounts(&plugins, &["labeler_plugin"], "  {}\n");
    exited(&mut host).await;
    host.logged(&format!("ServiceAccount {}/labeler does not exist; create it", plugins.name)).await;
    host.logged(&format!("kubectl -n {} create serviceaccount labeler", plugins.name)).await;
}

#[tokio::test]
async fn a_plugin_whose_service_account_is_missing_makes_the_host_list_and_watch_nothing_for_it() {
    let (plugins, tenant) = refused_labeler("id-missing-nolist", false, "does not exist; create it").await;
    let account = format!("/api/v1/namespaces/{}/serviceaccounts/labeler", plugins.name);
    assert!(!shared().audited_after_marker(&account).await.is_empty(), "the host asked for the ServiceAccount");
    let made = shared().audited_after_marker(&format!("/namespaces/{}/deployments", tenant.name)).await;
    assert!(made.is_empty(), "the host listed or watched for a plugin whose identity is missing: {made:?}");
}

/// Runs the labeler confined to a namespace of its own, as a ServiceAccount that exists
/// (`account`) or not, with no grants, and waits for the host to exit logging `refusal`.
async fn refused_labeler(prefix: &str, account: bool, refusal: &str) -> (TestNamespace, TestNamespace) {
    let plugins = shared().namespace(prefix).await.unwrap();
    let tenant = shared().namespace(&format!("{prefix}-apps")).await.unwrap();
    if account {
        service_account(&plugins, "labeler").await;
    }
    let settings = format!("  labeler: {{namespace: {}}}\n", tenant.name);
    let (mut host, _config) = run_as_service_accounts(&plugins, &["labeler_plugin"], &settings);
    exited(&mut host).await;
    host.logged(refusal).await;
    (plugins, tenant)
}

#[tokio::test]
async fn a_plugin_whose_reads_are_denied_makes_the_host_list_and_watch_nothing_for_it() {
    let (_, tenant) = refused_labeler("id-denied-nolist", true, "may not list deployments.apps in namespace").await;
    let made = shared().audited_after_marker(&format!("/namespaces/{}/deployments", tenant.name)).await;
    assert!(made.is_empty(), "the host listed or watched before the plugin's reads were reviewed: {made:?}");
}

#[tokio::test]
async fn a_plugin_whose_service_account_may_not_list_its_kinds_is_refused_with_a_role_that_would() {
    let plugins = shared().namespace("id-denied").await.unwrap();
    let tenant = shared().namespace("id-denied-apps").await.unwrap();
    service_account(&plugins, "labeler").await;
    // Watch but not list.
    let rules = json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["watch"]}]);
    grant(&tenant, "labeler", &plugins, "labeler", rules).await;
    let settings = format!("  labeler: {{namespace: {}}}\n", tenant.name);
    let (mut host, _config) = run_as_service_accounts(&plugins, &["labeler_plugin"], &settings);
    exited(&mut host).await;
    host.logged(&format!("may not list deployments.apps in namespace {};", tenant.name)).await;
    host.logged(&format!("metadata: {{name: wasmloop-plugin-labeler, namespace: {}}}", tenant.name)).await;
    host.logged(r#"rules: [{apiGroups: ["apps"], resources: [deployments], verbs: [list]}]"#).await;
}

#[tokio::test]
async fn a_plugin_may_not_act_as_a_service_account_not_marked_for_plugin_use() {
    let plugins = shared().namespace("id-unmarked").await.unwrap();
    // A workload's account, with the grants the plugin needs: being granted is not consent.
    unmarked_service_account(&plugins, "workload").await;
    grant(&plugins, "workload", &plugins, "workload", labeler_rules()).await;
    let settings = format!("  labeler: {{serviceAccount: {}/workload}}\n", plugins.name);
    let (mut host, _config) = run_as_service_accounts(&plugins, &["labeler_plugin"], &settings);
    exited(&mut host).await;
    host.logged(&format!("ServiceAccount {}/workload is not marked for plugin use", plugins.name)).await;
    host.logged(&format!(
        "kubectl -n {} annotate serviceaccount workload wasmloop.dev/plugin-identity=true",
        plugins.name
    ))
    .await;
}

#[tokio::test]
async fn a_plugin_may_not_act_as_the_hosts_own_service_account_even_when_marked() {
    let plugins = shared().namespace("id-own").await.unwrap();
    // A plugin named like the host's account, in the host's namespace.
    service_account(&plugins, "labeler").await;
    grant(&plugins, "labeler", &plugins, "labeler", labeler_rules()).await;
    let own = format!("{}/labeler", plugins.name);
    let (mut host, _config) =
        run_as_service_accounts_with(&plugins, &["labeler_plugin"], "  {}\n", &["--host-service-account", &own]);
    exited(&mut host).await;
    host.logged(&format!("ServiceAccount {own} is the host's own")).await;
}

#[tokio::test]
async fn a_plugins_own_error_is_recorded_as_the_plugin_not_as_the_host() {
    let plugins = shared().namespace("id-fail").await.unwrap();
    let tenant = shared().namespace("id-fail-apps").await.unwrap();
    service_account(&plugins, "hostile").await;
    // It may read, but not record Events.
    let reads =
        json!({"apiGroups": ["", "apps"], "resources": ["configmaps", "deployments"], "verbs": ["list", "watch"]});
    grant(&tenant, "hostile", &plugins, "hostile", json!([reads])).await;
    let settings = format!("  hostile: {{namespace: {}, config: {{mode: fail}}}}\n", tenant.name);
    let (host, _config) = run_as_service_accounts(&plugins, &["hostile_plugin"], &settings);
    create_configmap(&tenant, "trigger").await;
    // The Event with the plugin's own reason and words was attempted as the plugin, and RBAC
    // refused it...
    host.logged("could not record the failure as an Event").await;
    let refused = host.json_lines().into_iter().any(|l| {
        l["fields"]["message"].as_str().is_some_and(|m| m.contains("could not record the failure"))
            && l["fields"]["error"]
                .as_str()
                .is_some_and(|e| e.contains(&format!("ServiceAccount {}/hostile", plugins.name)))
    });
    assert!(refused, "the failure Event was not written as the plugin's ServiceAccount");
    // ...so no Event carries the reason the plugin chose.
    let events = tenant.api::<Event>().list(&Default::default()).await.unwrap();
    assert!(events.items.iter().all(|e| e.reason.as_deref() != Some("PluginChosenReason")), "{events:?}");
}
