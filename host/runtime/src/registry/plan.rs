//! What the registry decides, without compiling, preparing or stopping anything: the shell
//! ([`super::Registry`]) takes the lanes of the names involved, reads what serves, what is
//! parked and what shadows under its one lock, asks here, and carries the answer out.
//!
//! - an offer, before it is compiled: the version its source serves or has parked already
//!   changes nothing ([`again`]); a refused one is known by the name it was refused as
//!   ([`refused_as`], [`Refusals`]);
//! - a compiled offer ([`decide`], below);
//! - a shadow: a plugin has one, from one source ([`shadow`], [`seat`]);
//! - a source gone: what it serves stops, what it parked goes, what it was refused as is
//!   forgotten ([`removal`]);
//! - a plugin admitted to this replica starts the versions parked for it ([`admitted`]); one
//!   evicted parks the version serving ([`evicted`]);
//! - what a start did ([`started`]).
//!
//! A compiled offer ([`decide`]) follows these rules:
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

use std::collections::HashMap;

use wasmloop_sandbox::{PluginId, SourceId};

use super::Loaded;

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
    if let Some(Again::Unchanged(id)) = again(view.mine.as_ref().map(|(id, same)| (id, *same)), None) {
        return Decision::Unchanged { id };
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

/// What an offer that needs no compiling did: the very version its source serves, or has
/// parked, is offered again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Again {
    /// It serves already.
    Unchanged(PluginId),
    /// It waits, parked, to be admitted.
    Parked(PluginId),
}

/// What an offered version (its digest, its account) did before it is compiled, given the
/// version its source serves and the one it has parked, each with whether it is this very
/// version: none when it is to be compiled. The same rule [`decide`] applies once compiled.
///
/// ```
/// use wasmloop_runtime::registry::plan::{Again, again};
/// use wasmloop_sandbox::PluginId;
/// let id = PluginId::new(None, "labeler").unwrap();
/// assert_eq!(again(Some((&id, true)), None), Some(Again::Unchanged(id.clone())));
/// assert_eq!(again(Some((&id, false)), None), None);
/// ```
pub fn again(serving: Option<(&PluginId, bool)>, parked: Option<(&PluginId, bool)>) -> Option<Again> {
    match (serving, parked) {
        (Some((id, true)), _) => Some(Again::Unchanged(id.clone())),
        (_, Some((id, true))) => Some(Again::Parked(id.clone())),
        _ => None,
    }
}

/// What a version that did not compile is known as in metrics and refusals: the plugin its
/// source promised, else the one it serves, else `unknown`.
pub fn refused_as(promised: Option<PluginId>, serving: Option<PluginId>) -> PluginId {
    promised.or(serving).unwrap_or_else(|| PluginId::new(None, "unknown").expect("a plugin name"))
}

/// The plugin each source was last refused as, whose metric series go when the source stops
/// offering it: a source that keeps offering components of new names cannot grow `/metrics`.
#[derive(Debug, Default)]
pub struct Refusals(HashMap<SourceId, PluginId>);

impl Refusals {
    /// `source` was refused as `refused_as` (none: what it offers loads now). Returns the
    /// plugin whose series are to be forgotten: the one it was refused as before, unless that
    /// is the same or `serves`.
    pub fn note(
        &mut self,
        source: &SourceId,
        refused_as: Option<PluginId>,
        serves: impl Fn(&PluginId) -> bool,
    ) -> Option<PluginId> {
        let earlier = match refused_as {
            Some(id) => self.0.insert(source.clone(), id.clone()).filter(|earlier| *earlier != id),
            None => self.0.remove(source),
        };
        earlier.filter(|earlier| !serves(earlier))
    }

    /// `source` is gone: the plugin it was refused as, to forget unless it `serves`.
    pub fn forget(&mut self, source: &SourceId, serves: impl Fn(&PluginId) -> bool) -> Option<PluginId> {
        self.0.remove(source).filter(|refused| !serves(refused))
    }
}

/// What an offered shadow does, given the shadow seated for its plugin (its source, and
/// whether it is this very version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShadowStep {
    /// Another source's shadow is seated: refused.
    Taken {
        /// That source.
        holder: SourceId,
    },
    /// This very version shadows already.
    Unchanged,
    /// Compile it and seat it ([`seat`]).
    Seat,
}

