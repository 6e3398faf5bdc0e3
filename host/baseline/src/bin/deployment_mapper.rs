//! `deployment-mapper-native`: the index benchmark's native side. A kube-rs `Controller` over
//! Deployments whose reconcile does nothing, watching ConfigMaps: a changed ConfigMap maps to
//! the Deployments that mount it by reading every Deployment in the controller's reflector
//! store, as a kube-rs mapper does (kube-runtime keeps no index; its `Store` is a map by name).
//!
//! It prints `mapped NAME: K found, M read in T ns` for each mapping (the scan alone), and
//! `reconciled N` once N reconciles have run (`--report-at`).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

/// Runs the native Deployment mapper against the cluster in KUBECONFIG.
#[derive(Debug, Parser)]
struct Args {
    /// The namespace.
    #[arg(long)]
    namespace: String,
    /// Print `reconciled N` once this many reconciles have run.
    #[arg(long)]
    report_at: Option<u64>,
}

struct Context {
    reconciled: AtomicU64,
    report_at: Option<u64>,
}

async fn reconcile(_object: Arc<Deployment>, ctx: Arc<Context>) -> Result<Action, Infallible> {
    let done = ctx.reconciled.fetch_add(1, Ordering::Relaxed) + 1;
    if ctx.report_at == Some(done) {
        println!("reconciled {done}");
    }
    Ok(Action::await_change())
}

fn error_policy(_object: Arc<Deployment>, _error: &Infallible, _ctx: Arc<Context>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

/// Whether the Deployment mounts ConfigMap `name`.
fn mounts(deployment: &Deployment, name: &str) -> bool {
    let volumes = deployment.spec.template.spec.as_ref().and_then(|p| p.volumes.as_ref());
    volumes.is_some_and(|v| v.iter().any(|v| v.config_map.as_ref().is_some_and(|c| c.name == name)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let args = Args::parse();
    let client = Client::try_default().await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &args.namespace);
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &args.namespace);
    let controller = Controller::new(deployments, watcher::Config::default());
    let store = controller.store();
    let ctx = Arc::new(Context { reconciled: AtomicU64::new(0), report_at: args.report_at });
    controller
        .watches(configmaps, watcher::Config::default(), move |configmap: ConfigMap| {
            let start = Instant::now();
            let name = configmap.metadata.name.unwrap_or_default();
            let all = store.state();
            let found: Vec<ObjectRef<Deployment>> =
                all.iter().filter(|d| mounts(d, &name)).map(|d| ObjectRef::from_obj(&**d)).collect();
            let took = start.elapsed().as_nanos();
            println!("mapped {name}: {} found, {} read in {took} ns", found.len(), all.len());
            found
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
    Ok(())
}
