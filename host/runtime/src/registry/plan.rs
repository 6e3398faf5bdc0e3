//! What the registry does with a compiled version a source offers, decided without running
//! anything.
//!
//! The shell ([`super::Registry`]) takes the locks of the names involved, looks at what serves,
//! what is parked and what shadows ([`View`]), asks [`decide`], and carries the [`Decision`]
//! out: it prepares a controller, stops one, parks a version, or refuses. The rules:
//! - the same component, configuration and account from the same source change nothing;
//! - the manifest must name the plugin its source promised;
//! - on a sharded host, a plugin this replica is not admitted to is parked, unless another
//!   source already holds its name, serving or parked (the first source of a name keeps it);
//!   admitted, a name another source has parked is refused too: that version starts next;
//! - a name served by another source of the realm is refused, unless this source offers, as
//!   serving, exactly the version it shadows: then it is promoted and replaces that source's;
//! - otherwise the version is installed, replacing what this source served (a source serves
//!   at most one plugin, so offering another name gives the old one up).
//!
//! ```
//! use wasmloop_runtime::registry::plan::{Decision, Offered, View, decide};
//! use wasmloop_sandbox::PluginId;
//! let id = PluginId::new(None, "labeler").unwrap();
//! let offered = Offered { name: "labeler", id: &id, expected_name: None };
//! let view = View { mine: Some((id.clone(), false)), ..View::default() };
//! assert_eq!(decide(&view, &offered), Decision::Install { promote: false, replace: Some(id) });
//! ```

use wasmloop_sandbox::{PluginId, SourceId};

/// What serves, waits or shadows, as it concerns one offer: read under the registry's lock
/// while the offer's names are held, so nothing in it changes before the decision is carried
/// out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    /// The plugin the offering source serves now, and whether that is this very version
    /// (component, configuration and account).
    pub mine: Option<(PluginId, bool)>,
    /// Another source serving the offered plugin.
    pub holder: Option<SourceId>,
    /// Whether this replica may run the offered plugin: none when the host is not sharded.
    pub admitted: Option<bool>,
    /// Another source whose version of the offered plugin is parked here.
    pub parked_elsewhere: Option<SourceId>,
    /// Whether the offered plugin's shadow is this source's, of this very version.
    pub shadows_this: bool,
}

/// The names an offered version carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offered<'a> {
    /// The manifest's plugin name.
    pub name: &'a str,
    /// What the host knows the plugin by: the name within its realm
    /// ([`wasmloop_sandbox::Manifest::id`]).
    pub id: &'a PluginId,
    /// The name the source promised (a ConfigMap's label), if it promised one.
    pub expected_name: Option<&'a str>,
}

/// What to do with an offered version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// It already serves: nothing to do.
    Unchanged {
        /// The plugin.
        id: PluginId,
    },
    /// It is refused; whatever served before still does.
    Refuse(Refusal),
    /// It is valid but another replica runs the plugin: keep it compiled for when this one is
    /// admitted, after stopping what the source served before.
    Park {
        /// The plugin the source served before, of another name, which stops.
        stop: Option<PluginId>,
    },
    /// Prepare its controller, then stop `replace` and start it.
    Install {
        /// It is the seated shadow, promoted: it takes over from whichever source served.
        promote: bool,
        /// The serving plugin it replaces.
        replace: Option<PluginId>,
    },
}

/// Why an offered version is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The manifest names another plugin than the source promised.
    NameMismatch {
        /// What the source promised.
        expected: String,
    },
    /// Another source of the realm serves, or has parked, a plugin of this name.
    NameTaken {
        /// That source.
        holder: SourceId,
    },
}

/// Decides what an offered version does, given what serves (see the module's rules).
pub fn decide(view: &View, offered: &Offered<'_>) -> Decision {
    if let Some((id, true)) = &view.mine {
        return Decision::Unchanged { id: id.clone() };
    }
    if let Some(expected) = offered.expected_name.filter(|e| *e != offered.name) {
        return Decision::Refuse(Refusal::NameMismatch { expected: expected.to_owned() });
    }
    let mine = view.mine.as_ref().map(|(id, _)| id.clone());
    if view.admitted == Some(false) {
        // The first source of a name keeps it, as when every replica runs everything: a later
        // one is refused here too, not parked beside it.
        return match view.holder.clone().or_else(|| view.parked_elsewhere.clone()) {
            Some(holder) => Decision::Refuse(Refusal::NameTaken { holder }),
            None => Decision::Park { stop: mine },
        };
    }
    let promote = view.shadows_this && mine.is_none();
    // A version parked by another source waits to be admitted (`Registry::admit` starts it
    // next): that source came first.
    if let Some(holder) = view.parked_elsewhere.clone().filter(|_| view.holder.is_none()) {
        return Decision::Refuse(Refusal::NameTaken { holder });
    }
    match (&view.holder, promote) {
        (Some(holder), false) => Decision::Refuse(Refusal::NameTaken { holder: holder.clone() }),
        (Some(_), true) => Decision::Install { promote, replace: Some(offered.id.clone()) },
        (None, _) => Decision::Install { promote, replace: mine },
    }
}

#[cfg(test)]
mod tests {
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
}
