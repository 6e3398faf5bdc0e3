//! Event recorders that keep client-go's series semantics.
//!
//! kube's `Recorder` folds events that differ only in their note into one series that keeps
//! the first note; client-go keys series by the message too. Plugins put the news in the
//! message (node-image-watch's new total, the cause of a rejected plugin version), so the
//! host keeps one recorder per reporting controller and message.
//!
//! Each `Recorder::publish` first sweeps that recorder's whole cache of the last six minutes'
//! events, under its write lock: one recorder publishing for 10,000 objects spends a sixth of
//! a controller's CPU there, and its publishes queue on the lock (measured in
//! `docs/benchmarks.md`, the same in a native kube-rs controller). So each (controller,
//! message) has [`STRIPES`] recorders, and an event goes to the one its regarding object
//! hashes to: a series is per regarding object, so every event of a series still meets the
//! same cache, and each sweep sees a stripe's share of the events.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

/// Recorders are forgotten past this many, which only loses the aggregation of old
/// messages into series, never an event.
const MAX_RECORDERS: usize = 4096;

/// Recorders per reporting controller and message.
pub const STRIPES: u64 = 32;

/// Recorders by reporting controller, message and stripe.
pub struct Recorders {
    client: Client,
    recorders: Mutex<HashMap<(String, String, u64), Recorder>>,
}

/// The stripe of events about `regarding`: the same for every event about one object.
pub fn stripe(regarding: &ObjectReference) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (&regarding.api_version, &regarding.kind, &regarding.namespace, &regarding.name).hash(&mut hasher);
    hasher.finish() % STRIPES
}

impl Recorders {
    /// Recorders that publish with `client`.
    pub fn new(client: Client) -> Recorders {
        Recorders { client, recorders: Mutex::new(HashMap::new()) }
    }

    /// The recorder for events of `controller` carrying `message` about `regarding`.
    pub fn get(&self, controller: &str, message: &str, regarding: &ObjectReference) -> Recorder {
        let mut recorders = self.recorders.lock().expect("lock");
        if recorders.len() >= MAX_RECORDERS {
            recorders.clear();
        }
        recorders
            .entry((controller.to_owned(), message.to_owned(), stripe(regarding)))
            .or_insert_with(|| {
                let reporter = Reporter { controller: controller.to_owned(), instance: std::env::var("HOSTNAME").ok() };
                Recorder::new(self.client.clone(), reporter)
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(namespace: &str, name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("samplecontroller.k8s.io/v1alpha1".into()),
            kind: Some("Foo".into()),
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..ObjectReference::default()
        }
    }

    #[test]
    fn every_event_about_one_object_goes_to_one_stripe() {
        let web = reference("shop", "web");
        let again = ObjectReference { uid: Some("u1".into()), resource_version: Some("7".into()), ..web.clone() };
        assert_eq!(stripe(&web), stripe(&again), "a series is per object, whatever version is referenced");
    }

    #[test]
    fn events_about_many_objects_spread_over_the_stripes() {
        let mut used = std::collections::HashSet::new();
        for i in 0..1000 {
            let s = stripe(&reference("shop", &format!("foo-{i}")));
            assert!(s < STRIPES);
            used.insert(s);
        }
        assert_eq!(used.len() as u64, STRIPES, "1,000 objects reach every stripe");
    }
}
