//! The host's CPU budget for guest code: the pod's CPU quota, less the host's own reserve,
//! metered as a rate and shared by the plugins computing, by weighted fair share ([`shares`]
//! decides).
//!
//! Guest code is charged by epoch ticks: a guest in wasm code reaches the Store's epoch
//! callback once per tick, which charges that tick, and the host's time in its imports since,
//! to the call's plugin (a shadow is its plugin's). A plugin past its share while others run
//! yields until its window ends; the wait is the host's doing, so it does not count against
//! the call's deadline.
//!
//! ```
//! use std::time::Duration;
//! use wasmloop_sandbox::CpuBudget;
//!
//! // Three quarters of a one-CPU pod, at the default 1 ms tick.
//! let budget = CpuBudget::new(0.75, Duration::from_millis(1));
//! assert_eq!(budget.ticks_per_window(), 75);
//! ```

mod shares;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::memory_budget::Account;
use shares::{Shares, Verdict};

/// The span rates are counted over: the kernel's CFS period.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The CPU all guests together may use; shared by every plugin of a sandbox.
pub struct CpuBudget {
    cores: f64,
    ticks: u64,
    shares: Mutex<Shares>,
    /// Calls running now, all plugins.
    calls: AtomicUsize,
    /// The epoch ticker, which sleeps while no call runs, to wake when one starts.
    ticker: OnceLock<Thread>,
}

impl CpuBudget {
    /// A budget of `cores` CPUs' worth of guest code, charged in epoch ticks of `tick`.
    pub fn new(cores: f64, tick: Duration) -> CpuBudget {
        let cores = if cores.is_finite() && cores > 0.0 { cores } else { 1.0 };
        let ticks = (cores * WINDOW.as_secs_f64() / tick.as_secs_f64().max(1e-6)).round().max(1.0) as u64;
        CpuBudget {
            cores,
            ticks,
            shares: Mutex::new(Shares::new(ticks, WINDOW)),
            calls: AtomicUsize::new(0),
            ticker: OnceLock::new(),
        }
    }

    /// The budget, in CPUs.
    pub fn cores(&self) -> f64 {
        self.cores
    }

    /// Ticks of guest code all plugins together may run per [`WINDOW`].
    pub fn ticks_per_window(&self) -> u64 {
        self.ticks
    }

    fn shares(&self) -> std::sync::MutexGuard<'_, Shares> {
        self.shares.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes a call of `account` running, with the plugin's `weight`, until the guard drops.
    pub(crate) fn running(self: &Arc<Self>, account: Account, weight: u32) -> Running {
        self.shares().enter(&account, weight);
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0
            && let Some(ticker) = self.ticker.get()
        {
            ticker.unpark();
        }
        Running { budget: self.clone(), account }
    }

    /// Whether no call runs now: the epoch need not tick.
    pub(crate) fn idle(&self) -> bool {
        self.calls.load(Ordering::SeqCst) == 0
    }

    /// The thread ticking the epoch, woken when a call starts after an idle spell.
    pub(crate) fn ticked_by(&self, ticker: Thread) {
        let _ = self.ticker.set(ticker);
    }

    /// Charges `ticks` of `account`'s guest code; when it is past its share, until when it
    /// waits.
    pub(crate) fn charge(&self, account: &Account, ticks: u64) -> Option<Instant> {
        match self.shares().charge(account, ticks, Instant::now()) {
            Verdict::Run => None,
            Verdict::WaitUntil(until) => Some(until),
        }
    }
}

/// A call counted as running while this lives.
pub(crate) struct Running {
    budget: Arc<CpuBudget>,
    account: Account,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.budget.shares().leave(&self.account);
        self.budget.calls.fetch_sub(1, Ordering::SeqCst);
    }
}
