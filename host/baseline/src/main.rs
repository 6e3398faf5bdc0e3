//! `foo-controller-native`: foo-deployment's logic as an idiomatic kube-rs controller
//! (`kube::runtime::Controller`), the baseline of wasmloop's end-to-end benchmark.
//!
//! It does the same work per reconcile as the host running the plugin: read the Deployment
//! from a reflector cache (one watch, shared with the controller's trigger), server-side
//! apply it with a controller owner reference, mirror `availableReplicas` into the Foo's
//! status when it differs, record a `Synced` Event. It reuses the plugin crate's
//! `desired_deployment`, compiled natively, so the logic is byte-for-byte the same.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use foo_deployment::{Foo, desired_deployment};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

/// Runs the native Foo controller against the cluster in KUBECONFIG.
#[derive(Debug, Parser)]
struct Args {
    /// Reconciles at once (wasmloop's default is 4).
    #[arg(long, default_value_t = 4)]
    concurrency: u16,
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("Foo {0}: cannot decode: {1}")]
    Decode(String, serde_json::Error),
    #[error("Resource {0:?} already exists and is not managed by Foo")]
    ResourceExists(String),
    #[error("Foo {0}: API request failed: {1}")]
    Api(String, kube::Error),
}

struct Context {
    client: Client,
    resource: ApiResource,
    deployments: Store<Deployment>,
    recorder: Recorder,
}

async fn reconcile(object: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    let foo: Foo = serde_json::to_value(object.as_ref())
        .and_then(serde_json::from_value)
        .map_err(|e| Error::Decode(name.clone(), e))?;
    let reference = object.object_ref(&ctx.resource);
    let deployment_name = foo.spec.deployment_name.trim().to_owned();
    if deployment_name.is_empty() {
        let note = format!("Foo {name}: spec.deploymentName must be specified; set it to the Deployment to manage");
        let event = Event {
            type_: EventType::Warning,
            reason: "InvalidSpec".into(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        ctx.recorder.publish(&event, &reference).await.map_err(|e| Error::Api(name.clone(), e))?;
        return Ok(Action::await_change());
    }
    let uid = object.uid().unwrap_or_default();
    let existing = ctx.deployments.get(&ObjectRef::new(&deployment_name).within(&namespace));
    if let Some(existing) = &existing {
        let controlled = existing.owner_references().iter().any(|o| o.controller == Some(true) && o.uid == uid);
        if !controlled {
            return Err(Error::ResourceExists(deployment_name));
        }
    }
    let mut deployment = desired_deployment(&foo);
    deployment.metadata.owner_references = object.controller_owner_ref(&ctx.resource).map(|o| vec![o]);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let apply = PatchParams::apply("foo-controller-native").force();
    deployments
        .patch(&deployment_name, &apply, &Patch::Apply(&deployment))
        .await
        .map_err(|e| Error::Api(name.clone(), e))?;
    let available = existing.and_then(|d| d.status.as_ref()?.available_replicas).unwrap_or(0);
    if foo.status.map(|s| s.available_replicas) != Some(available) {
        let foos: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &namespace, &ctx.resource);
        let status = json!({"status": {"availableReplicas": available}});
        foos.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|e| Error::Api(name.clone(), e))?;
    }
    let synced = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("Foo synced successfully".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    ctx.recorder.publish(&synced, &reference).await.map_err(|e| Error::Api(name, e))?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<DynamicObject>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconcile failed; retrying in 5 s");
    Action::requeue(Duration::from_secs(5))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_writer(std::io::stderr).init();
    let args = Args::parse();
    let client = Client::try_default().await?;
    let gvk = GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await?;
    let foos: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let (deployments, writer) = reflector::store();
    let deployment_events =
        reflector::reflector(writer, watcher(Api::<Deployment>::all(client.clone()), watcher::Config::default()))
            .default_backoff()
            .touched_objects();
    let reporter = Reporter { controller: "foo-controller-native".into(), instance: None };
    let context = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        resource: resource.clone(),
        deployments,
    });
    tracing::info!("native foo controller running");
    Controller::new_with(foos, watcher::Config::default(), resource)
        .owns_stream(deployment_events)
        .with_config(Config::default().concurrency(args.concurrency))
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|_| futures::future::ready(()))
        .await;
    Ok(())
}
