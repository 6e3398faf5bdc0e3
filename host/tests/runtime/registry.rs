//! The registry against the real control plane: how loads of different plugins relate.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use wasmloop_runtime::identity::AccountChoice;
use wasmloop_runtime::registry::{Candidate, Loaded, Loader, Registry, Settings};
use wasmloop_runtime::{Context, ControllerConfig, Metrics};
use wasmloop_sandbox::{Sandbox, SandboxConfig};
use wasmloop_testenv::{TestNamespace, eventually, shared};

use crate::common::{grant_user, kubeconfig_as};

/// A client of the shared control plane acting as the plain user `user` ([`kubeconfig_as`]),
/// which may do only what a Role grants it.
async fn client_as(user: &str) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig_as(user).path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A registry acting as `client`, each realm's plugins confined to the realm's namespace.
fn registry(client: kube::Client) -> Registry {
    let sandbox = Sandbox::new(SandboxConfig::default().cache_dir(None)).unwrap();
    let loader: Loader = {
        let sandbox = sandbox.clone();
        Arc::new(move |bytes: bytes::Bytes, origin: String, _| {
            let sandbox = sandbox.clone();
            async move { sandbox.load_shared(bytes, &origin).await }.boxed()
        })
    };
    let settings: Settings = Arc::new(|realm: &str, _: &str| ControllerConfig {
        namespace: realm.parse().ok(),
        ..ControllerConfig::default()
    });
    let context = Context::new(client, Arc::new(Metrics::new()));
    Registry::new(context, sandbox, loader, settings, Duration::from_secs(1))
}

/// The noop plugin (which reconciles ConfigMaps) offered from a ConfigMap in `ns`.
fn noop_from(ns: &TestNamespace, bytes: &bytes::Bytes) -> Candidate {
    Candidate {
        source: wasmloop_sandbox::SourceId::object(
            wasmloop_sandbox::SourceKind::ConfigMap,
            ns.name.parse().unwrap(),
            "noop".parse().unwrap(),
        ),
        realm: Some(ns.name.parse().unwrap()),
        expected_name: Some("noop".to_owned()),
        bytes: bytes.clone(),
        held: None,
        config: None,
        account: AccountChoice::Operator { namespace: ns.name.clone() },
        settings: None,
    }
}

#[tokio::test]
async fn a_load_that_cannot_sync_holds_up_no_other_load() {
    let plane = shared();
    let (stuck_ns, free_ns) = (plane.namespace("reg-stuck").await.unwrap(), plane.namespace("reg-free").await.unwrap());
    // The host may read ConfigMaps in one namespace only: the other's cache never syncs, and
    // its load waits out the two-minute sync timeout.
    let user = format!("host-{}", free_ns.name);
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}]);
    grant_user(&free_ns, "read", &user, rules).await;
    let registry = Arc::new(registry(client_as(&user).await));
    let noop: bytes::Bytes = std::fs::read(wasmloop_testenv::components::component("noop_plugin")).unwrap().into();

    let stuck = tokio::spawn({
        let (registry, candidate) = (registry.clone(), noop_from(&stuck_ns, &noop));
        async move { registry.upsert(candidate).await }
    });
    let stuck_id = format!("{}/noop", stuck_ns.name);
    eventually(Duration::from_secs(60), "the first load to be preparing its controller", || {
        let (preparing, reached) = (registry.preparing(), registry.preparing().iter().any(|p| *p == stuck_id));
        async move { if reached { Ok(()) } else { Err(format!("preparing: {preparing:?}")) } }
    })
    .await;

    let free = tokio::time::timeout(Duration::from_secs(60), registry.upsert(noop_from(&free_ns, &noop)))
        .await
        .expect("the second plugin's load waited for the first's");
    assert!(matches!(free, Ok(Loaded::Started { .. })), "{free:?}");
    assert!(!stuck.is_finished(), "the first load ended: {:?}", stuck.await);
    assert_eq!(registry.preparing(), vec![format!("{}/noop", stuck_ns.name)]);
    assert_eq!(registry.names(), vec![format!("{}/noop", free_ns.name)]);
    stuck.abort();
}
