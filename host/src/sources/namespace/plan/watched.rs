//! What the watches bring, before anything is read: lists begun and ended, `WasmPlugin`s whose
//! generation was handled already, and the ConfigMaps `WasmPlugin`s name.

use std::collections::HashSet;

use wasmloop_contract::names::Name;
use wasmloop_sandbox::SourceKind;

use super::{Key, Shipper, State, Step};
use crate::wasmplugin::{self, WasmPlugin};

impl State {
    /// Whether `kind`'s first list is handled.
    pub(in crate::sources::namespace) fn listed(&self, kind: SourceKind) -> bool {
        self.listed.contains(&kind)
    }

    /// A list of `kind` began.
    pub(in crate::sources::namespace) fn on_list_started(&mut self, kind: SourceKind) {
        self.listing.insert(kind, HashSet::new());
    }

    /// The list of `kind` in progress brought `key`.
    pub(in crate::sources::namespace) fn on_listed(&mut self, key: &Key) {
        if let Some(names) = self.listing.get_mut(&key.kind) {
            names.insert(key.name.clone());
        }
    }

    /// The list of `kind` ended: the objects it did not bring were deleted while the watch was
    /// down.
    pub(in crate::sources::namespace) fn on_list_done(&mut self, kind: SourceKind) -> Vec<Step> {
        let names = self.listing.remove(&kind).unwrap_or_default();
        let gone: Vec<Key> =
            self.seen.keys().filter(|key| key.kind == kind && !names.contains(&key.name)).cloned().collect();
        self.listed.insert(kind);
        gone.iter().flat_map(|key| self.on_deleted(key)).collect()
    }

    /// `kind`'s watch failed: true when the kind is to count as listed now. A `WasmPlugin` kind
    /// not installed, or not to be listed, holds up neither readiness nor the ConfigMaps.
    pub(in crate::sources::namespace) fn on_watch_failed(&mut self, kind: SourceKind) -> bool {
        kind == SourceKind::WasmPlugin && self.listed.insert(kind)
    }

    /// An object came from a watch: false when it offers nothing new, being a `WasmPlugin` whose
    /// generation was handled already (only its status or metadata changed, the status
    /// writer's own writes among them).
    pub(in crate::sources::namespace) fn on_arrived(&mut self, shipper: &Shipper) -> bool {
        let Shipper::WasmPlugin(plugin) = shipper else { return true };
        let name = shipper.key().name;
        // Kept to offer again when its ConfigMap changes, without what the host never reads;
        // one whose configuration is past the limit is refused until edited, and not kept.
        if plugin.spec["config"].to_string().len() > wasmplugin::MAX_CONFIG {
            self.latest.remove(&name);
        } else {
            self.latest.insert(name.clone(), kept(plugin));
        }
        let current = plugin.metadata.generation.map(|g| (plugin.metadata.uid.clone(), g));
        if current.is_some() && self.generations.get(&name) == current.as_ref() {
            return false;
        }
        // Only a new spec can name another ConfigMap.
        self.index(&name, plugin);
        true
    }

    /// Notes which ConfigMap `WasmPlugin` `name` names, if any.
    fn index(&mut self, name: &Name, plugin: &WasmPlugin) {
        let named = wasmplugin::Spec::parse(plugin).ok().and_then(|spec| spec.configmap().map(ToString::to_string));
        if named.as_ref().and_then(|c| self.naming.get(c)).is_some_and(|(plugins, _)| plugins.contains(name)) {
            return;
        }
        self.unindex(name);
        if let Some(configmap) = named {
            self.naming.entry(configmap).or_default().0.insert(name.clone());
        }
    }

    pub(super) fn unindex(&mut self, name: &Name) {
        self.naming.retain(|_, (plugins, _)| {
            plugins.remove(name);
            !plugins.is_empty()
        });
    }

    /// ConfigMap `name`, which is no plugin ConfigMap, changed to `version` or went (none): the
    /// `WasmPlugin`s that name it are offered again, unless it is the version seen already.
    pub(in crate::sources::namespace) fn on_named(&mut self, name: &str, version: Option<String>) -> Vec<Step> {
        let Some((plugins, seen)) = self.naming.get_mut(name) else { return Vec::new() };
        if version.is_some() && *seen == version {
            return Vec::new();
        }
        *seen = version;
        let plugins: Vec<&WasmPlugin> = plugins.iter().filter_map(|p| self.latest.get(p)).collect();
        plugins.into_iter().map(|plugin| Step::Offer(Shipper::WasmPlugin(plugin.clone()))).collect()
    }
}

/// A `WasmPlugin` as the source keeps it: without its managed fields and the copy of itself
/// `kubectl apply` keeps, which can be as large as the spec.
fn kept(plugin: &WasmPlugin) -> WasmPlugin {
    let mut kept = plugin.clone();
    kept.metadata.managed_fields = None;
    if let Some(annotations) = kept.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    kept
}
