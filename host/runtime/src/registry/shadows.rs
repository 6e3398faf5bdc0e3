//! Shadows: a candidate seated beside its plugin's serving version, called with the same
//! requests and compared ([`crate::shadow`]). A plugin has one seat per realm, and one shadow
//! in it, from one source; what it finds is reported at most once per [`FINDINGS_EVERY`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use wasmloop_contract::names::Namespace;
use wasmloop_sandbox::{Plugin, PluginId, SourceId};

use super::plan::{self, ShadowStep, Unseated};
use super::reports::{Report, Reported};
use super::{Candidate, Registry, RegistryError, SeatKey, State, plugin_version_digest, realm_text};
use crate::shadow::{Shadow, ShadowReport, ShadowSeat, fits};

/// How often a shadow's findings are reported, at most: a status written per call would be a
/// write per reconcile.
pub const FINDINGS_EVERY: Duration = Duration::from_secs(1);

/// What an accepted shadow did.
#[derive(Debug)]
pub enum Shadowed {
    /// The candidate now shadows its plugin, replacing the source's earlier candidate.
    Seated {
        /// The plugin.
        name: String,
        /// The candidate's version.
        version: String,
        /// SHA-256 of component and configuration.
        digest: String,
        /// This seating's id ([`Shadow::id`]): findings of an earlier one are stale; what it
        /// finds is reported ([`Reported::ShadowFindings`]).
        id: u64,
    },
    /// The same candidate already shadows the plugin.
    Unchanged {
        /// The plugin.
        name: String,
    },
}

impl Registry {
    /// Plugin `name` of `realm`'s seat, made when it has none.
    pub(super) fn seat(&self, realm: Option<&Namespace>, name: &str) -> Arc<ShadowSeat> {
        let key = (realm.cloned(), name.to_owned());
        self.state().seats.entry(key).or_default().clone()
    }

    /// The shadow seated for plugin `name` of `realm`, without making a seat never used.
    pub(super) fn seated_in(state: &State, realm: Option<&Namespace>, name: &str) -> Option<Arc<Shadow>> {
        let key = (realm.cloned(), name.to_owned());
        state.seats.get(&key).and_then(|seat| seat.current())
    }

    /// Unseats every shadow of `source`, returning the plugins they shadowed.
    pub(super) fn vacate(&self, source: &SourceId) -> Vec<String> {
        vacate_locked(&mut self.state().seats, source, None)
    }

    /// Seats `candidate` as the shadow of the plugin it names (`expected_name`, which is
    /// required): called beside every version of that plugin from the same realm that serves,
    /// now or later, and compared with it. It is compiled and its instances reserved as for a
    /// serving version; the plugin's settings (concurrency, limits) apply. It acts as nobody:
    /// it writes nothing, and reads through the serving version's caches, so
    /// `candidate.account` is not used.
    ///
    /// # Errors
    /// When the candidate does not load, names another plugin, does not fit the serving
    /// version of its realm ([`crate::shadow::fits`]), or another source's shadow is seated;
    /// whatever shadowed before still does.
    pub async fn shadow(&self, candidate: Candidate) -> Result<Shadowed, RegistryError> {
        let origin = candidate.source.clone();
        let name = candidate.expected_name.clone().ok_or_else(|| RegistryError::ShadowMismatch {
            origin: origin.clone(),
            name: String::new(),
            reason: "names no plugin; say which plugin it shadows".to_owned(),
        })?;
        let digest = candidate.version_digest().await;
        let seated = Self::seated_in(&self.state(), candidate.realm.as_ref(), &name);
        let seated = seated
            .as_ref()
            .map(|current| (current.source(), plugin_version_digest(current.plugin(), current.config()) == digest));
        match plan::shadow(seated, &origin) {
            ShadowStep::Taken { holder } => return Err(RegistryError::ShadowTaken { origin, name, holder }),
            ShadowStep::Unchanged => {
                self.reporter.publish(Report::new(origin, Reported::ShadowUnchanged));
                return Ok(Shadowed::Unchanged { name });
            }
            ShadowStep::Seat => {}
        }
        let plugin = self.compile(&candidate).await.map_err(|source| {
            let id = PluginId::new(candidate.realm.clone(), &name).map(|id| id.to_string()).unwrap_or(name.clone());
            self.context.metrics.plugin_rejected(&id, source.reason());
            RegistryError::Load { source, running: None }
        })?;
        self.seat_compiled((&origin, candidate.realm.as_ref()), &name, plugin, candidate.config).await
    }

