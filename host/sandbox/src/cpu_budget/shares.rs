//! Who may run guest code now: the host's CPU budget shared among the plugins with calls
//! running, as a pure state machine over epoch ticks. The shell (`super`) charges the guest time
//! of every call here at each epoch tick (and the host's time in its imports), and makes a call
//! that must wait yield until then.
//!
//! Each plugin has a meter: a token bucket over time (GCRA's "theoretical arrival time": when
//! what it ran is paid for at its rate), with a burst of an eighth of a 100 ms window. Its rate
//! is its share of `capacity` ticks per window (the pod's CPU quota less the host's reserve),
//! weighted among the plugins computing (a call open that ran guest code within a window: one
//! asleep on a clock takes no share). A plugin alone has all of it; the shares add up to it.
//! A rate, not a count per window: the kernel counts the quota over every span of a period,
//! so a burst at the end of one window and another at the start of the next would get the
//! whole pod throttled. A plugin within its rate never waits, however much others ran.
//!
//! So one that spins, even within every per-call limit, cannot take more than its share from
//! the others, nor the host's reserve from the host (its watches, its Lease renewals).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::memory_budget::Account;

/// What a charged tick is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Go on.
    Run,
    /// Past its rate: wait until then.
    WaitUntil(Instant),
}

#[derive(Debug, Clone, Copy)]
struct Running {
    calls: u32,
    weight: u32,
}

/// One plugin's meter.
#[derive(Debug, Clone, Copy)]
struct Meter {
    /// When what it ran is paid for, at its share's rate.
    paid: Instant,
    /// When it last ran guest code.
    ran: Instant,
}

/// The books. See the module documentation.
#[derive(Debug)]
pub(crate) struct Shares {
    capacity: u64,
    window: Duration,
    meters: HashMap<Account, Meter>,
    running: HashMap<Account, Running>,
}

impl Shares {
    /// `capacity` ticks of guest code per `window`, at least one.
    pub(crate) fn new(capacity: u64, window: Duration) -> Shares {
        Shares { capacity: capacity.max(1), window, meters: HashMap::new(), running: HashMap::new() }
    }

    /// How far ahead of now what was run may be paid for: the burst.
    fn burst(&self) -> Duration {
        self.window / 8
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
        let burst = self.burst();
        // The meters of plugins that neither run nor ran lately owe nothing any more.
        let (window, running) = (self.window, &self.running);
        self.meters.retain(|a, meter| running.contains_key(a) || meter.ran + window > now);
        let rate = self.share(account, now);
        let cost = self.window.mul_f64(ticks as f64 / rate.max(1) as f64);
        let meter = self.meters.entry(account.clone()).or_insert(Meter { paid: now, ran: now });
        meter.paid = meter.paid.max(now) + cost;
        meter.ran = now;
        if meter.paid > now + burst {
            return Verdict::WaitUntil(meter.paid - burst);
        }
        Verdict::Run
    }

    /// Whether `account` has a call open that ran guest code within a window of `now`.
    fn computing(&self, account: &Account, now: Instant) -> bool {
        self.running.contains_key(account) && self.meters.get(account).is_some_and(|m| m.ran + self.window > now)
    }

