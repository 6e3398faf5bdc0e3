//! How a compiled version is installed: what the decision looks at ([`super::plan::View`]),
//! the identity and instances it is given, its controller prepared while the old version
//! still serves, and the swap.

use std::time::Duration;

use wasmloop_contract::names::Namespace;
use wasmloop_sandbox::{Plugin, PluginId, SourceId};

use super::lanes::Lane;
use super::plan::{self, Decision, Offered, Refusal, View};
use super::reports::{Loaded, Report, Reported};
use super::{Registry, RegistryError, Slot, plugin_version_digest, realm_text, version_of};
use crate::controller::{Controller, ControllerConfig, StartError};
use crate::identity::AccountChoice;

/// Where a version comes from, as an install needs it.
#[derive(Clone)]
pub(super) struct Offer {
    pub(super) source: SourceId,
    pub(super) realm: Option<Namespace>,
    pub(super) expected_name: Option<String>,
    pub(super) account: AccountChoice,
}

/// A version to start, as [`plan::decide`] said.
struct Install {
    offer: Offer,
    plugin: Plugin,
    config: Option<String>,
    digest: String,
    promote: bool,
    replace: Option<PluginId>,
    /// The version its source serves now, to name in errors.
    running: Option<String>,
}

/// A plugin noted as preparing while this lives, and counted in `wasmloop_plugins_preparing`.
struct Preparing<'a> {
    registry: &'a Registry,
    id: PluginId,
}

impl<'a> Preparing<'a> {
    fn enter(registry: &'a Registry, id: &PluginId) -> Self {
        let mut state = registry.state();
        state.preparing.insert(id.clone());
        registry.context.metrics.plugins_preparing(state.preparing.len());
        Preparing { registry, id: id.clone() }
    }
}

impl Drop for Preparing<'_> {
    fn drop(&mut self) {
        let mut state = self.registry.state();
        state.preparing.remove(&self.id);
        self.registry.context.metrics.plugins_preparing(state.preparing.len());
    }
}

impl Registry {
    /// Decides what `plugin` does ([`plan::decide`]) and carries it out. The caller holds the
    /// source's lane; this takes the lanes of the plugin offered and of the one the source
    /// serves, so what the decision saw holds until it is carried out.
    pub(super) async fn install_entered(
        &self,
        offer: Offer,
        plugin: Plugin,
        config: Option<String>,
    ) -> Result<Loaded, RegistryError> {
        let plugin = plugin.in_realm(offer.realm.clone());
        let digest = plugin_version_digest(&plugin, config.as_deref());
        // The plugin's own name (its ServiceAccount's, its seat's) and what the host knows it
        // by: names are unique within a realm, not across realms.
        let (name, id) = (plugin.manifest().name.clone(), plugin.manifest().id());
        // Only this source's offers change what it serves, and its lane is held: this holds.
        let mine = self.serving(&offer.source).map(|(id, _)| id);
        let _plugins = self.lanes.enter([Lane::Plugin(id.clone())].into_iter().chain(mine.map(Lane::Plugin))).await;
        let (view, running) = self.view(&offer, &name, &id, &digest);
        let reject = |error: RegistryError| {
            self.context.metrics.plugin_rejected(id.as_str(), error.reason());
            error
        };
        let (origin, source) = (offer.source.clone(), offer.source.clone());
        let decided =
            plan::decide(&view, &Offered { name: &name, id: &id, expected_name: offer.expected_name.as_deref() });
        // Reported while the lanes are held: what this source's plugin did reaches the stream
        // before anything a later change of the source or of the plugin does.
        let result = match decided {
            Decision::Unchanged { id } => Ok(Loaded::Unchanged { name: id, digest }),
            Decision::Refuse(Refusal::NameMismatch { expected }) => {
                Err(reject(RegistryError::NameMismatch { origin, expected, found: name, running }))
            }
            Decision::Refuse(Refusal::NameTaken { holder }) => {
                Err(reject(RegistryError::NameTaken { origin, name: id.clone(), holder }))
            }
            Decision::Park { stop } => match self.vouch(&offer, &plugin).await {
                Ok(()) => Ok(self.park(offer, plugin, config, stop).await),
                Err(source) => Err(reject(RegistryError::Start { source, running })),
            },
            Decision::Install { promote, replace } => {
                let install = Install { offer, plugin, config, digest, promote, replace, running };
                match self.start(install).await {
                    Ok((loaded, capped)) => {
                        let result = self.reported(&source, Ok(loaded));
                        if let Some(capped) = capped {
                            let message = capped.to_string();
                            tracing::warn!(%source, plugin = %id, "{message}");
                            self.reporter.publish(Report::new(source, Reported::Capped { message }));
                        }
                        return result;
                    }
                    Err(error) => Err(reject(error)),
                }
            }
        };
        self.reported(&source, result)
    }

