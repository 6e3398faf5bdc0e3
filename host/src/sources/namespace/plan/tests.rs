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

// The plan's entry points, one behaviour per test. A test reads the steps as words
// ([`said`]), as a reader of the log would.

mod state {
    use std::collections::HashMap;

    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;
    use wasmloop_runtime::identity::AccountChoice;
    use wasmloop_runtime::registry::Loaded;
    use wasmloop_sandbox::{LoadError, PluginId};

    use super::super::*;
    use crate::plugin_configmap::Stored;

    const IMAGE: &str =
        "oci://127.0.0.1:5000/hello@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// The registry as a test sets it: what serves, and whether pulls are allowed.
    #[derive(Default)]
    struct Registry {
        serving: HashMap<SourceId, (PluginId, String)>,
        refuses_pulls: bool,
    }

    impl World for Registry {
        fn serving(&self, source: &SourceId) -> Option<(PluginId, String)> {
            self.serving.get(source).cloned()
        }

        fn admissible(&self, _: &PluginRef) -> Result<(), String> {
            if self.refuses_pulls { Err("registry 127.0.0.1:5000 is not allowed".to_owned()) } else { Ok(()) }
        }
    }

    fn state() -> State {
        State::new(Namespace::parse("team-a").unwrap(), None)
    }

