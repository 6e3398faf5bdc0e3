//! What loads, deletions, retries, stops and the watches come to.

use serde_json::json;

use super::super::*;
use super::fixtures::*;

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
    let failed =
        LoadFailure::Bytes { plugin: "p".into(), reason: "DigestMismatch", message: "not the pinned digest".into() };
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
    assert_eq!(said(&state.on_stopped(&key(&a), why, Stopped::default(), &world)), ["report refused InvalidConfigMap"]);
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
    assert_eq!(said(&state.on_stopped(&key(&a), Why::Suspended, stopped("p"), &world)), ["report stopped Suspended"]);
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
