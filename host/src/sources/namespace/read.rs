//! Reading what an object offers: a plugin ConfigMap's payload, or a `WasmPlugin`'s spec with
//! the ConfigMap it names, read within a deadline. What is read is plain data ([`Offer`], or
//! [`Unread`] saying why not) for the plan to decide on.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_runtime::identity::SERVICE_ACCOUNT_ANNOTATION;

use super::plan::{MAX_REFUSAL, Offer, START_RETRY, Shipper, Unread};
use crate::plugin_configmap::{self, PluginPayload, STATUS_ANNOTATION, Track};
use crate::wasmplugin::{self, WasmPlugin};

/// How long a `WasmPlugin`'s ConfigMap may take to read before the offer is refused and tried
/// again: the loop waits for the read.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the objects of one namespace.
pub(super) struct Reader {
    pub(super) namespace: Namespace,
    pub(super) configmaps: Api<ConfigMap>,
}

impl Reader {
    /// What `shipper` offers, or why it offers nothing usable.
    pub(super) async fn read(&self, shipper: &Shipper) -> Result<Offer, Unread> {
        match shipper {
            Shipper::ConfigMap(cm) => {
                let payload = plugin_configmap::read(cm)
                    .map_err(|e| Unread::invalid("InvalidConfigMap", e.to_string(), false))?;
                let said = (payload.track == Track::Superseded).then(|| said_in_annotation(cm)).flatten();
                let account = cm.annotations().get(SERVICE_ACCOUNT_ANNOTATION).cloned();
                let stored_in = format!("{}/{}", self.namespace, cm.name_any());
                Ok(Offer {
                    payload,
                    account,
                    signer: None,
                    stop: false,
                    suspend: false,
                    said,
                    settings: None,
                    stored_in,
                })
            }
            Shipper::WasmPlugin(plugin) => {
                // An unreadable spec stops nothing (its failure policy is unknown), unless it
                // asks to be suspended: that it can always ask.
                let spec = match wasmplugin::Spec::parse(plugin) {
                    Ok(spec) => spec,
                    Err(_) if plugin.spec["suspend"] == true => return Ok(suspended(plugin)),
                    Err(error) => return Err(Unread::invalid("InvalidWasmPlugin", error.to_string(), false)),
                };
                let mut offer = Offer {
                    payload: spec.bare_payload(),
                    account: spec.account.as_ref().map(ToString::to_string),
                    signer: spec.signature.as_ref().and_then(|s| s.key.as_ref()).map(|key| key.to_ascii_uppercase()),
                    stop: spec.stop_on_failure,
                    suspend: spec.suspend,
                    said: wasmplugin::superseded(plugin),
                    settings: spec.settings.clone(),
                    stored_in: spec.configmap().map(|name| format!("{}/{name}", self.namespace)).unwrap_or_default(),
                };
                // Suspended or superseded, it loads nothing, whatever its ConfigMap holds.
                if offer.said.is_some() {
                    offer.payload.track = Track::Superseded;
                    return Ok(offer);
                }
                if offer.suspend {
                    return Ok(offer);
                }
                let configmap = match spec.configmap() {
                    Some(name) => self.read_configmap(name).await?,
                    None => None,
                };
                // Nothing is expanded here: that waits until the content is known to be new.
                let payload = spec.payload(&self.namespace, configmap.as_ref());
                let invalid = |e: wasmplugin::ConfigMapRefError| {
                    Unread::invalid("InvalidWasmPlugin", e.to_string(), spec.stop_on_failure)
                };
                offer.payload = payload.map_err(invalid)?;
                Ok(offer)
            }
        }
    }

    /// ConfigMap `name` of this namespace, as a `WasmPlugin` names it; none when it does not
    /// exist.
    async fn read_configmap(&self, name: &Name) -> Result<Option<ConfigMap>, Unread> {
        let at = format!("{}/{name}", self.namespace);
        let message = match tokio::time::timeout(READ_TIMEOUT, self.configmaps.get_opt(name)).await {
            Ok(Ok(found)) => return Ok(found),
            Ok(Err(error)) => format!(
                "cannot read ConfigMap {at}, which spec.configMapRef names ({}); the host needs get on ConfigMaps in {}",
                wasmloop_contract::validate::cut(error.to_string(), 512),
                self.namespace
            ),
            Err(_) => format!(
                "reading ConfigMap {at}, which spec.configMapRef names, took longer than {READ_TIMEOUT:?}; check the API server"
            ),
        };
        let message = format!("{message}; trying again in {} s", START_RETRY.as_secs());
        Err(Unread { reason: "ConfigMapUnreadable", message, stop: false, ours: true })
    }
}

/// What a superseded ConfigMap's status annotation says already: the promotion's own words,
/// after a restart.
fn said_in_annotation(cm: &ConfigMap) -> Option<String> {
    cm.annotations()
        .get(STATUS_ANNOTATION)
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|status| {
            status["lastError"].as_str().map(|said| wasmloop_contract::validate::cut(said.to_owned(), MAX_REFUSAL))
        })
}

/// What a `WasmPlugin` whose spec does not parse offers when it asks to be suspended: nothing.
fn suspended(plugin: &WasmPlugin) -> Offer {
    let name = wasmloop_contract::validate::cut(plugin.name_any(), 253);
    Offer { suspend: true, ..Offer::of(PluginPayload::named(name)) }
}
