//! Plugin sharding (`run --shard`) between `wasmloop run` replicas on the real control plane:
//! twelve plugins split between three replicas, each run exactly once; a SIGKILLed replica's
//! plugins move to the others; an added replica takes a share.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use common::Host;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;
use wasmloop_testenv::{TestNamespace, eventually, shared};

/// The shortest Lease the host allows.
const LEASE_SECONDS: &str = "6";

/// The twelve plugins: the stamp guest built as `stamp-00` to `stamp-11`.
fn stamps() -> Vec<(String, PathBuf)> {
    (0..12)
        .map(|i| {
            let name = format!("stamp-{i:02}");
            let component =
                wasmloop_testenv::components::component_named("stamp-plugin", "stamp_plugin", "STAMP_NAME", &name);
            (name, component)
        })
        .collect()
}

/// A host configuration confining every plugin to `ns`, so that tests running at once do
/// not stamp each other's ConfigMaps.
fn confined(ns: &TestNamespace, plugins: &[(String, PathBuf)]) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    let lines: String = plugins.iter().map(|(name, _)| format!("  {name}: {{namespace: {}}}\n", ns.name)).collect();
    std::fs::write(file.path(), format!("plugins:\n{lines}")).unwrap();
    file
}

/// Replica `name` (its identity, as `POD_NAME` gives it in a pod) of the shard whose Leases
/// live in `ns`, running `--shard` with every plugin and `extra` arguments.
fn replica(
    ns: &TestNamespace,
    name: &str,
    plugins: &[(String, PathBuf)],
    config: &tempfile::NamedTempFile,
    extra: &[&str],
) -> Host {
    replica_leasing(ns, name, plugins, config, extra, LEASE_SECONDS)
}

/// As [`replica`], with Leases of `seconds`.
fn replica_leasing(
    ns: &TestNamespace,
    name: &str,
    plugins: &[(String, PathBuf)],
    config: &tempfile::NamedTempFile,
    extra: &[&str],
    seconds: &str,
) -> Host {
    let mut args: Vec<OsString> =
        ["run", "--shard", "--leader-election-namespace", &ns.name, "--lease-duration-seconds", seconds]
            .map(OsString::from)
            .into();
    args.extend(["--config".into(), config.path().into()]);
    for (_, component) in plugins {
        args.extend(["--plugin".into(), component.into()]);
    }
    args.extend(extra.iter().map(OsString::from));
    Host::start_env(&[("POD_NAME", name)], args)
}

/// The plugins `host` runs now, by its `wasmloop_shard_running` series.
async fn running(host: &Host) -> BTreeSet<String> {
    let (_, text) = host.get("/metrics").await;
    text.lines()
        .filter(|l| l.starts_with("wasmloop_shard_running{") && l.ends_with(" 1"))
        .filter_map(|l| l.split("plugin=\"").nth(1)?.split('"').next().map(str::to_owned))
        .collect()
}

/// Who runs what among `replicas` by rendezvous hashing, as every replica computes it.
fn assigned(replicas: &[&str], plugins: &[(String, PathBuf)]) -> BTreeMap<String, BTreeSet<String>> {
    let members: Vec<String> = replicas.iter().map(|r| (*r).to_owned()).collect();
    let owner = |p: &str| wasmloop::shard::hashing::owner(p, &members).unwrap().to_owned();
    replicas
        .iter()
        .map(|r| ((*r).to_owned(), plugins.iter().filter(|(p, _)| owner(p) == *r).map(|(p, _)| p.clone()).collect()))
        .collect()
}

/// Waits until each of `replicas` runs exactly the plugins assigned to it among them (so
/// every plugin runs on exactly one), and returns who runs what.
async fn settled(replicas: &[(&str, &Host)], plugins: &[(String, PathBuf)]) -> BTreeMap<String, BTreeSet<String>> {
    let names: Vec<&str> = replicas.iter().map(|(n, _)| *n).collect();
    let want = assigned(&names, plugins);
    eventually(Duration::from_secs(90), "every plugin running on the one replica assigned it", || {
        let want = &want;
        async move {
            let mut shares = BTreeMap::new();
            for (name, host) in replicas {
                shares.insert((*name).to_owned(), running(host).await);
            }
            if shares == *want { Ok(shares) } else { Err(format!("running {shares:?}, assigned {want:?}")) }
        }
    })
    .await
}

