//! `wasmloop run` with foo-deployment on the real control plane: sample-controller parity.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{FOO_CRD, Host, deployment_with, foo, replicas};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmloop_testenv::{eventually, shared, wait_for_event};

#[tokio::test]
async fn foo_deployment_has_sample_controller_parity() {
    common::sample_controller_parity("run-foo", &common::component("foo_deployment")).await;
}

#[tokio::test]
async fn a_foreign_deployment_is_left_untouched_with_err_resource_exists() {
    let ns = shared().namespace("run-foreign").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    let deployments: Api<Deployment> = ns.api();
    let foreign: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "taken"},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "other"}},
                 "template": {"metadata": {"labels": {"app": "other"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap();
    let before = deployments.create(&PostParams::default(), &foreign).await.unwrap();
    let _host = Host::run(&["foo_deployment"]);
    foos.create(&PostParams::default(), &foo("claimer", "taken", 1)).await.unwrap();

    let events: Api<Event> = ns.api();
    let warning = wait_for_event(&events, Duration::from_secs(60), "the ErrResourceExists Warning", |e| {
        e.reason.as_deref() == Some("ErrResourceExists")
    })
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(warning.note.unwrap().contains("Resource \"taken\" already exists and is not managed by Foo"));
    let after = deployments.get("taken").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "the foreign Deployment was written");
}

#[tokio::test]
async fn an_invalid_spec_is_reported_and_the_deployment_it_manages_survives_prune() {
    let ns = shared().namespace("run-invalid").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    let deployments: Api<Deployment> = ns.api();
    let _host = Host::run(&["foo_deployment"]);
    foos.create(&PostParams::default(), &foo("kept", "kept", 1)).await.unwrap();
    let before = deployment_with(&deployments, "kept", "the Deployment", |d| replicas(d) == Some(1)).await;

    // An empty deploymentName: sample-controller reports it and leaves the Deployment alone.
    let blank = json!({"spec": {"deploymentName": ""}});
    foos.patch("kept", &PatchParams::default(), &Patch::Merge(blank)).await.unwrap();
    let events: Api<Event> = ns.api();
    wait_for_event(&events, Duration::from_secs(60), "the InvalidSpec Warning", |e| {
        e.reason.as_deref() == Some("InvalidSpec")
            && e.type_.as_deref() == Some("Warning")
            && e.note.as_deref().is_some_and(|n| n.contains("spec.deploymentName must be specified"))
    })
    .await;
    // Fix the spec. Reconciles of one Foo never overlap, so once this one has scaled the
    // Deployment, the one that reported the bad spec (and any prune of it) is over: a pruned
    // Deployment would have been recreated with another UID.
    let fixed = json!({"spec": {"deploymentName": "kept", "replicas": 2}});
    foos.patch("kept", &PatchParams::default(), &Patch::Merge(fixed)).await.unwrap();
    let after = deployment_with(&deployments, "kept", "the Deployment scaled", |d| replicas(d) == Some(2)).await;
    assert_eq!(after.metadata.uid, before.metadata.uid, "the Deployment was pruned and recreated");
}

#[tokio::test]
async fn two_hundred_foos_converge() {
    let ns = shared().namespace("run-foo-200").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    let _host = Host::run(&["foo_deployment"]);
    futures::stream::iter(0..200)
        .for_each_concurrent(20, |i| {
            let foos = foos.clone();
            async move {
                let name = format!("foo-{i}");
                foos.create(&PostParams::default(), &foo(&name, &name, 1 + i % 3)).await.unwrap();
            }
        })
        .await;
    let deployments: Api<Deployment> = ns.api();
    eventually(Duration::from_secs(180), "200 Deployments with the right replicas and 200 Foo statuses", || {
        let (deployments, foos) = (deployments.clone(), foos.clone());
        async move {
            let listed = deployments.list(&Default::default()).await.map_err(|e| e.to_string())?;
            let right = listed
                .items
                .iter()
                .filter(|d| {
                    let i: i32 = d.metadata.name.as_deref().unwrap()["foo-".len()..].parse().unwrap();
                    replicas(d) == Some(1 + i % 3)
                })
                .count();
            let statuses = foos
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .filter(|f| f.data["status"]["availableReplicas"] == 0)
                .count();
            if right == 200 && statuses == 200 {
                Ok(())
            } else {
                Err(format!("{right} Deployments right, {statuses} statuses set"))
            }
        }
    })
    .await;
}

/// The cases recorded for Foo `name` in `ns` so far, parsed.
fn cases_of(dir: &Path, ns: &str, name: &str) -> Vec<serde_json::Value> {
    let Ok(files) = std::fs::read_dir(dir.join("foo-deployment")) else { return Vec::new() };
    let mut cases: Vec<(String, serde_json::Value)> = files
        .filter_map(|f| f.ok())
        .filter(|f| {
            let file = f.file_name().to_string_lossy().into_owned();
            file.ends_with(".yaml") && file.contains(&format!("-{ns}-{name}"))
        })
        .filter_map(|f| {
            let text = std::fs::read_to_string(f.path()).ok()?;
            let case = serde_saphyr::from_str_with_options(&text, wasmloop::input::yaml_options()).ok()?;
            Some((f.file_name().to_string_lossy().into_owned(), case))
        })
        .collect();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    cases.into_iter().map(|(_, case)| case).collect()
}

#[tokio::test]
async fn every_reconcile_is_recorded_and_replays_the_same_with_its_version_and_changed_with_another_image() {
    let ns = shared().namespace("run-record").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(yaml.path(), format!("plugins:\n  foo-deployment: {{namespace: {}}}\n", ns.name)).unwrap();
    let plugin = common::component("foo_deployment");
    let host = Host::start([
        "run".as_ref(),
        "--plugin".as_ref(),
        plugin.as_os_str(),
        "--config".as_ref(),
        yaml.path().as_os_str(),
        "--record-dir".as_ref(),
        dir.path().as_os_str(),
    ]);
    let deployments: Api<Deployment> = ns.api();
    for name in ["one", "two", "three"] {
        foos.create(&PostParams::default(), &foo(name, &format!("{name}-web"), 1)).await.unwrap();
    }
    for name in ["one", "two", "three"] {
        deployment_with(&deployments, &format!("{name}-web"), "the Deployment", |d| replicas(d) == Some(1)).await;
        // A reconcile that looked the Deployment up and applied it. (Other tests' hosts may
        // have created it first, so whether it was found depends on them.)
        let case = eventually(Duration::from_secs(60), &format!("a case applying {name}-web"), || {
            let cases = cases_of(dir.path(), &ns.name, name);
            async move {
                let applies =
                    |c: &serde_json::Value| c["outcome"]["response"]["actions"].to_string().contains("Deployment");
                cases.into_iter().find(applies).ok_or_else(|| "not yet".to_owned())
            }
        })
        .await;
        assert_eq!((&case["plugin"], &case["request"]["phase"]), (&json!("foo-deployment"), &json!("apply")), "{case}");
        assert_eq!(case["request"]["object"]["metadata"]["name"], name, "{case}");
        let lookup = &case["lookups"][0];
        assert_eq!(
            (&lookup["verb"], &lookup["kind"], &lookup["name"]),
            (&json!("get"), &json!("apps/v1/Deployment"), &json!(format!("{name}-web"))),
            "{case}"
        );
        let actions = case["outcome"]["response"]["actions"].to_string();
        assert!(actions.contains(&format!("{name}-web")) && actions.contains("Deployment"), "{case}");
        assert!(case["digest"].as_str().is_some_and(|d| d.len() == 64), "{case}");
    }
    drop(host);

    // The version that recorded the cases replays every one the same.
    let replay = |plugin: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmloop"))
            .args(["replay", "-o", "json", "--plugin"])
            .arg(common::component(plugin))
            .arg(dir.path())
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), report)
    };
    let (code, report) = replay("foo_deployment");
    assert_eq!(code, Some(0), "{report:#}");
    let cases = report["cases"].as_array().unwrap();
    assert!(cases.len() >= 3 && cases.iter().all(|c| c["result"] == "same"), "{report:#}");
    assert_eq!(report["summary"]["same"], cases.len(), "{report:#}");

    // A version with another image: each Foo's Deployment changes, and the diff shows it.
    let (code, report) = replay("foo_deployment_next");
    assert_eq!(code, Some(i32::from(wasmloop::commands::EXIT_CHANGED)), "{report:#}");
    for name in ["one", "two", "three"] {
        let changed = report["cases"].as_array().unwrap().iter().any(|c| {
            let diff = c["diff"].as_str().unwrap_or_default();
            c["case"].as_str().is_some_and(|f| f.contains(&format!("-{}-{name}", ns.name)))
                && c["result"] == "changed"
                && diff.contains("-")
                && diff.contains("nginx:latest")
                && diff.contains("nginx:1.27")
        });
        assert!(changed, "no changed case for {name}: {report:#}");
    }
}

