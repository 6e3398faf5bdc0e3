//! A rate-limiting work queue of keys, with client-go's semantics.
//!
//! - Only keys are queued; adding a key that is already waiting does nothing, so a burst of
//!   events for one object becomes one reconcile of its latest state.
//! - A key is never handed out twice at once. A key added while it is being processed is
//!   queued again when [`WorkQueue::done`] is called for it.
//! - [`WorkQueue::add_rate_limited`] retries a failed key after a per-key exponential backoff
//!   (default 5 ms doubling to 1000 s, from `backon`); when it is due it also waits for a
//!   token of a queue-wide bucket (default 10 per second, burst 100, from `governor`), so a
//!   storm of failures cannot turn into a storm of retries. [`WorkQueue::forget`] resets a
//!   key's backoff after a success.
//! - [`WorkQueue::add_after`] (requeue-after) keeps the earliest deadline per key.
//! - [`WorkQueue::shut_down`] stops handing out keys; [`WorkQueue::drained`] waits for the
//!   keys in flight.
//! - [`WorkQueue::add_retry_after`] takes a plugin's own retry delay, held to the backoff's
//!   ceiling.
//!
//! Delays live in one `DelayQueue` owned by a timer task (`run_timers`). The bucket is applied
//! when a retry falls due rather than reserved up front (governor has no reservations); a
//! storm of failures still drains at the bucket's rate. Built on kept crates rather than
//! kube-runtime's `applier`: the host needs the queue's depth and retries as metrics, and
//! client-go's backoff-plus-bucket semantics, which `applier` leaves to the caller.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use wasmloop_runtime::{QueueConfig, WorkQueue};
//! let queue = WorkQueue::new(QueueConfig::default());
//! queue.add("default/web");
//! queue.add("default/web"); // collapses with the waiting one
//! let key = queue.get().await.unwrap();
//! // ... reconcile ...
//! queue.forget(&key);
//! queue.done(&key);
//! assert_eq!(queue.len(), 0);
//! # }
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use futures::StreamExt;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::time::{DelayQueue, delay_queue};

/// The longest delay the queue holds; longer requests are shortened to it.
pub const MAX_DELAY: Duration = Duration::from_secs(30 * 24 * 3600);

/// Queue settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Backoff after a key's first failure.
    pub base_delay: Duration,
    /// Backoff ceiling.
    pub max_delay: Duration,
    /// Retries per second across the whole queue.
    pub retries_per_second: NonZeroU32,
    /// Retries allowed at once before the rate applies.
    pub retry_burst: NonZeroU32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            retries_per_second: NonZeroU32::new(10).expect("non-zero"),
            retry_burst: NonZeroU32::new(100).expect("non-zero"),
        }
    }
}

struct State<K> {
    ready: VecDeque<K>,
    /// Keys that are waiting to be processed (in `ready`, or re-added while processing).
    dirty: HashSet<K>,
    processing: HashSet<K>,
    failures: HashMap<K, (u32, ExponentialBackoff)>,
    shutting_down: bool,
}

struct Shared<K> {
    state: Mutex<State<K>>,
    ready: Notify,
    idle: Notify,
    delays: mpsc::UnboundedSender<Delayed<K>>,
    bucket: DefaultDirectRateLimiter,
    config: QueueConfig,
}

struct Delayed<K> {
    key: K,
    delay: Duration,
    rate_limited: bool,
}

