//! `wasmloop run` survives an API-server outage. Its own test binary, so restarting the
//! API server disturbs no other test.

mod common;

use std::path::Path;

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
    let host = Host::run(&["foo_deployment"]);
    foos.create(&PostParams::default(), &foo("steady", "steady", 1)).await.unwrap();
    let deployments: Api<Deployment> = ns.api();
    deployment_with(&deployments, "steady", "1 replica", |d| replicas(d) == Some(1)).await;

    let before_outage = host.mark();
    plane.stop_apiserver();
    // The outage lasts until the host has felt it, or the test would prove nothing.
    host.logged_since(before_outage, "watch failed; retrying with backoff").await;
    plane.restart_apiserver().await.unwrap();

    // A client made before the outage reconnects; the host's watches must have resumed.
    foos.patch("steady", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 4}}))).await.unwrap();
    deployment_with(&deployments, "steady", "4 replicas after the outage", |d| replicas(d) == Some(4)).await;
    // New objects converge too, even in a namespace made after the outage.
    let after = plane.namespace("outage-after").await.unwrap();
    let later_foos = after.install_crd(Path::new(FOO_CRD)).await;
    later_foos.create(&PostParams::default(), &foo("later", "later", 2)).await.unwrap();
    let later_deployments: Api<Deployment> = after.api();
    deployment_with(&later_deployments, "later", "2 replicas in a namespace made after the outage", |d| {
        replicas(d) == Some(2)
    })
    .await;
}
