//! Failed reconciles over the host's error window, per plugin: what a `WasmPlugin`'s
//! `status.errors` (the ERRORS column) and its `Degraded` condition show. The writer samples
//! the `wasmloop_reconciles_total` counters every [`SAMPLE_EVERY`]; an [`ErrorWindow`] turns
//! the samples into counts over [`WINDOW`], decided without the clock or the metrics.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::time::{Duration, Instant};
//! # use wasmloop::status::errors::ErrorWindow;
//! let mut window = ErrorWindow::new(Duration::from_secs(60));
//! let start = Instant::now();
//! let at = |s| start + Duration::from_secs(s);
//! assert_eq!(window.observe(at(0), BTreeMap::from([("a/p".to_owned(), 5)]))["a/p"], 0);
//! assert_eq!(window.observe(at(30), BTreeMap::from([("a/p".to_owned(), 8)]))["a/p"], 3);
//! assert_eq!(window.observe(at(100), BTreeMap::from([("a/p".to_owned(), 8)]))["a/p"], 0);
//! ```

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How far back failures count.
pub const WINDOW: Duration = Duration::from_secs(300);

/// How often the writer samples the counters.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// Samples of each plugin's failure counter over the window.
#[derive(Debug)]
pub struct ErrorWindow {
    window: Duration,
    samples: HashMap<String, VecDeque<(Instant, u64)>>,
}

impl ErrorWindow {
    /// Counts over `window`.
    pub fn new(window: Duration) -> ErrorWindow {
        ErrorWindow { window, samples: HashMap::new() }
    }

    /// Takes the counter of each plugin not sampled yet as of `now`, as the start of its window:
    /// a version that just loaded counts its failures from its load, not from its first sample.
    pub fn prime(&mut self, now: Instant, totals: BTreeMap<String, u64>) {
        for (plugin, total) in totals {
            self.samples.entry(plugin).or_insert_with(|| VecDeque::from([(now, total)]));
        }
    }

    /// Whether `plugin` is sampled already.
    pub fn knows(&self, plugin: &str) -> bool {
        self.samples.contains_key(plugin)
    }

    /// Takes each plugin's failure counter as of `now`, and returns each one's failures over
    /// the window: the counter now less the oldest sample within it (the first sample counts
    /// from itself). A plugin missing from `totals` is forgotten.
    pub fn observe(&mut self, now: Instant, totals: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        self.samples.retain(|plugin, _| totals.contains_key(plugin));
        let mut counts = BTreeMap::new();
        for (plugin, total) in totals {
            let samples = self.samples.entry(plugin.clone()).or_default();
            // A counter that went back (the plugin reloaded under its name) starts over.
            if samples.back().is_some_and(|(_, last)| *last > total) {
                samples.clear();
            }
            samples.push_back((now, total));
            while samples.front().is_some_and(|(at, _)| now.saturating_duration_since(*at) > self.window) {
                samples.pop_front();
            }
            let oldest = samples.front().map_or(total, |(_, count)| *count);
            counts.insert(plugin, total - oldest);
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(count: u64) -> BTreeMap<String, u64> {
        BTreeMap::from([("team-a/hello".to_owned(), count)])
    }

    #[test]
    fn failures_count_within_the_window_only() {
        let mut window = ErrorWindow::new(Duration::from_secs(60));
        let start = Instant::now();
        let at = |s| start + Duration::from_secs(s);
        let cases = [(0, 10, 0), (20, 12, 2), (50, 15, 5), (70, 15, 3), (130, 15, 0), (140, 16, 1)];
        for (second, total, expected) in cases {
            assert_eq!(window.observe(at(second), totals(total))["team-a/hello"], expected, "at {second} s");
        }
    }

    #[test]
    fn a_counter_that_goes_back_starts_over_and_a_plugin_gone_is_forgotten() {
        let mut window = ErrorWindow::new(Duration::from_secs(60));
        let now = Instant::now();
        window.observe(now, totals(10));
        assert_eq!(window.observe(now + Duration::from_secs(1), totals(2))["team-a/hello"], 0);
        window.observe(now + Duration::from_secs(2), BTreeMap::new());
        assert!(window.samples.is_empty());
    }
}