    /// `account`'s share, in ticks per window: the capacity weighted among it and the plugins
    /// computing.
    fn share(&self, account: &Account, now: Instant) -> u64 {
        let weight = |r: &Running| u64::from(r.weight);
        let mine = self.running.get(account).map_or(1, weight);
        let others: u64 =
            self.running.iter().filter(|(a, _)| *a != account && self.computing(a, now)).map(|(_, r)| weight(r)).sum();
        (self.capacity * mine).div_ceil(mine + others)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const WINDOW: Duration = Duration::from_millis(100);
    const MS: Duration = Duration::from_millis(1);

    fn account(name: &str) -> Account {
        Arc::from(name)
    }

    /// Runs `who` one tick at a time for `span`, each charged once it ran and followed by the
    /// wait it is told: how many ticks it ran.
    fn ran_within(shares: &mut Shares, who: &Account, start: Instant, span: Duration) -> u64 {
        let (mut now, mut ran) = (start, 0);
        while now < start + span {
            now += MS;
            ran += 1;
            if let Verdict::WaitUntil(until) = shares.charge(who, 1, now) {
                now = now.max(until);
            }
        }
        ran
    }

    #[test]
    fn a_plugin_alone_runs_at_the_budgets_rate_over_any_span() {
        let mut shares = Shares::new(75, WINDOW);
        let (a, now) = (account("a"), Instant::now());
        shares.enter(&a, 1);
        let ran = ran_within(&mut shares, &a, now, WINDOW * 10);
        assert!((750..=770).contains(&ran), "75 a window over ten, and one burst: {ran}");
        // Over any span of a window (the kernel's period), at most 75 and the burst.
        let ran = ran_within(&mut shares, &a, now + WINDOW * 10, WINDOW);
        assert!(ran <= 75 + 13, "{ran}");
    }

    #[test]
    fn a_burst_is_an_eighth_of_a_window_then_the_rate_holds() {
        let mut shares = Shares::new(80, WINDOW);
        let (a, now) = (account("a"), Instant::now());
        shares.enter(&a, 1);
        // At one instant: 1.25 ms a tick, 12.5 ms of burst.
        let at_once = (1..).find(|_| shares.charge(&a, 1, now) != Verdict::Run).unwrap() - 1;
        assert_eq!(at_once, 10);
    }

    #[test]
    fn with_another_plugin_computing_each_gets_its_share() {
        let mut shares = Shares::new(80, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 1);
        shares.enter(&b, 1);
        let (mut t, mut ran_a, mut ran_b) = (now, 0u64, 0u64);
        let (mut wait_a, mut wait_b) = (now, now);
        while t < now + WINDOW * 10 {
            if t >= wait_a {
                match shares.charge(&a, 1, t) {
                    Verdict::Run => ran_a += 1,
                    Verdict::WaitUntil(until) => wait_a = until,
                }
            }
            if t >= wait_b {
                match shares.charge(&b, 1, t) {
                    Verdict::Run => ran_b += 1,
                    Verdict::WaitUntil(until) => wait_b = until,
                }
            }
            t += MS;
        }
        assert!(ran_a.abs_diff(ran_b) <= 12, "even halves: {ran_a} and {ran_b}");
        assert!(ran_a + ran_b <= 800 + 30, "within the budget: {}", ran_a + ran_b);
    }

    #[test]
    fn shares_follow_the_weights() {
        let mut shares = Shares::new(80, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 3);
        shares.enter(&b, 1);
        shares.charge(&a, 1, now);
        shares.charge(&b, 1, now);
        assert_eq!(shares.share(&a, now), 60);
        assert_eq!(shares.share(&b, now), 20);
    }

    #[test]
    fn a_plugin_whose_calls_only_sleep_takes_no_share() {
        let mut shares = Shares::new(80, WINDOW);
        let (a, sleeper, now) = (account("a"), account("sleeper"), Instant::now());
        shares.enter(&a, 1);
        shares.enter(&sleeper, 1);
        assert_eq!(shares.share(&a, now), 80, "the sleeper ran no guest code");
        shares.charge(&sleeper, 1, now);
        assert_eq!(shares.share(&a, now), 40, "now it computes");
        assert_eq!(shares.share(&a, now + WINDOW * 2), 80, "and then slept a window");
    }

    #[test]
    fn a_plugin_within_its_share_runs_though_the_other_spent_the_budget() {
        let mut shares = Shares::new(80, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 1);
        assert!(ran_within(&mut shares, &a, now, WINDOW) > 80, "alone, a takes it all");
        shares.enter(&b, 1);
        // b, within its half, runs at once; a, past it, waits.
        let later = now + WINDOW;
        assert_eq!(shares.charge(&b, 1, later), Verdict::Run);
        assert!(matches!(shares.charge(&a, 1, later), Verdict::WaitUntil(until) if until > later));
    }

    #[test]
    fn all_calls_of_a_plugin_draw_from_one_meter() {
        let mut shares = Shares::new(80, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        for _ in 0..4 {
            shares.enter(&a, 1);
        }
        shares.enter(&b, 1);
        shares.charge(&b, 1, now);
        assert_eq!(shares.share(&a, now), 40, "four calls, one half");
    }

    #[test]
    fn a_plugin_that_left_no_longer_holds_a_share() {
        let mut shares = Shares::new(80, WINDOW);
        let (a, b, now) = (account("a"), account("b"), Instant::now());
        shares.enter(&a, 1);
        shares.enter(&b, 1);
        shares.charge(&b, 1, now);
        shares.leave(&b);
        assert_eq!(shares.share(&a, now), 80);
    }
}