/// The work queue. Cheap to clone; all clones share one queue.
pub struct WorkQueue<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue { shared: self.shared.clone() }
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    /// A new queue. Spawns its timer task on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn new(config: QueueConfig) -> Self {
        let (delays, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
                shutting_down: false,
            }),
            ready: Notify::new(),
            idle: Notify::new(),
            delays,
            bucket: RateLimiter::direct(Quota::per_second(config.retries_per_second).allow_burst(config.retry_burst)),
            config,
        });
        tokio::spawn(run_timers(Arc::downgrade(&shared), rx));
        WorkQueue { shared }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.shared.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: K) {
        add(&self.shared, key);
    }

    /// Queues `key` after `delay`; of several pending delays for one key the earliest wins.
    pub fn add_after(&self, key: K, delay: Duration) {
        self.delay(key, delay, false);
    }

    fn delay(&self, key: K, delay: Duration, rate_limited: bool) {
        // DelayQueue cannot hold deadlines beyond about two years; a plugin may ask for more.
        let delay = delay.min(MAX_DELAY);
        if delay.is_zero() && !rate_limited {
            return self.add(key);
        }
        // The receiver lives as long as any queue handle: sending cannot fail while we run.
        let _ = self.shared.delays.send(Delayed { key, delay, rate_limited });
    }

    /// Queues `key` after its next backoff delay and returns that delay.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        self.retry(key, None)
    }

    /// Queues `key` after `delay` as a retry: counted like [`WorkQueue::add_rate_limited`],
    /// but at the delay the caller chose (a plugin that knows when a dependency is ready),
    /// held to the backoff's ceiling. Returns the delay used.
    pub fn add_retry_after(&self, key: K, delay: Duration) -> Duration {
        self.retry(key, Some(delay))
    }

    fn retry(&self, key: K, chosen: Option<Duration>) -> Duration {
        let delay = {
            let mut state = self.state();
            let config = self.shared.config;
            let (count, backoff) = state.failures.entry(key.clone()).or_insert_with(|| {
                let backoff = ExponentialBuilder::default()
                    .with_min_delay(config.base_delay)
                    .with_max_delay(config.max_delay)
                    .with_factor(2.0)
                    .without_max_times()
                    .build();
                (0, backoff)
            });
            *count += 1;
            match chosen {
                Some(delay) => delay.min(config.max_delay),
                None => backoff.next().unwrap_or(config.max_delay),
            }
        };
        self.delay(key, delay, true);
        delay
    }

    /// How many times in a row `key` has failed.
    pub fn retries(&self, key: &K) -> u32 {
        self.state().failures.get(key).map_or(0, |(n, _)| *n)
    }

    /// Resets `key`'s backoff (after a success).
    pub fn forget(&self, key: &K) {
        self.state().failures.remove(key);
    }

    /// The next key to process, once one is ready; none after [`WorkQueue::shut_down`].
    /// Call [`WorkQueue::done`] when finished with it.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.shared.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.state();
                if state.shutting_down {
                    return None;
                }
                if let Some(key) = state.ready.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Marks `key` processed; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let mut state = self.state();
        state.processing.remove(key);
        if state.dirty.contains(key) && !state.shutting_down {
            state.ready.push_back(key.clone());
            drop(state);
            self.shared.ready.notify_one();
        } else if state.processing.is_empty() {
            drop(state);
            self.shared.idle.notify_waiters();
        }
    }

    /// Keys ready to be handed out (the queue depth).
    pub fn len(&self) -> usize {
        self.state().ready.len()
    }

    /// True when no key is ready.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys being processed now.
    pub fn in_flight(&self) -> usize {
        self.state().processing.len()
    }

    /// Stops handing out keys: [`WorkQueue::get`] returns none from now on, and adds are
    /// ignored.
    pub fn shut_down(&self) {
        self.state().shutting_down = true;
        self.shared.ready.notify_waiters();
    }

    /// Waits until no key is being processed.
    pub async fn drained(&self) {
        loop {
            let notified = self.shared.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state().processing.is_empty() {
                return;
            }
            notified.await;
        }
    }
}

fn add<K: Clone + Eq + Hash>(shared: &Shared<K>, key: K) {
    let mut state = shared.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if state.shutting_down || !state.dirty.insert(key.clone()) || state.processing.contains(&key) {
        return;
    }
    state.ready.push_back(key);
    drop(state);
    shared.ready.notify_one();
}

