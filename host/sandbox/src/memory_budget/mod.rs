//! The host's guest memory budget: the linear memories of every instance alive, across every
//! plugin, held to one number of bytes, sized from what the host's pod may use.
//!
//! A plugin's own ceiling ([`crate::Limits::memory_bytes`]) bounds one instance; the pool
//! bounds how many instances exist. Neither bounds their product: two plugins, each within
//! its settings, could fill more than the pod has, and the kernel would kill the host and
//! every tenant's controllers with it. So every growth of every instance's memory (its
//! initial size included) is charged here first, through the Store's limiter.
//!
//! A growth that does not fit waits for room (see [`ledger`] for who goes first), up to a
//! bound; the wait is the host's time, not the guest's, so it does not count against the
//! call's deadline. A call that cannot get room fails as host pressure
//! ([`crate::CallFailure::HostPressure`]), which is never counted against the plugin: its key
//! comes back later.
//!
//! A plugin whose own limits could not fit is cut to fit when it starts (`Limits::fit`: its
//! memory limit plus its response limit, times its workers, within the three quarters of the
//! budget one plugin may hold), and the cut is reported on its status. The budget counts
//! linear memories only: the host's copies of what a call returns are bounded by that fit,
//! not charged as they are made, and compiler working memory and components being loaded sit
//! in the host's reserve. Its size comes from the pod's limits (`host/src/pod_limits.rs`).
//!
//! ```
//! use std::time::Duration;
//! use wasmloop_sandbox::MemoryBudget;
//!
//! let budget = MemoryBudget::new(384 << 20, Duration::from_secs(30));
//! assert_eq!((budget.total(), budget.used(), budget.waiting()), (384 << 20, 0, 0));
//! ```

mod ledger;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::oneshot;

pub(crate) use ledger::Account;
use ledger::{Ask, CallId, Ledger, Moves};

/// The memory all guests together may hold; cheap to clone, and shared by every plugin of a
/// sandbox.
#[derive(Clone)]
pub struct MemoryBudget {
    shared: Arc<Shared>,
}

struct Shared {
    books: Mutex<Books>,
    max_wait: Duration,
}

struct Books {
    ledger: Ledger,
    /// The calls in line, to wake.
    wakes: HashMap<CallId, oneshot::Sender<Wake>>,
}

#[derive(Debug)]
enum Wake {
    Granted,
    GaveWay,
}

/// Why a growth was refused for the host's sake, not the plugin's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pressure {
    /// No room came within the wait's bound.
    Waited(Duration),
    /// The call gave way: every call holding memory waited for more, and it was the youngest.
    GaveWay,
    /// The host made the call wait this long in all, for memory or its CPU share, past what one
    /// call may be held.
    Held(Duration),
    /// The call alone would hold more than one plugin may of the budget: not the host's
    /// pressure but a limit of the plugin's, which the limiter reports as its memory limit.
    Never {
        /// The budget.
        total: u64,
    },
}

impl std::fmt::Display for Pressure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pressure::Waited(waited) => {
                write!(f, "no room in the host's guest memory budget within {} ms", waited.as_millis())
            }
            Pressure::GaveWay => f.write_str(
                "the host's guest memory budget is held by calls that each wait for more; this one gave way",
            ),
            Pressure::Held(waited) => write!(
                f,
                "the host made the call wait {} s in all for memory or its CPU share, and ended it",
                waited.as_secs()
            ),
            Pressure::Never { total } => write!(
                f,
                "one call would hold more than a plugin may of the host's guest memory budget of {} MiB",
                total >> 20
            ),
        }
    }
}

impl MemoryBudget {
    /// A budget of `total` bytes, where a growth waits at most `max_wait` for room.
    pub fn new(total: u64, max_wait: Duration) -> MemoryBudget {
        let books = Books { ledger: Ledger::new(total), wakes: HashMap::new() };
        MemoryBudget { shared: Arc::new(Shared { books: Mutex::new(books), max_wait }) }
    }

    /// The budget, in bytes.
    pub fn total(&self) -> u64 {
        self.shared.books().ledger.total()
    }

    /// The bytes the calls alive now hold.
    pub fn used(&self) -> u64 {
        self.shared.books().ledger.used()
    }

    /// Calls waiting for room now.
    pub fn waiting(&self) -> usize {
        self.shared.books().ledger.waiting()
    }

    /// Opens the account of one call of plugin `account`; it is closed, and all it holds
    /// released, when the charge is dropped with the call's Store.
    pub(crate) fn open(&self, account: Account) -> Charge {
        let id = self.shared.books().ledger.open(account);
        Charge { shared: self.shared.clone(), id, waits: 0, waited: Duration::ZERO }
    }
}

