//! Shared informers against the real control plane.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use wasmloop_runtime::Metrics;
use wasmloop_runtime::discovery::Kinds;
use wasmloop_runtime::{Change, InformerScope, Informers};
use wasmloop_sandbox::{Gvk, Selector};
use wasmloop_testenv::{TestNamespace, shared};

fn configmaps(ns: &TestNamespace) -> InformerScope {
    InformerScope::new(Gvk::from_api_version("v1", "ConfigMap").unwrap(), Some(ns.name.parse().unwrap()))
}

fn configmap(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..ObjectMeta::default()
        },
        data: Some([("k".to_owned(), name.to_owned())].into()),
        ..ConfigMap::default()
    }
}

async fn next_change(rx: &mut tokio::sync::broadcast::Receiver<Change>, name: &str) -> Change {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let change = rx.recv().await.expect("the informer is alive");
            let entry = match &change {
                Change::Applied(e) | Change::Deleted(e) | Change::Left(e) => e,
            };
            if entry.envelope.name == name {
                return change;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no change for {name} within 30 s"))
}

#[tokio::test]
async fn two_holders_of_one_kind_and_scope_share_one_watch() {
    let ns = shared().namespace("inf-share").await.unwrap();
    let metrics = Arc::new(Metrics::new());
    let informers = Informers::new(ns.client.clone(), Arc::new(Kinds::new(ns.client.clone())), metrics.clone());
    let a = informers.acquire(&configmaps(&ns)).await.unwrap();
    let b = informers.acquire(&configmaps(&ns)).await.unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    let series = |name: &str| {
        format!(r#"wasmloop_{name}{{kind="v1/ConfigMap",namespace="{}",view="full",selector=""}}"#, ns.name)
    };
    let text = metrics.encode();
    assert!(text.contains(&format!("{} 1\n", series("watches_started_total"))), "{text}");
    assert!(text.contains(&format!("{} 1\n", series("watches_active"))), "{text}");
    drop((a, b));
    let text = metrics.encode();
    assert!(text.contains(&format!("{} 0\n", series("watches_active"))), "the last holder stops the watch: {text}");
}

#[tokio::test]
async fn the_cache_holds_what_existed_before_sync_and_what_came_after() {
    let ns = shared().namespace("inf-sync").await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    api.create(&PostParams::default(), &configmap("before", &[("tier", "web")])).await.unwrap();
    let informers = Informers::new(ns.client.clone(), Arc::new(Kinds::new(ns.client.clone())), Arc::default());
    let informer = informers.acquire(&configmaps(&ns)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), informer.synced()).await.expect("synced within 30 s");
    let before = informer.get(Some(&ns.name), "before").expect("listed at sync");
    assert_eq!(before.envelope.kind, "ConfigMap");
    assert_eq!(before.envelope.api_version, "v1");
    assert!(before.envelope.json.contains("\"tier\":\"web\""));

    let mut changes = informer.subscribe();
    api.create(&PostParams::default(), &configmap("after", &[("tier", "db")])).await.unwrap();
    assert!(matches!(next_change(&mut changes, "after").await, Change::Applied(_)));
    let web: Selector = "tier=web".parse().unwrap();
    let names: Vec<String> = informer.list(None, &web).iter().map(|e| e.envelope.name.clone()).collect();
    assert_eq!(names, ["before"]);
    let everything = Selector::default();
    assert_eq!(informer.list(Some(&ns.name), &everything).len(), 2, "both, looked up by namespace");
    assert!(informer.list(Some("elsewhere"), &everything).is_empty());
}

#[tokio::test]
async fn a_selected_watch_caches_only_what_it_selects_and_an_object_leaving_it_is_deleted() {
    let ns = shared().namespace("inf-selected").await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    api.create(&PostParams::default(), &configmap("web", &[("tier", "web")])).await.unwrap();
    api.create(&PostParams::default(), &configmap("db", &[("tier", "db")])).await.unwrap();
    let metrics = Arc::new(Metrics::new());
    let informers = Informers::new(ns.client.clone(), Arc::new(Kinds::new(ns.client.clone())), metrics.clone());
    let scope = InformerScope { selector: Some("tier=web".parse().unwrap()), ..configmaps(&ns) };
    let informer = informers.acquire(&scope).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), informer.synced()).await.expect("synced within 30 s");
    let cached = |informer: &wasmloop_runtime::Informer| -> Vec<String> {
        informer.list(None, &Selector::default()).iter().map(|e| e.envelope.name.clone()).collect()
    };
    assert_eq!(cached(&informer), ["web"], "the server sent only what the selector selects");
    let series = format!(
        r#"wasmloop_watches_active{{kind="v1/ConfigMap",namespace="{}",view="full",selector="tier=web"}} 1"#,
        ns.name
    );
    assert!(metrics.encode().contains(&series), "{}", metrics.encode());

    let mut changes = informer.subscribe();
    let relabel = |tier: &str| serde_json::json!({"metadata": {"labels": {"tier": tier}}});
    let merge = |tier| kube::api::Patch::Merge(relabel(tier));
    api.patch("web", &kube::api::PatchParams::default(), &merge("cache")).await.unwrap();
    assert!(matches!(next_change(&mut changes, "web").await, Change::Deleted(_)), "it left the selection");
    api.patch("db", &kube::api::PatchParams::default(), &merge("web")).await.unwrap();
    assert!(matches!(next_change(&mut changes, "db").await, Change::Applied(_)), "it joined the selection");
    assert_eq!(cached(&informer), ["db"]);
}

