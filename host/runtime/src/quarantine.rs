//! Plugin-wide backoff for a plugin whose guest calls keep failing.
//!
//! Per-key backoff already slows retries of one object, but a plugin that traps or runs past
//! its deadline on *every* object still spends a worker and an instance on each, and floods
//! its objects with Warning Events. Once a plugin's calls have all failed for a sustained time,
//! it is quarantined: one probe call goes through per probe interval (doubling up to a
//! ceiling) while every other key waits for the probe's time; the first call that succeeds
//! lifts the quarantine. Only failures of the guest itself count (traps, deadlines, memory and
//! response limits), not API errors, which say nothing about the plugin's health.
//!
//! The decisions are pure ([`Health::record`], [`Health::admit`]), with time passed in.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use wasmloop_runtime::quarantine::{Admission, Health, Policy};
//! let policy = Policy { after: Duration::from_secs(60), min_failures: 3, ..Policy::default() };
//! let start = Instant::now();
//! let mut health = Health::default();
//! for s in [0, 30, 61] {
//!     health.record(false, start + Duration::from_secs(s), &policy);
//! }
//! assert!(health.quarantined().is_some());
//! let later = start + Duration::from_secs(62);
//! assert!(matches!(health.admit(later), Admission::Defer(_)));
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// When a plugin is quarantined, and how it is probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// How long every call must have failed.
    pub after: Duration,
    /// How many failures, at least, in that time: a plugin called once a minute is not sick
    /// after one failure.
    pub min_failures: u32,
    /// The first wait between probes.
    pub first_probe: Duration,
    /// The longest wait between probes.
    pub max_probe: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            after: Duration::from_secs(60),
            min_failures: 10,
            first_probe: Duration::from_secs(5),
            max_probe: Duration::from_secs(300),
        }
    }
}

/// What a worker does with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Call the plugin.
    Call,
    /// Call the plugin: this is the quarantine's probe.
    Probe,
    /// Put the key back for this long: the plugin is quarantined.
    Defer(Duration),
}

/// A change of state, to be reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The plugin is quarantined, for this reason.
    Entered(String),
    /// A call succeeded; the plugin serves again.
    Lifted,
}

/// The state of one plugin's calls.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// Since when every call has failed; none after a success.
    failing_since: Option<Instant>,
    failures: u32,
    quarantine: Option<Quarantine>,
}

#[derive(Debug, Clone)]
struct Quarantine {
    reason: String,
    next_probe: Instant,
    interval: Duration,
    /// When the probe in flight was admitted. A probe whose key needed no call (its object
    /// was gone) never reports back, so after an interval another is admitted.
    probing_since: Option<Instant>,
}

impl Health {
    /// Why the plugin is quarantined, if it is.
    pub fn quarantined(&self) -> Option<&str> {
        self.quarantine.as_ref().map(|q| q.reason.as_str())
    }

    /// Whether a worker may call the plugin for a key now.
    pub fn admit(&mut self, now: Instant) -> Admission {
        let Some(quarantine) = &mut self.quarantine else { return Admission::Call };
        let due = match quarantine.probing_since {
            Some(since) => since + quarantine.interval,
            None => quarantine.next_probe,
        };
        if now >= due {
            quarantine.probing_since = Some(now);
            return Admission::Probe;
        }
        // The others wait for the probe's time, or for the probe in flight to decide.
        Admission::Defer((due - now).max(Duration::from_millis(1)))
    }

    /// Records how a guest call ended (`ok`: it returned, whatever it returned; not `ok`: it
    /// trapped, ran past its deadline or broke a limit).
    pub fn record(&mut self, ok: bool, now: Instant, policy: &Policy) -> Option<Transition> {
        if ok {
            self.failing_since = None;
            self.failures = 0;
            return self.quarantine.take().map(|_| Transition::Lifted);
        }
        let since = *self.failing_since.get_or_insert(now);
        self.failures = self.failures.saturating_add(1);
        match &mut self.quarantine {
            Some(quarantine) => {
                if quarantine.probing_since.take().is_some() {
                    // The probe failed: wait twice as long for the next.
                    quarantine.interval = (quarantine.interval * 2).min(policy.max_probe);
                    quarantine.next_probe = now + quarantine.interval;
                }
                None
            }
            None if now.duration_since(since) >= policy.after && self.failures >= policy.min_failures => {
                let reason = format!(
                    "every call failed for {} s ({} failures); one probe call every {} s until one succeeds",
                    now.duration_since(since).as_secs(),
                    self.failures,
                    policy.first_probe.as_secs()
                );
                self.quarantine = Some(Quarantine {
                    reason: reason.clone(),
                    next_probe: now + policy.first_probe,
                    interval: policy.first_probe,
                    probing_since: None,
                });
                Some(Transition::Entered(reason))
            }
            None => None,
        }
    }
}

/// Which plugins are quarantined now, and why: what `/readyz` details, operators and the
/// ConfigMap source (for each plugin's status annotation) read. Readers that must follow
/// changes [`subscribe`](Board::subscribe).
#[derive(Debug)]
pub struct Board(watch::Sender<BTreeMap<String, String>>);

