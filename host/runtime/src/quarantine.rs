//! Plugin-wide backoff for a plugin whose guest calls keep failing.
//!
//! Per-key backoff already slows retries of one object, but a plugin that traps or runs past
//! its deadline on *every* object still spends a worker and an instance on each, and floods
//! its objects with Warning Events. So a plugin is quarantined by its failure *rate*: once at
//! least [`Policy::failure_percent`] of its calls over the last [`Policy::after`] have failed,
//! without a break for [`Policy::after`], with [`Policy::min_failures`] failures at least in
//! that spell, one probe call
//! goes through per probe interval (doubling up to a ceiling) while every other key waits for
//! the probe's time; a probe that succeeds lifts the quarantine.
//!
//! Every failed call counts: traps, deadlines, memory and response limits, and errors the
//! plugin returns itself. A rate, not a streak: a plugin that fails 99 calls in 100 is sick,
//! and one success among them resets nothing. A plugin quarantined again soon after a lift
//! resumes the backoff where it stopped instead of starting over, so succeeding at one probe
//! in several buys it no stream of calls. API errors say nothing about the plugin's health and
//! are not counted; neither are `map` calls.
//!
//! The decisions are pure ([`Health::record`], [`Health::admit`]), with time passed in. The
//! worker wires them: a quarantined plugin's reconcile is put back until the next probe, so it
//! holds no worker, and each transition goes to the log, the metrics, an Event on the object
//! of the call that tipped it, and the host's [`Board`], which `/readyz` details and the status
//! writer (a plugin ConfigMap's annotation, a `WasmPlugin`'s conditions) follow. A version that
//! stops takes its quarantine with it.
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
    /// The window the failure rate is measured over, and how long it must stay at or above
    /// [`Policy::failure_percent`].
    pub after: Duration,
    /// How many failures, at least, in the window: a plugin called once a minute is not sick
    /// after one failure.
    pub min_failures: u32,
    /// The share of failed calls in the window, in percent, at or above which a plugin is
    /// failing.
    pub failure_percent: u8,
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
            failure_percent: 50,
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

/// Slots the window is counted in: memory stays constant however many calls a plugin makes.
const SLOTS: u64 = 12;

/// Calls that succeeded and failed over the last window, counted in [`SLOTS`] slots.
#[derive(Debug, Clone, Default)]
struct Window {
    epoch: Option<Instant>,
    /// (slot number since the epoch, succeeded, failed).
    slots: [(u64, u32, u32); SLOTS as usize],
}

impl Window {
    fn slot(&mut self, now: Instant, window: Duration) -> u64 {
        let epoch = *self.epoch.get_or_insert(now);
        let width = (window.as_nanos() / u128::from(SLOTS)).max(1);
        u64::try_from(now.saturating_duration_since(epoch).as_nanos() / width).unwrap_or(u64::MAX)
    }

    fn record(&mut self, ok: bool, now: Instant, window: Duration) {
        let slot = self.slot(now, window);
        let entry = &mut self.slots[(slot % SLOTS) as usize];
        if entry.0 != slot || (entry.1, entry.2) == (0, 0) {
            *entry = (slot, 0, 0);
        }
        match ok {
            true => entry.1 = entry.1.saturating_add(1),
            false => entry.2 = entry.2.saturating_add(1),
        }
    }

    /// (succeeded, failed) over the window ending now.
    fn counts(&mut self, now: Instant, window: Duration) -> (u32, u32) {
        let current = self.slot(now, window);
        self.slots
            .iter()
            .filter(|(slot, ..)| *slot + SLOTS > current && *slot <= current)
            .fold((0u32, 0u32), |(ok, failed), (_, o, f)| (ok.saturating_add(*o), failed.saturating_add(*f)))
    }
}

/// The state of one plugin's calls.
#[derive(Debug, Clone, Default)]
pub struct Health {
    window: Window,
    /// Since when the failure rate has been at or above the policy's, and the failures since;
    /// none while below.
    failing_since: Option<Instant>,
    failures: u32,
    quarantine: Option<Quarantine>,
    /// The probe interval and the time of the last lift: a plugin quarantined again within
    /// that interval of a lift resumes its backoff instead of starting over.
    lifted: Option<(Instant, Duration)>,
    /// When the last call was recorded.
    last_call: Option<Instant>,
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

