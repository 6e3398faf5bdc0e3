//! [`State::on_offer`] and [`State::on_pulled`]: what an object's content, and a pull's
//! outcome, come to.

use serde_json::json;

use super::super::*;
use super::fixtures::*;

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
    let loaded = Loaded::Started { name: PluginId::new(None, "p").unwrap(), version: "1".into(), digest: "d".into() };
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
    assert_eq!(said(&offered(&mut state, &a, Ok(suspended), &Registry::default())), ["observed 2", "stop: Suspended"]);
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
    state.on_arrived(&wp("p", 1, json!({"configMapRef": {"name": "c"}, "track": {"mode": "shadow", "shadows": "p"}})));
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
