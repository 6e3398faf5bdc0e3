//! Why each queued key will run: the triggers gathered while it waits, handed to its next
//! reconcile (contract 0.3's `request.triggers`).
//!
//! The queue keeps keys, not events, so that a burst of changes is one reconcile of the latest
//! state; the reasons ride beside it. Repeats of one trigger fold into one (the same child
//! changed five times is one `owned-changed`; generation changes keep the oldest `old` and the
//! newest `new`), and a key keeps at most [`MAX_TRIGGERS`], the newest, counting the rest.
//!
//! ```
//! use wasmloop_runtime::controller::reasons::{MAX_TRIGGERS, Reasons};
//! use wasmloop_sandbox::{GenerationChange, Trigger};
//! let mut reasons: Reasons<&str> = Reasons::default();
//! reasons.add("web", Trigger::PrimaryChanged(GenerationChange { old: Some(1), new: Some(2) }));
//! reasons.add("web", Trigger::PrimaryChanged(GenerationChange { old: Some(2), new: Some(3) }));
//! let (triggers, dropped) = reasons.take(&"web", std::time::Instant::now());
//! assert_eq!(triggers, vec![Trigger::PrimaryChanged(GenerationChange { old: Some(1), new: Some(3) })]);
//! assert_eq!(dropped, 0);
//! # let _ = MAX_TRIGGERS;
//! ```

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::Instant;

use wasmloop_sandbox::{GenerationChange, Trigger};

/// Triggers one reconcile carries at most.
pub const MAX_TRIGGERS: usize = wasmloop_sandbox::triggers::MAX;

/// The triggers of each waiting key.
#[derive(Debug)]
pub struct Reasons<K> {
    waiting: HashMap<K, Gathered>,
}

impl<K> Default for Reasons<K> {
    fn default() -> Self {
        Reasons { waiting: HashMap::new() }
    }
}

#[derive(Debug, Default)]
struct Gathered {
    triggers: VecDeque<Trigger>,
    dropped: u32,
    /// Reasons that hold only from a time on (a requeue comes due): a call before then does
    /// not carry them.
    due: Vec<(Instant, Trigger)>,
}

impl Gathered {
    /// `trigger` folded into a repeat of it, or listed after the rest, the oldest dropped past
    /// the bound.
    fn push(&mut self, trigger: Trigger) {
        if let Some(earlier) = self.triggers.iter_mut().find(|t| folds(t, &trigger)) {
            fold(earlier, trigger);
            return;
        }
        if self.triggers.len() == MAX_TRIGGERS {
            self.triggers.pop_front();
            self.dropped = self.dropped.saturating_add(1);
        }
        self.triggers.push_back(trigger);
    }
}

impl<K: Eq + Hash + Clone> Reasons<K> {
    /// One more reason for `key` to run.
    pub fn add(&mut self, key: K, trigger: Trigger) {
        self.waiting.entry(key).or_default().push(trigger);
    }

    /// A reason for `key` to run that holds from `due` on: the requeue a response asked for.
    /// A later one of the same kind replaces it, as the queue keeps one deadline per key.
    pub fn add_due(&mut self, key: K, trigger: Trigger, due: Instant) {
        let gathered = self.waiting.entry(key).or_default();
        gathered.due.retain(|(_, t)| !folds(t, &trigger));
        gathered.due.push((due, trigger));
    }

    /// The reasons gathered for `key` that hold at `now`, oldest first, and how many were
    /// dropped; the key keeps only those not due yet.
    pub fn take(&mut self, key: &K, now: Instant) -> (Vec<Trigger>, u32) {
        let Some(mut g) = self.waiting.remove(key) else { return (Vec::new(), 0) };
        if !g.due.is_empty() {
            let (mut due, later): (Vec<_>, Vec<_>) = g.due.drain(..).partition(|(at, _)| *at <= now);
            due.sort_by_key(|(at, _)| *at);
            due.into_iter().for_each(|(_, trigger)| g.push(trigger));
            if !later.is_empty() {
                self.waiting.insert(key.clone(), Gathered { due: later, ..Gathered::default() });
            }
        }
        (g.triggers.into(), g.dropped)
    }

    /// Puts back reasons taken for a call that did not happen (the host had no room for it),
    /// before any gathered since.
    pub fn put_back(&mut self, key: K, (triggers, dropped): (Vec<Trigger>, u32)) {
        let newer = self.waiting.remove(&key).unwrap_or_default();
        let mut g = Gathered { dropped: dropped.saturating_add(newer.dropped), due: newer.due, ..Gathered::default() };
        triggers.into_iter().chain(newer.triggers).for_each(|trigger| g.push(trigger));
        self.waiting.insert(key, g);
    }

    /// Forgets `key` (its object is gone, or no longer this controller's).
    pub fn forget(&mut self, key: &K) {
        self.waiting.remove(key);
    }

