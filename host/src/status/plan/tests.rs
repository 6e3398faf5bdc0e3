//! The status plan's table tests: each report and board change, and what it must show.

use wasmloop_runtime::shadow::Difference;

use super::*;

const NOW: &str = "2026-11-27T12:00:00Z";
const LATER: &str = "2026-11-27T12:05:00Z";

fn key(name: &str) -> ObjectKey {
    ObjectKey {
        kind: SourceKind::ConfigMap,
        namespace: Namespace::parse("team-a").unwrap(),
        name: Name::parse(name).unwrap(),
    }
}

fn source(name: &str) -> SourceId {
    SourceId::object(SourceKind::ConfigMap, Namespace::parse("team-a").unwrap(), Name::parse(name).unwrap())
}

fn pid(text: &str) -> wasmloop_sandbox::PluginId {
    wasmloop_sandbox::PluginId::parse(text).unwrap()
}

fn loaded(name: &str, loaded: Loaded) -> Report {
    Report::new(source(name), Reported::Loaded(loaded))
}

fn started(version: &str, digest: &str) -> Loaded {
    Loaded::Started { name: pid("team-a/hello"), version: version.into(), digest: digest.into() }
}

/// `hello-shadow`'s version, promoted over what `hello` served.
fn promoted() -> Loaded {
    Loaded::Promoted {
        name: pid("team-a/hello"),
        version: "2.0.0".into(),
        previous: Some("1.0.0".into()),
        superseded: Some(source("hello")),
        digest: "d2".into(),
    }
}

fn refused(name: &str, message: &str) -> Report {
    Report::new(source(name), Reported::Refused { reason: "LoadFailed".into(), message: message.into() })
}

fn seated(name: &str, id: u64) -> Report {
    let what = Reported::ShadowSeated { id, plugin: pid("team-a/hello"), version: "2".into(), digest: "d".into() };
    Report::new(source(name), what)
}

fn findings(name: &str, id: u64, report: ShadowReport) -> Report {
    Report::new(source(name), Reported::ShadowFindings { id, report })
}

/// The effects as short words, to read a case at a glance.
fn said(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .map(|effect| match effect {
            Effect::Status { object, .. } => format!("status {}", object.name),
            Effect::Supersede { object, .. } => format!("supersede {}", object.name),
            Effect::Event { object, reason, .. } => format!("event {reason} {}", object.name),
        })
        .collect()
}

fn status(effect: &Effect) -> &serde_json::Value {
    match effect {
        Effect::Status { status, .. } | Effect::Supersede { status, .. } => status,
        Effect::Event { .. } => panic!("an Event, not a status: {effect:?}"),
    }
}

