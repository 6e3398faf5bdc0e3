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

/// Recorders are forgotten past this many, or past [`MAX_KEY_BYTES`] of keys, which only
/// loses the aggregation of old messages into series, never an event.
const MAX_RECORDERS: usize = 4096;

/// The recorders' keys (controller and message) add up to at most this many bytes: messages
/// are a plugin's words, so their count alone bounds nothing.
const MAX_KEY_BYTES: usize = 2 << 20;

/// Recorders per reporting controller and message.
pub const STRIPES: u64 = 32;

/// Recorders by reporting controller, message and stripe.
pub struct Recorders {
    client: Client,
    recorders: Mutex<Keyed>,
}

#[derive(Default)]
struct Keyed {
    by_key: HashMap<(String, String, u64), Recorder>,
    key_bytes: usize,
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
        Recorders { client, recorders: Mutex::default() }
    }

    /// The recorder for events of `controller` carrying `message` about `regarding`.
    /// The message is cut to an Event note's limit first, so no key is longer than a note.
    pub fn get(&self, controller: &str, message: &str, regarding: &ObjectReference) -> Recorder {
        let message = wasmloop_contract::validate::event_note(message.to_owned());
        let key = (controller.to_owned(), message, stripe(regarding));
        let mut recorders = self.recorders.lock().expect("lock");
        if let Some(recorder) = recorders.by_key.get(&key) {
            return recorder.clone();
        }
        let bytes = key.0.len() + key.1.len();
        if recorders.by_key.len() >= MAX_RECORDERS || recorders.key_bytes + bytes > MAX_KEY_BYTES {
            *recorders = Keyed::default();
        }
        let reporter =
            Reporter { controller: controller.to_owned(), instance: instance(std::env::var("HOSTNAME").ok()) };
        let recorder = Recorder::new(self.client.clone(), reporter);
        recorders.key_bytes += bytes;
        recorders.by_key.insert(key, recorder.clone());
        recorder
    }

    /// How many recorders are kept, and the bytes of their keys.
    pub fn held(&self) -> (usize, usize) {
        let recorders = self.recorders.lock().expect("lock");
        (recorders.by_key.len(), recorders.key_bytes)
    }
}

/// The API's limit on an Event's `reportingInstance` (`ReportingInstanceLengthLimit`).
const MAX_REPORTING_INSTANCE: usize = 128;

/// The Event's `reportingInstance`: the pod's host name where it fits the API's 128 bytes;
/// otherwise none, and kube reports the controller's name, since the server refuses every
/// Event whose instance is longer.
fn instance(hostname: Option<String>) -> Option<String> {
    hostname.filter(|h| !h.is_empty() && h.len() <= MAX_REPORTING_INSTANCE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_past_the_apis_limit_is_not_the_reporting_instance() {
        assert_eq!(instance(Some("wasmloop-7d9c4-x2x".into())).as_deref(), Some("wasmloop-7d9c4-x2x"));
        assert_eq!(instance(Some("h".repeat(129))), None);
        assert_eq!(instance(Some(String::new())), None);
    }

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

    #[tokio::test]
    async fn the_recorders_keys_are_bounded_in_bytes_however_long_and_many_the_messages() {
        let client = kube::Client::try_from(kube::Config::new("https://127.0.0.1:9".parse().unwrap())).unwrap();
        let recorders = Recorders::new(client);
        let web = reference("shop", "web");
        for i in 0..200 {
            // A unique 3 MB message each time, as a failing plugin could send.
            let message = format!("{i}{}", "x".repeat(3 << 20));
            recorders.get("wasmloop/p", &message, &web);
            let (count, bytes) = recorders.held();
            assert!(bytes <= MAX_KEY_BYTES && count <= MAX_RECORDERS, "{count} recorders, {bytes} bytes");
        }
        let (_, bytes) = recorders.held();
        assert!(bytes > 0 && bytes < 200 * (wasmloop_contract::validate::MAX_EVENT_NOTE + 16), "{bytes}");
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