    /// Seats an already compiled `plugin` from `(source, realm)` as the shadow of plugin
    /// `name`, as [`Registry::shadow`] does after compiling.
    ///
    /// # Errors
    /// As [`Registry::shadow`], compiling aside.
    pub async fn seat_compiled(
        &self,
        (origin, realm): (&SourceId, Option<&Namespace>),
        name: &str,
        plugin: Plugin,
        config: Option<String>,
    ) -> Result<Shadowed, RegistryError> {
        let (origin, name, plugin) = (origin.clone(), name.to_owned(), plugin.in_realm(realm.cloned()));
        // The serving version it stands beside is its own realm's: names are unique per realm.
        let id = PluginId::new(realm.cloned(), &name).map_err(|e| RegistryError::ShadowMismatch {
            origin: origin.clone(),
            name: String::new(),
            reason: format!("names no plugin: {e}"),
        })?;
        let digest = plugin_version_digest(&plugin, config.as_deref());
        let found = plugin.manifest().name.clone();
        let seated = {
            let state = self.state();
            let holder = Self::seated_in(&state, realm, &name).map(|s| s.source().clone());
            let serving = state.slots.get(&id).map(|slot| slot.controller.plugin());
            plan::seat(holder.as_ref(), &origin, (&name, &found), || match serving {
                Some(serving) => fits(serving.manifest(), plugin.manifest()),
                None => Ok(()),
            })
        };
        match seated {
            Err(Unseated::Taken { holder }) => return Err(RegistryError::ShadowTaken { origin, name, holder }),
            Err(Unseated::NameMismatch { found }) => {
                self.context.metrics.plugin_rejected(id.as_str(), "NameMismatch");
                return Err(RegistryError::NameMismatch { origin, expected: name, found, running: None });
            }
            Err(Unseated::Misfit { reason }) => {
                self.context.metrics.plugin_rejected(id.as_str(), "ShadowMismatch");
                return Err(RegistryError::ShadowMismatch { origin, name, reason });
            }
            Ok(()) => {}
        }
        let (limits, capped) = self.fitted(&plugin, &(self.settings)(realm_text(realm), &name));
        if let Some(capped) = capped {
            tracing::warn!(source = %origin, plugin = %id, "shadow: {capped}");
        }
        let concurrency = limits.instances;
        let plugin = self.sandbox.reserve(&plugin.with_limits(limits)).map_err(|source| {
            self.context.metrics.plugin_rejected(id.as_str(), source.reason());
            RegistryError::Load { source, running: None }
        })?;
        let version = plugin.manifest().version.clone();
        let metrics = self.context.metrics.clone();
        let (shadow, findings) = Shadow::new(plugin, origin.clone(), config, concurrency, metrics);
        let seating = shadow.id();
        // One step under the lock: seated here (replacing this source's earlier shadow), then
        // gone from every other seat (a relabelled ConfigMap shadows one plugin). Seating
        // fails before anything is vacated, so what shadowed before still does.
        {
            let state = &mut *self.state();
            let key = (realm.cloned(), name.clone());
            if let Err(holder) = state.seats.entry(key.clone()).or_default().seat(shadow) {
                return Err(RegistryError::ShadowTaken { origin, name, holder });
            }
            vacate_locked(&mut state.seats, &origin, Some(&key));
        }
        let seated =
            Reported::ShadowSeated { id: seating, plugin: id, version: version.clone(), digest: digest.clone() };
        self.reporter.publish(Report::new(origin.clone(), seated));
        self.forward_findings(origin, seating, findings);
        Ok(Shadowed::Seated { name, version, digest, id: seating })
    }

    /// Reports what shadow seating `id` of `source` finds as it changes, at most once per
    /// [`FINDINGS_EVERY`]; ends when the shadow is gone.
    fn forward_findings(&self, source: SourceId, id: u64, mut findings: tokio::sync::watch::Receiver<ShadowReport>) {
        let reporter = self.reporter.clone();
        tokio::spawn(async move {
            while findings.changed().await.is_ok() {
                let report = findings.borrow_and_update().clone();
                reporter.publish(Report::new(source.clone(), Reported::ShadowFindings { id, report }));
                tokio::time::sleep(FINDINGS_EVERY).await;
            }
        });
    }

    /// Unseats the shadows `source` offered; their calls in flight finish unseen. Returns the
    /// plugins they shadowed.
    pub fn unshadow(&self, source: &SourceId) -> Vec<String> {
        self.vacate(source)
    }
}

/// Unseats every shadow of `source` but the one at `except`, returning the plugins they
/// shadowed, and forgets the seats nothing uses any more (a hostile source must not grow the
/// map name by name). A serving controller holds its seat, so only seats held by nothing else
/// go.
fn vacate_locked(
    seats: &mut HashMap<SeatKey, Arc<ShadowSeat>>,
    source: &SourceId,
    except: Option<&SeatKey>,
) -> Vec<String> {
    let vacated = seats
        .iter()
        .filter(|(key, seat)| Some(*key) != except && seat.vacate(source).is_some())
        .map(|((_, name), _)| name.clone())
        .collect();
    seats.retain(|_, seat| seat.current().is_some() || Arc::strong_count(seat) > 1);
    vacated
}