    /// Keys with reasons waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// True when no key has reasons waiting.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// True when `later` is a repeat of `earlier`, folded into it rather than listed again.
fn folds(earlier: &Trigger, later: &Trigger) -> bool {
    match (earlier, later) {
        // Not across a deletion: a recreated object of the name is another object.
        (Trigger::PrimaryChanged(a), Trigger::PrimaryChanged(b)) => a.new.is_some() && b.old.is_some(),
        (Trigger::OwnedChanged(a), Trigger::OwnedChanged(b))
        | (Trigger::RelatedChanged(a), Trigger::RelatedChanged(b)) => {
            (&a.api_version, &a.kind, &a.namespace, &a.name) == (&b.api_version, &b.kind, &b.namespace, &b.name)
        }
        (Trigger::Resync, Trigger::Resync)
        | (Trigger::Requeue, Trigger::Requeue)
        | (Trigger::Retry, Trigger::Retry) => true,
        (Trigger::Conflict(a), Trigger::Conflict(b)) => {
            let (a, b) = (&a.target, &b.target);
            (&a.api_version, &a.kind, &a.namespace, &a.name) == (&b.api_version, &b.kind, &b.namespace, &b.name)
        }
        _ => false,
    }
}

/// `later` folded into `earlier`: the span of generations, or the latest state.
fn fold(earlier: &mut Trigger, later: Trigger) {
    match (earlier, later) {
        (Trigger::PrimaryChanged(GenerationChange { new, .. }), Trigger::PrimaryChanged(later)) => *new = later.new,
        (earlier, later) => *earlier = later,
    }
}

#[cfg(test)]
mod tests {
    use wasmloop_sandbox::WitObjectRef as ObjectRef;

    use super::*;

    fn changed(name: &str) -> Trigger {
        Trigger::OwnedChanged(ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
            namespace: Some("shop".into()),
            uid: None,
        })
    }

    #[test]
    fn triggers_come_out_in_arrival_order_once_each() {
        let mut r: Reasons<&str> = Reasons::default();
        for t in [changed("a"), Trigger::Resync, changed("b"), changed("a"), Trigger::Resync] {
            r.add("k", t);
        }
        assert_eq!(r.take(&"k", Instant::now()), (vec![changed("a"), Trigger::Resync, changed("b")], 0));
        assert_eq!(r.take(&"k", Instant::now()), (Vec::new(), 0), "taken means gone");
    }

    #[test]
    fn past_the_bound_the_oldest_go_and_are_counted() {
        let mut r: Reasons<&str> = Reasons::default();
        for i in 0..MAX_TRIGGERS + 5 {
            r.add("k", changed(&format!("c{i}")));
        }
        let (triggers, dropped) = r.take(&"k", Instant::now());
        assert_eq!((triggers.len(), dropped), (MAX_TRIGGERS, 5));
        assert_eq!(triggers[0], changed("c5"));
    }

    #[test]
    fn a_call_that_did_not_happen_gets_its_reasons_back_before_newer_ones() {
        let mut r: Reasons<&str> = Reasons::default();
        r.add("k", changed("a"));
        let taken = r.take(&"k", Instant::now());
        r.add("k", Trigger::Retry);
        r.put_back("k", taken);
        assert_eq!(r.take(&"k", Instant::now()).0, vec![changed("a"), Trigger::Retry]);
    }

    #[test]
    fn keys_are_kept_apart_and_forgotten_alone() {
        let mut r: Reasons<&str> = Reasons::default();
        r.add("a", Trigger::Resync);
        r.add("b", Trigger::Requeue);
        r.forget(&"a");
        assert_eq!((r.len(), r.take(&"b", Instant::now()).0), (1, vec![Trigger::Requeue]));
        assert!(r.is_empty());
    }

    #[test]
    fn a_requeue_is_a_reason_only_once_it_is_due() {
        let mut r: Reasons<&str> = Reasons::default();
        let start = Instant::now();
        let later = start + std::time::Duration::from_secs(60);
        r.add_due("k", Trigger::Requeue, later);
        r.add("k", changed("a"));
        assert_eq!(r.take(&"k", start).0, vec![changed("a")], "an early call is not the requeue");
        assert_eq!(r.take(&"k", later).0, vec![Trigger::Requeue], "kept for the call that is");
        assert!(r.is_empty());
    }

    #[test]
    fn a_deletion_and_a_recreation_are_not_folded_into_one_change() {
        let mut r: Reasons<&str> = Reasons::default();
        let changed = |old, new| Trigger::PrimaryChanged(GenerationChange { old, new });
        r.add("k", changed(Some(1), None));
        r.add("k", changed(None, Some(1)));
        assert_eq!(r.take(&"k", Instant::now()).0, vec![changed(Some(1), None), changed(None, Some(1))]);
    }
}
