//! Who may run guest code now: the host's CPU budget shared among the plugins with calls
//! running, as a pure state machine over epoch ticks. The shell (`super`) charges every tick of
//! guest code (and the host's time in imports) here, and makes a call that must wait yield
//! until its window ends.
//!
//! Time is cut into windows (100 ms, the kernel's own CFS period, by default). In each, the
//! guests together may run `capacity` ticks: the pod's CPU quota less the host's reserve. A
//! plugin alone may take all of it; with others computing (a call open that ran guest code in
//! this window or the last: one asleep on a clock takes no share), each may take its weighted
//! share, and a plugin past its share waits for the next window while another has work. A plugin
//! within its share never waits: so one that spins, even within every per-call limit, cannot
//! take more than its share from the others, nor the host's reserve from the host (its
//! watches, its Lease renewals).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::memory_budget::Account;

/// What a charged tick is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Go on.
    Run,
    /// Past its share: wait until then.
    WaitUntil(Instant),
}

#[derive(Debug, Clone, Copy)]
struct Running {
    calls: u32,
    weight: u32,
}

/// The books of the current window. See the module documentation.
#[derive(Debug)]
pub(crate) struct Shares {
    capacity: u64,
    window: Duration,
    started: Option<Instant>,
    used: HashMap<Account, u64>,
    /// The plugins that ran guest code in the last window.
    before: HashSet<Account>,
    running: HashMap<Account, Running>,
}

impl Shares {
    /// `capacity` ticks of guest code per `window`, at least one.
    pub(crate) fn new(capacity: u64, window: Duration) -> Shares {
        Shares {
            capacity: capacity.max(1),
            window,
            started: None,
            used: HashMap::new(),
            before: HashSet::new(),
            running: HashMap::new(),
        }
    }

    /// A call of `account` starts running, with the plugin's `weight` (at least 1).
    pub(crate) fn enter(&mut self, account: &Account, weight: u32) {
        let running = self.running.entry(account.clone()).or_insert(Running { calls: 0, weight: 1 });
        running.calls += 1;
        running.weight = weight.max(1);
    }

    /// A call of `account` ends.
    pub(crate) fn leave(&mut self, account: &Account) {
        if let Some(running) = self.running.get_mut(account) {
            running.calls -= 1;
            if running.calls == 0 {
                self.running.remove(account);
            }
        }
    }

    /// Charges `ticks` of `account`'s guest code at `now`.
    pub(crate) fn charge(&mut self, account: &Account, ticks: u64, now: Instant) -> Verdict {
        let mut started = *self.started.get_or_insert(now);
        if now >= started + self.window {
            // A new window. Windows keep their phase, so a plugin held to a share runs the same
            // fraction of every span of one window's length, as the kernel's quota counts.
            let behind = now.duration_since(started).as_nanos() / self.window.as_nanos().max(1);
            started += self.window * u32::try_from(behind).unwrap_or(u32::MAX);
            self.started = Some(started);
            // Only the window just ended counts as the last: after an idle spell, nobody.
            self.before =
                if behind == 1 { self.used.drain().map(|(account, _)| account).collect() } else { HashSet::new() };
            self.used.clear();
        }
        let ends = started + self.window;
        let used = self.used.entry(account.clone()).or_default();
        *used = used.saturating_add(ticks);
        let used = *used;
        let others = self.running.keys().any(|other| other != account && self.computing(other));
        let total: u64 = self.used.values().sum();
        if used > self.share(account) && (others || total > self.capacity) {
            return Verdict::WaitUntil(ends);
        }
        Verdict::Run
    }

    /// Whether `account` has a call open that ran guest code in this window or the last.
    fn computing(&self, account: &Account) -> bool {
        self.running.contains_key(account) && (self.used.contains_key(account) || self.before.contains(account))
    }