/// Creates a ConfigMap every stamp plugin reconciles.
async fn stamped_configmap(ns: &TestNamespace, name: &str) {
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"wasmloop.dev/stamp": "true"}}})).unwrap();
    ns.api::<ConfigMap>().create(&PostParams::default(), &cm).await.unwrap();
}

/// Waits until every plugin has stamped ConfigMap `name`.
async fn stamped_by_all(ns: &TestNamespace, name: &str, plugins: &[(String, PathBuf)]) {
    let api: Api<ConfigMap> = ns.api();
    eventually(Duration::from_secs(90), "every plugin's stamp", || {
        let api = api.clone();
        async move {
            let annotations = api.get(name).await.map_err(|e| e.to_string())?.metadata.annotations.unwrap_or_default();
            let missing: Vec<&String> = plugins
                .iter()
                .map(|(n, _)| n)
                .filter(|n| !annotations.contains_key(&format!("stamp.wasmloop.dev/{n}")))
                .collect();
            if missing.is_empty() { Ok(()) } else { Err(format!("not stamped by {missing:?}")) }
        }
    })
    .await;
}

/// Successful reconciles of `plugin` on `host` (0 when it never ran there).
async fn reconciles(host: &Host, plugin: &str) -> f64 {
    host.metric_or_zero(&format!(r#"wasmloop_reconciles_total{{plugin="{plugin}",result="success"}}"#)).await
}

#[tokio::test]
async fn three_replicas_split_twelve_plugins_and_each_plugin_runs_on_exactly_one() {
    let ns = shared().namespace("shard-split").await.unwrap();
    let plugins = stamps();
    let config = confined(&ns, &plugins);
    let a = replica(&ns, "replica-a", &plugins, &config, &[]);
    let b = replica(&ns, "replica-b", &plugins, &config, &[]);
    let c = replica(&ns, "replica-c", &plugins, &config, &[]);
    let shares = settled(&[("replica-a", &a), ("replica-b", &b), ("replica-c", &c)], &plugins).await;
    for (replica, share) in &shares {
        assert!(!share.is_empty(), "{replica} runs nothing: {shares:?}");
    }
    for host in [&a, &b, &c] {
        assert_eq!(host.metric("wasmloop_shard_members").await, 3.0);
    }
    stamped_configmap(&ns, "work").await;
    stamped_by_all(&ns, "work", &plugins).await;
    // Every stamp is in, so each plugin's runner has reconciled: the others never did.
    for (replica, host) in [("replica-a", &a), ("replica-b", &b), ("replica-c", &c)] {
        for (plugin, _) in &plugins {
            let ran = reconciles(host, plugin).await;
            assert_eq!(ran > 0.0, shares[replica].contains(plugin), "{plugin} on {replica}: {ran} reconciles");
        }
    }
}

#[tokio::test]
async fn a_sigkilled_replicas_plugins_move_to_the_others_and_objects_created_meanwhile_converge() {
    let ns = shared().namespace("shard-kill").await.unwrap();
    let plugins = stamps();
    let config = confined(&ns, &plugins);
    let a = replica(&ns, "replica-a", &plugins, &config, &[]);
    let b = replica(&ns, "replica-b", &plugins, &config, &[]);
    let mut c = replica(&ns, "replica-c", &plugins, &config, &[]);
    let before = settled(&[("replica-a", &a), ("replica-b", &b), ("replica-c", &c)], &plugins).await;
    c.kill();
    stamped_configmap(&ns, "meanwhile").await;
    let after = settled(&[("replica-a", &a), ("replica-b", &b)], &plugins).await;
    // Only the dead replica's plugins moved.
    for replica in ["replica-a", "replica-b"] {
        assert!(after[replica].is_superset(&before[replica]), "{replica} lost plugins: {before:?} -> {after:?}");
    }
    stamped_by_all(&ns, "meanwhile", &plugins).await;
    for host in [&a, &b] {
        eventually(Duration::from_secs(30), "the dead replica dropped from the members", || async move {
            let members = host.metric("wasmloop_shard_members").await;
            if members == 2.0 { Ok(()) } else { Err(format!("{members} members")) }
        })
        .await;
    }
}

#[tokio::test]
async fn an_added_replica_takes_a_share_and_only_that_share_moves() {
    let ns = shared().namespace("shard-add").await.unwrap();
    let plugins = stamps();
    let config = confined(&ns, &plugins);
    let a = replica(&ns, "replica-a", &plugins, &config, &[]);
    let b = replica(&ns, "replica-b", &plugins, &config, &[]);
    let before = settled(&[("replica-a", &a), ("replica-b", &b)], &plugins).await;
    let c = replica(&ns, "replica-c", &plugins, &config, &[]);
    let after = settled(&[("replica-a", &a), ("replica-b", &b), ("replica-c", &c)], &plugins).await;
    assert!(!after["replica-c"].is_empty(), "the new replica took nothing: {after:?}");
    for replica in ["replica-a", "replica-b"] {
        assert!(after[replica].is_subset(&before[replica]), "{replica} gained plugins: {before:?} -> {after:?}");
    }
    // Handed over, not dropped: objects still converge.
    stamped_configmap(&ns, "after-join").await;
    stamped_by_all(&ns, "after-join", &plugins).await;
}

#[tokio::test]
async fn a_plugin_configmaps_status_names_the_replica_that_runs_it() {
    let ns = shared().namespace("shard-status").await.unwrap();
    let plugin =
        wasmloop_testenv::components::component_named("stamp-plugin", "stamp_plugin", "STAMP_NAME", "stamp-cm");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .arg("bundle")
        .arg(&plugin)
        .args(["--name", "stamp-cm", "--namespace", &ns.name])
        .output()
        .unwrap();
    assert!(out.status.success(), "bundle failed: {}", String::from_utf8_lossy(&out.stderr));
    let cm: ConfigMap = serde_saphyr::from_slice_with_options(&out.stdout, wasmloop::input::yaml_options()).unwrap();
    let configmaps: Api<ConfigMap> = ns.api();
    configmaps.create(&PostParams::default(), &cm).await.unwrap();
    let none: Vec<(String, PathBuf)> = Vec::new();
    // It stamps ConfigMaps of a namespace of their own: no plugin writes into a plugin namespace.
    let apps = shared().namespace("shard-status-apps").await.unwrap();
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), format!("plugins:\n  {}/stamp-cm: {{namespace: {}}}\n", ns.name, apps.name)).unwrap();
    let extra = ["--plugin-namespace", ns.name.as_str()];
    let a = replica(&ns, "replica-a", &none, &config, &extra);
    let b = replica(&ns, "replica-b", &none, &config, &extra);
    // A ConfigMap's plugin is known by NAMESPACE/NAME: that is what is hashed and fenced.
    let id = format!("{}/stamp-cm", ns.name);
    let only = [(id.clone(), plugin.clone())];
    let shares = settled(&[("replica-a", &a), ("replica-b", &b)], &only).await;
    let runner = shares.iter().find(|(_, s)| s.contains(&id)).map(|(r, _)| r.clone()).unwrap();
    eventually(Duration::from_secs(60), "the status naming the runner", || {
        let (configmaps, runner) = (configmaps.clone(), runner.clone());
        async move {
            let cm = configmaps.get("stamp-cm").await.map_err(|e| e.to_string())?;
            let text = cm.metadata.annotations.unwrap_or_default().remove("wasmloop.dev/status").ok_or("no status")?;
            let status: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            if status["replica"] == runner.as_str() && status["plugin"] == "stamp-cm" { Ok(()) } else { Err(text) }
        }
    })
    .await;
    stamped_configmap(&apps, "work").await;
    stamped_by_all(&apps, "work", &[("stamp-cm".to_owned(), plugin)]).await;
}

