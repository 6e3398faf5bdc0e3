//! The namespace source's plan, table-tested: each entry point of [`State`] and of [`Seen`],
//! without a runtime, a cluster or a registry.

use super::seen::{DeleteStep, OfferStep, RetryStep};
use super::*;

#[test]
fn retries_of_the_same_content_back_off_to_a_ceiling_and_new_content_starts_afresh() {
    let first = Duration::from_secs(15);
    let mut seen = Seen::default();
    seen.offer(&cm(), content("a"), None);
    let mut delays = Vec::new();
    for _ in 0..8 {
        delays.push(seen.schedule_retry(first).expect("none pending").as_secs());
        assert_eq!(seen.schedule_retry(first), None, "one retry at a time");
        seen.retry();
        seen.offer(&cm(), content("a"), None);
    }
    assert_eq!(delays, [15, 30, 60, 120, 240, 300, 300, 300]);
    seen.offer(&cm(), content("b"), None);
    assert_eq!(seen.schedule_retry(first), Some(first), "new content retries at once again");
}

#[test]
fn a_wasmplugin_of_the_same_name_claims_a_plugin_over_a_configmap_whichever_came_first() {
    let cases: [(&str, &[&str], Option<&str>); 4] = [
        ("hello", &[], None),
        ("hello", &["other"], None),
        ("hello", &["other", "hello"], Some("hello")),
        ("hello", &["hello-shadow"], None),
    ];
    for (plugin, wasmplugins, expected) in cases {
        assert_eq!(claimant(plugin, wasmplugins.iter().copied()), expected, "{plugin} among {wasmplugins:?}");
    }
}

#[test]
fn the_configmaps_a_wasmplugin_takes_its_plugin_from_are_those_that_named_it() {
    let key = |kind, name: &str| Key { kind, name: Name::parse(name).unwrap() };
    let named = |plugin: &str| Seen { plugin: Some(plugin.to_owned()), ..Seen::default() };
    let seen = [
        (key(SourceKind::ConfigMap, "a"), named("hello")),
        (key(SourceKind::ConfigMap, "b"), named("other")),
        (key(SourceKind::WasmPlugin, "hello"), named("hello")),
        (key(SourceKind::ConfigMap, "c"), Seen::default()),
    ];
    let yielding = yielding("hello", seen.iter().map(|(k, s)| (k, s)));
    assert_eq!(yielding, [&key(SourceKind::ConfigMap, "a")]);
}

fn content(digest: &str) -> Content {
    Content { digest: digest.to_owned(), ..Content::default() }
}

fn cm() -> Shipper {
    Shipper::ConfigMap(ConfigMap::default())
}

