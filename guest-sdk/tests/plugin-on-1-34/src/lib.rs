//! A Deployment scaler built for Kubernetes 1.34: the smallest plugin that uses k8s-openapi's
//! types, so that the version it picks is compiled in.

use k8s_openapi::api::apps::v1::Deployment;
use wasmloop_sdk::prelude::*;

struct Replicas;

impl Reconciler for Replicas {
    fn manifest() -> Manifest {
        Manifest::new("plugin-on-1-34", "0.1.0").primary::<Deployment>()
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let deployment: Deployment = request.object()?;
        let replicas = deployment.spec.and_then(|s| s.replicas).unwrap_or(1);
        Ok(vec![event(EventType::Normal, "Counted", format!("{replicas} replicas"))])
    }
}

wasmloop_sdk::export_plugin!(Replicas);