#[test]
fn each_report_shows_what_its_configmap_should_say() {
    // (case, reports in order, what the last report writes)
    let cases: Vec<(&str, Vec<Report>, Vec<&str>)> = vec![
        (
            "a version loads",
            vec![loaded("hello", started("1.0.0", "d1"))],
            vec!["status hello", "event PluginLoaded hello"],
        ),
        ("a refusal", vec![refused("hello", "bad")], vec!["status hello", "event PluginRejected hello"]),
        ("the same refusal again says nothing new", vec![refused("hello", "bad"), refused("hello", "bad")], vec![]),
        (
            "another refusal is said",
            vec![refused("hello", "bad"), refused("hello", "worse")],
            vec!["status hello", "event PluginRejected hello"],
        ),
        (
            "an offer of what serves ends a refusal",
            vec![
                refused("hello", "bad"),
                loaded("hello", Loaded::Unchanged { name: pid("team-a/hello"), digest: "d1".into() }),
            ],
            vec!["status hello"],
        ),
        (
            "an offer of what serves, with nothing refused, writes nothing",
            vec![loaded("hello", Loaded::Unchanged { name: pid("team-a/hello"), digest: "d1".into() })],
            vec![],
        ),
        (
            "a version parked for another replica writes nothing here",
            vec![loaded("hello", Loaded::Parked { name: pid("team-a/hello"), digest: "d1".into() })],
            vec![],
        ),
        (
            "a promotion supersedes the ConfigMap that served, first",
            vec![loaded("hello", started("1.0.0", "d1")), loaded("hello-shadow", promoted())],
            vec!["supersede hello", "status hello-shadow", "event PluginLoaded hello-shadow"],
        ),
        (
            "a promotion over a ConfigMap deleted since marks nothing",
            vec![
                loaded("hello", started("1.0.0", "d1")),
                Report::new(source("hello"), Reported::Removed),
                loaded("hello-shadow", promoted()),
            ],
            vec!["status hello-shadow", "event PluginLoaded hello-shadow"],
        ),
        ("a shadow seated", vec![seated("s", 1)], vec!["status s", "event ShadowStarted s"]),
        (
            "findings of a seating since replaced are stale",
            vec![seated("s", 2), findings("s", 1, ShadowReport { compared: 1, same: 1, ..ShadowReport::default() })],
            vec![],
        ),
        (
            "a retired ConfigMap says it is superseded, once",
            vec![Report::new(source("old"), Reported::Retired { said: None })],
            vec!["status old", "event Superseded old"],
        ),
        (
            "a retired ConfigMap keeps what its status said after a restart",
            vec![Report::new(
                source("old"),
                Reported::Retired { said: Some("superseded: plugin hello is served from ...".into()) },
            )],
            vec![],
        ),
        (
            "a source that is no ConfigMap shows nowhere",
            vec![Report::new(SourceId::file("a.wasm"), Reported::Refused { reason: "X".into(), message: "m".into() })],
            vec![],
        ),
        (
            "a deleted ConfigMap is forgotten: its refusal, said again later, is said",
            vec![refused("hello", "bad"), Report::new(source("hello"), Reported::Removed), refused("hello", "bad")],
            vec!["status hello", "event PluginRejected hello"],
        ),
    ];
    for (case, reports, expected) in cases {
        let mut statuses = Statuses::new(None);
        let mut last = Vec::new();
        for report in reports {
            last = statuses.report(report, NOW);
        }
        assert_eq!(said(&last), expected, "{case}");
    }
}

