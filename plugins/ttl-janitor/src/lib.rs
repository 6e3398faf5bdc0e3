//! `ttl-janitor`: deletes Deployments whose time is up, as kube-janitor (hjacobs/kube-janitor)
//! does, with its annotations:
//!
//! - `janitor/ttl`: a time to live counted from the object's creation, `<n><unit>` with unit
//!   `s`, `m`, `h`, `d` or `w` (`30m`, `7d`), or `forever`;
//! - `janitor/expires`: an absolute time, `2026-12-24T18:00:00Z`, `2026-12-24T18:00Z` or
//!   `2026-12-24` (midnight UTC).
//!
//! A TTL counts from the object's `creationTimestamp` (whole seconds, as the API server stamps
//! it), by the host's clock. When both are given the earlier wins. When the time has come the
//! janitor records an Event
//! (`TimeToLiveExpired` or `ExpiryTimeReached`, kube-janitor's reasons) and deletes the object,
//! pinned to its UID so that a new object of the same name is never taken for it. Before then
//! it asks to be called again when the time comes (`requeue_after`), and on that call checks
//! the clock again: a requeue that fires early finds the time not yet come and waits again, so
//! nothing is deleted early. Nothing is kept between calls: the deadline is computed from the
//! object each time, so a host restart (which reconciles every object again) loses nothing,
//! and an object whose time passed while no host ran is deleted on the first call.
//!
//! A value that does not parse gets a Warning Event (`InvalidTTL`, `InvalidExpiry`) naming
//! the value and the forms allowed, and is ignored: the other annotation still counts.
//!
//! What differs from kube-janitor, and why: one component serves one kind (the contract's one
//! primary). Built for another kind, drop the generation filter unless that kind, as
//! Deployments do, moves its generation when its annotations change (StatefulSets, Jobs and
//! CronJobs do not: an annotation added later would not call the janitor). There is no dry-run flag (run `wasmloop
//! reconcile` on the object instead, or `wasmloop shadow`). kube-janitor's rules file (TTLs by
//! JMESPath) is not carried over.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::civil::{Date, DateTime};
use k8s_openapi::jiff::{SignedDuration, Timestamp, tz};
use std::time::Duration;
use wasmloop_sdk::prelude::*;

/// Time to live, counted from creation.
pub const TTL: &str = "janitor/ttl";
/// Absolute expiry time.
pub const EXPIRES: &str = "janitor/expires";

/// The plugin.
pub struct TtlJanitor;

/// What sets an object's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// `janitor/ttl`, as written.
    Ttl(String),
    /// `janitor/expires`, as written.
    Expires(String),
}

/// When an object's time is up and what says so (none: never), and the annotations that do not
/// parse, each as an Event's reason and message. Each annotation counts on its own, as in
/// kube-janitor: a bad expiry does not cancel a good TTL.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct End {
    /// The earliest end the annotations give.
    pub at: Option<(Timestamp, Cause)>,
    /// What did not parse.
    pub invalid: Vec<(&'static str, String)>,
}

/// `text` as a time to live: `None` for `forever`.
///
/// # Errors
/// A sentence naming the value and the forms allowed.
pub fn parse_ttl(text: &str) -> Result<Option<SignedDuration>, String> {
    if text == "forever" {
        return Ok(None);
    }
    let refuse = || {
        format!("TTL {text:?} is not a duration: write <number><unit> with unit s, m, h, d or w (30m, 7d), or forever")
    };
    let unit_at = text.len().checked_sub(1).filter(|&i| i > 0 && text.is_char_boundary(i)).ok_or_else(refuse)?;
    let (digits, unit) = text.split_at(unit_at);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refuse());
    }
    let count: i64 = digits.parse().map_err(|_| refuse())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(refuse()),
    };
    count.checked_mul(seconds).map(|s| Some(SignedDuration::from_secs(s))).ok_or_else(refuse)
}

/// `text` as an expiry instant, in kube-janitor's three forms (UTC).
///
/// # Errors
/// A sentence naming the value and the forms allowed.
pub fn parse_expiry(text: &str) -> Result<Timestamp, String> {
    let refuse = || {
        format!("expiry time {text:?} is not a time: write 2026-12-24T18:00:00Z, 2026-12-24T18:00Z or 2026-12-24 (UTC)")
    };
    let civil = if let Some(rest) = text.strip_suffix('Z') {
        let seconds = if rest.len() == 16 { format!("{rest}:00") } else { rest.to_owned() };
        seconds.parse::<DateTime>().ok().filter(|_| seconds.len() == 19)
    } else if text.len() == 10 {
        text.parse::<Date>().ok().map(|d| d.to_datetime(k8s_openapi::jiff::civil::Time::midnight()))
    } else {
        None
    };
    civil.and_then(|c| c.to_zoned(tz::TimeZone::UTC).ok()).map(|z| z.timestamp()).ok_or_else(refuse)
}

