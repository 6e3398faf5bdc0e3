//! A call's deadline, which stops while the host makes the guest wait.
//!
//! A call's deadline is the time its guest may take: computing, or waiting in a host call (a
//! WASI clock, a poll). Time the host makes it wait for the host's own sake (for room in the
//! guest memory budget, for its turn at the CPU) is not the guest's: it would fail a plugin
//! for its neighbours' load. So those waits move the deadline out by as long as they took.
//! A call still ends: its guest time is bounded by the deadline, and the host's waits, in all,
//! by [`MAX_HELD`], past which the call ends as the host's failure, not the guest's.
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

/// The longest the host may make one call wait, in all: a call that the host cannot give
/// room or time within it ends, so that it does not hold its instance and memory on and on.
pub(crate) const MAX_HELD: Duration = Duration::from_secs(60);

/// How a call that did not finish ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The guest had its time.
    Deadline,
    /// The host made it wait past [`MAX_HELD`].
    Held(Duration),
}

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

    /// Runs `work` until it ends, the deadline passes, or the host's waits pass [`MAX_HELD`];
    /// a hold moves the deadline.
    pub(crate) async fn within<T>(&self, work: impl Future<Output = T>) -> Result<T, Ended> {
        let mut work = std::pin::pin!(work);
        loop {
            let held = self.paused().since.is_some();
            let wake = if held { Instant::now() + WHILE_HELD } else { self.deadline() };
            tokio::select! {
                biased;
                out = &mut work => return Ok(out),
                () = tokio::time::sleep_until(wake) => {
                    let waited = self.waited();
                    if waited > MAX_HELD {
                        return Err(Ended::Held(waited));
                    }
                    if self.expired(Instant::now()) {
                        return Err(Ended::Deadline);
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
        assert_eq!(out, Err(Ended::Deadline));
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
        assert_eq!(clock.within(work).await, Ok("done"));
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
        assert_eq!(clock.within(work).await, Err(Ended::Deadline));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_the_host_holds_past_its_bound_ends_as_the_hosts() {
        let clock = CallClock::start(Duration::from_secs(1));
        let work = async {
            let _held = clock.hold();
            std::future::pending::<()>().await;
        };
        assert!(matches!(clock.within(work).await, Err(Ended::Held(waited)) if waited > MAX_HELD));
    }
}
