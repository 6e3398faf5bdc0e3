//! What the plan's tests build on: a registry as a test sets it, objects, offers, and the
//! steps read as words ([`said`]), as a reader of the log would.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;
pub(super) use wasmloop_runtime::identity::AccountChoice;
pub(super) use wasmloop_sandbox::{LoadError, PluginId};

use super::super::*;
use crate::plugin_configmap::Stored;

pub(super) const IMAGE: &str =
    "oci://127.0.0.1:5000/hello@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The registry as a test sets it: what serves, and whether pulls are allowed.
#[derive(Default)]
pub(super) struct Registry {
    pub(super) serving: HashMap<SourceId, (PluginId, String)>,
    pub(super) refuses_pulls: bool,
}

impl World for Registry {
    fn serving(&self, source: &SourceId) -> Option<(PluginId, String)> {
        self.serving.get(source).cloned()
    }

    fn admissible(&self, reference: &PluginRef) -> Result<(), crate::oci::OciError> {
        if self.refuses_pulls {
            Err(crate::oci::OciError::NoRegistryAllowed(reference.registry().to_owned()))
        } else {
            Ok(())
        }
    }
}

pub(super) fn state() -> State {
    State::new(Namespace::parse("team-a").unwrap(), None)
}

pub(super) fn cm(name: &str) -> Shipper {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    Shipper::ConfigMap(cm)
}

pub(super) fn wp(name: &str, generation: i64, spec: serde_json::Value) -> Shipper {
    let object =
        json!({"metadata": {"name": name, "namespace": "team-a", "uid": "u1", "generation": generation}, "spec": spec});
    Shipper::WasmPlugin(serde_json::from_value(object).unwrap())
}

pub(super) fn key(shipper: &Shipper) -> Key {
    shipper.key()
}

/// What plugin `plugin`'s object offers: a stored component, serving.
pub(super) fn offer(plugin: &str) -> Offer {
    let payload =
        PluginPayload { component: Stored::Plain(vec![1, 2, 3].into()), ..PluginPayload::named(plugin.into()) };
    Offer { stored_in: "team-a/x".into(), ..Offer::of(payload) }
}

pub(super) fn referenced(plugin: &str) -> Offer {
    let mut offer = offer(plugin);
    offer.payload.component = Stored::Nothing;
    offer.payload.reference = Some(PluginRef::parse(IMAGE).unwrap().pinned().unwrap());
    offer
}

pub(super) fn shadow(mut offer: Offer) -> Offer {
    offer.payload.track = Track::Shadow;
    offer
}

pub(super) fn offered(
    state: &mut State,
    shipper: &Shipper,
    read: Result<Offer, Unread>,
    world: &Registry,
) -> Vec<Step> {
    let content = content_of(&read);
    state.on_offer(shipper, read, content, None, world)
}

pub(super) fn serving(state: &State, shipper: &Shipper, plugin: &str) -> Registry {
    let id = PluginId::new(Some(Namespace::parse("team-a").unwrap()), plugin).unwrap();
    Registry {
        serving: HashMap::from([(state.source(&key(shipper)), (id, "1.0.0".to_owned()))]),
        ..Registry::default()
    }
}

pub(super) fn start_failed() -> RegistryError {
    let source = wasmloop_runtime::controller::StartError::NotSynced {
        plugin: PluginId::new(None, "p").unwrap(),
        kind: "v1/ConfigMap".into(),
    };
    RegistryError::Start { source, running: None }
}

/// The steps as words.
pub(super) fn said(steps: &[Step]) -> Vec<String> {
    steps.iter().map(word).collect()
}

pub(super) fn word(step: &Step) -> String {
    match step {
        Step::Report(_, Reported::Observed { generation, settled, .. }) => {
            format!("observed {generation}{}", if *settled { ", settled" } else { "" })
        }
        Step::Report(_, what) => format!("report {}", reported(what)),
        Step::Refuse { reason, ours: false, .. } => format!("refuse {reason}"),
        Step::Refuse { reason, ours: true, .. } => format!("refuse {reason}, the host's failure"),
        Step::Stop(_, why) => format!("stop: {}", reason_of(why)),
        Step::RetryAfter(_, delay) => format!("retry after {} s", delay.as_secs()),
        Step::RetryNow(key) => format!("retry {} {} now", key.kind, key.name),
        Step::RetryBlocked => "retry the blocked".to_owned(),
        Step::AbortPull(_, id) => format!("abort pull {id}"),
        Step::Pull { account: Some(_), .. } => "pull, as its account".to_owned(),
        Step::Pull { account: None, .. } => "pull, as nobody".to_owned(),
        Step::Load { spec, .. } if spec.shadow() => "seat".to_owned(),
        Step::Load { .. } => "load".to_owned(),
        Step::Offer(_) => "offer".to_owned(),
        Step::Fetch(_) => "fetch".to_owned(),
    }
}

pub(super) fn reported(what: &Reported) -> String {
    match what {
        Reported::Stopped { reason, .. } => format!("stopped {reason}"),
        Reported::Refused { reason, .. } => format!("refused {reason}"),
        Reported::Retired { .. } => "retired".to_owned(),
        Reported::Removed => "removed".to_owned(),
        other => format!("{other:?}"),
    }
}

pub(super) fn reason_of(why: &Why) -> &str {
    match why {
        Why::Refused { reason, .. } => reason,
        Why::Suspended => "Suspended",
        Why::Retired { .. } => "Retired",
        Why::NameTaken { .. } => "NameTaken",
        Why::Deleted => "Deleted",
    }
}

pub(super) fn message(steps: &[Step]) -> &str {
    steps
        .iter()
        .find_map(|step| match step {
            Step::Refuse { message, .. } | Step::Stop(_, Why::Refused { message, .. }) => Some(message.as_str()),
            Step::Report(_, Reported::Stopped { message, .. } | Reported::Refused { message, .. }) => {
                Some(message.as_str())
            }
            _ => None,
        })
        .expect("a refusal")
}

pub(super) fn refused(state: &State, shipper: &Shipper) -> bool {
    state.seen.get(&key(shipper)).is_some_and(|seen| seen.refused)
}

pub(super) fn pulling(state: &mut State, shipper: &Shipper, offer: Offer) -> u64 {
    match offered(state, shipper, Ok(offer), &Registry::default()).pop() {
        Some(Step::Pull { id, .. }) => id,
        other => panic!("no pull: {other:?}"),
    }
}