/// When the object with these annotations, created at `created` (its `creationTimestamp`, in
/// whole seconds as the API server stamps it), is due for deletion.
pub fn end_of(created: Option<Timestamp>, ttl: Option<&str>, expires: Option<&str>) -> End {
    let mut end = End::default();
    let mut ends = Vec::new();
    if let Some(text) = ttl {
        match parse_ttl(text) {
            Ok(None) => {}
            // An object the API server has not stamped yet has no age: it is not due.
            Ok(Some(ttl)) => match created.map(|c| c.checked_add(ttl)) {
                None => {}
                Some(Ok(at)) => ends.push((at, Cause::Ttl(text.to_owned()))),
                Some(Err(_)) => {
                    end.invalid.push(("InvalidTTL", format!("TTL {text:?} ends past the last time there is")))
                }
            },
            Err(why) => end.invalid.push(("InvalidTTL", why)),
        }
    }
    if let Some(text) = expires {
        match parse_expiry(text) {
            Ok(at) => ends.push((at, Cause::Expires(text.to_owned()))),
            Err(why) => end.invalid.push(("InvalidExpiry", why)),
        }
    }
    end.at = ends.into_iter().min_by_key(|(at, _)| *at);
    end
}

/// What to do about an object whose end is `end`, at `now` (the host's clock).
pub fn actions_at(end: End, now: Timestamp, target: ObjectRef, what: &str) -> Vec<Action> {
    let mut actions: Vec<Action> = end
        .invalid
        .into_iter()
        .map(|(reason, why)| event(EventType::Warning, reason, format!("{why}; the annotation is ignored")))
        .collect();
    match end.at {
        None => {}
        Some((at, cause)) if now >= at => {
            let (reason, message) = match cause {
                Cause::Ttl(ttl) => ("TimeToLiveExpired", format!("{what} with {ttl} TTL has expired; deleting it")),
                Cause::Expires(at) => {
                    ("ExpiryTimeReached", format!("{what} reached its expiry time {at}; deleting it"))
                }
            };
            actions.push(event(EventType::Normal, reason, message));
            actions.push(delete(target));
        }
        Some((at, cause)) => {
            let by = match cause {
                Cause::Ttl(ttl) => format!("its {ttl} TTL"),
                Cause::Expires(when) => format!("its expiry time {when}"),
            };
            wasmloop_sdk::info!("{what} is due at {at} by {by}; kept until then");
            // Rounded up to the millisecond: a wait cut short would fire a moment early, and
            // only find the time not yet come.
            let left = at.duration_since(now).unsigned_abs();
            let millis = u64::try_from(left.as_micros().div_ceil(1_000)).unwrap_or(u64::MAX);
            actions.push(requeue_after(Duration::from_millis(millis)));
        }
    }
    actions
}

fn annotation<'a>(object: &'a serde_json::Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations").and_then(|a| a.get(key)).and_then(serde_json::Value::as_str)
}

impl Reconciler for TtlJanitor {
    fn manifest() -> Manifest {
        Manifest::new("ttl-janitor", env!("CARGO_PKG_VERSION"))
            // Either annotation marks an object, and a selector's annotation filters must all
            // hold, so the kind is selected whole; the generation filter keeps the controller's
            // status updates from calling the janitor (an annotation change moves a
            // Deployment's generation).
            .primary_selector(KindSelector::of::<Deployment>().generation_changed())
            .writes(Grant::of::<Deployment>().delete())
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        if request.phase != Phase::Apply {
            return Ok(Vec::new());
        }
        let object: serde_json::Value = request.object()?;
        if object.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
            return Ok(Vec::new());
        }
        let created = object
            .pointer("/metadata/creationTimestamp")
            .and_then(serde_json::Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok());
        let end = end_of(created, annotation(&object, TTL), annotation(&object, EXPIRES));
        let what = format!("{} {}", request.object.kind, request.object.display_name());
        Ok(actions_at(end, now(), request.object.to_ref(), &what))
    }
}

/// The wall clock (WASI's, in the host). k8s-openapi builds jiff without its clock.
fn now() -> Timestamp {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let seconds = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    Timestamp::new(seconds, i32::try_from(since.subsec_nanos()).unwrap_or(0)).unwrap_or(Timestamp::MAX)
}