    /// Records how a guest call ended (`ok`: it returned a response; not `ok`: it trapped, ran
    /// past its deadline, broke a limit or returned an error).
    pub fn record(&mut self, ok: bool, now: Instant, policy: &Policy) -> Option<Transition> {
        self.window.record(ok, now, policy.after);
        // A spell of failing is unbroken only while calls keep coming: after a silence longer
        // than the window, old failures no longer count towards a quarantine.
        if self.last_call.is_some_and(|last| now.duration_since(last) > policy.after) {
            self.failing_since = None;
            self.failures = 0;
        }
        self.last_call = Some(now);
        if let Some(quarantine) = &mut self.quarantine {
            // Only the probe's success lifts it: a call admitted before the quarantine began
            // says nothing of whether the plugin has healed since.
            if ok && quarantine.probing_since.is_some() {
                let interval = quarantine.interval;
                self.quarantine = None;
                self.failing_since = None;
                self.failures = 0;
                self.window = Window::default();
                self.lifted = Some((now, interval));
                return Some(Transition::Lifted);
            }
            if !ok && quarantine.probing_since.take().is_some() {
                // The probe failed: wait twice as long for the next.
                quarantine.interval = (quarantine.interval * 2).min(policy.max_probe);
                quarantine.next_probe = now + quarantine.interval;
            }
            return None;
        }
        let (succeeded, failed) = self.window.counts(now, policy.after);
        let calls = u64::from(succeeded) + u64::from(failed);
        let failing = u64::from(failed) * 100 >= u64::from(policy.failure_percent) * calls && failed > 0;
        if !failing {
            self.failing_since = None;
            self.failures = 0;
            return None;
        }
        let since = *self.failing_since.get_or_insert(now);
        self.failures = self.failures.saturating_add(u32::from(!ok));
        if now.duration_since(since) < policy.after || self.failures < policy.min_failures {
            return None;
        }
        let interval = match self.lifted {
            Some((at, interval)) if now.duration_since(at) <= policy.after + interval => {
                (interval * 2).min(policy.max_probe)
            }
            _ => policy.first_probe,
        };
        let reason = format!(
            "{failed} of its last {calls} calls failed ({}%), {} since it began failing {} s ago; one probe call every {} s until one succeeds",
            u64::from(failed) * 100 / calls,
            self.failures,
            now.duration_since(since).as_secs(),
            interval.as_secs()
        );
        self.quarantine =
            Some(Quarantine { reason: reason.clone(), next_probe: now + interval, interval, probing_since: None });
        Some(Transition::Entered(reason))
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
            failure_percent: 50,
            first_probe: Duration::from_secs(5),
            max_probe: Duration::from_secs(20),
        }
    }

    /// A plugin quarantined by three failures at 0, 30 and 60 s, under [`policy`].
    fn quarantined_at_60_s() -> (Instant, Policy, Health) {
        let (start, p) = (Instant::now(), policy());
        let mut health = Health::default();
        for s in [0, 30, 60] {
            health.record(false, start + Duration::from_secs(s), &p);
        }
        assert!(health.quarantined().is_some());
        (start, p, health)
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
        let cases: [(&str, &[(u64, bool)], bool); 8] = [
            ("failing for 60 s, 3 times", &[(0, false), (30, false), (60, false)], true),
            ("failing for 59 s", &[(0, false), (30, false), (59, false)], false),
            ("failing for long, but twice", &[(0, false), (600, false)], false),
            (
                "a success among failures resets nothing",
                &[(0, false), (30, true), (40, false), (50, false), (61, false)],
                true,
            ),
            ("half the calls fail, for a minute", &[(0, false), (1, true), (30, false), (31, true), (60, false)], true),
            (
                "a third of the calls fail",
                &[
                    (0, false),
                    (1, true),
                    (2, true),
                    (30, false),
                    (31, true),
                    (32, true),
                    (60, false),
                    (61, true),
                    (62, true),
                ],
                false,
            ),
            ("all successes", &[(0, true), (100, true)], false),
            (
                "failures that drop below the rate start the count again",
                &[(0, false), (1, true), (2, true), (3, true), (40, false), (70, false), (99, false)],
                false,
            ),
        ];
        for (what, calls, quarantined) in cases {
            let (transitions, ends) = run(calls);
            assert_eq!(ends, quarantined, "{what}");
            assert_eq!(entered(&transitions), quarantined, "{what}: {transitions:?}");
        }
    }

    #[test]
    fn a_quarantined_plugin_gets_one_probe_per_interval_and_others_wait_for_it() {
        let (start, p, mut health) = quarantined_at_60_s();
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
        let (start, _, mut health) = quarantined_at_60_s();
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(health.admit(at(65)), Admission::Probe);
        assert_eq!(health.admit(at(70)), Admission::Probe);
    }

    #[test]
    fn a_successful_call_lifts_the_quarantine_and_every_key_is_admitted() {
        let (start, p, mut health) = quarantined_at_60_s();
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(health.admit(at(65)), Admission::Probe);
        assert_eq!(health.record(true, at(65), &p), Some(Transition::Lifted));
        assert_eq!(health.quarantined(), None);
        assert_eq!(health.admit(at(65)), Admission::Call);
        // And it takes a full new spell of failures to be quarantined again.
        assert_eq!(health.record(false, at(66), &p), None);
    }

    #[test]
    fn only_the_probes_success_lifts_a_quarantine_not_a_call_admitted_before_it() {
        let (start, p, mut health) = quarantined_at_60_s();
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(health.record(true, at(61), &p), None, "a call from before the quarantine");
        assert!(health.quarantined().is_some());
        assert_eq!(health.admit(at(65)), Admission::Probe);
        assert_eq!(health.record(true, at(65), &p), Some(Transition::Lifted));
    }

    #[test]
    fn failures_before_a_silence_longer_than_the_window_do_not_count() {
        let (start, p) = (Instant::now(), policy());
        let at = |s: u64| start + Duration::from_secs(s);
        let mut health = Health::default();
        for s in [0, 10, 20, 30] {
            health.record(false, at(s), &p);
        }
        assert_eq!(health.record(false, at(4000), &p), None, "one failure after hours of silence");
        assert!(health.quarantined().is_none());
    }

    #[test]
    fn a_plugin_that_fails_99_calls_in_100_is_quarantined_though_it_never_fails_twice_in_a_row_unseen() {
        let (start, p) = (Instant::now(), policy());
        let mut health = Health::default();
        let mut entered = false;
        for i in 0..200u64 {
            let at = start + Duration::from_millis(i * 500);
            entered |= matches!(health.record(i % 100 == 0, at, &p), Some(Transition::Entered(_)));
        }
        assert!(
            entered && health.quarantined().is_some_and(|r| r.contains("calls failed")),
            "{:?}",
            health.quarantined()
        );
    }

    #[test]
    fn a_plugin_quarantined_again_soon_after_a_lift_resumes_its_backoff() {
        let (start, p, mut health) = quarantined_at_60_s();
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(health.admit(at(65)), Admission::Probe);
        health.record(false, at(65), &p);
        assert_eq!(health.admit(at(75)), Admission::Probe);
        assert_eq!(health.record(true, at(75), &p), Some(Transition::Lifted));
        // Failing again at once: quarantined again after another window, with twice the interval.
        for s in [76, 100, 136] {
            health.record(false, at(s), &p);
        }
        assert!(health.quarantined().is_some());
        assert_eq!(health.admit(at(137)), Admission::Defer(Duration::from_secs(19)), "20 s, not the first 5 s");
    }

    #[test]
    fn the_window_holds_constant_memory_and_forgets_calls_older_than_it() {
        let (start, p) = (Instant::now(), policy());
        let mut window = Window::default();
        for i in 0..100_000u64 {
            window.record(false, start + Duration::from_millis(i), p.after);
        }
        assert_eq!(
            window.counts(start + Duration::from_millis(99_999), p.after).1,
            60_000,
            "the last 60 s: 12 slots of 5 s"
        );
        assert_eq!(window.counts(start + Duration::from_secs(300), p.after), (0, 0));
    }
}
