//! The Leases sharding is built on, judged as client-go judges them: by when *this* replica
//! saw each one change, never by the `renewTime` another replica's clock wrote. A Lease whose
//! record (its resourceVersion) has not changed for a whole Lease duration, by this replica's
//! own monotonic clock, is stale: its holder stopped renewing it. Clock skew between nodes
//! cannot make a live holder look dead.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// When each Lease's record was last seen to change.
#[derive(Debug, Default)]
pub struct Observations {
    seen: HashMap<String, (String, Instant)>,
}

impl Observations {
    /// Notes that Lease `name` holds `record` (its resourceVersion) at `now`.
    pub fn see(&mut self, name: &str, record: &str, now: Instant) {
        match self.seen.get_mut(name) {
            Some((known, _)) if known == record => {}
            _ => {
                self.seen.insert(name.to_owned(), (record.to_owned(), now));
            }
        }
    }

    /// Forgets Leases not in `present` (deleted ones), so the map does not grow.
    pub fn retain(&mut self, present: &std::collections::HashSet<&str>) {
        self.seen.retain(|name, _| present.contains(name.as_str()));
    }

    /// True when Lease `name` changed within `duration` before `now`. A Lease first seen just
    /// now counts as fresh: a replica that starts gives every holder a full duration.
    pub fn fresh(&self, name: &str, now: Instant, duration: Duration) -> bool {
        self.seen.get(name).is_some_and(|(_, since)| now.duration_since(*since) < duration)
    }
}

/// What to do about a plugin's fence this replica is to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nobody holds it, or its holder stopped renewing it: take it.
    Take,
    /// Another replica holds it and renews it (it is handing the plugin over, or does not
    /// know yet that it should): wait.
    Wait,
}

/// The step for a fence held by `holder` (none or empty: released), `fresh` as
/// [`Observations::fresh`] says, for the process `me` (a replica's name and a per-process
/// nonce: a predecessor under the same pod name is another holder).
pub fn step(holder: Option<&str>, me: &str, fresh: bool) -> Step {
    match holder {
        None | Some("") => Step::Take,
        Some(holder) if holder == me => Step::Take,
        Some(_) if !fresh => Step::Take,
        Some(_) => Step::Wait,
    }
}

/// How long after sending its last successful renewal a replica stops everything: an eighth of
/// the duration before any other replica may judge its Leases stale. Counting from the send,
/// not the answer, keeps a slow API server from stretching it.
pub fn renew_deadline(duration: Duration) -> Duration {
    duration - duration / 8
}

/// A Lease name's last segment from a host identity: lowercase letters, digits and `-`,
/// starting and ending alphanumeric, at most 200 characters (Lease names are DNS subdomains
/// of 253; the prefix takes the rest).
pub fn name_segment(identity: &str) -> String {
    let mapped: String = identity
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' })
        .take(200)
        .collect();
    let trimmed = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() { "host".to_owned() } else { trimmed.to_owned() }
}

/// A plugin's key in its fence's name and label: the name itself when it is a valid label
/// value (plugin names may start or end with `-`, label values may not), else `x.` and 16 hex
/// digits of its SHA-256: a dot is valid in both, and in no plugin name, so no plugin can
/// take another's key.
pub fn plugin_key(plugin: &str) -> String {
    if !plugin.is_empty() && wasmloop_contract::validate::is_label_value(plugin) {
        plugin.to_owned()
    } else {
        format!("x.{}", &wasmloop_sandbox::digest(plugin.as_bytes())[..16])
    }
}

/// A value unique to this process, to tell it from a predecessor under the same name.
pub fn nonce() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    wasmloop_sandbox::digest(format!("{now}/{}", std::process::id()).as_bytes())[..12].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_taken_when_free_stale_or_ours_and_waited_for_otherwise() {
        let cases = [
            ("never held", None, true, Step::Take),
            ("released", Some(""), true, Step::Take),
            ("ours, this process's", Some("me"), true, Step::Take),
            ("a previous process's under our name, renewed", Some("me-before"), true, Step::Wait),
            ("another's, renewed", Some("them"), true, Step::Wait),
            ("another's, stale", Some("them"), false, Step::Take),
        ];
        for (what, holder, fresh, want) in cases {
            assert_eq!(step(holder, "me", fresh), want, "{what}");
        }
    }

    #[test]
    fn a_lease_is_fresh_until_it_goes_a_whole_duration_unchanged_by_our_own_clock() {
        let duration = Duration::from_secs(6);
        let mut seen = Observations::default();
        let start = Instant::now();
        seen.see("l", "1", start);
        assert!(seen.fresh("l", start, duration), "first sight gives a full duration");
        // Seen again unchanged: the clock keeps running from the first sight.
        seen.see("l", "1", start + Duration::from_secs(5));
        assert!(!seen.fresh("l", start + duration, duration));
        // A renewal (a new resourceVersion) starts it again.
        seen.see("l", "2", start + duration);
        assert!(seen.fresh("l", start + Duration::from_secs(11), duration));
        assert!(!seen.fresh("unknown", start, duration), "a Lease never seen is nobody's");
    }

    #[test]
    fn a_holder_stops_an_eighth_of_the_duration_before_it_may_be_judged_stale() {
        assert_eq!(renew_deadline(Duration::from_secs(8)), Duration::from_secs(7));
        assert_eq!(renew_deadline(Duration::from_secs(15)), Duration::from_millis(13_125));
    }

    #[test]
    fn plugin_names_that_are_no_label_value_get_a_hashed_key() {
        assert_eq!(plugin_key("mirror"), "mirror");
        assert_eq!(plugin_key("a-1"), "a-1");
        for odd in ["-edge", "edge-", "-"] {
            let key = plugin_key(odd);
            assert!(key.starts_with("x.") && key.len() == 18, "{odd}: {key}");
        }
        assert_ne!(plugin_key("edge-"), plugin_key("-edge"));
    }

    #[test]
    fn identities_become_valid_lease_name_segments() {
        let cases = [
            ("wasmloop-7d9f-x2", "wasmloop-7d9f-x2"),
            ("Node_1-4242", "node-1-4242"),
            ("-edge-", "edge"),
            ("a..b", "a--b"),
            ("___", "host"),
        ];
        for (identity, want) in cases {
            assert_eq!(name_segment(identity), want, "{identity}");
        }
        assert_eq!(name_segment(&"a".repeat(300)).len(), 200);
    }
}