#[test]
fn a_loaded_version_shows_with_its_time_and_ends_any_refusal_and_shadow() {
    let mut statuses = Statuses::new(None);
    statuses.report(refused("hello", "bad"), NOW);
    statuses.report(seated("hello", 1), NOW);
    let effects = statuses.report(loaded("hello", started("1.0.0", "d1")), LATER);
    assert_eq!(
        status(&effects[0]).to_string(),
        format!(r#"{{"plugin":"hello","version":"1.0.0","activeDigest":"d1","loadedAt":"{LATER}","lastError":null}}"#),
        "the annotation's text, keys in order"
    );
}

#[test]
fn a_refusal_shows_its_cut_words_and_when() {
    let mut statuses = Statuses::new(None);
    let effects = statuses.report(refused("hello", &"x".repeat(10_000)), NOW);
    let shown = status(&effects[0]);
    assert!(shown["lastError"].as_str().unwrap().len() <= MAX_LAST_ERROR);
    assert_eq!(shown["lastErrorAt"], NOW);
    let Effect::Event { kind, note, .. } = &effects[1] else { panic!("an Event") };
    assert_eq!(*kind, EventType::Warning);
    assert!(note.starts_with("LoadFailed: xxx"));
}

#[test]
fn a_promotion_names_the_successor_on_the_superseded_configmap() {
    let mut statuses = Statuses::new(None);
    statuses.report(loaded("hello", started("1.0.0", "d1")), NOW);
    let effects = statuses.report(loaded("hello-shadow", promoted()), LATER);
    let old = status(&effects[0]);
    assert_eq!(old["activeDigest"], serde_json::Value::Null);
    assert_eq!(
        old["lastError"],
        "superseded: plugin hello is served from ConfigMap team-a/hello-shadow now (a promoted shadow); delete this ConfigMap"
    );
    let retired = statuses.report(Report::new(source("hello"), Reported::Retired { said: None }), LATER);
    assert!(retired.is_empty(), "the promotion's words stay: {retired:?}");
}

#[test]
fn a_shadow_s_first_difference_is_announced_once() {
    let mut statuses = Statuses::new(None);
    statuses.report(seated("s", 7), NOW);
    let latest = Difference {
        object: "Foo team-a/x".into(),
        result: ShadowResult::Differing,
        diff: String::new(),
        at: NOW.into(),
    };
    let differing =
        |n| ShadowReport { compared: n, differing: n, latest: Some(latest.clone()), ..ShadowReport::default() };
    let same = ShadowReport { compared: 1, same: 1, ..ShadowReport::default() };
    let found = |statuses: &mut Statuses, report| said(&statuses.report(findings("s", 7, report), NOW));
    assert_eq!(found(&mut statuses, same), ["status s"]);
    assert_eq!(found(&mut statuses, differing(1)), ["status s", "event ShadowDiffers s"]);
    assert_eq!(found(&mut statuses, differing(2)), ["status s"]);
    let effects = statuses.report(findings("s", 7, differing(3)), NOW);
    assert_eq!(status(&effects[0])["shadow"]["findings"]["differing"], 3);
}

#[test]
fn a_quarantine_shows_on_the_configmap_serving_the_plugin_until_it_is_lifted() {
    let mut statuses = Statuses::new(Some("replica-0".into()));
    statuses.report(loaded("hello", started("1.0.0", "d1")), NOW);
    statuses.report(refused("other", "bad"), NOW);
    let board = BTreeMap::from([("team-a/hello".to_owned(), "crash loop".to_owned())]);
    let effects = statuses.quarantines(&board, NOW);
    assert_eq!(said(&effects), ["status hello"], "only what serves the plugin");
    assert_eq!(status(&effects[0])["quarantined"], "crash loop");
    assert_eq!(status(&effects[0])["replica"], "replica-0");
    assert!(statuses.quarantines(&board, NOW).is_empty(), "shown already");
    let lifted = statuses.quarantines(&BTreeMap::new(), NOW);
    assert_eq!(status(&lifted[0]).get("quarantined"), None);
}

#[test]
fn a_replica_names_itself_only_on_what_it_runs() {
    let mut statuses = Statuses::new(Some("replica-0".into()));
    let effects = statuses.report(refused("hello", "NameTaken: x"), NOW);
    assert_eq!(
        *status(&effects[0]),
        json!({"activeDigest": null, "lastError": "NameTaken: x", "lastErrorAt": NOW}),
        "a replica that runs nothing from it does not name itself"
    );
}

#[test]
fn a_burst_writes_each_configmap_s_last_status_once() {
    let status = |name: &str, n: u64| Effect::Status { object: key(name), status: json!(n) };
    let note = |name: &str| event(&key(name), EventType::Normal, "PluginLoaded", "LoadPlugin", String::new());
    let burst = vec![status("a", 1), note("a"), status("b", 1), status("a", 2), note("b"), status("b", 2)];
    assert_eq!(coalesced(burst), vec![note("a"), status("a", 2), note("b"), status("b", 2)]);
}

#[test]
fn a_burst_of_refusals_records_the_last_event_of_each_reason() {
    let refusal = |n: u32| event(&key("a"), EventType::Warning, "PluginRejected", "LoadPlugin", n.to_string());
    let loaded = event(&key("a"), EventType::Normal, "PluginLoaded", "LoadPlugin", String::new());
    assert_eq!(coalesced(vec![refusal(1), loaded.clone(), refusal(2), refusal(3)]), vec![loaded, refusal(3)]);
}

#[test]
fn a_superseded_mark_carries_the_status_that_came_before_it() {
    let status = |name: &str, n: u64| Effect::Status { object: key(name), status: json!(n) };
    let mark = |name: &str, n: u64| Effect::Supersede { object: key(name), status: json!(n) };
    assert_eq!(coalesced(vec![status("a", 1), mark("a", 2)]), vec![mark("a", 2)]);
    assert_eq!(coalesced(vec![mark("a", 1), status("a", 2)]), vec![mark("a", 1), status("a", 2)]);
}

fn plugin_source(name: &str) -> SourceId {
    SourceId::object(SourceKind::WasmPlugin, Namespace::parse("team-a").unwrap(), Name::parse(name).unwrap())
}

fn observed(name: &str, generation: i64, settled: bool) -> Report {
    let pin = Some("image registry/hello@sha256:abc".to_owned());
    Report::new(plugin_source(name), Reported::Observed { generation, pin, settled })
}

/// The WasmPlugin status a burst of reports about `name` writes last.
fn last_status(statuses: &mut Statuses, reports: Vec<Report>, now: &str) -> serde_json::Value {
    let mut last = None;
    for report in reports {
        for effect in statuses.report(report, now) {
            if let Effect::Status { status, .. } | Effect::Supersede { status, .. } = effect {
                last = Some(status);
            }
        }
    }
    last.expect("a status was written")
}

/// Each condition as `Type=Status/Reason`, in order.
fn conditions_said(status: &serde_json::Value) -> Vec<String> {
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}={}/{}",
                c["type"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap()
            )
        })
        .collect()
}

