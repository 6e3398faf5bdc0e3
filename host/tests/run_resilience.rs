//! `wasmloop run` survives an API-server outage. Its own test binary, so restarting the
//! API server disturbs no other test.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{FOO_CRD, Host, deployment_with, foo, replicas};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmloop_testenv::shared;

#[tokio::test]
async fn the_host_recovers_from_an_api_server_outage_and_converges_afterwards() {
    let plane = shared();
    let ns = plane.namespace("outage").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    let _host = Host::run(&["foo_deployment"]);
    foos.create(&PostParams::default(), &foo("steady", "steady", 1)).await.unwrap();
    let deployments: Api<Deployment> = ns.api();
    deployment_with(&deployments, "steady", "1 replica", |d| replicas(d) == Some(1)).await;

    plane.stop_apiserver();
    tokio::time::sleep(Duration::from_secs(10)).await;
    plane.restart_apiserver().await.unwrap();

    // A client made before the outage reconnects; the host's watches must have resumed.
    let foos = {
        let ns = plane.namespace("outage-after").await.unwrap();
        let _ = ns;
        foos
    };
    foos.patch("steady", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 4}}))).await.unwrap();
    deployment_with(&deployments, "steady", "4 replicas after the outage", |d| replicas(d) == Some(4)).await;
}