/// What a shadow offered by `origin` does, given the one seated (`seated`: its source and
/// whether it is this very version).
pub fn shadow(seated: Option<(&SourceId, bool)>, origin: &SourceId) -> ShadowStep {
    match seated {
        Some((holder, _)) if holder != origin => ShadowStep::Taken { holder: holder.clone() },
        Some((_, true)) => ShadowStep::Unchanged,
        _ => ShadowStep::Seat,
    }
}

/// Why a compiled shadow cannot be seated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unseated {
    /// Another source's shadow is seated.
    Taken {
        /// That source.
        holder: SourceId,
    },
    /// The manifest names another plugin than the source promised.
    NameMismatch {
        /// What the manifest names.
        found: String,
    },
    /// It does not fit the serving version ([`crate::shadow::fits`]).
    Misfit {
        /// What does not match, and what to do.
        reason: String,
    },
}

/// Whether a compiled shadow from `origin` of plugin `expected` may be seated: the seat is
/// not another source's, its manifest names `expected` (`found`), and it `fits` the serving
/// version, checked in that order.
pub fn seat(
    holder: Option<&SourceId>,
    origin: &SourceId,
    (expected, found): (&str, &str),
    fits: impl FnOnce() -> Result<(), crate::shadow::Misfit>,
) -> Result<(), Unseated> {
    if let Some(holder) = holder.filter(|h| *h != origin) {
        return Err(Unseated::Taken { holder: holder.clone() });
    }
    if found != expected {
        return Err(Unseated::NameMismatch { found: found.to_owned() });
    }
    fits().map_err(|misfit| Unseated::Misfit { reason: misfit.to_string() })
}

/// What a removed source's plugins come to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removal {
    /// The plugin it serves, to stop.
    pub stop: Option<PluginId>,
    /// The plugin whose version it had parked, gone with it.
    pub parked: Option<PluginId>,
}

impl Removal {
    /// The plugin that is gone: the one stopped, else the one parked.
    pub fn gone(&self) -> Option<&PluginId> {
        self.stop.as_ref().or(self.parked.as_ref())
    }
}

/// What removing a source does, given the plugin it served when its lane was entered
/// (`before`), the one it serves now that its plugin's lane is held too (`now`; a promotion
/// may have taken the plugin over meanwhile, and another source's version is not this
/// source's to stop), and the plugin whose version it had parked.
pub fn removal(before: Option<&PluginId>, now: Option<&PluginId>, parked: Option<PluginId>) -> Removal {
    let stop = before.filter(|name| now == Some(*name)).cloned();
    Removal { stop, parked }
}

/// The sources whose versions parked for plugin `id` start once it is admitted, in order.
pub fn admitted<'a>(id: &PluginId, parked: impl IntoIterator<Item = (&'a SourceId, PluginId)>) -> Vec<SourceId> {
    let mut sources: Vec<SourceId> = parked.into_iter().filter(|(_, p)| p == id).map(|(s, _)| s.clone()).collect();
    sources.sort();
    sources
}

/// What evicting plugin `id` from this replica does, given the version serving here (its
/// source and digest): that version is parked for its source, and reported parked; with none
/// serving, only the admission goes.
pub fn evicted(id: &PluginId, serving: Option<(&SourceId, &str)>) -> Option<(SourceId, Loaded)> {
    let (source, digest) = serving?;
    Some((source.clone(), Loaded::Parked { name: id.clone(), digest: digest.to_owned() }))
}

/// What a started version did: promoted from shadow, replaced `previous`, or started; and the
/// source a promotion took the plugin from (`old_source`, when it is not `source`), which now
/// serves nothing.
pub fn started(
    (name, version, digest): (PluginId, String, String),
    promoted: bool,
    previous: Option<(String, SourceId)>,
    source: &SourceId,
) -> Loaded {
    match previous {
        _ if promoted => {
            let superseded = previous.as_ref().map(|(_, old)| old).filter(|old| *old != source).cloned();
            let previous = previous.map(|(version, _)| version);
            Loaded::Promoted { name, version, previous, superseded, digest }
        }
        Some((previous, _)) => Loaded::Replaced { name, version, previous, digest },
        None => Loaded::Started { name, version, digest },
    }
}

#[cfg(test)]
mod tests;