    /// `account`'s share of a window: the capacity weighted among it and the plugins computing.
    fn share(&self, account: &Account) -> u64 {
        let weight = |r: &Running| u64::from(r.weight);
        let mine = self.running.get(account).map_or(1, weight);
        let others: u64 =
            self.running.iter().filter(|(a, _)| *a != account && self.computing(a)).map(|(_, r)| weight(r)).sum();
        // Past the fraction, not before: a share of 7.5 ticks lets the eighth tick run.
        (self.capacity * mine).div_ceil(mine + others)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const WINDOW: Duration = Duration::from_millis(100);

    fn account(name: &str) -> Account {
        Arc::from(name)
    }

    /// Charges one tick at a time until the first wait: how many ran.
    fn ticks_before_wait(shares: &mut Shares, who: &Account, now: Instant) -> u64 {
        (1..).find(|_| shares.charge(who, 1, now) != Verdict::Run).unwrap() - 1
    }

    #[test]
    fn a_plugin_alone_may_use_the_whole_capacity_and_then_waits_for_the_next_window() {
        let mut shares = Shares::new(15, WINDOW);
        let (a, now) = (account("a"), Instant::now());
        shares.enter(&a, 1);
        assert_eq!(ticks_before_wait(&mut shares, &a, now), 15);
        assert_eq!(shares.charge(&a, 1, now), Verdict::WaitUntil(now + WINDOW));
        assert_eq!(shares.charge(&a, 1, now + WINDOW), Verdict::Run, "a new window");
    }

    #[test]
    fn with_another_plugin_computing_a_plugin_gets_its_share_and_the_other_never_waits() {
        let mut shares = Shares::new(16, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 1);
        shares.enter(&b, 1);
        shares.charge(&b, 1, now);
        assert_eq!(ticks_before_wait(&mut shares, &a, now), 8);
        assert_eq!(ticks_before_wait(&mut shares, &b, now), 7, "one ran already");
    }

    #[test]
    fn a_plugin_whose_calls_only_sleep_takes_no_share() {
        let mut shares = Shares::new(16, WINDOW);
        let (a, sleeper, now) = (account("a"), account("sleeper"), Instant::now());
        shares.enter(&a, 1);
        shares.enter(&sleeper, 1);
        assert_eq!(ticks_before_wait(&mut shares, &a, now), 16, "the sleeper ran no guest code");
    }

    #[test]
    fn a_plugin_that_computed_in_the_last_window_keeps_its_share() {
        let mut shares = Shares::new(16, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 1);
        shares.enter(&b, 1);
        shares.charge(&b, 1, now);
        assert_eq!(ticks_before_wait(&mut shares, &a, now + WINDOW), 8, "b computed in the last window");
    }

    #[test]
    fn shares_follow_the_weights() {
        let mut shares = Shares::new(16, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 3);
        shares.enter(&b, 1);
        shares.charge(&b, 1, now);
        assert_eq!(ticks_before_wait(&mut shares, &a, now), 12);
        assert_eq!(ticks_before_wait(&mut shares, &b, now), 3, "one ran already");
    }

    #[test]
    fn a_plugin_within_its_share_runs_even_when_the_window_is_spent() {
        let mut shares = Shares::new(10, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 1);
        assert_eq!(ticks_before_wait(&mut shares, &a, now), 10, "alone, a takes it all");
        shares.enter(&b, 1);
        assert_eq!(shares.charge(&b, 1, now), Verdict::Run);
        assert_eq!(shares.charge(&a, 1, now), Verdict::WaitUntil(now + WINDOW), "b computes now");
    }

    #[test]
    fn all_calls_of_a_plugin_draw_from_one_share() {
        let mut shares = Shares::new(16, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        for _ in 0..4 {
            shares.enter(&a, 1);
        }
        shares.enter(&b, 1);
        shares.charge(&b, 1, now);
        assert_eq!(ticks_before_wait(&mut shares, &a, now), 8, "four calls, one half");
    }

    #[test]
    fn a_plugin_that_left_no_longer_holds_a_share() {
        let mut shares = Shares::new(16, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 1);
        shares.enter(&b, 1);
        shares.charge(&b, 1, now);
        shares.leave(&b);
        assert_eq!(ticks_before_wait(&mut shares, &a, now), 16, "alone again, a may take it all");
    }

    #[test]
    fn windows_keep_their_phase_after_an_idle_spell() {
        let mut shares = Shares::new(1, WINDOW);
        let (a, start) = (account("a"), Instant::now());
        shares.enter(&a, 1);
        shares.charge(&a, 1, start);
        let later = start + WINDOW * 7 + Duration::from_millis(30);
        assert_eq!(shares.charge(&a, 1, later), Verdict::Run);
        assert_eq!(shares.charge(&a, 1, later), Verdict::WaitUntil(start + WINDOW * 8));
    }
}
