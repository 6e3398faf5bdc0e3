//! What a controller remembers per key between passes: the keys its reconciles hold, the
//! last state of deleted primaries not yet delivered, the state each primary had at its last
//! successful apply, and the related objects waiting for `map`. Deletions and previous states
//! are handed to the next version of the plugin on a swap; related objects are not, since the
//! next version requeues every primary when it starts.
//!
//! `previous` (`deliver-previous`) exists because a fresh instance per call has no memory,
//! and a plugin that reports transitions (`pod-logger`: "Pending → Running") needs the state
//! it last saw. Kept per key as an `Arc` of the cache entry (a pointer, not a copy), and only
//! for the same object: a recreated one of the same name has none. Plugins stay stateless
//! and level-driven.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::work::{Key, Related};
use crate::informer::Entry;

/// The keys being reconciled by any version of one plugin, each with the generation of the
/// version reconciling it. Kept apart from the queue's own book-keeping, so that a broken
/// queue shows up as `wasmloop_reconcile_overlaps_total` instead of passing unseen, and handed
/// from version to version, so that a new version never starts on a key an old version's
/// reconcile (one that outlived the drain timeout) still holds.
#[derive(Default)]
pub struct RunningKeys(Mutex<HashMap<Key, u64>>);

/// The answer to a worker that wants to reconcile a key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Claim {
    /// The key is the worker's until released.
    Claimed,
    /// This version already reconciles the key: the queue failed its promise.
    Overlap,
    /// An older version still reconciles the key.
    Busy,
}

impl RunningKeys {
    pub(super) fn claim(&self, key: &Key, generation: u64) -> Claim {
        let mut keys = self.0.lock().expect("lock");
        match keys.get(key) {
            Some(g) if *g == generation => Claim::Overlap,
            Some(_) => Claim::Busy,
            None => {
                keys.insert(key.clone(), generation);
                Claim::Claimed
            }
        }
    }

    pub(super) fn release(&self, key: &Key, generation: u64) {
        let mut keys = self.0.lock().expect("lock");
        if keys.get(key) == Some(&generation) {
            keys.remove(key);
        }
    }

    /// True when no version holds a key.
    pub(super) fn is_empty(&self) -> bool {
        self.0.lock().expect("lock").is_empty()
    }

    /// The keys `generation` still holds.
    pub(super) fn held_by(&self, generation: u64) -> Vec<String> {
        let keys = self.0.lock().expect("lock");
        keys.iter().filter(|(_, g)| **g == generation).map(|(k, _)| k.to_string()).collect()
    }
}

/// Per-key state kept between passes.
#[derive(Default)]
pub(super) struct Memory {
    /// Deleted primaries whose deletion the plugin has not been told of yet.
    tombstones: Mutex<HashMap<Key, Arc<Entry>>>,
    /// Each primary as it was at its last successful apply.
    previous: Mutex<HashMap<Key, Arc<Entry>>>,
    /// The latest state of each related object waiting for `map`, and whether it went
    /// (deleted, or out of the watch's selection).
    related: Mutex<HashMap<Related, (Arc<Entry>, bool)>>,
}

impl Memory {
    /// A primary was deleted: its previous state goes; its last state waits for delivery
    /// when `deliver` says so.
    pub(super) fn deleted(&self, key: &Key, last: Option<Arc<Entry>>) {
        self.previous.lock().expect("lock").remove(key);
        if let Some(last) = last {
            self.tombstones.lock().expect("lock").insert(key.clone(), last);
        }
    }

    /// Takes the undelivered deletion of `key`, and forgets its previous state: the key names
    /// no live object.
    pub(super) fn take_tombstone(&self, key: &Key) -> Option<Arc<Entry>> {
        self.previous.lock().expect("lock").remove(key);
        self.tombstones.lock().expect("lock").remove(key)
    }

    /// Keeps a deletion for its retry, unless a newer one of the same name came meanwhile.
    pub(super) fn keep_tombstone(&self, key: &Key, last: Arc<Entry>) {
        self.tombstones.lock().expect("lock").entry(key.clone()).or_insert(last);
    }

    /// The state the primary `key` had at its last successful apply, when it is the same
    /// object (`uid`): a recreated object of the same name has no previous state.
    pub(super) fn previous(&self, key: &Key, uid: &str) -> Option<Arc<Entry>> {
        let previous = self.previous.lock().expect("lock");
        previous.get(key).filter(|e| e.envelope.uid == uid).cloned()
    }

    pub(super) fn remember(&self, key: &Key, entry: Arc<Entry>) {
        self.previous.lock().expect("lock").insert(key.clone(), entry);
    }

    /// A related object changed or `went`: its latest state waits for `map`.
    pub(super) fn related_changed(&self, related: Related, entry: Arc<Entry>, went: bool) {
        self.related.lock().expect("lock").insert(related, (entry, went));
    }

    /// Takes the latest state of a related object for `map`, and whether it went.
    pub(super) fn take_related(&self, related: &Related) -> Option<(Arc<Entry>, bool)> {
        self.related.lock().expect("lock").remove(related)
    }

    /// Keeps a related object for the retry of its `map`, unless a newer state came meanwhile.
    pub(super) fn keep_related(&self, related: &Related, taken: (Arc<Entry>, bool)) {
        self.related.lock().expect("lock").entry(related.clone()).or_insert(taken);
    }