#[tokio::test]
async fn a_replica_stopped_with_sigterm_hands_its_plugins_over_without_waiting_for_its_leases() {
    let ns = shared().namespace("shard-term").await.unwrap();
    let plugins = stamps();
    let config = confined(&ns, &plugins);
    // Leases of ten minutes: a move that waited for them to go stale would not end in time.
    let lease = "600";
    let a = replica_leasing(&ns, "replica-a", &plugins, &config, &[], lease);
    let mut b = replica_leasing(&ns, "replica-b", &plugins, &config, &[], lease);
    settled(&[("replica-a", &a), ("replica-b", &b)], &plugins).await;
    assert!(b.terminate().success(), "a replica leaving on SIGTERM exits 0");
    b.logged("left the shard: every plugin handed over, member Lease deleted").await;
    settled(&[("replica-a", &a)], &plugins).await;
    stamped_configmap(&ns, "after-leave").await;
    stamped_by_all(&ns, "after-leave", &plugins).await;
}

#[tokio::test]
async fn two_thousand_wasmplugins_that_may_not_act_as_anyone_take_no_fence_lease() {
    use common::wasmplugin::{WASMPLUGIN_CRD, bundle};
    let plugins = shared().namespace("shard-unusable").await.unwrap();
    let leases = shared().namespace("shard-unusable-leases").await.unwrap();
    let wasmplugins = plugins.install_crd(std::path::Path::new(WASMPLUGIN_CRD)).await;
    // One component for all, each WasmPlugin acting as the ServiceAccount named like it, which
    // does not exist.
    let (configmap, template) = bundle("noop_plugin", "noop", &plugins.name, &[]);
    plugins.api::<ConfigMap>().create(&PostParams::default(), &configmap.unwrap()).await.unwrap();
    let args = [
        "run",
        "--shard",
        "--leader-election-namespace",
        &leases.name,
        "--lease-duration-seconds",
        LEASE_SECONDS,
        "--plugin-identity",
        "impersonate",
        "--plugin-namespace",
        &plugins.name,
    ];
    let host = Host::start_env(&[("POD_NAME", "replica-a")], args);
    host.ready(Duration::from_secs(60), "the replica ready").await;
    const COUNT: usize = 2_000;
    let names: Vec<String> = (0..COUNT).map(|i| format!("unusable-{i:04}")).collect();
    for batch in names.chunks(50) {
        let creates = batch.iter().map(|name| {
            let mut plugin = template.clone();
            plugin.metadata.name = Some(name.clone());
            let api = wasmplugins.clone();
            async move { api.create(&PostParams::default(), &plugin).await.unwrap() }
        });
        futures::future::join_all(creates).await;
    }
    eventually(Duration::from_secs(600), "every WasmPlugin refused for its ServiceAccount", || {
        let api = wasmplugins.clone();
        async move {
            let listed = api.list(&Default::default()).await.map_err(|e| e.to_string())?;
            let refused = listed
                .items
                .iter()
                .filter(|p| {
                    let ready =
                        p.data["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
                    ready.is_some_and(|r| r["status"] == "False" && r["reason"] == "IdentityRefused")
                })
                .count();
            if refused == COUNT { Ok(()) } else { Err(format!("{refused} of {COUNT} refused")) }
        }
    })
    .await;
    let fences: Vec<String> = leases
        .api::<k8s_openapi::api::coordination::v1::Lease>()
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|l| {
            l.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.get("wasmloop.dev/shard-role").map(String::as_str) == Some("fence"))
        })
        .filter_map(|l| l.metadata.name)
        .collect();
    assert!(fences.is_empty(), "no plugin that may not run takes a fence: {fences:?}");
    assert!(host.metric("wasmloop_shard_members").await >= 1.0, "the replica took part all along");
}
