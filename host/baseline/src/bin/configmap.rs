//! `configmap-controller-native`: a kube-rs `Controller` over ConfigMaps whose reconcile does
//! nothing, the native twin of the `noop` plugin in the scale benchmark: what a controller
//! costs when its logic costs nothing.
//!
//! It prints `reconciled N` on stdout once N reconciles have run (`--report-at`), so a
//! benchmark can tell when its cache has synced and every object was seen.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::watcher;

/// Runs the native no-op ConfigMap controller against the cluster in KUBECONFIG.
#[derive(Debug, Parser)]
struct Args {
    /// Only this namespace (default: all).
    #[arg(long)]
    namespace: Option<String>,
    /// Reconciles at once (wasmloop's default is 4).
    #[arg(long, default_value_t = 4)]
    concurrency: u16,
    /// Print `reconciled N` once this many reconciles have run.
    #[arg(long)]
    report_at: Option<u64>,
}

struct Context {
    reconciled: AtomicU64,
    report_at: Option<u64>,
}

async fn reconcile(_object: Arc<ConfigMap>, ctx: Arc<Context>) -> Result<Action, Infallible> {
    let done = ctx.reconciled.fetch_add(1, Ordering::Relaxed) + 1;
    if ctx.report_at == Some(done) {
        println!("reconciled {done}");
    }
    Ok(Action::await_change())
}

fn error_policy(_object: Arc<ConfigMap>, _error: &Infallible, _ctx: Arc<Context>) -> Action {
    Action::requeue(Duration::from_secs(5))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).init();
    let args = Args::parse();
    let client = Client::try_default().await?;
    let api: Api<ConfigMap> = match &args.namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    };
    let ctx = Arc::new(Context { reconciled: AtomicU64::new(0), report_at: args.report_at });
    Controller::new(api, watcher::Config::default())
        .with_config(Config::default().concurrency(args.concurrency))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
    Ok(())
}
