//! The registry's plan, table-tested: each decision without a registry, a sandbox or a
//! cluster.

use super::*;

use std::sync::LazyLock;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_sandbox::SourceKind;

static LABELER_ID: LazyLock<PluginId> = LazyLock::new(|| id("team-a/labeler"));
static LABELER: LazyLock<Offered<'static>> =
    LazyLock::new(|| Offered { name: "labeler", id: &LABELER_ID, expected_name: None });

fn id(text: &str) -> PluginId {
    PluginId::parse(text).unwrap()
}

/// ConfigMap `name` of the realm.
fn configmap(name: &str) -> SourceId {
    SourceId::object(SourceKind::ConfigMap, Namespace::parse("team-a").unwrap(), Name::parse(name).unwrap())
}

fn mine(plugin: &str, same: bool) -> Option<(PluginId, bool)> {
    Some((id(plugin), same))
}

fn taken(holder: &str) -> Decision {
    Decision::Refuse(Refusal::NameTaken { holder: configmap(holder) })
}

fn install(promote: bool, replace: Option<&str>) -> Decision {
    Decision::Install { promote, replace: replace.map(id) }
}

#[test]
fn decisions_follow_the_rules_in_order() {
    let promised = |name| Offered { expected_name: Some(name), ..*LABELER };
    let cases: Vec<(&str, View, Offered<'_>, Decision)> = vec![
        ("a first version starts", View::default(), *LABELER, install(false, None)),
        (
            "the same version from the same source changes nothing",
            View { mine: mine("team-a/labeler", true), ..View::default() },
            *LABELER,
            Decision::Unchanged { id: id("team-a/labeler") },
        ),
        (
            "unchanged wins over a name mismatch: the version serving was checked already",
            View { mine: mine("team-a/labeler", true), ..View::default() },
            promised("other"),
            Decision::Unchanged { id: id("team-a/labeler") },
        ),
        (
            "a new version replaces the source's",
            View { mine: mine("team-a/labeler", false), ..View::default() },
            *LABELER,
            install(false, Some("team-a/labeler")),
        ),
        (
            "a source offering another name gives its old plugin up",
            View { mine: mine("team-a/stamp", false), ..View::default() },
            *LABELER,
            install(false, Some("team-a/stamp")),
        ),
        ("the promised name must be the manifest's", View::default(), promised("stamp"), {
            Decision::Refuse(Refusal::NameMismatch { expected: "stamp".into() })
        }),
        ("the promised name matching passes", View::default(), promised("labeler"), install(false, None)),
        (
            "a name another source serves is refused",
            View { holder: Some(configmap("b")), ..View::default() },
            *LABELER,
            taken("b"),
        ),
        (
            "the seated shadow of this very version is promoted over the other source",
            View { holder: Some(configmap("b")), shadows_this: true, ..View::default() },
            *LABELER,
            install(true, Some("team-a/labeler")),
        ),
        (
            "a promotion with nothing serving starts the plugin",
            View { shadows_this: true, ..View::default() },
            *LABELER,
            install(true, None),
        ),
        (
            "a source that serves already is not promoted: it replaces its own",
            View { mine: mine("team-a/labeler", false), shadows_this: true, ..View::default() },
            *LABELER,
            install(false, Some("team-a/labeler")),
        ),
    ];
    for (case, view, offered, expected) in cases {
        assert_eq!(decide(&view, &offered), expected, "{case}");
    }
}

#[test]
fn decisions_on_a_shard_follow_the_rules_in_order() {
    let cases: Vec<(&str, View, Offered<'_>, Decision)> = vec![
        (
            "on a shard admitted to the plugin, it installs",
            View { admitted: Some(true), ..View::default() },
            *LABELER,
            install(false, None),
        ),
        (
            "on a shard not admitted, it is parked",
            View { admitted: Some(false), ..View::default() },
            *LABELER,
            Decision::Park { stop: None },
        ),
        (
            "parking a new name stops what the source served",
            View { admitted: Some(false), mine: mine("team-a/stamp", false), ..View::default() },
            *LABELER,
            Decision::Park { stop: Some(id("team-a/stamp")) },
        ),
        (
            "not admitted, a name served by another source is refused",
            View { admitted: Some(false), holder: Some(configmap("b")), ..View::default() },
            *LABELER,
            taken("b"),
        ),
        (
            "not admitted, a name parked by another source is refused",
            View { admitted: Some(false), parked_elsewhere: Some(configmap("c")), ..View::default() },
            *LABELER,
            taken("c"),
        ),
        (
            "admitted, a name parked by another source that admit has yet to start is refused",
            View { admitted: Some(true), parked_elsewhere: Some(configmap("c")), ..View::default() },
            *LABELER,
            taken("c"),
        ),
        (
            "not admitted, a shadow is not promoted past the first source",
            View { admitted: Some(false), holder: Some(configmap("b")), shadows_this: true, ..View::default() },
            *LABELER,
            taken("b"),
        ),
    ];
    for (case, view, offered, expected) in cases {
        assert_eq!(decide(&view, &offered), expected, "{case}");
    }
}

