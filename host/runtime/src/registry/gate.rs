//! Sharding's side of the registry (`--shard`): which plugins this replica is admitted to run,
//! the valid versions it keeps parked for the others, and the hand-overs of versions stopped
//! here that another replica, or a new start here, waits for. A check and the install it
//! allows are one step: both happen within the plugin's lane.

use std::collections::{HashMap, HashSet};

use wasmloop_sandbox::{Plugin, PluginId, SourceId};

use super::install::Offer;
use super::lanes::Lane;
use super::reports::{Loaded, Report, Reported};
use super::{Registry, RegistryError, plan, plugin_version_digest};
use crate::controller::Handover;

/// Which plugins a sharded host may run: those whose fence it holds.
#[derive(Default)]
pub(super) struct Gate {
    pub(super) admitted: HashSet<PluginId>,
    /// By source: each source's latest offer of a plugin not admitted.
    parked: HashMap<SourceId, Parked>,
    /// Versions stopped without a successor here (their source removed, or offering another
    /// plugin), by plugin: reconciles past the drain time may still run, and a hand-over to
    /// another replica, or a new start here, waits for them.
    retired: HashMap<PluginId, Vec<Handover>>,
}

/// A valid version this host does not run, because another replica runs its plugin.
pub(super) struct Parked {
    pub(super) offer: Offer,
    /// Compiled, holding no instances.
    pub(super) plugin: Plugin,
    pub(super) config: Option<String>,
}

impl Parked {
    /// The plugin it is a version of.
    pub(super) fn id(&self) -> PluginId {
        self.plugin.manifest().id()
    }

    /// What names the version.
    pub(super) fn digest(&self) -> String {
        plugin_version_digest(&self.plugin, self.config.as_deref())
    }
}

impl Gate {
    /// The plugins admitted or parked here.
    pub(super) fn known(&self) -> impl Iterator<Item = PluginId> + '_ {
        self.admitted.iter().cloned().chain(self.parked.values().map(Parked::id))
    }

    /// What `source` has parked here.
    pub(super) fn parked_for(&self, source: &SourceId) -> Option<&Parked> {
        self.parked.get(source)
    }

    /// Another source's version of plugin `id` parked here.
    pub(super) fn parked_elsewhere(&self, source: &SourceId, id: &PluginId) -> Option<SourceId> {
        self.parked.iter().find(|(s, p)| *s != source && p.id() == *id).map(|(s, _)| s.clone())
    }

    /// Takes what `source` has parked here out.
    pub(super) fn unpark(&mut self, source: &SourceId) -> Option<Parked> {
        self.parked.remove(source)
    }

    /// Parks `parked` for `source`, replacing what it parked before.
    pub(super) fn park(&mut self, source: SourceId, parked: Parked) {
        self.parked.insert(source, parked);
    }
}

impl Registry {
    /// True while a version of plugin `id` ([`wasmloop_sandbox::Manifest::id`]) waits here,
    /// parked, for admission.
    pub fn is_parked(&self, id: &PluginId) -> bool {
        self.state().gate.as_ref().is_some_and(|gate| gate.parked.values().any(|p| p.id() == *id))
    }

    /// Lets this replica run plugin `name` (it holds the plugin's fence) and starts the
    /// versions parked for it. Returns what each source's version did.
    pub async fn admit(&self, name: &PluginId) -> Vec<(SourceId, Result<Loaded, RegistryError>)> {
        let sources = {
            let mut state = self.state();
            let Some(gate) = state.gate.as_mut() else { return Vec::new() };
            gate.admitted.insert(name.clone());
            plan::admitted(name, gate.parked.iter().map(|(source, parked)| (source, parked.id())))
        };
        let mut results = Vec::new();
        for source in sources {
            let _source = self.lanes.enter([Lane::Source(source.clone())]).await;
            // Taken under the source's lane: a newer offer from it, made meanwhile, wins.
            let parked = {
                let mut state = self.state();
                let Some(gate) = state.gate.as_mut() else { break };
                if !gate.parked.get(&source).is_some_and(|p| p.id() == *name) {
                    continue;
                }
                gate.parked.remove(&source).expect("checked above")
            };
            let (offer, plugin, config) = (parked.offer.clone(), parked.plugin.clone(), parked.config.clone());
            let result = self.install_entered(offer, plugin, config).await;
            if result.is_err() {
                // Kept for the next try (a full pool, a cache that did not sync): the plugin is
                // still assigned here, and nothing else would offer it again.
                if let Some(gate) = self.state().gate.as_mut() {
                    gate.parked.entry(source.clone()).or_insert(parked);
                }
            }
            results.push((source, result));
        }
        results
    }

