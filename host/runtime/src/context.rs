//! What every controller in one host shares: the client, discovery, informers, the host's
//! executor, metrics, identities, write buckets, the quarantine board, leadership and the
//! recorder. Built once at the binary's edge; every controller starts from it.

use std::sync::Arc;

use tokio::sync::watch;

use crate::discovery::Kinds;
use crate::executor::{DryRunSink, Executor, WriteBuckets};
use crate::identity::Identities;
use crate::informer::{Informers, InitialList};
use crate::metrics::Metrics;
use crate::quarantine::Board;
use crate::record::Recorder;

/// One host's connection to the cluster: the client, the discovery cache, the shared
/// informers, the executor, the metrics, whom plugins act as and whether this host may
/// reconcile. Cheap to clone; every plugin's controller starts from the same one, which is
/// what lets plugins share watches.
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
    /// Whom plugins act as, and the clients that act as them.
    pub identities: Arc<Identities>,
    /// Plugins quarantined now.
    pub quarantines: Arc<Board>,
    /// The plugins' write buckets, which outlive any one version.
    pub write_buckets: Arc<WriteBuckets>,
    /// True while this host may reconcile (it leads, or runs without leader election).
    /// Informers and queues run either way, so a standby's caches are warm when it takes over.
    pub leading: watch::Receiver<bool>,
    /// Where each reconcile is recorded (`--record-dir`), if anywhere.
    pub record: Option<Recorder>,
}

impl Context {
    /// A context talking through `client` and counting into `metrics`, reconciling always.
    pub fn new(client: kube::Client, metrics: Arc<Metrics>) -> Context {
        let kinds = Arc::new(Kinds::new(client.clone()));
        Context {
            informers: Arc::new(Informers::new(client.clone(), kinds.clone(), metrics.clone())),
            executor: Arc::new(Executor::new(client.clone(), kinds.clone(), metrics.clone())),
            leading: watch::channel(true).1,
            identities: Arc::new(Identities::host(client.clone())),
            quarantines: Arc::default(),
            write_buckets: Arc::default(),
            record: None,
            client,
            kinds,
            metrics,
        }
    }

    /// This context with an executor that writes nothing and reports what it would have
    /// written to `sink`.
    pub fn dry_run(mut self, sink: DryRunSink) -> Context {
        let executor = Executor::new(self.client.clone(), self.kinds.clone(), self.metrics.clone());
        self.executor = Arc::new(executor.with_dry_run(sink));
        self
    }

    /// This context's plugins refused every write into `namespaces`, the plugin namespaces
    /// ([`Executor::guarding`]); after [`Context::dry_run`], which it keeps.
    pub fn guarding(mut self, namespaces: std::collections::BTreeSet<wasmloop_contract::names::Namespace>) -> Context {
        let base = self.executor.acting_as(self.client.clone(), "the host's own identity".to_owned());
        self.executor = Arc::new(base.guarding(namespaces));
        self
    }

    /// This context's informers making their initial lists as `list` says, whatever the
    /// server's version.
    pub fn initial_list(mut self, list: InitialList) -> Context {
        let informers = Informers::new(self.client.clone(), self.kinds.clone(), self.metrics.clone());
        self.informers = Arc::new(informers.with_initial_list(list));
        self
    }

    /// This context with plugins acting as `identities` says.
    pub fn identities(mut self, identities: Identities) -> Context {
        self.identities = Arc::new(identities);
        self
    }

    /// This context recording every reconcile with `recorder`.
    pub fn recording(mut self, recorder: Recorder) -> Context {
        self.record = Some(recorder);
        self
    }

    /// This context reconciling only while `leading` says so.
    pub fn leadership(mut self, leading: watch::Receiver<bool>) -> Context {
        self.leading = leading;
        self
    }
}
