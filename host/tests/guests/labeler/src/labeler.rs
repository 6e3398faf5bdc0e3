// The labeler's logic, shared by both versions; each crate sets `VERSION` and includes this.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;
use wasmloop_sdk::prelude::*;

/// The label this plugin owns.
const LABEL: &str = "wasmloop.dev/labeled-by";

struct Labeler;

impl Reconciler for Labeler {
    fn manifest() -> Manifest {
        Manifest::new("labeler", &format!("{}.0.0", &VERSION[1..]))
            .primary::<Deployment>()
            .writes(Grant::of::<Deployment>().patch())
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let deployment: Deployment = request.object()?;
        let labels = deployment.metadata.labels.unwrap_or_default();
        if labels.get(LABEL).map(String::as_str) == Some(VERSION) {
            return Ok(Vec::new());
        }
        let labels = json!({"metadata": {"labels": {LABEL: VERSION}}});
        Ok(vec![patch(request.object.to_ref(), PatchKind::Merge, &labels)])
    }
}

wasmloop_sdk::export_plugin!(Labeler);
