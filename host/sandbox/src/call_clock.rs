//! A call's deadline, which stops while the host makes the guest wait.
//!
//! A call's deadline is the time its guest may take: computing, or waiting in a host call (a
//! WASI clock, a poll). Time the host makes it wait for the host's own sake (for room in the
//! guest memory budget, for its turn at the CPU) is not the guest's: it would fail a plugin
//! for its neighbours' load. So those waits move the deadline out by as long as they took.
//! A call still ends: every such wait is bounded, and only guest time counts.
//!
//! Its instants are tokio's, so that tests with a paused clock see what the guest would.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// When a call must end, paused by the host's waits.
#[derive(Debug)]
pub(crate) struct CallClock {
    started: Instant,
    limit: Duration,
    paused: Mutex<Paused>,
}

#[derive(Debug, Default)]
struct Paused {
    /// Waits that ended.
    total: Duration,
    /// The wait under way, since when.
    since: Option<Instant>,
}

/// While this lives, the call's clock is stopped.
pub(crate) struct Hold<'a> {
    clock: &'a CallClock,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        let mut paused = self.clock.paused();
        if let Some(since) = paused.since.take() {
            paused.total += since.elapsed();
        }
    }
}

/// How often a call waiting on the host looks at its clock again.
const WHILE_HELD: Duration = Duration::from_millis(10);

impl CallClock {
    /// A clock started now, with `limit` of guest time.
    pub(crate) fn start(limit: Duration) -> CallClock {
        CallClock { started: Instant::now(), limit, paused: Mutex::default() }
    }

    fn paused(&self) -> std::sync::MutexGuard<'_, Paused> {
        self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops the clock while the host makes the guest wait, until the hold drops.
    pub(crate) fn hold(&self) -> Hold<'_> {
        self.paused().since.get_or_insert_with(Instant::now);
        Hold { clock: self }
    }

    /// How long the host made the guest wait, in all.
    pub(crate) fn waited(&self) -> Duration {
        let paused = self.paused();
        paused.total + paused.since.map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// When the call must end, as things stand (a wait under way counts to now).
    pub(crate) fn deadline(&self) -> Instant {
        self.started + self.limit + self.waited()
    }

    /// Whether the guest has had its time by `now`; never while the host holds it.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.paused().since.is_none() && now >= self.deadline()
    }

    /// Runs `work` until it ends or the deadline passes (none then); a hold moves the end.
    pub(crate) async fn within<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        let mut work = std::pin::pin!(work);
        loop {
            let held = self.paused().since.is_some();
            let wake = if held { Instant::now() + WHILE_HELD } else { self.deadline() };
            tokio::select! {
                biased;
                out = &mut work => return Some(out),
                () = tokio::time::sleep_until(wake) => {
                    if self.expired(Instant::now()) {
                        return None;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_past_the_deadline_is_stopped() {
        let clock = CallClock::start(Duration::from_secs(1));
        let out = clock.within(tokio::time::sleep(Duration::from_secs(5))).await;
        assert_eq!(out, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_moves_the_deadline_out_by_as_long() {
        let clock = CallClock::start(Duration::from_secs(1));
        let work = async {
            tokio::time::sleep(Duration::from_millis(900)).await;
            // The host made the guest wait two seconds.
            {
                let _held = clock.hold();
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            "done"
        };
        assert_eq!(clock.within(work).await, Some("done"));
        assert_eq!(clock.waited(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn guest_time_after_a_hold_still_runs_out() {
        let clock = CallClock::start(Duration::from_secs(1));
        let work = async {
            {
                let _held = clock.hold();
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        };
        let started = Instant::now();
        assert_eq!(clock.within(work).await, None);
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }
}