#[tokio::test]
async fn a_delete_is_delivered_once_with_the_last_state() {
    let ns = shared().namespace("inf-delete").await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let informers = Informers::new(ns.client.clone(), Arc::new(Kinds::new(ns.client.clone())), Arc::default());
    let informer = informers.acquire(&configmaps(&ns)).await.unwrap();
    informer.synced().await;
    let mut changes = informer.subscribe();
    api.create(&PostParams::default(), &configmap("doomed", &[])).await.unwrap();
    next_change(&mut changes, "doomed").await;
    api.delete("doomed", &DeleteParams::default()).await.unwrap();
    match next_change(&mut changes, "doomed").await {
        Change::Deleted(last) => assert!(last.envelope.json.contains("\"k\":\"doomed\"")),
        other => panic!("expected a deletion, got {other:?}"),
    }
    assert!(informer.get(Some(&ns.name), "doomed").is_none());
}

#[tokio::test]
async fn children_are_found_by_owner_uid() {
    let ns = shared().namespace("inf-owner").await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let parent = api.create(&PostParams::default(), &configmap("parent", &[])).await.unwrap();
    let uid = parent.metadata.uid.clone().unwrap();
    let mut child = configmap("child", &[]);
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "parent".into(),
        uid: uid.clone(),
        ..OwnerReference::default()
    }]);
    api.create(&PostParams::default(), &child).await.unwrap();
    api.create(&PostParams::default(), &configmap("stranger", &[])).await.unwrap();
    let informers = Informers::new(ns.client.clone(), Arc::new(Kinds::new(ns.client.clone())), Arc::default());
    let informer = informers.acquire(&configmaps(&ns)).await.unwrap();
    informer.synced().await;
    let owned: Vec<String> = informer.owned_by(&uid).iter().map(|e| e.envelope.name.clone()).collect();
    assert_eq!(owned, ["child"]);
}

#[tokio::test]
async fn an_unknown_kind_is_an_error_naming_it() {
    let ns = shared().namespace("inf-unknown").await.unwrap();
    let informers = Informers::new(ns.client.clone(), Arc::new(Kinds::new(ns.client.clone())), Arc::default());
    let scope = InformerScope::new(Gvk::from_api_version("example.com/v1", "Nothing").unwrap(), None);
    let err = informers.acquire(&scope).await.err().expect("discovery fails");
    assert!(err.to_string().contains("kind example.com/v1/Nothing is not served"), "{err}");
}