fn condition<'a>(status: &'a serde_json::Value, type_: &str) -> &'a serde_json::Value {
    status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == type_).unwrap()
}

fn wasmplugin_loaded(version: &str) -> Report {
    Report::new(plugin_source("hello"), Reported::Loaded(started(version, "d")))
}

fn wasmplugin_refused(reason: &str) -> Report {
    Report::new(plugin_source("hello"), Reported::Refused { reason: reason.into(), message: "bad version".into() })
}

#[test]
fn a_wasmplugin_s_conditions_follow_what_happened_to_it() {
    let stopped = Report::new(
        plugin_source("hello"),
        Reported::Stopped { reason: "LoadFailed".into(), message: "bad version; failurePolicy Stop".into() },
    );
    let suspended = Report::new(
        plugin_source("hello"),
        Reported::Stopped { reason: "Suspended".into(), message: "suspended".into() },
    );
    let cases: Vec<(&str, Vec<Report>, [&str; 4])> = vec![
        (
            "a version serves",
            vec![wasmplugin_loaded("1.0.0")],
            ["Ready=True/Serving", "Loaded=True/Loaded", "Degraded=False/AsExpected", "Quarantined=False/Healthy"],
        ),
        (
            "a refusal before any version served",
            vec![wasmplugin_refused("InvalidWasmPlugin")],
            [
                "Ready=False/InvalidWasmPlugin",
                "Loaded=False/InvalidWasmPlugin",
                "Degraded=False/AsExpected",
                "Quarantined=False/Healthy",
            ],
        ),
        (
            "a refused update keeps the previous version: ready, and degraded",
            vec![wasmplugin_loaded("1.0.0"), wasmplugin_refused("LoadFailed")],
            ["Ready=True/Serving", "Loaded=True/Loaded", "Degraded=True/LoadFailed", "Quarantined=False/Healthy"],
        ),
        (
            "a refused update under Stop stops it",
            vec![wasmplugin_loaded("1.0.0"), stopped],
            [
                "Ready=False/LoadFailed",
                "Loaded=False/LoadFailed",
                "Degraded=False/AsExpected",
                "Quarantined=False/Healthy",
            ],
        ),
        (
            "a suspended plugin is not ready",
            vec![wasmplugin_loaded("1.0.0"), suspended],
            [
                "Ready=False/Suspended",
                "Loaded=False/Suspended",
                "Degraded=False/AsExpected",
                "Quarantined=False/Healthy",
            ],
        ),
        (
            "a reason the API would refuse is not written",
            vec![wasmplugin_refused("not a word!")],
            ["Ready=False/Refused", "Loaded=False/Refused", "Degraded=False/AsExpected", "Quarantined=False/Healthy"],
        ),
    ];
    for (case, reports, expected) in cases {
        let status = last_status(&mut Statuses::new(None), reports, NOW);
        assert_eq!(conditions_said(&status)[..4], expected, "{case}");
    }
}

#[test]
fn observed_generation_is_written_with_that_generation_s_outcome_not_before() {
    let mut statuses = Statuses::new(None);
    last_status(&mut statuses, vec![observed("hello", 1, false), wasmplugin_loaded("1.0.0")], NOW);
    assert!(statuses.report(observed("hello", 2, false), NOW).is_empty(), "generation 2 is under way");
    let status = last_status(&mut statuses, vec![wasmplugin_refused("LoadFailed")], LATER);
    assert_eq!(status["observedGeneration"], 2);
    assert_eq!(condition(&status, "Degraded")["observedGeneration"], 2);
    assert_eq!(condition(&status, "Pinned")["status"], "True", "{status}");
}