impl Default for Board {
    fn default() -> Self {
        Board(watch::Sender::new(BTreeMap::new()))
    }
}

impl Board {
    /// Plugin `plugin` is quarantined for `reason`, or (none) no longer is.
    pub fn set(&self, plugin: &str, reason: Option<&str>) {
        self.0.send_if_modified(|board| match reason {
            Some(reason) => board.insert(plugin.to_owned(), reason.to_owned()).as_deref() != Some(reason),
            None => board.remove(plugin).is_some(),
        });
    }

    /// Why plugin `plugin` is quarantined; none when it is not.
    pub fn get(&self, plugin: &str) -> Option<String> {
        self.0.borrow().get(plugin).cloned()
    }

    /// Every quarantined plugin and why, by name.
    pub fn list(&self) -> Vec<(String, String)> {
        self.0.borrow().iter().map(|(p, r)| (p.clone(), r.clone())).collect()
    }

    /// A receiver that wakes at every change of the board.
    pub fn subscribe(&self) -> watch::Receiver<BTreeMap<String, String>> {
        self.0.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            after: Duration::from_secs(60),
            min_failures: 3,
            first_probe: Duration::from_secs(5),
            max_probe: Duration::from_secs(20),
        }
    }

    /// Feeds `calls` (second, ok) and returns the transitions and whether it ends quarantined.
    fn run(calls: &[(u64, bool)]) -> (Vec<Transition>, bool) {
        let start = Instant::now();
        let mut health = Health::default();
        let transitions =
            calls.iter().filter_map(|(s, ok)| health.record(*ok, start + Duration::from_secs(*s), &policy())).collect();
        (transitions, health.quarantined().is_some())
    }

    #[test]
    fn only_sustained_and_repeated_failure_quarantines() {
        let entered = |t: &Vec<Transition>| matches!(t.as_slice(), [Transition::Entered(_)]);
        let cases: [(&str, &[(u64, bool)], bool); 5] = [
            ("failing for 60 s, 3 times", &[(0, false), (30, false), (60, false)], true),
            ("failing for 59 s", &[(0, false), (30, false), (59, false)], false),
            ("failing for long, but twice", &[(0, false), (600, false)], false),
            ("a success in between", &[(0, false), (30, true), (40, false), (89, false)], false),
            ("all successes", &[(0, true), (100, true)], false),
        ];
        for (what, calls, quarantined) in cases {
            let (transitions, ends) = run(calls);
            assert_eq!(ends, quarantined, "{what}");
            assert_eq!(entered(&transitions), quarantined, "{what}: {transitions:?}");
        }
    }

    #[test]
    fn a_quarantined_plugin_gets_one_probe_per_interval_and_others_wait_for_it() {
        let (start, p) = (Instant::now(), policy());
        let mut health = Health::default();
        for s in [0, 30, 60] {
            health.record(false, start + Duration::from_secs(s), &p);
        }
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(health.admit(at(61)), Admission::Defer(Duration::from_secs(4)));
        assert_eq!(health.admit(at(65)), Admission::Probe);
        // One probe at a time: the others wait for it, an interval at most.
        assert_eq!(health.admit(at(65)), Admission::Defer(Duration::from_secs(5)));
        assert_eq!(health.admit(at(68)), Admission::Defer(Duration::from_secs(2)));
        // The probe fails: the interval doubles, up to the ceiling.
        assert_eq!(health.record(false, at(66), &p), None);
        assert_eq!(health.admit(at(70)), Admission::Defer(Duration::from_secs(6)));
        assert_eq!(health.admit(at(76)), Admission::Probe);
        health.record(false, at(76), &p);
        assert_eq!(health.admit(at(77)), Admission::Defer(Duration::from_secs(19)));
        assert_eq!(health.admit(at(96)), Admission::Probe);
        health.record(false, at(96), &p);
        assert_eq!(health.admit(at(96)), Admission::Defer(Duration::from_secs(20)), "capped at max_probe");
    }

    #[test]
    fn a_probe_that_never_reports_back_is_replaced_after_an_interval() {
        let (start, p) = (Instant::now(), policy());
        let mut health = Health::default();
        for s in [0, 30, 60] {
            health.record(false, start + Duration::from_secs(s), &p);
        }
        assert_eq!(health.admit(start + Duration::from_secs(65)), Admission::Probe);
        assert_eq!(health.admit(start + Duration::from_secs(70)), Admission::Probe);
    }

    #[test]
    fn a_successful_call_lifts_the_quarantine_and_every_key_is_admitted() {
        let (start, p) = (Instant::now(), policy());
        let mut health = Health::default();
        for s in [0, 30, 60] {
            health.record(false, start + Duration::from_secs(s), &p);
        }
        assert_eq!(health.admit(start + Duration::from_secs(65)), Admission::Probe);
        assert_eq!(health.record(true, start + Duration::from_secs(65), &p), Some(Transition::Lifted));
        assert_eq!(health.quarantined(), None);
        assert_eq!(health.admit(start + Duration::from_secs(65)), Admission::Call);
        // And it takes a full new spell of failures to be quarantined again.
        assert_eq!(health.record(false, start + Duration::from_secs(66), &p), None);
    }
}