    fn cm(name: &str) -> Shipper {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.to_owned());
        Shipper::ConfigMap(cm)
    }

    fn wp(name: &str, generation: i64, spec: serde_json::Value) -> Shipper {
        let object = json!({"metadata": {"name": name, "namespace": "team-a", "uid": "u1", "generation": generation}, "spec": spec});
        Shipper::WasmPlugin(serde_json::from_value(object).unwrap())
    }

    fn key(shipper: &Shipper) -> Key {
        shipper.key()
    }

    /// What plugin `plugin`'s object offers: a stored component, serving.
    fn offer(plugin: &str) -> Offer {
        let payload = PluginPayload {
            name: plugin.to_owned(),
            component: Stored::Plain(vec![1, 2, 3].into()),
            reference: None,
            pull_secret: None,
            config: None,
            pin: None,
            signature: None,
            track: Track::Serving,
        };
        let (account, signer, said, settings) = (None, None, None, None);
        Offer { payload, account, signer, stop: false, suspend: false, said, settings, stored_in: "team-a/x".into() }
    }

    fn referenced(plugin: &str) -> Offer {
        let mut offer = offer(plugin);
        offer.payload.component = Stored::Nothing;
        offer.payload.reference = Some(PluginRef::parse(IMAGE).unwrap().pinned().unwrap());
        offer
    }

    fn shadow(mut offer: Offer) -> Offer {
        offer.payload.track = Track::Shadow;
        offer
    }

    fn offered(state: &mut State, shipper: &Shipper, read: Result<Offer, Unread>, world: &Registry) -> Vec<Step> {
        let content = content_of(&read);
        state.on_offer(shipper, read, content, None, world)
    }

    fn serving(state: &State, shipper: &Shipper, plugin: &str) -> Registry {
        let id = PluginId::new(Some(Namespace::parse("team-a").unwrap()), plugin).unwrap();
        Registry {
            serving: HashMap::from([(state.source(&key(shipper)), (id, "1.0.0".to_owned()))]),
            ..Registry::default()
        }
    }

    fn start_failed() -> RegistryError {
        let source = wasmloop_runtime::controller::StartError::NotSynced {
            plugin: PluginId::new(None, "p").unwrap(),
            kind: "v1/ConfigMap".into(),
        };
        RegistryError::Start { source, running: None }
    }

    /// The steps as words.
    fn said(steps: &[Step]) -> Vec<String> {
        steps.iter().map(word).collect()
    }

    fn word(step: &Step) -> String {
        match step {
            Step::Report(_, Reported::Observed { generation, settled, .. }) => {
                format!("observed {generation}{}", if *settled { ", settled" } else { "" })
            }
            Step::Report(_, what) => format!("report {}", reported(what)),
            Step::Refuse { reason, ours: false, .. } => format!("refuse {reason}"),
            Step::Refuse { reason, ours: true, .. } => format!("refuse {reason}, the host's failure"),
            Step::Stop(_, why) => format!("stop: {}", reason_of(why)),
            Step::RetryAfter(_, delay) => format!("retry after {} s", delay.as_secs()),
            Step::RetryNow(key) => format!("retry {} {} now", key.kind, key.name),
            Step::RetryBlocked => "retry the blocked".to_owned(),
            Step::AbortPull(_, id) => format!("abort pull {id}"),
            Step::Pull { account: Some(_), .. } => "pull, as its account".to_owned(),
            Step::Pull { account: None, .. } => "pull, as nobody".to_owned(),
            Step::Load { spec, .. } if spec.shadow() => "seat".to_owned(),
            Step::Load { .. } => "load".to_owned(),
            Step::Offer(_) => "offer".to_owned(),
            Step::Fetch(_) => "fetch".to_owned(),
        }
    }

    fn reported(what: &Reported) -> String {
        match what {
            Reported::Stopped { reason, .. } => format!("stopped {reason}"),
            Reported::Refused { reason, .. } => format!("refused {reason}"),
            Reported::Retired { .. } => "retired".to_owned(),
            Reported::Removed => "removed".to_owned(),
            other => format!("{other:?}"),
        }
    }

    fn reason_of(why: &Why) -> &str {
        match why {
            Why::Refused { reason, .. } => reason,
            Why::Suspended => "Suspended",
            Why::Retired { .. } => "Retired",
            Why::NameTaken { .. } => "NameTaken",
            Why::Deleted => "Deleted",
        }
    }

    fn message(steps: &[Step]) -> &str {
        steps
            .iter()
            .find_map(|step| match step {
                Step::Refuse { message, .. } | Step::Stop(_, Why::Refused { message, .. }) => Some(message.as_str()),
                Step::Report(_, Reported::Stopped { message, .. } | Reported::Refused { message, .. }) => {
                    Some(message.as_str())
                }
                _ => None,
            })
            .expect("a refusal")
    }

    fn refused(state: &State, shipper: &Shipper) -> bool {
        state.seen.get(&key(shipper)).is_some_and(|seen| seen.refused)
    }

    // on_offer

    #[test]
    fn a_stored_component_is_loaded() {
        let (mut state, a) = (state(), cm("a"));
        assert_eq!(said(&offered(&mut state, &a, Ok(offer("p")), &Registry::default())), ["load"]);
    }

    #[test]
    fn the_same_content_again_is_nothing_new() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let Some(Step::Load { id, .. }) = offered(&mut state, &a, Ok(offer("p")), &world).pop() else { panic!() };
        let loaded =
            Loaded::Started { name: PluginId::new(None, "p").unwrap(), version: "1".into(), digest: "d".into() };
        state.on_loaded(&a, id, Ok(LoadDone::Loaded(loaded)), &world);
        assert!(offered(&mut state, &a, Ok(offer("p")), &world).is_empty());
    }

    #[test]
    fn content_that_cannot_be_read_is_refused() {
        let (mut state, a) = (state(), cm("a"));
        let unread = Unread::invalid("InvalidConfigMap", "no plugin label".into(), false);
        assert_eq!(said(&offered(&mut state, &a, Err(unread), &Registry::default())), ["refuse InvalidConfigMap"]);
        assert!(refused(&state, &a));
    }

    #[test]
    fn a_refusal_says_which_version_keeps_serving() {
        let (mut state, a) = (state(), cm("a"));
        let world = serving(&state, &a, "p");
        let unread = Unread::invalid("InvalidConfigMap", "no plugin label".into(), false);
        let steps = offered(&mut state, &a, Err(unread), &world);
        assert!(message(&steps).ends_with("(plugin p 1.0.0 keeps serving)"), "{}", message(&steps));
    }

    #[test]
    fn what_the_host_failed_to_read_is_refused_as_its_own_failure_and_tried_again() {
        let (mut state, a) = (state(), wp("a", 1, json!({})));
        let unread = Unread { reason: "ConfigMapUnreadable", message: "cannot read".into(), stop: true, ours: true };
        let steps = offered(&mut state, &a, Err(unread), &Registry::default());
        assert_eq!(said(&steps), ["observed 1", "retry after 15 s", "refuse ConfigMapUnreadable, the host's failure"]);
        assert!(!refused(&state, &a), "the object is not at fault");
    }

    #[test]
    fn under_failure_policy_stop_a_refusal_stops_what_served_and_says_nothing_keeps_serving() {
        let (mut state, a) = (state(), cm("a"));
        let world = serving(&state, &a, "p");
        let unread = Unread::invalid("InvalidConfigMap", "bad".into(), true);
        let steps = offered(&mut state, &a, Err(unread), &world);
        assert_eq!(said(&steps), ["stop: InvalidConfigMap"]);
        assert_eq!(message(&steps), "bad");
    }

    #[test]
    fn a_suspended_wasmplugin_stops_what_it_serves() {
        let (mut state, a) = (state(), wp("a", 2, json!({"suspend": true})));
        let mut suspended = offer("p");
        suspended.suspend = true;
        assert_eq!(
            said(&offered(&mut state, &a, Ok(suspended), &Registry::default())),
            ["observed 2", "stop: Suspended"]
        );
    }

    #[test]
    fn a_superseded_object_is_retired_whether_it_stores_or_names_its_component() {
        for mut offer in [offer("p"), referenced("p")] {
            let (mut state, a) = (state(), cm("a"));
            (offer.payload.track, offer.said) = (Track::Superseded, Some("superseded by b".into()));
            assert_eq!(said(&offered(&mut state, &a, Ok(offer), &Registry::default())), ["stop: Retired"]);
        }
    }

    #[test]
    fn a_reference_is_pulled_as_the_plugin_s_account() {
        let (mut state, a) = (state(), cm("a"));
        assert_eq!(said(&offered(&mut state, &a, Ok(referenced("p")), &Registry::default())), ["pull, as its account"]);
    }

    #[test]
    fn a_shadow_s_reference_is_pulled_as_nobody() {
        let (mut state, a) = (state(), cm("a"));
        let steps = offered(&mut state, &a, Ok(shadow(referenced("p"))), &Registry::default());
        assert_eq!(said(&steps), ["pull, as nobody"]);
    }

    #[test]
    fn a_reference_the_registry_policy_forbids_is_refused_before_a_connection_is_made() {
        let (mut state, a) = (state(), cm("a"));
        let world = Registry { refuses_pulls: true, ..Registry::default() };
        assert_eq!(said(&offered(&mut state, &a, Ok(referenced("p")), &world)), ["refuse PullRefused"]);
    }

    #[test]
    fn a_malformed_pin_is_refused_before_a_pull() {
        let (mut state, a) = (state(), cm("a"));
        let mut pinned = referenced("p");
        pinned.payload.pin = Some("sha256:not-hex".into());
        let steps = offered(&mut state, &a, Ok(pinned), &Registry::default());
        assert_eq!(said(&steps).len(), 1);
        assert!(said(&steps)[0].starts_with("refuse "), "{:?}", said(&steps));
    }

    #[test]
    fn an_account_that_is_no_service_account_name_is_refused() {
        let (mut state, a) = (state(), cm("a"));
        let mut named = offer("p");
        named.account = Some("Not An Account".into());
        let steps = offered(&mut state, &a, Ok(named), &Registry::default());
        assert_eq!(said(&steps), ["refuse InvalidConfigMap"]);
        assert!(message(&steps).contains("wasmloop.dev/service-account"), "{}", message(&steps));
    }

    #[test]
    fn a_named_account_is_the_one_the_plugin_acts_as() {
        let (mut state, a) = (state(), cm("a"));
        let mut named = offer("p");
        named.account = Some("robot".into());
        let Some(Step::Load { spec, .. }) = offered(&mut state, &a, Ok(named), &Registry::default()).pop() else {
            panic!("no load")
        };
        assert!(
            matches!(spec.account, AccountChoice::Named(account) if account.to_string() == "ServiceAccount team-a/robot")
        );
    }

    #[test]
    fn a_shadow_is_seated_and_acts_as_nobody_whatever_account_it_names() {
        let (mut state, a) = (state(), cm("a"));
        let mut named = shadow(offer("p"));
        named.account = Some("robot".into());
        let Some(Step::Load { spec, .. }) = offered(&mut state, &a, Ok(named), &Registry::default()).pop() else {
            panic!("no load")
        };
        assert!(spec.shadow());
        assert!(matches!(spec.account, AccountChoice::LikePlugin { .. }));
    }

    #[test]
    fn an_object_that_serves_cannot_become_a_shadow() {
        let (mut state, a) = (state(), cm("a"));
        let world = serving(&state, &a, "p");
        let steps = offered(&mut state, &a, Ok(shadow(offer("p"))), &world);
        assert_eq!(said(&steps), ["refuse InvalidConfigMap"]);
        assert!(message(&steps).contains("this ConfigMap serves plugin p"), "{}", message(&steps));
    }

    #[test]
    fn a_configmap_may_not_serve_a_plugin_a_wasmplugin_claims() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        assert!(state.on_arrived(&wp("p", 1, json!({"configMapRef": {"name": "c"}}))));
        let steps = offered(&mut state, &a, Ok(offer("p")), &world);
        assert_eq!(said(&steps), ["refuse NameTaken"]);
        assert!(message(&steps).contains("claimed by WasmPlugin team-a/p"), "{}", message(&steps));
    }

    #[test]
    fn a_shadowing_wasmplugin_claims_no_name() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        state.on_arrived(&wp(
            "p",
            1,
            json!({"configMapRef": {"name": "c"}, "track": {"mode": "shadow", "shadows": "p"}}),
        ));
        assert_eq!(said(&offered(&mut state, &a, Ok(offer("p")), &world)), ["load"]);
    }

    #[test]
    fn a_key_ref_on_a_host_that_trusts_no_keys_is_refused() {
        let (mut state, a) = (state(), wp("a", 1, json!({})));
        let mut signed = offer("p");
        signed.signer = Some("0123456789ABCDEF".into());
        let steps = offered(&mut state, &a, Ok(signed), &Registry::default());
        assert_eq!(said(&steps), ["observed 1", "refuse SignatureRejected"]);
        assert!(message(&steps).contains("--trusted-keys"), "{}", message(&steps));
    }

    #[test]
    fn new_content_while_pulling_aborts_the_pull() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let Some(Step::Pull { id, .. }) = offered(&mut state, &a, Ok(referenced("p")), &world).pop() else { panic!() };
        let mut other = offer("p");
        other.payload.config = Some("{}".into());
        assert_eq!(said(&offered(&mut state, &a, Ok(other), &world)), [format!("abort pull {id}"), "load".into()]);
    }

    #[test]
    fn an_offer_while_loading_waits_for_the_load() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        offered(&mut state, &a, Ok(offer("p")), &world);
        let mut other = offer("p");
        other.payload.config = Some("{}".into());
        assert!(offered(&mut state, &a, Ok(other), &world).is_empty());
    }

    #[test]
    fn a_wasmplugin_s_generation_is_observed_before_its_outcome_and_settled_when_nothing_is_under_way() {
        let (mut state, world) = (state(), Registry::default());
        let (first, again) = (wp("a", 3, json!({})), wp("a", 3, json!({})));
        let invalid = || Err(Unread::invalid("InvalidWasmPlugin", "bad".into(), false));
        assert_eq!(said(&offered(&mut state, &first, invalid(), &world)), ["observed 3", "refuse InvalidWasmPlugin"]);
        assert_eq!(said(&offered(&mut state, &again, invalid(), &world)), ["observed 3, settled"]);
    }

    // on_pulled

    fn pulling(state: &mut State, shipper: &Shipper, offer: Offer) -> u64 {
        match offered(state, shipper, Ok(offer), &Registry::default()).pop() {
            Some(Step::Pull { id, .. }) => id,
            other => panic!("no pull: {other:?}"),
        }
    }

    #[test]
    fn a_pulled_component_is_loaded() {
        let (mut state, a) = (state(), cm("a"));
        let id = pulling(&mut state, &a, referenced("p"));
        assert_eq!(said(&state.on_pulled(&a, id, offer("p"), None, &Registry::default())), ["load"]);
    }

    #[test]
    fn a_stale_pull_s_report_changes_nothing() {
        let (mut state, a) = (state(), cm("a"));
        let id = pulling(&mut state, &a, referenced("p"));
        assert!(state.on_pulled(&a, id + 7, offer("p"), None, &Registry::default()).is_empty());
        assert!(!state.seen[&key(&a)].idle(), "the pull under way still is");
    }

    #[test]
    fn a_failed_pull_is_refused_and_tried_again_in_30_s() {
        let (mut state, a) = (state(), cm("a"));
        let id = pulling(&mut state, &a, referenced("p"));
        let failed = Some(PullFailure::Fetch("connection refused".into()));
        let steps = state.on_pulled(&a, id, referenced("p"), failed, &Registry::default());
        assert_eq!(said(&steps), ["retry after 30 s", "refuse PullFailed"]);
        assert!(message(&steps).contains("cannot pull oci://127.0.0.1:5000/hello@sha256:"), "{}", message(&steps));
    }

    #[test]
    fn a_plugin_refused_its_account_before_the_pull_is_tried_again_in_15_s() {
        let (mut state, a) = (state(), cm("a"));
        let id = pulling(&mut state, &a, referenced("p"));
        let failed = Some(PullFailure::Identity(start_failed()));
        let steps = state.on_pulled(&a, id, referenced("p"), failed, &Registry::default());
        assert_eq!(said(&steps), ["retry after 15 s", "refuse StartFailed"]);
    }

    // on_loaded

    fn loading(state: &mut State, shipper: &Shipper, offer: Offer) -> u64 {
        match offered(state, shipper, Ok(offer), &Registry::default()).pop() {
            Some(Step::Load { id, .. }) => id,
            other => panic!("no load: {other:?}"),
        }
    }

    fn started(plugin: &str) -> Result<LoadDone, LoadFailure> {
        let name = PluginId::new(Some(Namespace::parse("team-a").unwrap()), plugin).unwrap();
        Ok(LoadDone::Loaded(Loaded::Started { name, version: "1".into(), digest: "d".into() }))
    }

    #[test]
    fn a_loaded_version_ends_the_object_s_refusal() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        offered(&mut state, &a, Err(Unread::invalid("InvalidConfigMap", "x".into(), false)), &world);
        let id = loading(&mut state, &a, offer("p"));
        assert!(state.on_loaded(&a, id, started("p"), &world).is_empty());
        assert!(!refused(&state, &a));
    }

    #[test]
    fn a_seated_shadow_ends_the_object_s_refusal() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        offered(&mut state, &a, Err(Unread::invalid("InvalidConfigMap", "x".into(), false)), &world);
        let id = loading(&mut state, &a, shadow(offer("p")));
        assert!(state.on_loaded(&a, id, Ok(LoadDone::Seated), &world).is_empty());
        assert!(!refused(&state, &a));
    }

    #[test]
    fn a_stale_load_s_report_changes_nothing() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let id = loading(&mut state, &a, offer("p"));
        assert!(state.on_loaded(&a, id + 1, started("p"), &world).is_empty());
    }

    #[test]
    fn a_plugin_that_did_not_start_is_refused_and_tried_again() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let id = loading(&mut state, &a, offer("p"));
        let steps = state.on_loaded(&a, id, Err(LoadFailure::Registry(start_failed())), &world);
        assert_eq!(said(&steps), ["retry after 15 s", "refuse StartFailed"]);
    }

    #[test]
    fn a_component_that_does_not_load_is_refused_and_not_tried_again() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let id = loading(&mut state, &a, offer("p"));
        let source = LoadError::Panicked { origin: "ConfigMap team-a/a".into(), message: "x".into() };
        let steps =
            state.on_loaded(&a, id, Err(LoadFailure::Registry(RegistryError::Load { source, running: None })), &world);
        assert_eq!(said(&steps).len(), 1, "{:?}", said(&steps));
    }

    #[test]
    fn bytes_that_do_not_match_their_pin_are_refused_naming_the_plugin() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let id = loading(&mut state, &a, offer("p"));
        let failed = LoadFailure::Bytes {
            plugin: "p".into(),
            reason: "DigestMismatch",
            message: "not the pinned digest".into(),
        };
        let steps = state.on_loaded(&a, id, Err(failed), &world);
        assert_eq!(said(&steps), ["refuse DigestMismatch"]);
        assert_eq!(message(&steps), "plugin p: not the pinned digest");
    }

    #[test]
    fn what_waited_for_a_load_is_handled_after_it() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let id = loading(&mut state, &a, offer("p"));
        assert_eq!(state.arrive(&a, Some(1)), Arrival::Wait);
        assert_eq!(said(&state.on_loaded(&a, id, started("p"), &world)), ["offer"]);
    }

    #[test]
    fn a_deletion_that_waited_for_a_load_unloads_after_it() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let id = loading(&mut state, &a, offer("p"));
        assert!(state.on_deleted(&key(&a)).is_empty());
        assert_eq!(said(&state.on_loaded(&a, id, started("p"), &world)), ["stop: Deleted"]);
        assert!(!state.seen.contains_key(&key(&a)));
    }

    #[test]
    fn a_configmap_version_loaded_while_a_wasmplugin_of_its_name_came_gives_the_name_up() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let id = loading(&mut state, &a, offer("p"));
        state.on_arrived(&wp("p", 1, json!({"configMapRef": {"name": "c"}})));
        assert_eq!(said(&state.on_loaded(&a, id, started("p"), &world)), ["stop: NameTaken", "retry the blocked"]);
    }

    #[test]
    fn a_wasmplugin_refused_for_a_configmap_s_version_of_its_name_takes_it_and_tries_again() {
        let (mut state, world) = (state(), Registry::default());
        let (a, p) = (cm("a"), wp("p", 1, json!({"configMapRef": {"name": "c"}})));
        offered(&mut state, &a, Ok(offer("p")), &world);
        state.on_arrived(&p);
        let id = loading(&mut state, &p, offer("p"));
        let holder =
            SourceId::object(SourceKind::ConfigMap, Namespace::parse("team-a").unwrap(), Name::parse("a").unwrap());
        let name = PluginId::new(Some(Namespace::parse("team-a").unwrap()), "p").unwrap();
        let taken = RegistryError::NameTaken { origin: state.source(&key(&p)), name, holder };
        let steps = state.on_loaded(&p, id, Err(LoadFailure::Registry(taken)), &world);
        assert_eq!(said(&steps), ["stop: NameTaken", "retry WasmPlugin p now"]);
    }

    // on_deleted, on_retry

    #[test]
    fn a_deleted_object_with_nothing_under_way_stops_what_it_served() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        offered(&mut state, &a, Err(Unread::invalid("InvalidConfigMap", "x".into(), false)), &world);
        assert_eq!(said(&state.on_deleted(&key(&a))), ["stop: Deleted"]);
        assert!(!state.seen.contains_key(&key(&a)));
    }

    #[test]
    fn a_deleted_object_s_pull_is_aborted() {
        let (mut state, a) = (state(), cm("a"));
        let id = pulling(&mut state, &a, referenced("p"));
        assert_eq!(said(&state.on_deleted(&key(&a))), [format!("abort pull {id}"), "stop: Deleted".into()]);
    }

    #[test]
    fn a_deleted_wasmplugin_claims_its_name_no_more() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let p = wp("p", 1, json!({"configMapRef": {"name": "c"}}));
        state.on_arrived(&p);
        state.on_deleted(&key(&p));
        assert_eq!(said(&offered(&mut state, &a, Ok(offer("p")), &world)), ["load"]);
    }

    #[test]
    fn a_retry_that_is_due_reads_the_object_afresh() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        offered(&mut state, &a, Err(Unread::invalid("InvalidConfigMap", "x".into(), false)), &world);
        assert_eq!(said(&state.on_retry(&key(&a))), ["fetch"]);
    }

    #[test]
    fn a_retry_while_a_pull_is_under_way_is_skipped() {
        let (mut state, a) = (state(), cm("a"));
        pulling(&mut state, &a, referenced("p"));
        assert!(state.on_retry(&key(&a)).is_empty());
    }

    #[test]
    fn an_object_that_could_not_be_read_for_its_retry_is_tried_again_in_15_s() {
        let (mut state, a) = (state(), cm("a"));
        assert_eq!(said(&state.on_fetch_failed(&key(&a))), ["retry after 15 s"]);
    }

    // on_stopped, unblocked

    fn blocked_other(state: &mut State) -> Shipper {
        let b = cm("b");
        state.on_arrived(&wp("q", 1, json!({"configMapRef": {"name": "c"}})));
        offered(state, &b, Ok(offer("q")), &Registry::default());
        assert!(refused(state, &b));
        b
    }

    fn stopped(plugin: &str) -> Stopped {
        let removed = Some(PluginId::new(Some(Namespace::parse("team-a").unwrap()), plugin).unwrap());
        Stopped { removed, unshadowed: Vec::new() }
    }

    #[test]
    fn a_stop_under_failure_policy_stop_reports_the_plugin_stopped_and_retries_the_blocked() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        blocked_other(&mut state);
        let why = Why::Refused { reason: "InvalidConfigMap".into(), message: "bad".into() };
        let steps = state.on_stopped(&key(&a), why, stopped("p"), &world);
        assert_eq!(said(&steps), ["report stopped InvalidConfigMap", "retry ConfigMap b now"]);
        assert!(message(&steps).contains("failurePolicy Stop: plugin team-a/p stopped"), "{}", message(&steps));
    }

    #[test]
    fn a_refusal_under_failure_policy_stop_with_nothing_serving_is_a_plain_refusal() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        offered(&mut state, &a, Err(Unread::invalid("InvalidConfigMap", "x".into(), true)), &world);
        let why = Why::Refused { reason: "InvalidConfigMap".into(), message: "bad".into() };
        assert_eq!(
            said(&state.on_stopped(&key(&a), why, Stopped::default(), &world)),
            ["report refused InvalidConfigMap"]
        );
        assert!(refused(&state, &a));
    }

    #[test]
    fn the_object_that_stopped_is_not_among_those_it_unblocks() {
        let (mut state, world) = (state(), Registry::default());
        let b = blocked_other(&mut state);
        let why = Why::Refused { reason: "InvalidConfigMap".into(), message: "bad".into() };
        let steps = state.on_stopped(&key(&b), why, stopped("q"), &world);
        assert_eq!(said(&steps), ["report stopped InvalidConfigMap"]);
    }

    #[test]
    fn a_suspension_reports_the_plugin_stopped_and_is_no_refusal() {
        let (mut state, a, world) = (state(), wp("a", 1, json!({})), Registry::default());
        offered(&mut state, &a, Err(Unread::invalid("InvalidWasmPlugin", "x".into(), false)), &world);
        assert_eq!(
            said(&state.on_stopped(&key(&a), Why::Suspended, stopped("p"), &world)),
            ["report stopped Suspended"]
        );
        assert!(!refused(&state, &a));
    }

    #[test]
    fn a_retired_object_reports_what_its_status_said() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let said_before = Some("superseded".to_owned());
        let steps = state.on_stopped(&key(&a), Why::Retired { said: said_before.clone() }, Stopped::default(), &world);
        assert!(matches!(&steps[..], [Step::Report(_, Reported::Retired { said })] if *said == said_before));
    }

    #[test]
    fn a_configmap_that_gives_its_name_up_is_stopped_if_it_served_and_refused_if_not() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        let why = || Why::NameTaken { message: "claimed".into() };
        assert_eq!(said(&state.on_stopped(&key(&a), why(), stopped("p"), &world)), ["report stopped NameTaken"]);
        assert_eq!(said(&state.on_stopped(&key(&a), why(), Stopped::default(), &world)), ["report refused NameTaken"]);
    }

    #[test]
    fn a_deleted_wasmplugin_frees_its_name_for_the_configmaps_it_blocked() {
        let (mut state, world) = (state(), Registry::default());
        blocked_other(&mut state);
        let q = wp("q", 1, json!({"configMapRef": {"name": "c"}}));
        let steps = state.on_stopped(&key(&q), Why::Deleted, Stopped::default(), &world);
        assert_eq!(said(&steps), ["report removed", "retry ConfigMap b now"]);
    }

    #[test]
    fn a_deleted_configmap_that_served_nothing_unblocks_nothing() {
        let (mut state, a, world) = (state(), cm("a"), Registry::default());
        blocked_other(&mut state);
        assert_eq!(said(&state.on_stopped(&key(&a), Why::Deleted, Stopped::default(), &world)), ["report removed"]);
    }

    #[test]
    fn an_object_refused_while_its_plugin_is_held_elsewhere_is_blocked_until_it_serves() {
        let mut state = state();
        let b = blocked_other(&mut state);
        assert_eq!(state.unblocked(&Registry::default()), [key(&b)]);
        assert!(state.unblocked(&serving(&state, &b, "q")).is_empty(), "it serves");
    }

    // what the watches bring

    #[test]
    fn a_wasmplugin_whose_generation_was_handled_offers_nothing_new() {
        let (mut state, world) = (state(), Registry::default());
        let p = wp("p", 4, json!({}));
        assert!(state.on_arrived(&p));
        offered(&mut state, &p, Err(Unread::invalid("InvalidWasmPlugin", "x".into(), false)), &world);
        assert!(!state.on_arrived(&wp("p", 4, json!({}))), "a status write");
        assert!(state.on_arrived(&wp("p", 5, json!({}))), "an edit");
    }

    #[test]
    fn a_wasmplugin_created_again_under_its_name_is_new_whatever_its_generation() {
        let (mut state, world) = (state(), Registry::default());
        let p = wp("p", 1, json!({}));
        state.on_arrived(&p);
        offered(&mut state, &p, Err(Unread::invalid("InvalidWasmPlugin", "x".into(), false)), &world);
        let Shipper::WasmPlugin(mut again) = wp("p", 1, json!({})) else { unreachable!() };
        again.metadata.uid = Some("u2".into());
        assert!(state.on_arrived(&Shipper::WasmPlugin(again)));
    }

    #[test]
    fn a_change_of_the_configmap_a_wasmplugin_names_offers_the_wasmplugin_again() {
        let mut state = state();
        state.on_arrived(&wp("p", 1, json!({"configMapRef": {"name": "c"}})));
        assert_eq!(said(&state.on_named("c", Some("10".into()))), ["offer"]);
        assert!(state.on_named("c", Some("10".into())).is_empty(), "a relist of the version seen");
        assert!(state.on_named("other", Some("11".into())).is_empty(), "a ConfigMap no WasmPlugin names");
        assert_eq!(said(&state.on_named("c", None)), ["offer"], "it went");
    }

    #[test]
    fn a_list_that_did_not_bring_an_object_unloads_it() {
        let (mut state, world) = (state(), Registry::default());
        let (a, b) = (cm("a"), cm("b"));
        offered(&mut state, &a, Ok(offer("p")), &world);
        offered(&mut state, &b, Err(Unread::invalid("InvalidConfigMap", "x".into(), false)), &world);
        state.on_list_started(SourceKind::ConfigMap);
        state.on_listed(&key(&a));
        assert!(!state.listed(SourceKind::ConfigMap));
        assert_eq!(said(&state.on_list_done(SourceKind::ConfigMap)), ["stop: Deleted"]);
        assert!(state.listed(SourceKind::ConfigMap));
        assert!(state.seen.contains_key(&key(&a)) && !state.seen.contains_key(&key(&b)));
    }

    #[test]
    fn a_failed_wasmplugin_watch_counts_as_listed_once_and_a_configmap_watch_never() {
        let mut state = state();
        assert!(state.on_watch_failed(SourceKind::WasmPlugin));
        assert!(!state.on_watch_failed(SourceKind::WasmPlugin));
        assert!(!state.on_watch_failed(SourceKind::ConfigMap));
    }

    #[test]
    fn an_unreadable_object_s_content_is_its_error_so_another_error_is_another_offer() {
        let a = Err(Unread::invalid("InvalidConfigMap", "one".into(), false));
        let b = Err(Unread::invalid("InvalidConfigMap", "two".into(), false));
        assert_ne!(content_of(&a), content_of(&b));
        assert_eq!(content_of(&a).unread.as_deref(), Some("one"));
    }
}