#[test]
fn a_settled_generation_is_written_at_once() {
    let mut statuses = Statuses::new(None);
    last_status(&mut statuses, vec![observed("hello", 1, false), wasmplugin_loaded("1.0.0")], NOW);
    let status = last_status(&mut statuses, vec![observed("hello", 2, true)], NOW);
    assert_eq!(status["observedGeneration"], 2);
    assert!(statuses.report(observed("hello", 2, true), NOW).is_empty(), "shown already");
}

#[test]
fn a_condition_keeps_its_transition_time_while_its_status_holds() {
    let mut statuses = Statuses::new(None);
    last_status(&mut statuses, vec![wasmplugin_loaded("1.0.0")], NOW);
    let status = last_status(&mut statuses, vec![wasmplugin_refused("LoadFailed")], LATER);
    assert_eq!(condition(&status, "Ready")["lastTransitionTime"], NOW, "still ready");
    assert_eq!(condition(&status, "Degraded")["lastTransitionTime"], LATER, "degraded since the refusal");
}

#[test]
fn failed_reconciles_show_as_errors_and_degrade_a_wasmplugin_until_the_window_forgets_them() {
    let mut statuses = Statuses::new(None);
    last_status(&mut statuses, vec![wasmplugin_loaded("1.0.0")], NOW);
    assert_eq!(statuses.serving_wasmplugins()[0].0, "team-a/hello");
    let version = statuses.serving_wasmplugins()[0].1.clone();
    let failing = BTreeMap::from([(version.clone(), 4)]);
    let effects = statuses.errors(&failing, LATER);
    let shown = status(&effects[0]);
    assert_eq!(shown["errors"], 4);
    assert!(is(shown, "Degraded", "True", "ReconcileErrors") && is(shown, "Ready", "True", "Serving"), "{shown}");
    assert!(statuses.errors(&failing, LATER).is_empty(), "shown already");
    let healed = statuses.errors(&BTreeMap::from([(version, 0)]), LATER);
    assert!(is(status(&healed[0]), "Degraded", "False", "AsExpected"));
    assert_eq!(status(&healed[0])["errors"], 0);
}

#[test]
fn an_event_about_an_object_serving_a_plugin_is_paid_by_that_plugin() {
    let mut statuses = Statuses::new(None);
    let effects = statuses.report(loaded("hello", started("1.0.0", "d1")), NOW);
    let payer = effects.iter().find_map(|e| match e {
        Effect::Event { plugin, .. } => Some(plugin.clone()),
        _ => None,
    });
    assert_eq!(payer, Some(Some("team-a/hello".to_owned())));
    let refused = statuses.report(refused("other", "bad"), NOW);
    let payer = refused.iter().find_map(|e| match e {
        Effect::Event { plugin, .. } => Some(plugin.clone()),
        _ => None,
    });
    assert_eq!(payer, Some(None), "serving nothing: its namespace's bucket pays");
}

fn capped(source: SourceId) -> Report {
    Report::new(source, Reported::Capped { message: "runs with 1 concurrent reconcile".into() })
}

#[test]
fn a_version_capped_to_the_memory_budget_degrades_a_wasmplugin_until_a_version_is_not() {
    let mut statuses = Statuses::new(None);
    let status = last_status(&mut statuses, vec![wasmplugin_loaded("1.0.0"), capped(plugin_source("hello"))], NOW);
    assert!(is(&status, "Degraded", "True", "CappedToMemoryBudget"), "{status}");
    assert_eq!(condition(&status, "Degraded")["message"], "runs with 1 concurrent reconcile");
    assert!(is(&status, "Ready", "True", "Serving"), "it serves, with less");
    let status = last_status(&mut statuses, vec![wasmplugin_loaded("1.0.1")], LATER);
    assert!(is(&status, "Degraded", "False", "AsExpected"), "{status}");
}