/// One step of an object's life, and what it must decide.
enum Event {
    Offer(&'static str, &'static str),
    Delete(&'static str),
    Retry(RetryStep),
    PullStarted(u64),
    Pulled(u64, bool),
    LoadStarted(u64),
    LoadFinished(u64, &'static str),
}

fn run(events: Vec<Event>) {
    let mut seen = Seen::default();
    for (at, event) in events.into_iter().enumerate() {
        match event {
            Event::Offer(digest, expected) => {
                let step = seen.offer(&cm(), content(digest), None);
                let got = match &step {
                    OfferStep::Wait => "wait",
                    OfferStep::Same => "same",
                    OfferStep::New { abandoned: Some(_) } => "new, abandoning a pull",
                    OfferStep::New { abandoned: None } => "new",
                };
                assert_eq!(got, expected, "step {at}");
            }
            Event::Delete(expected) => {
                let got = match seen.delete() {
                    DeleteStep::Wait => "wait",
                    DeleteStep::Unload { abandoned: Some(_) } => "unload, abandoning a pull",
                    DeleteStep::Unload { abandoned: None } => "unload",
                };
                assert_eq!(got, expected, "step {at}");
            }
            Event::Retry(expected) => assert_eq!(seen.retry(), expected, "step {at}"),
            Event::PullStarted(id) => seen.pull_started(id),
            Event::Pulled(id, current) => assert_eq!(seen.pulled(id), current, "step {at}"),
            Event::LoadStarted(id) => seen.load_started(id),
            Event::LoadFinished(id, expected) => {
                let got = match seen.load_finished(id) {
                    None => "stale",
                    Some(None) => "nothing waited",
                    Some(Some(Waiting::Offer(_))) => "an offer waited",
                    Some(Some(Waiting::Delete)) => "a deletion waited",
                };
                assert_eq!(got, expected, "step {at}");
            }
        }
    }
}

#[test]
fn a_configmaps_events_follow_the_rules() {
    use Event::*;
    let cases: Vec<(&str, Vec<Event>)> = vec![
        ("the same content again changes nothing", vec![Offer("d1", "new"), Offer("d1", "same")]),
        ("other content is new", vec![Offer("d1", "new"), Offer("d2", "new")]),
        (
            "an offer during a load waits for it, and is handed back",
            vec![Offer("d1", "new"), LoadStarted(1), Offer("d2", "wait"), LoadFinished(1, "an offer waited")],
        ),
        (
            "even the same content waits during a load",
            vec![Offer("d1", "new"), LoadStarted(1), Offer("d1", "wait"), LoadFinished(1, "an offer waited")],
        ),
        (
            "a deletion during a load waits for it",
            vec![Offer("d1", "new"), LoadStarted(1), Delete("wait"), LoadFinished(1, "a deletion waited")],
        ),
        ("a load with nothing waiting hands nothing back", vec![LoadStarted(1), LoadFinished(1, "nothing waited")]),
        (
            "another load's report is stale",
            vec![LoadStarted(2), LoadFinished(1, "stale"), LoadFinished(2, "nothing waited")],
        ),
        (
            "a load is over once it reported",
            vec![LoadStarted(1), LoadFinished(1, "nothing waited"), Offer("d1", "new")],
        ),
        (
            "new content abandons the pull of older content, whose report is then stale",
            vec![Offer("d1", "new"), PullStarted(1), Offer("d2", "new, abandoning a pull"), Pulled(1, false)],
        ),
        ("the pull under way reports", vec![PullStarted(1), Pulled(1, true), Pulled(1, false)]),
        ("a deletion abandons the pull", vec![PullStarted(1), Delete("unload, abandoning a pull")]),
        ("a deletion with nothing under way unloads", vec![Offer("d1", "new"), Delete("unload")]),
        ("a retry while pulling is skipped", vec![PullStarted(1), Retry(RetryStep::Skip)]),
        ("a retry while loading is skipped", vec![LoadStarted(1), Retry(RetryStep::Skip)]),
        (
            "a retry forgets the content handled, so the same content is tried again",
            vec![Offer("d1", "new"), Retry(RetryStep::Offer), Offer("d1", "new")],
        ),
    ];
    for (case, events) in cases {
        eprintln!("case: {case}");
        run(events);
    }
}

#[test]
fn one_retry_is_scheduled_at_a_time() {
    let (mut seen, first) = (Seen::default(), Duration::from_secs(15));
    assert!(seen.schedule_retry(first).is_some());
    assert!(seen.schedule_retry(first).is_none());
    assert_eq!(seen.retry(), RetryStep::Offer);
    assert!(seen.schedule_retry(first).is_some());
}

#[test]
fn a_refused_configmap_is_blocked_unless_it_serves_or_pulls() {
    let refused = || Seen { refused: true, ..Seen::default() };
    assert!(refused().blocked(false));
    assert!(!Seen::default().blocked(false), "nothing refused");
    assert!(!refused().blocked(true), "it serves");
    let mut pulling = refused();
    pulling.pull_started(1);
    assert!(!pulling.blocked(false), "its pull reports anyway");
    let mut loading = refused();
    loading.load_started(1);
    assert!(loading.blocked(false), "a retry of a loading object is skipped when due");
}

/// What happens to a plugin ConfigMap, for [`reads_of`].
enum Life {
    /// It arrives, of this fingerprint, offering this content when read.
    Arrives(Option<u64>, &'static str),
    /// Its retry is due.
    Retried,
    /// A load of what it offers starts.
    Loads,
}

/// How many times the source reads the object over `life`.
fn reads_of(life: Vec<Life>) -> usize {
    let (mut seen, mut reads) = (Seen::default(), 0);
    for event in life {
        match event {
            Life::Arrives(fingerprint, digest) => {
                if seen.arrive(&cm(), fingerprint) == Arrival::Read {
                    reads += 1;
                    seen.offer(&cm(), content(digest), fingerprint);
                }
            }
            Life::Retried => assert_eq!(seen.retry(), RetryStep::Offer),
            Life::Loads => seen.load_started(1),
        }
    }
    reads
}

#[test]
fn an_object_is_read_only_when_what_it_offers_may_have_changed() {
    use Life::*;
    let cases: Vec<(&str, Vec<Life>, usize)> = vec![
        (
            "the echo of the host's own status write is not read",
            vec![Arrives(Some(1), "d1"), Arrives(Some(1), "d1")],
            1,
        ),
        (
            "nor are many echoes and relists",
            vec![Arrives(Some(1), "d1"), Arrives(Some(1), "d1"), Arrives(Some(1), "d1"), Arrives(Some(1), "d1")],
            1,
        ),
        ("an edit is read", vec![Arrives(Some(1), "d1"), Arrives(Some(2), "d2")], 2),
        (
            "an edit back to what was handled is read: the fingerprint is the last one's",
            vec![Arrives(Some(1), "d1"), Arrives(Some(2), "d2"), Arrives(Some(1), "d1")],
            3,
        ),
        ("a retry reads the same again", vec![Arrives(Some(1), "d1"), Retried, Arrives(Some(1), "d1")], 2),
        (
            "an object with no fingerprint (a WasmPlugin) is read each time",
            vec![Arrives(None, "d1"), Arrives(None, "d1")],
            2,
        ),
        (
            "during a load, even an echo waits for the load's report",
            vec![Arrives(Some(1), "d1"), Loads, Arrives(Some(1), "d1")],
            1,
        ),
    ];
    for (case, life, expected) in cases {
        assert_eq!(reads_of(life), expected, "{case}");
    }
}

#[test]
fn an_echo_during_a_load_waits_rather_than_being_dropped() {
    let mut seen = Seen::default();
    seen.offer(&cm(), content("d1"), Some(1));
    seen.load_started(1);
    assert_eq!(seen.arrive(&cm(), Some(1)), Arrival::Wait);
    assert!(matches!(seen.load_finished(1), Some(Some(Waiting::Offer(_)))));
}

mod fixtures;
mod offers;
mod outcomes;
