//! Events as a current API server stores them (`events.k8s.io/v1`): a repeat extends one
//! Event's series, and what the host sends stays within the API's limits. In a test binary of
//! its own, so that only its hosts report about its Foos.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{FOO_CRD, Host, deployment_with, foo, replicas};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmloop_testenv::{shared, wait_for_event};

/// A foo-deployment host reporting as `hostname` (its pod's name, in a cluster).
fn host_named(hostname: &str) -> Host {
    let plugin = common::component("foo_deployment");
    Host::start_env(&[("HOSTNAME", hostname)], [Path::new("run"), Path::new("--plugin"), &plugin])
}

fn synced_about(e: &Event, foo: &str) -> bool {
    e.reason.as_deref() == Some("Synced") && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(foo)
}

#[tokio::test]
async fn a_repeated_event_is_one_events_k8s_io_v1_event_whose_series_counts_the_repeats() {
    let ns = shared().namespace("events-series").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    let _host = host_named("series-reporter");
    let deployments: Api<Deployment> = ns.api();
    let created = foos.create(&PostParams::default(), &foo("repeated", "repeated", 1)).await.unwrap();
    deployment_with(&deployments, "repeated", "the Deployment", |d| replicas(d) == Some(1)).await;
    // Each change is reconciled, and each reconcile records the same Synced Event.
    for n in [2, 3] {
        let change = Patch::Merge(json!({"spec": {"replicas": n}}));
        foos.patch("repeated", &PatchParams::default(), &change).await.unwrap();
        deployment_with(&deployments, "repeated", "the new replicas", |d| replicas(d) == Some(n)).await;
    }

    let events: Api<Event> = ns.api();
    let ours = |e: &Event| synced_about(e, "repeated") && e.reporting_instance.as_deref() == Some("series-reporter");
    let event = wait_for_event(&events, Duration::from_secs(60), "a Synced series of 3", |e| {
        ours(e) && e.series.as_ref().is_some_and(|s| s.count >= 3)
    })
    .await;
    let all = events.list(&Default::default()).await.unwrap();
    assert_eq!(all.items.iter().filter(|e| ours(e)).count(), 1, "the repeats were folded into one Event");
    assert_eq!(event.regarding.clone().unwrap().uid.as_deref(), created.metadata.uid.as_deref());
    assert_eq!(event.reporting_controller.as_deref(), Some("wasmloop/foo-deployment"));
    assert_eq!(event.action.as_deref(), Some("Reconcile"));
    assert!(event.event_time.is_some(), "an events.k8s.io/v1 Event has an eventTime");

    // Older clients (`kubectl describe`) read the same Event through core/v1, with its series.
    let core: Api<k8s_openapi::api::core::v1::Event> = ns.api();
    let seen = core.get(event.metadata.name.as_deref().unwrap()).await.unwrap();
    assert_eq!(seen.involved_object.name.as_deref(), Some("repeated"));
    assert!(seen.series.is_some_and(|s| s.count.unwrap_or_default() >= 3), "core/v1 sees the series");
}

#[tokio::test]
async fn a_host_name_past_the_apis_limit_still_gets_its_events_stored_reported_by_the_controller() {
    let ns = shared().namespace("events-long-host").await.unwrap();
    let foos = ns.install_crd(Path::new(FOO_CRD)).await;
    // The API refuses a reportingInstance over 128 bytes: as the instance, this name would
    // cost every Event the host sends.
    let _host = host_named(&"h".repeat(129));
    foos.create(&PostParams::default(), &foo("long", "long", 1)).await.unwrap();
    let events: Api<Event> = ns.api();
    // Only this host reports without an instance of its own (the other's is series-reporter).
    wait_for_event(&events, Duration::from_secs(60), "a Synced Event reported by the controller", |e| {
        synced_about(e, "long") && e.reporting_instance.as_deref() == Some("wasmloop/foo-deployment")
    })
    .await;
}
