//! What a worker does with one key, decided from what the cache holds and what the plugin
//! declared, with no I/O: whether to call the plugin and in which phase, when the finalizer
//! goes on and comes off, which children a successful apply prunes, how a failure is retried
//! and how an outcome goes back to the queue. The worker carries these decisions out.
//!
//! Pruning is asked for, never implied: the manifest's `prune` only allows it, and a response
//! asks with the `prune` action in phase `apply`. Only then, after every other action has
//! succeeded, are the children the primary controls and the response did not apply deleted,
//! each with its UID as precondition. A response that did not ask, a failed reconcile,
//! `cleanup` and `deleted` delete nothing they do not name, so a reconcile that can only report
//! a problem never destroys what exists. A plugin's own retry delay replaces the backoff, held
//! to the requeue floor here and to the backoff's ceiling by the queue.

use std::collections::HashSet;
use std::time::Duration;

use wasmloop_sandbox::{Gvk, Manifest, Object, ObjectRef, Phase};

use super::work::Key;
use crate::executor::Applied;

/// What the cache holds for a key when a worker takes it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Observed<'a> {
    /// Not in the cache; `tombstone` when its deletion is remembered and not yet delivered.
    Absent {
        /// A deletion waits to be delivered.
        tombstone: bool,
    },
    /// In the cache.
    Present {
        /// It carries a deletionTimestamp.
        deleting: bool,
        /// The plugin's label selector selects it.
        selected: bool,
        /// Its finalizers.
        finalizers: &'a [String],
    },
}

/// The worker's next step for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Nothing to do.
    Nothing,
    /// Call the plugin in this phase.
    Call(Phase),
    /// Put the plugin's finalizer on before its first apply. The update requeues the key, and
    /// the next pass calls the plugin; when writes requeue nothing (a dry run) the plugin is
    /// called right away (`then_apply`).
    AddFinalizer {
        /// Call the plugin in the same pass.
        then_apply: bool,
    },
}

/// The step for a key, given what the cache holds, the plugin's finalizer and whether the
/// host's writes reach the API server (and so requeue the key).
pub(super) fn step(observed: Observed<'_>, finalizer: Option<&str>, writes_requeue: bool) -> Step {
    let Observed::Present { deleting, selected, finalizers } = observed else {
        return match observed {
            Observed::Absent { tombstone: true } => Step::Call(Phase::Deleted),
            _ => Step::Nothing,
        };
    };
    let holds = |f: &str| finalizers.iter().any(|x| x == f);
    // Cleanup comes before the selector: a primary holding our finalizer must get it released
    // even when its labels no longer select it.
    if deleting {
        return match finalizer {
            Some(f) if holds(f) => Step::Call(Phase::Cleanup),
            _ => Step::Nothing,
        };
    }
    if !selected {
        return Step::Nothing;
    }
    match finalizer {
        Some(f) if !holds(f) => Step::AddFinalizer { then_apply: !writes_requeue },
        _ => Step::Call(Phase::Apply),
    }
}

/// What a successful call is followed by, besides its own actions.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct FollowUp {
    /// Delete the children the response did not apply.
    pub prune: bool,
    /// Take the plugin's finalizer off the primary.
    pub release_finalizer: bool,
    /// Remember the primary as the previous state of the next call.
    pub remember: bool,
}

/// The follow-up of a successful call in `phase` whose response asked to prune or not.
/// Prune acts only when the response asked, in a successful apply, of a plugin whose
/// manifest allows it (the sandbox refuses the rest; this holds even if it did not): a
/// failed call, a response that did not ask, a cleanup or a deletion leaves every child as it
/// is.
pub(super) fn follow_up(phase: Phase, manifest: &Manifest, prune_asked: bool) -> FollowUp {
    FollowUp {
        prune: prune_asked && phase == Phase::Apply && manifest.prune,
        release_finalizer: phase == Phase::Cleanup && manifest.finalizer.is_some(),
        remember: phase == Phase::Apply && manifest.deliver_previous,
    }
}

/// A child of the primary in the cache.
#[derive(Debug, Clone, Copy)]
pub(super) struct Child<'a> {
    /// The object.
    pub object: &'a Object,
    /// The UID of its controller owner, if any.
    pub controller: Option<&'a str>,
}