#[test]
fn a_capped_version_shows_in_its_configmap_s_annotation() {
    let mut statuses = Statuses::new(None);
    let status =
        last_status(&mut statuses, vec![loaded("hello", started("1.0.0", "d1")), capped(source("hello"))], NOW);
    assert_eq!(status["capped"], "runs with 1 concurrent reconcile");
    assert!(statuses.report(capped(source("gone")), NOW).is_empty(), "nothing is made for what serves nothing");
}

fn is(status: &serde_json::Value, type_: &str, holds: &str, reason: &str) -> bool {
    let found = condition(status, type_);
    found["status"] == holds && found["reason"] == reason
}

#[test]
fn a_restarted_writer_keeps_the_transition_times_the_status_held() {
    let mut statuses = Statuses::new(None);
    last_status(&mut statuses, vec![wasmplugin_loaded("1.0.0")], LATER);
    let written = json!([
        {"type": "Ready", "status": "True", "lastTransitionTime": NOW},
        {"type": "Degraded", "status": "True", "lastTransitionTime": NOW},
        {"type": "Loaded", "status": "True", "lastTransitionTime": "not a time"},
    ]);
    let key = ObjectKey {
        kind: SourceKind::WasmPlugin,
        namespace: Namespace::parse("team-a").unwrap(),
        name: Name::parse("hello").unwrap(),
    };
    let status = statuses.adopt_times(&key, &written).unwrap();
    assert_eq!(condition(&status, "Ready")["lastTransitionTime"], NOW, "the same status: its time");
    assert_eq!(condition(&status, "Degraded")["lastTransitionTime"], LATER, "another status: now");
    assert_eq!(condition(&status, "Loaded")["lastTransitionTime"], LATER, "no time: now");
    let next = last_status(&mut statuses, vec![wasmplugin_refused("LoadFailed")], LATER);
    assert_eq!(condition(&next, "Ready")["lastTransitionTime"], NOW, "adopted for good");
}

#[test]
fn a_quarantine_shows_in_the_quarantined_and_ready_conditions_until_it_is_lifted() {
    let mut statuses = Statuses::new(None);
    last_status(&mut statuses, vec![wasmplugin_loaded("1.0.0")], NOW);
    let board = BTreeMap::from([("team-a/hello".to_owned(), "9 of its last 10 calls failed".to_owned())]);
    let entered = statuses.quarantines(&board, LATER);
    let status = status(&entered[0]);
    assert_eq!(condition(status, "Quarantined")["status"], "True");
    assert_eq!(condition(status, "Quarantined")["lastTransitionTime"], LATER);
    assert!(condition(status, "Quarantined")["message"].as_str().unwrap().contains("9 of its last 10 calls failed"));
    assert_eq!(condition(status, "Ready")["reason"], "Quarantined");
    let lifted = statuses.quarantines(&BTreeMap::new(), LATER);
    assert_eq!(condition(super::tests::status(&lifted[0]), "Ready")["status"], "True");
}

#[test]
fn a_shadow_wasmplugin_counts_its_findings_in_the_shadowing_condition() {
    let mut statuses = Statuses::new(None);
    let what = Reported::ShadowSeated { id: 3, plugin: pid("team-a/hello"), version: "2".into(), digest: "d".into() };
    let seated = Report::new(plugin_source("canary"), what);
    let report = ShadowReport { compared: 5, same: 3, differing: 2, ..ShadowReport::default() };
    let found = Report::new(plugin_source("canary"), Reported::ShadowFindings { id: 3, report });
    let status = last_status(&mut statuses, vec![seated, found], NOW);
    let shadowing = condition(&status, "Shadowing");
    assert_eq!((&shadowing["status"], &shadowing["reason"]), (&json!("True"), &json!("Differing")));
    assert!(
        shadowing["message"].as_str().unwrap().contains("5 compared, 3 same, 2 differing, 0 failed"),
        "{shadowing}"
    );
    assert_eq!(condition(&status, "Ready")["reason"], "Shadowing");
    assert_eq!(status["shadow"]["findings"]["differing"], 2);
}

