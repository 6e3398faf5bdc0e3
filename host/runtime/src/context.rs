//! What every controller in one host shares.

use std::sync::Arc;

use crate::discovery::Kinds;
use crate::executor::Executor;
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
    /// A context talking through `client` and counting into `metrics`.
    pub fn new(client: kube::Client, metrics: Arc<Metrics>) -> Context {
        let kinds = Arc::new(Kinds::new(client.clone()));
        Context {
            informers: Arc::new(Informers::new(client.clone(), kinds.clone(), metrics.clone())),
            executor: Arc::new(Executor::new(client.clone(), kinds.clone(), metrics.clone())),
            client,
            kinds,
            metrics,
        }
    }
}