/// The children a successful apply prunes: those the primary controls that the response did
/// not apply. Children that other owners control, or that merely carry a non-controller
/// reference to the primary, are never pruned. Each delete names the child's UID, so a
/// recreated object of the same name is left alone.
pub(super) fn prune_targets<'a>(
    primary_uid: &str,
    children: impl IntoIterator<Item = Child<'a>>,
    applied: &[Applied],
) -> Vec<ObjectRef> {
    let keep: HashSet<(&Gvk, Option<&str>, &str)> =
        applied.iter().map(|a| (&a.kind, a.namespace.as_deref(), a.name.as_str())).collect();
    children
        .into_iter()
        .filter(|child| child.controller == Some(primary_uid))
        .filter(|child| {
            let o = child.object;
            !keep.iter().any(|(kind, ns, name)| {
                kind.matches(&o.api_version, &o.kind) && *ns == o.namespace.as_deref() && *name == o.name
            })
        })
        .filter_map(|child| {
            // A child whose place does not parse cannot be named in a request: it is left.
            let o = child.object;
            Some(ObjectRef {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                name: o.name.parse().ok()?,
                namespace: o.namespace.as_deref().map(str::parse).transpose().ok()?,
                uid: Some(o.uid.clone()),
            })
        })
        .collect()
}

/// How a reconcile ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Succeeded; `requeue_after` when the plugin asked to be called again.
    Done {
        /// Actions carried out.
        actions: usize,
        /// When the plugin asked to be called again.
        requeue_after: Option<Duration>,
    },
    /// Back off and retry.
    Retry,
    /// Retry after this delay, which the plugin chose.
    RetryAfter(Duration),
    /// Do not retry until something changes.
    Wait,
    /// The host's budgets had no room for the call (host pressure): come back after this
    /// delay, with nothing counted against the plugin.
    Deferred(Duration),
}

impl Outcome {
    /// Nothing was done, and nothing needs doing.
    pub(super) const NOTHING: Outcome = Outcome::Done { actions: 0, requeue_after: None };

    /// True when the key comes back for another attempt at the same work.
    pub(super) fn retries(self) -> bool {
        matches!(self, Outcome::Retry | Outcome::RetryAfter(_) | Outcome::Deferred(_))
    }
}

/// How long a key whose call the host had no room for waits before it comes back: long
/// enough for a call holding the room to end, short beside a backoff's ceiling.
pub(super) const HOST_PRESSURE_RETRY: Duration = Duration::from_secs(2);

/// How a failure is retried: a permanent one waits for a change; a transient one backs off,
/// or waits the delay the plugin asked for, held to the requeue floor.
pub(super) fn retry_of(transient: bool, asked: Option<Duration>, floor: Duration) -> Outcome {
    match (transient, asked) {
        (false, _) => Outcome::Wait,
        (true, None) => Outcome::Retry,
        (true, Some(after)) => Outcome::RetryAfter(after.max(floor)),
    }
}

/// What the queue does with a key after its reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Requeue {
    /// Forget its failures; it comes back only on a change.
    Forget,
    /// Forget its failures and come back after this delay.
    After(Duration),
    /// Count a failure and come back with backoff.
    Backoff,
    /// Count a failure and come back after this delay (held to the backoff ceiling).
    RetryAfter(Duration),
    /// Come back after this delay, the failures counted so far kept and none added.
    Defer(Duration),
}

/// The queue's disposal of an outcome, with `floor` the shortest requeue a plugin gets.
pub(super) fn requeue(outcome: Outcome, floor: Duration) -> Requeue {
    match outcome {
        Outcome::Done { requeue_after: Some(after), .. } => Requeue::After(after.max(floor)),
        Outcome::Done { requeue_after: None, .. } | Outcome::Wait => Requeue::Forget,
        Outcome::Retry => Requeue::Backoff,
        Outcome::RetryAfter(after) => Requeue::RetryAfter(after),
        Outcome::Deferred(after) => Requeue::Defer(after),
    }
}