impl Shared {
    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Books {
    fn deliver(&mut self, moves: Moves) {
        let wakes = moves.granted.into_iter().map(|id| (id, Wake::Granted));
        for (id, wake) in wakes.chain(moves.given_up.into_iter().map(|id| (id, Wake::GaveWay))) {
            if let Some(sender) = self.wakes.remove(&id) {
                // A receiver gone is a call gone: its close follows.
                let _ = sender.send(wake);
            }
        }
    }
}

/// One call's account with the budget.
pub(crate) struct Charge {
    shared: Arc<Shared>,
    id: CallId,
    waits: u32,
    waited: Duration,
}

impl Charge {
    /// Grows the call's holding by `bytes`, waiting for room when there is none.
    pub(crate) async fn grow(&mut self, bytes: u64) -> Result<(), Pressure> {
        let (ask, woken) = {
            let mut books = self.shared.books();
            let (ask, moves) = books.ledger.ask(self.id, bytes);
            let woken = (ask == Ask::Queued).then(|| {
                let (sender, receiver) = oneshot::channel();
                books.wakes.insert(self.id, sender);
                receiver
            });
            books.deliver(moves);
            (ask, woken)
        };
        let total = || self.shared.books().ledger.total();
        let Some(mut woken) = woken else {
            return match ask {
                Ask::Granted => Ok(()),
                _ => Err(Pressure::Never { total: total() }),
            };
        };
        let started = Instant::now();
        self.waits += 1;
        let wake = match tokio::time::timeout(self.shared.max_wait, &mut woken).await {
            Ok(wake) => Some(wake.unwrap_or(Wake::GaveWay)),
            Err(_) => self.stop_waiting(&mut woken),
        };
        let waited = started.elapsed();
        self.waited += waited;
        match wake {
            Some(Wake::Granted) => Ok(()),
            Some(Wake::GaveWay) => Err(Pressure::GaveWay),
            None => Err(Pressure::Waited(waited)),
        }
    }

    /// Leaves the line when the wait ran out: none. A wake that came as it ran out stands.
    fn stop_waiting(&self, woken: &mut oneshot::Receiver<Wake>) -> Option<Wake> {
        let mut books = self.shared.books();
        if books.wakes.remove(&self.id).is_none() {
            return Some(woken.try_recv().unwrap_or(Wake::GaveWay));
        }
        let moves = books.ledger.give_up(self.id);
        books.deliver(moves);
        None
    }

    /// How many growths waited, and for how long in all.
    pub(crate) fn waits(&self) -> (u32, Duration) {
        (self.waits, self.waited)
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut books = self.shared.books();
        books.wakes.remove(&self.id);
        let moves = books.ledger.close(self.id);
        books.deliver(moves);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[tokio::test(start_paused = true)]
    async fn a_waiting_growth_is_granted_when_a_call_ends() {
        let budget = MemoryBudget::new(100 * MIB, Duration::from_secs(30));
        let mut first = budget.open(Arc::from("a"));
        let mut second = budget.open(Arc::from("a"));
        first.grow(70 * MIB).await.unwrap();
        let waiting = tokio::spawn(async move { second.grow(50 * MIB).await.map(|()| second) });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(budget.waiting(), 1);
        drop(first);
        let second = waiting.await.unwrap().expect("granted once the first call ended");
        assert_eq!(second.waits().0, 1);
        assert_eq!(budget.used(), 50 * MIB);
    }

    #[tokio::test(start_paused = true)]
    async fn a_growth_that_finds_no_room_in_time_fails_as_pressure_and_leaves_the_line() {
        let budget = MemoryBudget::new(100 * MIB, Duration::from_secs(30));
        let mut holder = budget.open(Arc::from("a"));
        let mut waiter = budget.open(Arc::from("b"));
        holder.grow(70 * MIB).await.unwrap();
        let refused = waiter.grow(50 * MIB).await;
        assert!(matches!(refused, Err(Pressure::Waited(w)) if w >= Duration::from_secs(30)), "{refused:?}");
        assert_eq!((budget.waiting(), budget.used()), (0, 70 * MIB));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_dropped_while_it_waits_releases_what_it_held() {
        let budget = MemoryBudget::new(100 * MIB, Duration::from_secs(30));
        let mut holder = budget.open(Arc::from("a"));
        holder.grow(60 * MIB).await.unwrap();
        let mut waiter = budget.open(Arc::from("b"));
        waiter.grow(30 * MIB).await.unwrap();
        let waiting = tokio::spawn(async move { waiter.grow(30 * MIB).await });
        tokio::time::sleep(Duration::from_secs(1)).await;
        waiting.abort();
        let _ = waiting.await;
        assert_eq!((budget.waiting(), budget.used()), (0, 60 * MIB));
    }

    #[tokio::test(start_paused = true)]
    async fn of_two_calls_waiting_on_each_other_the_younger_gives_way_at_once() {
        let budget = MemoryBudget::new(100 * MIB, Duration::from_secs(30));
        let (mut older, mut younger) = (budget.open(Arc::from("a")), budget.open(Arc::from("b")));
        older.grow(45 * MIB).await.unwrap();
        younger.grow(45 * MIB).await.unwrap();
        let older = tokio::spawn(async move { older.grow(20 * MIB).await.map(|()| older) });
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(younger.grow(20 * MIB).await, Err(Pressure::GaveWay));
        drop(younger);
        assert!(older.await.unwrap().is_ok(), "the older is granted once the younger is gone");
    }
}