/// Owns the timers of delayed adds. Ends when the last queue handle is dropped.
async fn run_timers<K: Clone + Eq + Hash + Send + Sync + 'static>(
    shared: Weak<Shared<K>>,
    mut requests: mpsc::UnboundedReceiver<Delayed<K>>,
) {
    let mut timers: DelayQueue<K> = DelayQueue::new();
    let mut pending: HashMap<K, (delay_queue::Key, Instant, bool)> = HashMap::new();
    loop {
        tokio::select! {
            request = requests.recv() => {
                let Some(Delayed { key, delay, rate_limited }) = request else { return };
                let due = Instant::now() + delay;
                match pending.get_mut(&key) {
                    Some((timer, at, limited)) => {
                        if due < *at {
                            timers.reset_at(timer, due);
                            *at = due;
                            *limited = rate_limited;
                        }
                    }
                    None => {
                        let timer = timers.insert_at(key.clone(), due);
                        pending.insert(key, (timer, due, rate_limited));
                    }
                }
            }
            Some(expired) = timers.next(), if !timers.is_empty() => {
                let key = expired.into_inner();
                let Some((_, _, rate_limited)) = pending.remove(&key) else { continue };
                let Some(shared) = shared.upgrade() else { return };
                if rate_limited {
                    // The bucket paces retries queue-wide; waiting here must not hold up
                    // other timers.
                    tokio::spawn(async move {
                        shared.bucket.until_ready().await;
                        add(&shared, key);
                    });
                } else {
                    add(&shared, key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> WorkQueue<&'static str> {
        WorkQueue::new(QueueConfig::default())
    }

    async fn next(q: &WorkQueue<&'static str>) -> Option<&'static str> {
        tokio::time::timeout(Duration::from_secs(3600), q.get()).await.ok().flatten()
    }

    async fn nothing_ready(q: &WorkQueue<&'static str>, within: Duration) -> bool {
        tokio::time::timeout(within, q.get()).await.is_err()
    }

    #[tokio::test(start_paused = true)]
    async fn adds_of_a_waiting_key_collapse_into_one() {
        let q = queue();
        for _ in 0..100 {
            q.add("a");
        }
        assert_eq!(q.len(), 1);
        assert_eq!(next(&q).await, Some("a"));
        assert!(nothing_ready(&q, Duration::from_secs(1)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_in_flight_is_not_handed_out_again() {
        let q = queue();
        q.add("a");
        assert_eq!(next(&q).await, Some("a"));
        q.add("a");
        assert!(nothing_ready(&q, Duration::from_secs(1)).await, "a second worker got the key in flight");
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_added_during_processing_runs_again_after_done() {
        let q = queue();
        q.add("a");
        let key = next(&q).await.unwrap();
        q.add("a");
        q.add("a");
        q.done(&key);
        assert_eq!(next(&q).await, Some("a"));
        q.done(&"a");
        assert!(nothing_ready(&q, Duration::from_secs(1)).await, "the re-adds collapse into one run");
    }

    #[tokio::test(start_paused = true)]
    async fn keys_are_handed_out_in_order() {
        let q = queue();
        q.add("a");
        q.add("b");
        q.add("c");
        assert_eq!((next(&q).await, next(&q).await, next(&q).await), (Some("a"), Some("b"), Some("c")));
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_from_the_base() {
        let q = queue();
        let delays: Vec<Duration> = (0..5).map(|_| q.add_rate_limited("a")).collect();
        for (delay, expected_ms) in delays.iter().zip([5u64, 10, 20, 40, 80]) {
            // backon computes in f32: allow a rounding error far below one step.
            let expected = Duration::from_millis(expected_ms);
            assert!(delay.abs_diff(expected) < Duration::from_millis(1), "{delays:?}");
        }
        assert_eq!(q.retries(&"a"), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limited_key_arrives_after_its_delay() {
        let q = queue();
        let start = Instant::now();
        q.add_rate_limited("a");
        q.add_rate_limited("a"); // 10 ms: the earlier 5 ms deadline wins
        assert_eq!(next(&q).await, Some("a"));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(5) && waited < Duration::from_millis(10), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_is_capped() {
        let q = WorkQueue::new(QueueConfig { max_delay: Duration::from_millis(40), ..QueueConfig::default() });
        let last = (0..20).map(|_| q.add_rate_limited("a")).last().unwrap();
        assert_eq!(last, Duration::from_millis(40));
    }

    #[tokio::test(start_paused = true)]
    async fn a_chosen_retry_delay_counts_as_a_retry_arrives_at_its_time_and_is_held_to_the_ceiling() {
        let q = WorkQueue::new(QueueConfig { max_delay: Duration::from_secs(60), ..QueueConfig::default() });
        let start = Instant::now();
        assert_eq!(q.add_retry_after("a", Duration::from_secs(3)), Duration::from_secs(3));
        assert_eq!(q.retries(&"a"), 1);
        assert!(nothing_ready(&q, Duration::from_secs(2)).await);
        assert_eq!(next(&q).await, Some("a"));
        assert!(start.elapsed() >= Duration::from_secs(3));
        q.done(&"a");
        assert_eq!(q.add_retry_after("a", Duration::from_secs(3600)), Duration::from_secs(60));
        assert_eq!(q.retries(&"a"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn forget_resets_the_backoff() {
        let q = queue();
        q.add_rate_limited("a");
        q.add_rate_limited("a");
        q.forget(&"a");
        assert_eq!(q.retries(&"a"), 0);
        assert_eq!(q.add_rate_limited("a"), Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_fires_at_its_time() {
        let q = queue();
        let start = Instant::now();
        q.add_after("a", Duration::from_secs(30));
        assert!(nothing_ready(&q, Duration::from_secs(29)).await);
        assert_eq!(next(&q).await, Some("a"));
        assert!(start.elapsed() >= Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn the_earliest_requeue_wins() {
        let q = queue();
        let start = Instant::now();
        q.add_after("a", Duration::from_secs(30));
        q.add_after("a", Duration::from_secs(2));
        assert_eq!(next(&q).await, Some("a"));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(2) && waited < Duration::from_secs(3), "{waited:?}");
        q.done(&"a");
        assert!(nothing_ready(&q, Duration::from_secs(60)).await, "the later deadline was replaced, not kept");
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_stops_handing_out_keys() {
        let q = queue();
        q.add("a");
        q.shut_down();
        assert_eq!(next(&q).await, None);
        q.add("b");
        assert_eq!(q.len(), 1, "adds after shut-down are ignored");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_worker_is_released_by_shut_down() {
        let q = queue();
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(worker.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn drained_waits_for_keys_in_flight() {
        let q = queue();
        q.add("a");
        let key = next(&q).await.unwrap();
        q.shut_down();
        let drained = tokio::spawn({
            let q = q.clone();
            async move { q.drained().await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!drained.is_finished(), "drained returned with a key in flight");
        q.done(&key);
        drained.await.unwrap();
        assert_eq!(q.in_flight(), 0);
    }

    // The bucket runs on the real clock (governor's), so this test does too.
    #[tokio::test]
    async fn retries_are_paced_by_the_queue_wide_bucket() {
        let q = WorkQueue::new(QueueConfig {
            retries_per_second: NonZeroU32::new(4).unwrap(),
            retry_burst: NonZeroU32::new(1).unwrap(),
            ..QueueConfig::default()
        });
        let start = std::time::Instant::now();
        for key in ["a", "b", "c"] {
            q.add_rate_limited(key);
        }
        for _ in 0..3 {
            let key = tokio::time::timeout(Duration::from_secs(10), q.get()).await.unwrap().unwrap();
            q.done(&key);
        }
        // One retry at once, then one every 250 ms: the third cannot come before ~500 ms.
        assert!(start.elapsed() >= Duration::from_millis(450), "{:?}", start.elapsed());
    }
}