/// The primaries a change to a child requeues: its controller owner, when that is of the
/// primary kind. Group and kind are compared, not version: a CRD served at a new version
/// still owns its children. A namespaced owner is in its child's namespace.
pub(super) fn owners_of(
    owners: &[(&str, &str, &str)],
    child_namespace: Option<&str>,
    primary: &Gvk,
    primary_namespaced: bool,
) -> Vec<Key> {
    owners
        .iter()
        .filter(|(api_version, kind, _)| {
            let (group, _) = wasmloop_contract::gvk::split_api_version(api_version);
            *kind == primary.kind().as_str() && group == primary.group().as_str()
        })
        .map(|(_, _, name)| Key {
            namespace: child_namespace.filter(|_| primary_namespaced).map(str::to_owned),
            name: (*name).to_owned(),
        })
        .collect()
}

/// The primaries a `map` answer names, as keys. A namespaced primary named without a
/// namespace is in the related object's; a cluster-scoped primary has none; a key outside the
/// namespaces the primaries are served from (`served_from`, empty for every namespace) names
/// nothing the plugin is served, and is dropped.
pub(super) fn mapped_keys(
    refs: Vec<ObjectRef>,
    related_namespace: Option<&str>,
    primary_namespaced: bool,
    served_from: &[&str],
) -> Vec<Key> {
    refs.into_iter()
        .filter_map(|r| {
            let namespace = if primary_namespaced {
                r.namespace.map(|ns| ns.to_string()).or_else(|| related_namespace.map(str::to_owned))
            } else {
                None
            };
            let served = !primary_namespaced
                || served_from.is_empty()
                || namespace.as_deref().is_some_and(|ns| served_from.contains(&ns));
            served.then(|| Key { namespace, name: r.name.to_string() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "example.com/cleanup";

    fn present(deleting: bool, selected: bool, finalizers: &[String]) -> Observed<'_> {
        Observed::Present { deleting, selected, finalizers }
    }

    #[test]
    fn the_step_for_a_key_follows_the_primary_its_finalizer_and_the_selector() {
        let ours = vec![F.to_owned()];
        let other = vec!["someone.else/keep".to_owned()];
        let none: Vec<String> = Vec::new();
        #[rustfmt::skip]
        let cases: Vec<(&str, Observed<'_>, Option<&str>, bool, Step)> = vec![
            ("gone, nothing remembered", Observed::Absent { tombstone: false }, None, true, Step::Nothing),
            ("gone, deletion remembered", Observed::Absent { tombstone: true }, None, true, Step::Call(Phase::Deleted)),
            ("gone, with a finalizer declared", Observed::Absent { tombstone: true }, Some(F), true, Step::Call(Phase::Deleted)),
            ("live, no finalizer", present(false, true, &none), None, true, Step::Call(Phase::Apply)),
            ("live, not selected", present(false, false, &none), None, true, Step::Nothing),
            ("live, finalizer missing", present(false, true, &none), Some(F), true, Step::AddFinalizer { then_apply: false }),
            ("live, finalizer missing, dry run", present(false, true, &none), Some(F), false, Step::AddFinalizer { then_apply: true }),
            ("live, only another's finalizer", present(false, true, &other), Some(F), true, Step::AddFinalizer { then_apply: false }),
            ("live, finalizer held", present(false, true, &ours), Some(F), true, Step::Call(Phase::Apply)),
            ("unselected, finalizer missing: not added", present(false, false, &none), Some(F), true, Step::Nothing),
            ("deleting, finalizer held", present(true, true, &ours), Some(F), true, Step::Call(Phase::Cleanup)),
            ("deleting, finalizer held, unselected", present(true, false, &ours), Some(F), true, Step::Call(Phase::Cleanup)),
            ("deleting, finalizer released", present(true, true, &other), Some(F), true, Step::Nothing),
            ("deleting, no finalizer declared", present(true, true, &ours), None, true, Step::Nothing),
        ];
        for (case, observed, finalizer, writes_requeue, expected) in cases {
            assert_eq!(step(observed, finalizer, writes_requeue), expected, "{case}");
        }
    }

    fn manifest(prune: bool, finalizer: Option<&str>, deliver_previous: bool) -> Manifest {
        Manifest {
            finalizer: finalizer.map(str::to_owned),
            prune,
            deliver_previous,
            ..Manifest::declaring("p", Gvk::from_api_version("example.com/v1", "Foo").unwrap())
        }
    }

    #[test]
    fn only_an_apply_that_asks_prunes_and_only_a_cleanup_releases_the_finalizer() {
        let all = manifest(true, Some(F), true);
        let remembers = FollowUp { remember: true, ..FollowUp::default() };
        #[rustfmt::skip]
        let cases = [
            ("apply, asked", Phase::Apply, &all, true, FollowUp { prune: true, release_finalizer: false, remember: true }),
            ("apply, not asked", Phase::Apply, &all, false, remembers),
            ("cleanup, asked", Phase::Cleanup, &all, true, FollowUp { prune: false, release_finalizer: true, remember: false }),
            ("deleted, asked", Phase::Deleted, &all, true, FollowUp::default()),
            ("apply, asked, not allowed", Phase::Apply, &manifest(false, Some(F), false), true, FollowUp::default()),
            ("cleanup, no finalizer", Phase::Cleanup, &manifest(true, None, true), false, FollowUp::default()),
        ];
        for (case, phase, manifest, asked, expected) in cases {
            assert_eq!(follow_up(phase, manifest, asked), expected, "{case}");
        }
    }

    fn child(name: &str, kind: &str) -> Object {
        Object {
            api_version: if kind == "Deployment" { "apps/v1".into() } else { "v1".into() },
            kind: kind.into(),
            name: name.into(),
            namespace: Some("t".into()),
            uid: format!("uid-{name}"),
            json: "{}".into(),
        }
    }

    fn applied(name: &str, kind: &str) -> Applied {
        let api_version = if kind == "Deployment" { "apps/v1" } else { "v1" };
        Applied {
            kind: Gvk::from_api_version(api_version, kind).unwrap(),
            namespace: Some("t".into()),
            name: name.into(),
            uid: None,
        }
    }

    #[test]
    fn prune_deletes_only_controlled_children_the_response_did_not_apply() {
        let (web, old, shared, theirs, same_name) = (
            child("web", "Deployment"),
            child("old", "Deployment"),
            child("cfg", "ConfigMap"),
            child("x", "Deployment"),
            child("web", "ConfigMap"),
        );
        let children = || {
            [
                Child { object: &web, controller: Some("p-uid") },
                Child { object: &old, controller: Some("p-uid") },
                // A non-controller reference to the primary: someone else's.
                Child { object: &shared, controller: None },
                Child { object: &theirs, controller: Some("other-uid") },
                // Same name as an applied object, another kind: not kept by it.
                Child { object: &same_name, controller: Some("p-uid") },
            ]
        };
        let names = |refs: Vec<ObjectRef>| refs.iter().map(|r| format!("{}/{}", r.kind, r.name)).collect::<Vec<_>>();
        #[rustfmt::skip]
        let cases: Vec<(&str, Vec<Applied>, Vec<&str>)> = vec![
            ("everything applied again", vec![applied("web", "Deployment"), applied("old", "Deployment"), applied("web", "ConfigMap")], vec![]),
            ("one dropped", vec![applied("web", "Deployment"), applied("web", "ConfigMap")], vec!["Deployment/old"]),
            ("nothing applied: every controlled child", vec![], vec!["Deployment/web", "Deployment/old", "ConfigMap/web"]),
        ];
        for (case, applied, expected) in cases {
            assert_eq!(names(prune_targets("p-uid", children(), &applied)), expected, "{case}");
        }
        let uid = prune_targets("p-uid", children(), &[]).remove(0).uid;
        assert_eq!(uid.as_deref(), Some("uid-web"), "a prune is preconditioned on the child's UID");
    }

    #[test]
    fn a_failure_waits_for_a_change_or_retries_no_sooner_than_the_floor() {
        let floor = Duration::from_secs(1);
        let ms = Duration::from_millis;
        let cases = [
            (false, None, Outcome::Wait),
            (false, Some(ms(5_000)), Outcome::Wait),
            (true, None, Outcome::Retry),
            (true, Some(ms(5_000)), Outcome::RetryAfter(ms(5_000))),
            (true, Some(ms(10)), Outcome::RetryAfter(floor)),
        ];
        for (transient, asked, expected) in cases {
            assert_eq!(retry_of(transient, asked, floor), expected, "{transient} {asked:?}");
        }
    }

    #[test]
    fn an_outcome_goes_back_to_the_queue_as_forget_requeue_or_backoff() {
        let floor = Duration::from_secs(1);
        let ms = Duration::from_millis;
        let cases = [
            (Outcome::NOTHING, Requeue::Forget),
            (Outcome::Done { actions: 3, requeue_after: Some(ms(30_000)) }, Requeue::After(ms(30_000))),
            (Outcome::Done { actions: 0, requeue_after: Some(ms(1)) }, Requeue::After(floor)),
            (Outcome::Wait, Requeue::Forget),
            (Outcome::Retry, Requeue::Backoff),
            (Outcome::RetryAfter(ms(2_000)), Requeue::RetryAfter(ms(2_000))),
            (Outcome::Deferred(ms(2_000)), Requeue::Defer(ms(2_000))),
        ];
        for (outcome, expected) in cases {
            assert_eq!(requeue(outcome, floor), expected, "{outcome:?}");
        }
    }

    #[test]
    fn a_child_requeues_its_controller_owner_of_the_primary_kind_at_any_version() {
        let foo = Gvk::from_api_version("example.com/v1", "Foo").unwrap();
        let key = |ns: Option<&str>, name: &str| Key { namespace: ns.map(str::to_owned), name: name.into() };
        #[rustfmt::skip]
        let cases: Vec<(&str, Vec<(&str, &str, &str)>, bool, Vec<Key>)> = vec![
            ("same version", vec![("example.com/v1", "Foo", "a")], true, vec![key(Some("t"), "a")]),
            ("a newer version", vec![("example.com/v2", "Foo", "a")], true, vec![key(Some("t"), "a")]),
            ("another group", vec![("other.io/v1", "Foo", "a")], true, vec![]),
            ("another kind", vec![("example.com/v1", "Bar", "a")], true, vec![]),
            ("cluster-scoped primary", vec![("example.com/v1", "Foo", "a")], false, vec![key(None, "a")]),
        ];
        for (case, owners, namespaced, expected) in cases {
            assert_eq!(owners_of(&owners, Some("t"), &foo, namespaced), expected, "{case}");
        }
    }

    #[test]
    fn map_answers_become_keys_in_the_related_namespace_and_within_the_served_one() {
        let r = |ns: Option<&str>, name: &str| ObjectRef {
            api_version: "example.com/v1".into(),
            kind: "Foo".into(),
            name: name.parse().unwrap(),
            namespace: ns.map(|ns| ns.parse().unwrap()),
            uid: None,
        };
        let key = |ns: Option<&str>, name: &str| Key { namespace: ns.map(str::to_owned), name: name.into() };
        #[rustfmt::skip]
        let cases: Vec<(&str, ObjectRef, bool, &[&str], Vec<Key>)> = vec![
            ("no namespace: the related object's", r(None, "a"), true, &[], vec![key(Some("rel"), "a")]),
            ("its own namespace", r(Some("x"), "a"), true, &[], vec![key(Some("x"), "a")]),
            ("cluster-scoped primary drops the namespace", r(Some("x"), "a"), false, &[], vec![key(None, "a")]),
            ("inside the served namespace", r(Some("t"), "a"), true, &["t"], vec![key(Some("t"), "a")]),
            ("inside one of the served namespaces", r(Some("u"), "a"), true, &["t", "u"], vec![key(Some("u"), "a")]),
            ("outside the served namespace: dropped", r(Some("x"), "a"), true, &["t"], vec![]),
            ("defaulted outside the served namespace: dropped", r(None, "a"), true, &["t"], vec![]),
        ];
        for (case, reference, namespaced, served, expected) in cases {
            assert_eq!(mapped_keys(vec![reference], Some("rel"), namespaced, served), expected, "{case}");
        }
    }
}