#[test]
fn a_promotion_marks_the_wasmplugin_that_served_superseded_in_its_ready_condition() {
    let mut statuses = Statuses::new(None);
    last_status(&mut statuses, vec![observed("hello", 4, false), wasmplugin_loaded("1.0.0")], NOW);
    let promoted = Loaded::Promoted {
        name: pid("team-a/hello"),
        version: "2.0.0".into(),
        previous: Some("1.0.0".into()),
        superseded: Some(plugin_source("hello")),
        digest: "d2".into(),
    };
    let effects = statuses.report(Report::new(plugin_source("canary"), Reported::Loaded(promoted)), LATER);
    let Effect::Supersede { object, status } = &effects[0] else { panic!("a mark first: {effects:?}") };
    assert_eq!(object.name.as_str(), "hello");
    let ready = condition(status, "Ready");
    assert_eq!((&ready["reason"], &ready["observedGeneration"]), (&json!("Superseded"), &json!(4)));
    let plugin: crate::wasmplugin::WasmPlugin = serde_json::from_value(json!({
        "metadata": {"name": "hello", "generation": 4}, "status": status,
    }))
    .unwrap();
    assert!(crate::wasmplugin::superseded(&plugin).is_some(), "a restart reads the mark back");
}

#[test]
fn nothing_is_made_for_a_configmap_not_shown() {
    let mut statuses = Statuses::new(None);
    statuses.report(loaded("gone", Loaded::Parked { name: pid("team-a/gone"), digest: "d".into() }), NOW);
    assert!(statuses.shown.is_empty(), "a parked report of a ConfigMap not shown keeps nothing");
}

#[test]
fn a_configmap_or_wasmplugin_source_is_an_object_to_show_and_a_file_is_none() {
    assert_eq!(object_of(&source("hello")), Some(key("hello")));
    let plugin = object_of(&plugin_source("hello")).unwrap();
    assert_eq!((plugin.kind, plugin.source()), (SourceKind::WasmPlugin, plugin_source("hello")));
    assert_eq!(object_of(&SourceId::file("hello.wasm")), None);
}

#[test]
fn an_object_reported_on_is_shown_until_it_is_removed() {
    let mut statuses = Statuses::new(None);
    let team_a = Namespace::parse("team-a").unwrap();
    assert!(!statuses.shows(&key("hello")) && !statuses.shows_in(&team_a));
    statuses.report(loaded("hello", started("1.0.0", "d1")), NOW);
    assert!(statuses.shows(&key("hello")) && statuses.shows_in(&team_a));
    assert!(!statuses.shows_in(&Namespace::parse("team-b").unwrap()));
    statuses.report(Report::new(source("hello"), Reported::Removed), NOW);
    assert!(!statuses.shows(&key("hello")) && !statuses.shows_in(&team_a));
}

#[test]
fn a_new_leader_writes_the_error_counts_whatever_they_are() {
    let mut statuses = Statuses::new(None);
    last_status(&mut statuses, vec![wasmplugin_loaded("1.0.0")], NOW);
    let version = statuses.serving_wasmplugins()[0].1.clone();
    let counts = BTreeMap::from([(version, 2)]);
    statuses.errors(&counts, LATER);
    assert!(statuses.errors(&counts, LATER).is_empty(), "shown already");
    statuses.forget_errors();
    assert_eq!(status(&statuses.errors(&counts, LATER)[0])["errors"], 2);
}

#[test]
fn a_configmap_s_status_says_what_serves_and_nothing_of_what_it_does_not_show() {
    let shown = Shown {
        active: Some(Active {
            id: "team-a/hello".into(),
            loaded: Version {
                plugin: "hello".into(),
                version: "1.0.0".into(),
                digest: "d1".into(),
                loaded_at: NOW.into(),
            },
        }),
        ..Shown::default()
    };
    let status = status_of(&shown, Some("replica-1"));
    let said = (&status["plugin"], &status["version"], &status["activeDigest"], &status["replica"]);
    assert_eq!(said, (&json!("hello"), &json!("1.0.0"), &json!("d1"), &json!("replica-1")));
    assert!(status.get("shadow").is_none() && status["lastError"].is_null(), "{status}");
    let nothing = status_of(&Shown::default(), Some("replica-1"));
    assert!(nothing["activeDigest"].is_null() && nothing.get("replica").is_none(), "{nothing}");
}