    /// What the decision on an offer of plugin `name` (known as `id`) looks at, and the version
    /// its source serves now.
    fn view(&self, offer: &Offer, name: &str, id: &PluginId, digest: &str) -> (View, Option<String>) {
        let state = self.state();
        let source = &offer.source;
        let view = View {
            mine: state.serving(source).map(|(n, s)| (n.clone(), s.digest == digest && s.account == offer.account)),
            holder: state.slots.get(id).filter(|s| s.source != *source).map(|s| s.source.clone()),
            admitted: state.gate.as_ref().map(|g| g.admitted.contains(id)),
            parked_elsewhere: state.gate.as_ref().and_then(|g| g.parked_elsewhere(source, id)),
            shadows_this: Self::seated_in(&state, offer.realm.as_ref(), name).is_some_and(|shadow| {
                *shadow.source() == *source && plugin_version_digest(shadow.plugin(), shadow.config()) == digest
            }),
        };
        (view, state.running_version(source))
    }

    /// Prepares the new version's controller while what it replaces still serves, with no
    /// lock held (its caches may take two minutes to sync), then stops the old version and
    /// starts the new one. Says what of its limits the host's guest memory budget cut, if
    /// anything.
    async fn start(&self, install: Install) -> Result<(Loaded, Option<wasmloop_sandbox::Capped>), RegistryError> {
        let Install { offer, plugin, config, digest, promote, replace, running } = install;
        let Offer { source, realm, account, .. } = offer;
        let (name, id) = (plugin.manifest().name.clone(), plugin.manifest().id());
        let seat = self.seat(realm.as_ref(), &name);
        let promoted = seat.current().filter(|_| promote);
        let mut controller_config = (self.settings)(realm_text(realm.as_ref()), &name);
        if let Some(text) = &config {
            controller_config.plugin_config = text.clone();
        }
        controller_config.identity =
            self.context.identities.identity_for(&account, &name, controller_config.service_account.as_ref()).map_err(
                |source| {
                    let source = StartError::Identity { plugin: id.clone(), source };
                    RegistryError::Start { source, running: running.clone() }
                },
            )?;
        // One instance per worker (workers make the `map` calls too): a call never waits for
        // another plugin. Ceilings times workers must fit the host's guest memory budget, or
        // the plugin alone could fill the host: fewer workers if not. A promoted shadow keeps
        // the instances it reserved, fitted the same way: a full pool does not stop a promotion.
        let (plugin, capped) = match &promoted {
            Some(shadow) => (shadow.plugin().clone(), None),
            None => {
                let (limits, capped) = self.fitted(&plugin, &controller_config);
                let reserved = self
                    .sandbox
                    .reserve(&plugin.with_limits(limits))
                    .map_err(|source| RegistryError::Load { source, running: running.clone() })?;
                (reserved, capped)
            }
        };
        controller_config.concurrency_override = Some(plugin.limits().instances);
        let version = plugin.manifest().version.clone();
        let prepared = {
            let _preparing = Preparing::enter(self, &id);
            Controller::prepare(plugin, &self.context, controller_config, seat.clone())
                .await
                .map_err(|source| RegistryError::Start { source, running: running.clone() })?
        };
        if self.state().closed {
            return Err(RegistryError::ShuttingDown { plugin: id });
        }
        // A source that now offers a plugin of another name gives up its old one; a promoted
        // shadow takes over from whichever source served.
        let old = replace.and_then(|replaced| self.state().take_slot(&replaced, &self.context.metrics));
        let previous = old.as_ref().map(|s| (version_of(&s.controller), s.source.clone()));
        // A source serves or shadows, not both; and a promoted shadow must be gone before the
        // new version starts, or it would be compared with itself.
        self.vacate(&source);
        let controller = match old {
            Some(old) => prepared.run_after(old.controller.shut_down(self.drain).await),
            None => prepared.run(),
        };
        let slot = Slot { source: source.clone(), realm, account, digest: digest.clone(), config, controller };
        if let Err(slot) = self.seat_slot(&id, slot) {
            // Shut down while it prepared: it must not run past the host's drain.
            slot.controller.shut_down(Duration::ZERO).await;
            return Err(RegistryError::ShuttingDown { plugin: id });
        }
        self.context.metrics.plugin_loaded(id.as_str());
        Ok((plan::started((id, version, digest), promoted.is_some(), previous, &source), capped))
    }

