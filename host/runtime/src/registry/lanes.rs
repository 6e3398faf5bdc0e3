//! One lane per name: work on a plugin, or on a source, waits only for earlier work on the
//! same plugin or source, never for a load of another plugin, whose cache sync may take two
//! minutes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;
use wasmloop_sandbox::{PluginId, SourceId};

/// What a lane is named by. Sources and plugins are kept apart: a source's text cannot take a
/// plugin's lane.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Lane {
    /// Loads and removals of one source, one at a time.
    Source(SourceId),
    /// Installs, stops, parks and hand-overs of one plugin, one at a time.
    Plugin(PluginId),
}

/// The lanes in use. A lane exists while someone holds or waits for it, so a source that
/// makes up names cannot grow the map.
#[derive(Default)]
pub(super) struct Lanes {
    lanes: Mutex<HashMap<Lane, Arc<tokio::sync::Mutex<()>>>>,
}

/// Lanes held; they are let go when this drops.
pub(super) struct Held<'a> {
    lanes: &'a Lanes,
    guards: Vec<OwnedMutexGuard<()>>,
}

impl Lanes {
    /// Waits for every lane in `names`, taken in order so that two callers wanting
    /// overlapping sets cannot wait on each other. A caller holding lanes may enter more only
    /// if each is ordered after every one it holds: sources before plugins.
    pub(super) async fn enter(&self, names: impl IntoIterator<Item = Lane>) -> Held<'_> {
        let mut names: Vec<Lane> = names.into_iter().collect();
        names.sort();
        names.dedup();
        let mut guards = Vec::with_capacity(names.len());
        for name in names {
            let lane = self.lanes.lock().expect("lock").entry(name).or_default().clone();
            guards.push(lane.lock_owned().await);
        }
        Held { lanes: self, guards }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut lanes = self.lanes.lanes.lock().expect("lock");
        self.guards.clear();
        // A lane only the map holds has nobody in it or waiting: it goes. The whole map is
        // swept, so the lane of a waiter that was cancelled goes too.
        lanes.retain(|_, lane| Arc::strong_count(lane) > 1);
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn plugin(name: &str) -> Lane {
        Lane::Plugin(PluginId::new(None, name).unwrap())
    }

    #[tokio::test]
    async fn a_held_lane_holds_up_only_its_own_name() {
        let lanes = Lanes::default();
        let _a = lanes.enter([plugin("a")]).await;
        assert!(lanes.enter([plugin("b")]).now_or_never().is_some(), "lane b waited for lane a");
        assert!(lanes.enter([plugin("a")]).now_or_never().is_none(), "lane a was entered twice at once");
    }

    #[tokio::test]
    async fn lanes_go_when_nobody_holds_them() {
        let lanes = Lanes::default();
        drop(lanes.enter([plugin("a"), Lane::Source(SourceId::file("x.wasm")), plugin("a")]).await);
        assert!(lanes.lanes.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_no_lane_behind() {
        let lanes = Lanes::default();
        let held = lanes.enter([plugin("a")]).await;
        assert!(lanes.enter([plugin("a"), plugin("b")]).now_or_never().is_none());
        drop(held);
        assert!(lanes.lanes.lock().unwrap().is_empty());
    }

    #[test]
    fn sources_come_before_plugins() {
        assert!(Lane::Source(SourceId::file("zz")) < plugin("aa"));
    }
}