#[tokio::test]
async fn a_shadow_file_is_compared_with_the_serving_version_and_writes_nothing() {
    let ns = shared().namespace("run-shadow").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    let yaml = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(yaml.path(), format!("plugins:\n  foo-deployment: {{namespace: {}}}\n", ns.name)).unwrap();
    let (plugin, next) = (common::component("foo_deployment"), common::component("foo_deployment_next"));
    let mut shadow = std::ffi::OsString::from("foo-deployment=");
    shadow.push(&next);
    let host = Host::start([
        "run".as_ref(),
        "--plugin".as_ref(),
        plugin.as_os_str(),
        "--shadow".as_ref(),
        shadow.as_os_str(),
        "--config".as_ref(),
        yaml.path().as_os_str(),
    ]);
    host.ready(Duration::from_secs(60), "the host ready: the plugin and its shadow seated").await;
    foos.create(&PostParams::default(), &foo("shadowed", "shadowed-web", 1)).await.unwrap();

    let series = r#"wasmloop_shadow_reconciles_total{plugin="foo-deployment",result="differing"}"#;
    host.metric_until(series, "the shadow's response to differ", |n| n >= 1.0).await;
    // What differed, said where an operator looks: the log line is the behaviour here.
    host.logged("the shadow's response differs from the serving version's").await;
    let deployments: Api<Deployment> = ns.api();
    let d = deployment_with(&deployments, "shadowed-web", "the Deployment", |d| replicas(d) == Some(1)).await;
    let image = d.spec.template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("nginx:latest"), "the serving image, never the shadow's");
}

#[test]
fn a_shadow_file_of_another_plugin_fails_the_command_before_it_connects() {
    let next = common::component("foo_deployment_next");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmloop"))
        .args(["run", "--plugin"])
        .arg(common::component("foo_deployment"))
        .arg("--shadow")
        .arg(format!("not-foo={}", next.display()))
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(r#"plugin "foo-deployment", not "not-foo""#), "{stderr}");
}