    /// Puts `slot` in as plugin `id`'s, unless the host shut down meanwhile; its source's
    /// parked version, if any, goes.
    fn seat_slot(&self, id: &PluginId, slot: Slot) -> Result<(), Slot> {
        let mut state = self.state();
        if state.closed {
            return Err(slot);
        }
        if let Some(gate) = state.gate.as_mut() {
            gate.unpark(&slot.source);
        }
        state.slots.insert(id.clone(), slot);
        self.context.metrics.plugins_active(state.slots.len());
        Ok(())
    }

    /// `plugin`'s limits as it runs under `config`: one instance per worker, the operator's CPU
    /// weight, within the host's guest memory budget ([`wasmloop_sandbox::Sandbox::fit`]).
    pub(super) fn fitted(
        &self,
        plugin: &Plugin,
        config: &ControllerConfig,
    ) -> (wasmloop_sandbox::Limits, Option<wasmloop_sandbox::Capped>) {
        let concurrency = config.concurrency_for(plugin.manifest().settings.max_concurrent_reconciles);
        self.sandbox.fit(plugin.limits().instances(concurrency).cpu_weight(config.cpu_weight))
    }

    /// Checks that `plugin`, offered by `offer`, may act as whom it names, before it is parked: a
    /// sharded host takes a fence Lease for every plugin it knows, so one whose identity would
    /// be refused must not become one (two thousand such objects would be two thousand Leases
    /// to renew).
    async fn vouch(&self, offer: &Offer, plugin: &Plugin) -> Result<(), StartError> {
        self.may_act(offer.realm.as_ref(), &plugin.manifest().name, &offer.account).await
    }

    /// Checks that plugin `name` of `realm` may act as whom `account` names: with plugins
    /// acting as their own ServiceAccounts, that the account exists, its administrator opted it
    /// in, and it is not the host's. Sources ask before anything is compiled for an offer.
    ///
    /// # Errors
    /// [`StartError::Identity`], naming the plugin and what to do.
    pub async fn may_act(
        &self,
        realm: Option<&Namespace>,
        name: &str,
        account: &AccountChoice,
    ) -> Result<(), StartError> {
        let configured = (self.settings)(realm_text(realm), name).service_account;
        let identities = &self.context.identities;
        // Sources name plugins as manifests must: a name that is none is refused as `unknown`.
        let id = PluginId::new(realm.cloned(), name).unwrap_or_else(|_| plan::refused_as(None, None));
        let refused = |source| StartError::Identity { plugin: id.clone(), source };
        let identity = identities.identity_for(account, name, configured.as_ref()).map_err(refused)?;
        if let crate::identity::Identity::ServiceAccount(account) = &identity {
            identities.ensure_usable(account).await.map_err(refused)?;
        }
        Ok(())
    }
}