fn file(name: &str) -> SourceId {
    SourceId::file(name)
}

// again

#[test]
fn the_version_a_source_serves_offered_again_is_unchanged() {
    let p = id("team-a/p");
    assert_eq!(again(Some((&p, true)), None), Some(Again::Unchanged(p)));
}

#[test]
fn the_version_a_source_has_parked_offered_again_stays_parked() {
    let p = id("team-a/p");
    assert_eq!(again(None, Some((&p, true))), Some(Again::Parked(p)));
}

#[test]
fn another_version_than_the_one_serving_or_parked_is_compiled() {
    let p = id("team-a/p");
    assert_eq!(again(Some((&p, false)), Some((&p, false))), None);
    assert_eq!(again(None, None), None);
}

#[test]
fn what_serves_wins_over_what_is_parked_when_both_are_this_version() {
    let (p, q) = (id("team-a/p"), id("team-a/q"));
    assert_eq!(again(Some((&p, true)), Some((&q, true))), Some(Again::Unchanged(p)));
}

// refused_as, Refusals

#[test]
fn a_version_that_did_not_compile_is_known_by_the_name_promised_then_the_one_serving() {
    let (promised, serving) = (id("team-a/p"), id("team-a/q"));
    assert_eq!(refused_as(Some(promised.clone()), Some(serving.clone())), promised);
    assert_eq!(refused_as(None, Some(serving.clone())), serving);
    assert_eq!(refused_as(None, None), "unknown");
}

#[test]
fn a_source_refused_under_a_new_name_forgets_the_series_of_the_old_one() {
    let mut refusals = Refusals::default();
    let nothing_serves = |_: &PluginId| false;
    assert_eq!(refusals.note(&configmap("a"), Some(id("team-a/one")), nothing_serves), None);
    assert_eq!(refusals.note(&configmap("a"), Some(id("team-a/two")), nothing_serves), Some(id("team-a/one")));
}

#[test]
fn a_source_refused_again_under_the_same_name_forgets_nothing() {
    let mut refusals = Refusals::default();
    refusals.note(&configmap("a"), Some(id("team-a/one")), |_| false);
    assert_eq!(refusals.note(&configmap("a"), Some(id("team-a/one")), |_| false), None);
}

#[test]
fn a_source_whose_offer_loads_forgets_what_it_was_refused_as() {
    let mut refusals = Refusals::default();
    refusals.note(&configmap("a"), Some(id("team-a/one")), |_| false);
    assert_eq!(refusals.note(&configmap("a"), None, |_| false), Some(id("team-a/one")));
    assert_eq!(refusals.forget(&configmap("a"), |_| false), None, "nothing is left to forget");
}

#[test]
fn the_series_of_a_name_that_serves_are_kept() {
    let mut refusals = Refusals::default();
    refusals.note(&configmap("a"), Some(id("team-a/one")), |_| false);
    let one_serves = |p: &PluginId| *p == id("team-a/one");
    assert_eq!(refusals.note(&configmap("a"), Some(id("team-a/two")), one_serves), None);
    assert_eq!(refusals.forget(&configmap("a"), |_| false), Some(id("team-a/two")));
}

#[test]
fn two_sources_refused_under_one_name_keep_their_own_notes() {
    let mut refusals = Refusals::default();
    refusals.note(&configmap("a"), Some(id("team-a/one")), |_| false);
    refusals.note(&configmap("b"), Some(id("team-a/one")), |_| false);
    assert_eq!(refusals.forget(&configmap("a"), |_| false), Some(id("team-a/one")));
    assert_eq!(refusals.forget(&configmap("b"), |_| false), Some(id("team-a/one")));
}

// shadow, seat

#[test]
fn a_shadow_where_another_source_s_is_seated_is_refused() {
    let (a, b) = (configmap("a"), configmap("b"));
    assert_eq!(shadow(Some((&b, true)), &a), ShadowStep::Taken { holder: b });
}

#[test]
fn the_shadow_seated_offered_again_is_unchanged() {
    let a = configmap("a");
    assert_eq!(shadow(Some((&a, true)), &a), ShadowStep::Unchanged);
}

#[test]
fn a_new_version_of_the_seated_shadow_or_a_first_shadow_is_seated() {
    let a = configmap("a");
    assert_eq!(shadow(Some((&a, false)), &a), ShadowStep::Seat);
    assert_eq!(shadow(None, &a), ShadowStep::Seat);
}