    /// Stops running plugin `name` here and parks its version: another replica is to run it.
    /// Returns once it stopped taking work (its reconciles in flight given the drain time); the
    /// hand-overs it returns (of this version, and of any stopped here without a successor)
    /// say when the last of them has ended ([`Handover::quiesced`]), which a caller handing
    /// the plugin to another process waits for.
    pub async fn evict(&self, name: &PluginId) -> Vec<Handover> {
        if self.state().gate.is_none() {
            return Vec::new();
        }
        let _plugin = self.lanes.enter([Lane::Plugin(name.clone())]).await;
        let mut handovers = self.take_retired(name);
        // Taken from the slots and parked in one step, and reported before the drain: a
        // removal of the source sees it either serving or parked, drops it, and its report
        // comes after this one.
        let (slot, source, parked) = {
            let state = &mut *self.state();
            if let Some(gate) = state.gate.as_mut() {
                gate.admitted.remove(name);
            }
            let serving = state.slots.get(name).map(|slot| (&slot.source, slot.digest.as_str()));
            let Some((source, parked)) = plan::evicted(name, serving) else { return handovers };
            let slot = state.take_slot(name, &self.context.metrics).expect("it serves");
            let offer = Offer {
                source: slot.source.clone(),
                realm: slot.realm.clone(),
                expected_name: None,
                account: slot.account.clone(),
            };
            let plugin = slot.controller.plugin().with_limits(slot.controller.plugin().limits());
            let gate = state.gate.as_mut().expect("checked above");
            gate.park(source.clone(), Parked { offer, plugin, config: slot.config.clone() });
            (slot, source, parked)
        };
        self.reporter.publish(Report::new(source, Reported::Loaded(parked)));
        let handover = slot.controller.shut_down(self.drain).await;
        self.context.metrics.plugin_stopped(name.as_str());
        handovers.push(handover);
        handovers
    }

    /// The hand-overs of versions of `name` stopped here without a successor (see
    /// [`Registry::evict`]); whoever takes them waits for them.
    pub fn take_retired(&self, name: &PluginId) -> Vec<Handover> {
        self.state().gate.as_mut().and_then(|gate| gate.retired.remove(name)).unwrap_or_default()
    }

    /// Keeps the hand-over of a version of `name` stopped without a successor, on a sharded
    /// host.
    pub(super) fn retire(&self, name: &PluginId, handover: Handover) {
        if let Some(gate) = self.state().gate.as_mut() {
            gate.retired.entry(name.clone()).or_default().push(handover);
        }
    }

    /// Keeps `plugin` for when its name is admitted. What the source served before (`stop`, a
    /// plugin of another name) stops: the source offers this one now.
    pub(super) async fn park(
        &self,
        offer: Offer,
        plugin: Plugin,
        config: Option<String>,
        stop: Option<PluginId>,
    ) -> Loaded {
        let (name, digest) = (plugin.manifest().id(), plugin_version_digest(&plugin, config.as_deref()));
        let old = stop.and_then(|old| self.state().take_slot(&old, &self.context.metrics).map(|slot| (old, slot)));
        if let Some((old_name, old)) = old {
            let handover = old.controller.shut_down(self.drain).await;
            self.retire(&old_name, handover);
        }
        if let Some(gate) = self.state().gate.as_mut() {
            gate.park(offer.source.clone(), Parked { offer, plugin, config });
        }
        Loaded::Parked { name, digest }
    }
}