    /// Everything a successor version needs: undelivered deletions and previous states.
    pub(super) fn hand_over(&self) -> Remembered {
        Remembered {
            tombstones: std::mem::take(&mut *self.tombstones.lock().expect("lock")),
            previous: std::mem::take(&mut *self.previous.lock().expect("lock")),
        }
    }

    /// Takes over what a predecessor remembered, keeping anything newer of its own, and only
    /// what the successor would be served itself (`serves`: its primaries' namespace and
    /// selector, which its access was reviewed for): a version confined to fewer objects is
    /// told nothing of the rest. Returns the keys whose deletions now wait for delivery.
    pub(super) fn take_over(
        &self,
        remembered: Remembered,
        (deliver_deleted, deliver_previous): (bool, bool),
        serves: impl Fn(&Key, &Entry) -> bool,
    ) -> Vec<Key> {
        let mut delivered = Vec::new();
        if deliver_deleted {
            let mut tombstones = self.tombstones.lock().expect("lock");
            for (key, entry) in remembered.tombstones.into_iter().filter(|(k, e)| serves(k, e)) {
                tombstones.entry(key.clone()).or_insert(entry);
                delivered.push(key);
            }
        }
        if deliver_previous {
            let mut previous = self.previous.lock().expect("lock");
            for (key, entry) in remembered.previous.into_iter().filter(|(k, e)| serves(k, e)) {
                previous.entry(key).or_insert(entry);
            }
        }
        delivered
    }
}

/// What one version remembered, for the next.
#[derive(Default)]
pub(super) struct Remembered {
    tombstones: HashMap<Key, Arc<Entry>>,
    previous: HashMap<Key, Arc<Entry>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Key { namespace: Some("t".into()), name: name.into() }
    }

    fn entry(name: &str, uid: &str) -> Arc<Entry> {
        use kube::api::{ApiResource, DynamicObject};
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let mut object = DynamicObject::new(name, &resource).within("t");
        object.metadata.uid = Some(uid.into());
        Arc::new(Entry::new(object, &resource, Default::default()).unwrap())
    }

    #[test]
    fn a_successor_takes_over_undelivered_deletions_and_previous_states_keeping_its_own_newer_ones() {
        let old = Memory::default();
        old.deleted(&key("gone"), Some(entry("gone", "u-gone")));
        old.remember(&key("kept"), entry("kept", "u-old"));
        old.remember(&key("both"), entry("both", "u-old"));
        let new = Memory::default();
        new.remember(&key("both"), entry("both", "u-new"));
        let delivered = new.take_over(old.hand_over(), (true, true), |_, _| true);
        assert_eq!(delivered, vec![key("gone")], "the deletion is the successor's to deliver");
        assert!(new.take_tombstone(&key("gone")).is_some());
        assert!(new.previous(&key("kept"), "u-old").is_some());
        assert!(new.previous(&key("both"), "u-new").is_some(), "its own newer state wins");
        assert!(new.previous(&key("both"), "u-old").is_none(), "a recreated object has no previous state");
        assert!(old.take_tombstone(&key("gone")).is_none(), "handed over, not copied");
    }

    #[test]
    fn a_successor_that_does_not_ask_for_deletions_or_previous_states_gets_none() {
        let old = Memory::default();
        old.deleted(&key("gone"), Some(entry("gone", "u1")));
        old.remember(&key("kept"), entry("kept", "u2"));
        let new = Memory::default();
        assert!(new.take_over(old.hand_over(), (false, false), |_, _| true).is_empty());
        assert!(new.take_tombstone(&key("gone")).is_none() && new.previous(&key("kept"), "u2").is_none());
    }

    #[test]
    fn a_successor_is_handed_only_the_deletions_and_states_of_objects_it_is_served() {
        let old = Memory::default();
        old.deleted(&key("mine"), Some(entry("mine", "u1")));
        old.deleted(&key("theirs"), Some(entry("theirs", "u2")));
        old.remember(&key("seen-mine"), entry("seen-mine", "u3"));
        old.remember(&key("seen-theirs"), entry("seen-theirs", "u4"));
        let new = Memory::default();
        let delivered = new.take_over(old.hand_over(), (true, true), |k, _| !k.name.contains("theirs"));
        assert_eq!(delivered, vec![key("mine")]);
        assert!(new.take_tombstone(&key("theirs")).is_none(), "a deletion outside its scope is not its to see");
        assert!(new.previous(&key("seen-mine"), "u3").is_some());
        assert!(new.previous(&key("seen-theirs"), "u4").is_none());
    }

    #[test]
    fn a_key_is_claimed_once_and_an_older_versions_claim_makes_it_busy() {
        let running = RunningKeys::default();
        assert_eq!(running.claim(&key("a"), 1), Claim::Claimed);
        assert_eq!(running.claim(&key("a"), 1), Claim::Overlap, "the same version twice");
        assert_eq!(running.claim(&key("a"), 2), Claim::Busy, "a newer version waits");
        assert_eq!(running.held_by(1), vec!["t/a".to_owned()]);
        running.release(&key("a"), 2);
        assert_eq!(running.claim(&key("a"), 2), Claim::Busy, "only the holder releases");
        running.release(&key("a"), 1);
        assert_eq!(running.claim(&key("a"), 2), Claim::Claimed);
    }
}