#[test]
fn a_compiled_shadow_is_held_to_the_seat_then_its_name_then_the_serving_version() {
    let (a, b) = (configmap("a"), configmap("b"));
    let kept = || crate::shadow::Misfit::Kept { kinds: "v1/Secret".into() };
    let misfit = || Err(kept());
    let cases: Vec<(&str, Option<&SourceId>, &str, Result<(), crate::shadow::Misfit>, Result<(), Unseated>)> = vec![
        ("a free seat", None, "p", Ok(()), Ok(())),
        ("its own seat", Some(&a), "p", Ok(()), Ok(())),
        ("another's seat", Some(&b), "q", misfit(), Err(Unseated::Taken { holder: b.clone() })),
        ("another name", None, "q", misfit(), Err(Unseated::NameMismatch { found: "q".into() })),
        ("a misfit", None, "p", misfit(), Err(Unseated::Misfit { reason: kept().to_string() })),
    ];
    for (case, holder, found, fits, expected) in cases {
        assert_eq!(seat(holder, &a, ("p", found), move || fits), expected, "{case}");
    }
}

#[test]
fn whether_a_shadow_fits_is_asked_only_once_seat_and_name_pass() {
    let (a, b) = (configmap("a"), configmap("b"));
    let asked = std::cell::Cell::new(0);
    let fits = || {
        asked.set(asked.get() + 1);
        Ok(())
    };
    let _ = seat(Some(&b), &a, ("p", "p"), fits);
    assert_eq!(asked.get(), 0, "another's seat");
    let _ = seat(None, &a, ("p", "q"), || {
        asked.set(asked.get() + 1);
        Ok(())
    });
    assert_eq!(asked.get(), 0, "another name");
}

// removal

#[test]
fn a_removed_source_stops_the_plugin_it_serves() {
    let p = id("team-a/p");
    let removal = removal(Some(&p), Some(&p), None);
    assert_eq!((removal.stop.as_ref(), removal.gone()), (Some(&p), Some(&p)));
}

#[test]
fn a_plugin_a_promotion_took_over_meanwhile_is_not_the_removed_source_s_to_stop() {
    let p = id("team-a/p");
    assert_eq!(removal(Some(&p), None, None), Removal::default());
}

#[test]
fn a_removed_source_that_only_parked_a_version_is_gone_all_the_same() {
    let p = id("team-a/p");
    let removal = removal(None, None, Some(p.clone()));
    assert_eq!((removal.stop.clone(), removal.gone().cloned()), (None, Some(p)));
}

#[test]
fn a_removed_source_that_served_nothing_stops_nothing() {
    assert_eq!(removal(None, None, None).gone(), None);
}

// admitted

#[test]
fn an_admitted_plugin_starts_the_versions_parked_for_it_and_no_other() {
    let (a, b, c) = (configmap("a"), configmap("b"), file("c.wasm"));
    let parked = [(&b, id("team-a/p")), (&a, id("team-a/p")), (&c, id("q"))];
    assert_eq!(admitted(&id("team-a/p"), parked), [a, b]);
    assert!(admitted(&id("team-a/r"), [(&c, id("q"))]).is_empty());
}

// evicted

#[test]
fn an_evicted_plugin_parks_the_version_serving_for_its_source() {
    let (p, source) = (id("team-a/p"), configmap("a"));
    let (parked_for, loaded) = evicted(&p, Some((&source, "d1"))).expect("it serves");
    assert_eq!((parked_for, loaded), (source, Loaded::Parked { name: p, digest: "d1".into() }));
}

#[test]
fn an_evicted_plugin_that_serves_nothing_here_parks_nothing() {
    assert_eq!(evicted(&id("team-a/p"), None), None);
}

// started

#[test]
fn a_first_version_started() {
    let loaded = started((id("p"), "1".into(), "d".into()), false, None, &file("p.wasm"));
    assert!(matches!(loaded, Loaded::Started { version, .. } if version == "1"));
}

#[test]
fn a_new_version_replaced_the_previous_one() {
    let source = file("p.wasm");
    let loaded = started((id("p"), "2".into(), "d".into()), false, Some(("1".into(), source.clone())), &source);
    assert!(matches!(loaded, Loaded::Replaced { previous, .. } if previous == "1"));
}

#[test]
fn a_promoted_shadow_names_the_source_it_took_the_plugin_from() {
    let (old, shadow) = (configmap("a"), configmap("a-shadow"));
    let loaded = started((id("team-a/p"), "2".into(), "d".into()), true, Some(("1".into(), old.clone())), &shadow);
    let Loaded::Promoted { previous, superseded, .. } = loaded else { panic!("{loaded:?}") };
    assert_eq!((previous.as_deref(), superseded), (Some("1"), Some(old)));
}

#[test]
fn a_promotion_in_the_source_that_served_supersedes_no_source() {
    let source = configmap("a");
    let loaded = started((id("team-a/p"), "2".into(), "d".into()), true, Some(("1".into(), source.clone())), &source);
    assert!(matches!(loaded, Loaded::Promoted { superseded: None, .. }));
}

#[test]
fn a_promotion_with_nothing_serving_replaced_nothing() {
    let loaded = started((id("team-a/p"), "2".into(), "d".into()), true, None, &configmap("a"));
    assert!(matches!(loaded, Loaded::Promoted { previous: None, superseded: None, .. }));
}
