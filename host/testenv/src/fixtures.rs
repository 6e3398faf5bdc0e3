//! Helpers tests share on top of the control plane: installing a CRD from a file, waiting
//! for an Event.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams};

use crate::{TestNamespace, eventually};

impl TestNamespace {
    /// Installs the CRD in `path` (once per control plane; "already exists" is fine) and
    /// returns the API of its kind in this namespace once the server serves it.
    ///
    /// # Panics
    /// When the file is not a CRD or the server refuses it.
    pub async fn install_crd(&self, path: &Path) -> Api<DynamicObject> {
        let crd = read_crd(path);
        match Api::<CustomResourceDefinition>::all(self.client.clone()).create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(e) => panic!("installing {}: {e}", path.display()),
        }
        let version = &crd.spec.versions.iter().find(|v| v.storage).expect("a storage version").name;
        let gvk = GroupVersionKind::gvk(&crd.spec.group, version, &crd.spec.names.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.name, &resource);
        eventually(Duration::from_secs(30), &format!("{} to be served", crd.spec.names.kind), || {
            let api = api.clone();
            async move { api.list(&ListParams::default()).await.map(drop).map_err(|e| e.to_string()) }
        })
        .await;
        api
    }

    /// Deletes the CRD in `path` from the control plane, with every object of its kind, and
    /// returns once the server no longer has it. For a test that needs the kind absent.
    ///
    /// # Panics
    /// When the file is not a CRD, or the server refuses the delete or still has it after 60 s.
    pub async fn remove_crd(&self, path: &Path) {
        let crd = read_crd(path);
        let name = crd.metadata.name.expect("a CRD has a name");
        let crds = Api::<CustomResourceDefinition>::all(self.client.clone());
        match crds.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => panic!("deleting CRD {name}: {e}"),
        }
        eventually(Duration::from_secs(60), &format!("CRD {name} to be gone"), || {
            let crds = crds.clone();
            let name = name.clone();
            async move {
                match crds.get_opt(&name).await {
                    Ok(None) => Ok(()),
                    Ok(Some(_)) => Err("still there".to_owned()),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
        .await;
    }
}

fn read_crd(path: &Path) -> CustomResourceDefinition {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{} is not a CRD: {e}", path.display()))
}

/// Waits up to `timeout` for an `events.k8s.io/v1` Event in `events` that `matches`.
///
/// # Panics
/// When none appears in time; the message lists the events seen.
pub async fn wait_for_event(
    events: &Api<Event>,
    timeout: Duration,
    what: &str,
    matches: impl Fn(&Event) -> bool,
) -> Event {
    let matches = &matches;
    eventually(timeout, what, || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            let seen: Vec<String> = list.items.iter().map(|e| format!("{:?}: {:?}", e.reason, e.note)).collect();
            list.items.into_iter().find(|e| matches(e)).ok_or_else(|| format!("{seen:?}"))
        }
    })
    .await
}