wasmloop_sdk::export_plugin!(TtlJanitor);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmloop_sdk::testing::TestCase;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn deployment(annotations: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "preview", "namespace": "pr-7", "uid": "u-1",
                            "creationTimestamp": "2001-02-03T04:05:06Z", "annotations": annotations}})
    }

    #[test]
    fn a_ttl_counts_from_creation_in_every_unit() {
        for (ttl, secs) in [("90s", 90), ("30m", 1_800), ("2h", 7_200), ("7d", 604_800), ("1w", 604_800)] {
            assert_eq!(parse_ttl(ttl), Ok(Some(SignedDuration::from_secs(secs))), "{ttl}");
        }
    }

    #[test]
    fn forever_never_ends() {
        assert_eq!(end_of(Some(at("2001-01-01T00:00:00Z")), Some("forever"), None), End::default());
    }

    #[test]
    fn a_ttl_that_is_no_duration_is_reported_and_the_object_kept() {
        let created = Some(at("2001-01-01T00:00:00Z"));
        for bad in ["", "m", "10", "10y", "-5m", "1.5h", "5 m", "99999999999999999999w", "٣m", "600000000w"] {
            let end = end_of(created, Some(bad), None);
            assert!(end.at.is_none() && end.invalid[0].0 == "InvalidTTL", "{bad:?}: {end:?}");
        }
    }

    #[test]
    fn a_bad_expiry_does_not_cancel_a_good_ttl() {
        let outcome = TestCase::new(deployment(json!({TTL: "1h", EXPIRES: "soon"}))).run::<TtlJanitor>();
        assert_eq!(outcome.events()[0].reason, "InvalidExpiry");
        assert_eq!(outcome.events()[1].reason, "TimeToLiveExpired");
        assert_eq!(outcome.deletes().len(), 1);
    }

    #[test]
    fn an_expiry_takes_kube_janitor_s_three_forms() {
        assert_eq!(parse_expiry("2026-12-24T18:00:00Z"), Ok(at("2026-12-24T18:00:00Z")));
        assert_eq!(parse_expiry("2026-12-24T18:00Z"), Ok(at("2026-12-24T18:00:00Z")));
        assert_eq!(parse_expiry("2026-12-24"), Ok(at("2026-12-24T00:00:00Z")));
        for bad in ["2026-12-24T18:00:00", "24.12.2026", "2026-13-01", "2026-12-24T18Z", "tomorrow"] {
            assert!(parse_expiry(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_earlier_of_ttl_and_expiry_wins() {
        let created = Some(at("2026-01-01T00:00:00Z"));
        let end = end_of(created, Some("1d"), Some("2026-01-01T12:00Z"));
        assert_eq!(end.at, Some((at("2026-01-01T12:00:00Z"), Cause::Expires("2026-01-01T12:00Z".into()))));
        let end = end_of(created, Some("1h"), Some("2026-01-01T12:00Z"));
        assert_eq!(end.at, Some((at("2026-01-01T01:00:00Z"), Cause::Ttl("1h".into()))));
    }

    #[test]
    fn before_its_time_an_object_is_requeued_for_exactly_then_and_not_deleted() {
        let end = End { at: Some((at("2026-01-01T00:01:00Z"), Cause::Ttl("1m".into()))), invalid: Vec::new() };
        let now = at("2026-01-01T00:00:00.000200Z");
        let target = ObjectRef::new::<Deployment>("preview");
        let actions = actions_at(end, now, target, "Deployment pr-7/preview");
        // 59.9998 s left: rounded up, never down.
        assert_eq!(actions.len(), 1);
        assert!(matches!(&actions[0], Action::RequeueAfter(d) if *d == Duration::from_millis(60_000)), "{actions:?}");
    }

    #[test]
    fn at_its_time_an_object_is_deleted_by_uid_with_kube_janitor_s_event() {
        let outcome = TestCase::new(deployment(json!({TTL: "1h"}))).run::<TtlJanitor>();
        let events = outcome.events();
        assert_eq!(events[0].reason, "TimeToLiveExpired");
        assert!(events[0].message.contains("Deployment pr-7/preview with 1h TTL has expired"), "{}", events[0].message);
        let deletes = outcome.deletes();
        assert_eq!((deletes[0].name.as_str(), deletes[0].uid.as_deref()), ("preview", Some("u-1")));
    }

    #[test]
    fn an_expiry_in_the_future_deletes_nothing() {
        let outcome = TestCase::new(deployment(json!({EXPIRES: "2999-01-01"}))).run::<TtlJanitor>();
        assert!(outcome.deletes().is_empty());
        assert!(outcome.requeue_after().is_some());
    }

    #[test]
    fn an_object_without_annotations_is_left_alone() {
        let outcome = TestCase::new(deployment(json!({}))).run::<TtlJanitor>();
        assert!(outcome.actions().is_empty() && outcome.requeue_after().is_none());
    }

    #[test]
    fn an_object_being_deleted_is_left_alone() {
        let mut object = deployment(json!({TTL: "1s"}));
        object["metadata"]["deletionTimestamp"] = json!("2001-02-03T04:05:07Z");
        assert!(TestCase::new(object).run::<TtlJanitor>().actions().is_empty());
    }

    #[test]
    fn an_invalid_expiry_is_a_warning_naming_the_forms() {
        let outcome = TestCase::new(deployment(json!({EXPIRES: "soon"}))).run::<TtlJanitor>();
        let events = outcome.events();
        assert_eq!(events[0].reason, "InvalidExpiry");
        assert!(events[0].message.contains("write 2026-12-24T18:00:00Z"), "{}", events[0].message);
        assert!(outcome.deletes().is_empty());
    }
}
