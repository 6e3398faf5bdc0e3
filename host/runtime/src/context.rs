//! What every controller in one host shares.

use std::sync::Arc;

use crate::discovery::Kinds;
use crate::executor::{DryRunSink, Executor};
use crate::informer::Informers;
use crate::metrics::Metrics;

/// One host's connection to the cluster: the client, the discovery cache, the shared
/// informers, the executor and the metrics. Cheap to clone; every plugin's controller
/// starts from the same one, which is what lets plugins share watches.
#[derive(Clone)]
pub struct Context {
    /// The API client.
    pub client: kube::Client,
    /// Kinds resolved through discovery.
    pub kinds: Arc<Kinds>,
    /// The shared, reference-counted informers.
    pub informers: Arc<Informers>,
    /// Carries out plugins' actions.
    pub executor: Arc<Executor>,
    /// The host's metrics.
    pub metrics: Arc<Metrics>,
}

impl Context {
    /// A context talking through `client` and counting into `metrics`; with `dry_run`, its
    /// executor writes nothing and reports what it would have written.
    pub fn new(client: kube::Client, metrics: Arc<Metrics>, dry_run: Option<DryRunSink>) -> Context {
        let kinds = Arc::new(Kinds::new(client.clone()));
        let mut executor = Executor::new(client.clone(), kinds.clone(), metrics.clone());
        if let Some(sink) = dry_run {
            executor = executor.with_dry_run(sink);
        }
        Context {
            informers: Arc::new(Informers::new(client.clone(), kinds.clone(), metrics.clone())),
            executor: Arc::new(executor),
            client,
            kinds,
            metrics,
        }
    }
}
