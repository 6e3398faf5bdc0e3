//! What the status writer shows for each object that ships a plugin (a plugin ConfigMap, a
//! `WasmPlugin`), decided without the API server: a [`Statuses`] takes each report of the
//! registry's stream ([`Statuses::report`]) and each change of the quarantine board
//! ([`Statuses::quarantines`]), keeps what each object's status shows ([`Shown`]), and returns
//! the writes to carry out ([`Effect`]): a status, an Event.
//!
//! A ConfigMap's status annotation is a pure function of what is shown ([`status_of`]); a
//! `WasmPlugin`'s status is too, with its conditions' transition times carried over from the
//! last status written ([`super::conditions`]).

use std::collections::{BTreeMap, HashMap};

use serde_json::json;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_contract::validate;
use wasmloop_runtime::compare::ShadowResult;
use wasmloop_runtime::registry::Loaded;
use wasmloop_runtime::registry::reports::{Report, Reported};
use wasmloop_runtime::shadow::ShadowReport;
use wasmloop_sandbox::{EventType, SourceId, SourceKind};

use super::conditions::{self, Condition};
use crate::plugin_configmap::TRACK_ANNOTATION;
use crate::wasmplugin::SUPERSEDED;

/// The longest refusal a status shows.
pub(super) const MAX_LAST_ERROR: usize = 4096;

/// A plugin version an object loaded, serving or shadowing, as its status shows it: the
/// plugin's name, the manifest's version, the SHA-256 of component and configuration, and when
/// it loaded.
#[derive(Debug)]
pub(super) struct Version {
    pub(super) plugin: String,
    pub(super) version: String,
    pub(super) digest: String,
    pub(super) loaded_at: String,
}

impl Version {
    /// The version's fields of the status, its digest under `digest_key`.
    fn status(&self, digest_key: &str) -> serde_json::Value {
        json!({"plugin": self.plugin, "version": self.version, digest_key: self.digest, "loadedAt": self.loaded_at})
    }
}

/// A version serving from a ConfigMap.
#[derive(Debug)]
pub(super) struct Active {
    /// What the host knows it by (`NAMESPACE/NAME`): its quarantine is found by this.
    pub(super) id: String,
    pub(super) loaded: Version,
}

impl Active {
    /// This version, and when it loaded: a reload of the same digest is a new version too.
    fn version_key(&self) -> String {
        format!("{}@{}@{}", self.id, self.loaded.digest, self.loaded.loaded_at)
    }
}

/// A candidate shadowing from a ConfigMap, and what it found.
#[derive(Debug)]
pub(super) struct Shadowing {
    /// The seating's id: findings of an earlier seating of this ConfigMap are stale.
    pub(super) id: u64,
    pub(super) loaded: Version,
    pub(super) findings: ShadowReport,
    /// The `ShadowDiffers` Event was recorded.
    pub(super) announced: bool,
}

/// What one object's status shows.
#[derive(Debug, Default)]
pub(super) struct Shown {
    /// The version serving from it.
    pub(super) active: Option<Active>,
    /// The candidate shadowing from it, and what it found.
    pub(super) shadow: Option<Shadowing>,
    /// Why its last offer was refused or stopped, and when; none when it was accepted.
    pub(super) last_error: Option<String>,
    pub(super) last_error_at: Option<String>,
    /// The CamelCase reason of `last_error`.
    pub(super) reason: Option<String>,
    /// Why its serving version is quarantined; none when it is not.
    pub(super) quarantined: Option<String>,
    /// The generation (a `WasmPlugin`'s) whose outcome is shown.
    pub(super) observed: Option<i64>,
    /// The generation the source is handling, and what pins its version, until its outcome.
    pub(super) pending: Option<(i64, Option<String>)>,
    /// What pins the version serving or shadowing (an image's digest, a digest pin).
    pub(super) pinned: Option<String>,
    /// The conditions last written (a `WasmPlugin`'s), whose transition times carry over.
    pub(super) conditions: Vec<Condition>,
    /// Failed reconciles of the version serving over the error window (a `WasmPlugin`'s).
    pub(super) errors: Option<u64>,
    /// What the host's guest memory budget cut of the serving version's settings, if anything.
    pub(super) capped: Option<String>,
}

/// An object that ships a plugin: kind, namespace and name, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct ObjectKey {
    /// Its kind.
    pub(super) kind: SourceKind,
    /// Its namespace.
    pub(super) namespace: Namespace,
    /// Its name.
    pub(super) name: Name,
}

impl ObjectKey {
    /// The source it is, as the registry and its reports name it.
    pub(super) fn source(&self) -> SourceId {
        SourceId::object(self.kind, self.namespace.clone(), self.name.clone())
    }
}

/// The object a source is, when it is a ConfigMap or a `WasmPlugin` (not a file).
pub(super) fn object_of(source: &SourceId) -> Option<ObjectKey> {
    let (kind, namespace, name) = source.as_object()?;
    Some(ObjectKey { kind, namespace: namespace.clone(), name: name.clone() })
}

/// A write to carry out.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Effect {
    /// Write ConfigMap `object`'s status annotation.
    Status { object: ObjectKey, status: serde_json::Value },
    /// Mark ConfigMap `object` `wasmloop.dev/track: superseded` (a promoted shadow serves
    /// its plugin from another ConfigMap), with its status in the same write: the mark is what
    /// a restart reads, and the status says who serves now. Every replica marks; the status
    /// is the leader's to write, as always.
    Supersede { object: ObjectKey, status: serde_json::Value },
    /// Record an Event about ConfigMap `object`, paid from the write budget of `plugin` (the
    /// plugin serving from it, by id) when one serves.
    Event {
        object: ObjectKey,
        plugin: Option<String>,
        kind: EventType,
        reason: &'static str,
        action: &'static str,
        note: String,
    },
}

/// What every object's status shows, by object.
#[derive(Debug, Default)]
pub(super) struct Statuses {
    shown: HashMap<ObjectKey, Shown>,
    /// With `--shard`, this replica's identity, shown in the status of what it runs.
    replica: Option<String>,
}

impl Statuses {
    /// Statuses of a replica named `replica` (`--shard`), which shows its name on what it runs.
    pub(super) fn new(replica: Option<String>) -> Statuses {
        Statuses { shown: HashMap::new(), replica }
    }

    /// What `report` changes, `now` being the time to show for what happens now. A report about
    /// a source other than a ConfigMap or a `WasmPlugin` changes nothing.
    pub(super) fn report(&mut self, report: Report, now: &str) -> Vec<Effect> {
        let Some(object) = object_of(&report.source) else { return Vec::new() };
        // An outcome is the outcome of the generation the source was handling.
        let outcome = !matches!(
            report.what,
            Reported::Observed { .. }
                | Reported::ShadowFindings { .. }
                | Reported::Removed
                | Reported::Capped { .. }
                | Reported::Loaded(Loaded::Parked { .. })
        );
        let settled = if outcome { self.shown.get_mut(&object).and_then(Shown::settle) } else { None };
        let pin = settled.clone().map(|(_, pin)| pin);
        let mut effects = match report.what {
            Reported::Loaded(loaded) => self.loaded(object.clone(), &loaded, pin, now),
            Reported::Refused { reason, message } => self.refused(object.clone(), &reason, message, now),
            Reported::Stopped { reason, message } => self.stopped(object.clone(), reason, message, now),
            Reported::Retired { said } => self.retired(object.clone(), said, now),
            Reported::ShadowSeated { id, plugin, version, digest } => {
                let loaded = Version { plugin: plugin.name().to_owned(), version, digest, loaded_at: now.to_owned() };
                self.shadow_seated(object.clone(), id, loaded, pin, now)
            }
            Reported::ShadowUnchanged => self.error_over(object.clone(), now),
            Reported::ShadowFindings { id, report } => self.shadow_found(object.clone(), id, report, now),
            Reported::Observed { generation, pin, settled } => {
                self.observed(object.clone(), generation, pin, settled, now)
            }
            Reported::Removed => {
                self.shown.remove(&object);
                Vec::new()
            }
            Reported::Capped { message } => self.capped(object.clone(), message, now),
        };
        // A generation settled with nothing else to write still shows that it was observed.
        let written = effects.iter().any(|e| !matches!(e, Effect::Event { .. }) && *object_key(e) == object);
        if settled.is_some() && !written {
            effects.push(self.status(&object, now));
        }
        effects
    }

    /// Whether `object`'s status is shown here (it was reported on, and not removed since).
    pub(super) fn shows(&self, object: &ObjectKey) -> bool {
        self.shown.contains_key(object)
    }

    /// Whether any object of `namespace` is shown here.
    pub(super) fn shows_in(&self, namespace: &Namespace) -> bool {
        self.shown.keys().any(|object| object.namespace == *namespace)
    }

    /// Shows each serving plugin's quarantine, entered or lifted: `board` maps a quarantined
    /// plugin to why.
    pub(super) fn quarantines(&mut self, board: &BTreeMap<String, String>, now: &str) -> Vec<Effect> {
        self.restate(now, |_, shown| {
            let Some(active) = &shown.active else { return false };
            let quarantined = board.get(&active.id).cloned();
            let changed = quarantined != shown.quarantined;
            shown.quarantined = quarantined;
            changed
        })
    }

    /// Lets `change` update what each object serving a version shows, and returns, in key
    /// order, the status of each it changed (it says so).
    fn restate(&mut self, now: &str, mut change: impl FnMut(&ObjectKey, &mut Shown) -> bool) -> Vec<Effect> {
        let mut effects = Vec::new();
        for (object, shown) in &mut self.shown {
            if shown.active.is_some() && change(object, shown) {
                effects.push(status_effect(object, shown, self.replica.as_deref(), now));
            }
        }
        effects.sort_by(|a, b| object_key(a).cmp(object_key(b)));
        effects
    }

    /// Takes the transition times of `written` (the conditions a `WasmPlugin`'s status held
    /// before this process wrote it) where a condition's status is the same, and returns the
    /// status to write instead: a restart or a new leader changes no transition time.
    pub(super) fn adopt_times(&mut self, object: &ObjectKey, written: &serde_json::Value) -> Option<serde_json::Value> {
        let replica = self.replica.clone();
        let shown = self.shown.get_mut(object)?;
        shown.conditions = conditions::adopted(std::mem::take(&mut shown.conditions), written);
        Some(conditions::status(shown, replica.as_deref()))
    }

    /// The plugins serving from `WasmPlugin`s, whose failures the writer samples: each as
    /// (plugin, version), the version being what [`Statuses::errors`] counts by, so a new version
    /// starts from none.
    pub(super) fn serving_wasmplugins(&self) -> Vec<(String, String)> {
        let serving = self.shown.iter().filter(|(object, _)| object.kind == SourceKind::WasmPlugin);
        serving.filter_map(|(_, shown)| shown.active.as_ref().map(|a| (a.id.clone(), a.version_key()))).collect()
    }

    /// Forgets the counts shown: the next ones are written whatever they are (a new leader's,
    /// whose counters are not the old leader's).
    pub(super) fn forget_errors(&mut self) {
        for shown in self.shown.values_mut() {
            shown.errors = None;
        }
    }

    /// Shows each `WasmPlugin`'s failed reconciles over the error window: `counts` maps a
    /// serving version ([`Statuses::serving_wasmplugins`]) to its count.
    pub(super) fn errors(&mut self, counts: &BTreeMap<String, u64>, now: &str) -> Vec<Effect> {
        self.restate(now, |object, shown| {
            let Some(active) = shown.active.as_ref().filter(|_| object.kind == SourceKind::WasmPlugin) else {
                return false;
            };
            let count = counts.get(&active.version_key()).copied();
            let changed = count.is_some() && count != shown.errors;
            if changed {
                shown.errors = count;
            }
            changed
        })
    }

    /// An Event about `object`, paid from the plugin serving from it, if one does.
    fn event(
        &self,
        object: &ObjectKey,
        kind: EventType,
        reason: &'static str,
        action: &'static str,
        note: String,
    ) -> Effect {
        let plugin = self.shown.get(object).and_then(|shown| shown.active.as_ref()).map(|active| active.id.clone());
        Effect::Event { object: object.clone(), plugin, kind, reason, action, note }
    }

    fn shown(&mut self, object: &ObjectKey) -> &mut Shown {
        self.shown.entry(object.clone()).or_default()
    }

    fn status(&mut self, object: &ObjectKey, now: &str) -> Effect {
        let replica = self.replica.clone();
        status_effect(object, self.shown(object), replica.as_deref(), now)
    }

    /// The source began handling a generation: its outcome comes next, unless `settled`.
    fn observed(
        &mut self,
        object: ObjectKey,
        generation: i64,
        pin: Option<String>,
        settled: bool,
        now: &str,
    ) -> Vec<Effect> {
        let shown = self.shown(&object);
        if !settled {
            shown.pending = Some((generation, pin));
            return Vec::new();
        }
        if shown.observed == Some(generation) && shown.pending.is_none() {
            return Vec::new();
        }
        (shown.observed, shown.pending) = (Some(generation), None);
        vec![self.status(&object, now)]
    }

    fn loaded(&mut self, object: ObjectKey, loaded: &Loaded, pin: Option<Option<String>>, now: &str) -> Vec<Effect> {
        let (id, version, superseded) = match loaded {
            Loaded::Started { name, version, .. } | Loaded::Replaced { name, version, .. } => (name, version, None),
            Loaded::Promoted { name, version, superseded, .. } => (name, version, superseded.as_ref()),
            Loaded::Parked { .. } => {
                // Another replica runs it, and says so in the status. Nothing is made for an
                // object not shown (deleted since).
                if let Some(shown) = self.shown.get_mut(&object) {
                    shown.active = None;
                }
                return Vec::new();
            }
            // Back to what serves after a refusal (as the refusal advised): the error is over.
            // What pins it may have changed (a pin added to the same component).
            Loaded::Unchanged { .. } => {
                if let (Some(pin), Some(shown)) = (pin, self.shown.get_mut(&object)) {
                    shown.pinned = pin;
                }
                return self.error_over(object, now);
            }
        };
        let plugin = id.name().to_owned();
        let mut effects = Vec::new();
        // The object that served before, unless deleted since (then nothing is shown for it).
        if let Some(old) = superseded.and_then(object_of).filter(|old| self.shown.contains_key(old)) {
            let by = object.source();
            let what = match old.kind {
                SourceKind::ConfigMap => "delete this ConfigMap",
                SourceKind::WasmPlugin => "delete this WasmPlugin, or edit its spec to offer it again",
            };
            let old_shown = self.shown(&old);
            old_shown.active = None;
            old_shown.last_error =
                Some(format!("superseded: plugin {plugin} is served from {by} now (a promoted shadow); {what}"));
            old_shown.last_error_at = Some(now.to_owned());
            old_shown.reason = Some(SUPERSEDED.to_owned());
            let replica = self.replica.clone();
            let status = status_of_kind(&old, self.shown(&old), replica.as_deref(), now);
            effects.push(Effect::Supersede { object: old, status });
        }
        let loaded_version = Version {
            plugin: plugin.clone(),
            version: version.clone(),
            digest: loaded.digest().to_owned(),
            loaded_at: now.to_owned(),
        };
        let shown = self.shown(&object);
        // Serving now: whatever this object shadowed before is unseated. A new version starts
        // healthy.
        shown.active = Some(Active { id: id.to_string(), loaded: loaded_version });
        (shown.shadow, shown.quarantined, shown.errors, shown.capped) = (None, None, None, None);
        (shown.last_error, shown.last_error_at, shown.reason) = (None, None, None);
        if let Some(pin) = pin {
            shown.pinned = pin;
        }
        effects.push(self.status(&object, now));
        let note = format!("plugin {plugin} {version} serving (sha256 {})", short(loaded.digest()));
        effects.push(self.event(&object, EventType::Normal, "PluginLoaded", "LoadPlugin", note));
        effects
    }

    /// The version just loaded runs with less than its settings ask, to fit the host's guest
    /// memory budget.
    fn capped(&mut self, object: ObjectKey, message: String, now: &str) -> Vec<Effect> {
        let Some(shown) = self.shown.get_mut(&object).filter(|shown| shown.active.is_some()) else {
            return Vec::new();
        };
        shown.capped = Some(validate::cut(message, MAX_LAST_ERROR));
        vec![self.status(&object, now)]
    }

    /// A refusal is over: what serves (or shadows) is what the source offers.
    fn error_over(&mut self, object: ObjectKey, now: &str) -> Vec<Effect> {
        let shown = self.shown(&object);
        if shown.last_error.take().is_none() {
            return Vec::new();
        }
        (shown.last_error_at, shown.reason) = (None, None);
        vec![self.status(&object, now)]
    }

    fn refused(&mut self, object: ObjectKey, reason: &str, message: String, now: &str) -> Vec<Effect> {
        // Refusals quote what others wrote (a registry, a manifest, a compiler on a component):
        // a status past the API's limits would lose the whole status.
        let message = validate::cut(message, MAX_LAST_ERROR);
        let shown = self.shown(&object);
        if shown.last_error.as_deref() == Some(message.as_str()) {
            // Said already: the same words again would say nothing new.
            return Vec::new();
        }
        shown.last_error = Some(message.clone());
        shown.last_error_at = Some(now.to_owned());
        shown.reason = Some(reason.to_owned());
        let note = format!("{reason}: {message}");
        vec![self.status(&object, now), self.event(&object, EventType::Warning, "PluginRejected", "LoadPlugin", note)]
    }

    /// What served or shadowed from the object stopped, as it asked.
    fn stopped(&mut self, object: ObjectKey, reason: String, message: String, now: &str) -> Vec<Effect> {
        let message = validate::cut(message, MAX_LAST_ERROR);
        let shown = self.shown(&object);
        let was_running = shown.active.is_some() || shown.shadow.is_some();
        if !was_running && shown.last_error.as_deref() == Some(message.as_str()) {
            return Vec::new();
        }
        (shown.active, shown.shadow, shown.quarantined, shown.pinned, shown.errors) = (None, None, None, None, None);
        (shown.last_error, shown.last_error_at) = (Some(message.clone()), Some(now.to_owned()));
        shown.reason = Some(reason.clone());
        let kind = if reason == "Suspended" { EventType::Normal } else { EventType::Warning };
        let note = format!("{reason}: {message}");
        vec![self.status(&object, now), self.event(&object, kind, "PluginStopped", "StopPlugin", note)]
    }

    fn retired(&mut self, object: ObjectKey, said: Option<String>, now: &str) -> Vec<Effect> {
        let shown = self.shown(&object);
        (shown.active, shown.shadow) = (None, None);
        shown.reason = Some(SUPERSEDED.to_owned());
        if shown.last_error.is_none() {
            // The status's words, as anyone who may write the object left them.
            shown.last_error = said.map(|said| validate::cut(said, MAX_LAST_ERROR));
        }
        // The promotion's own words name the successor: keep them, and say nothing again
        // after a restart.
        if shown.last_error.as_deref().is_some_and(|e| e.starts_with("superseded")) {
            return Vec::new();
        }
        let message = match object.kind {
            SourceKind::ConfigMap => format!(
                "superseded ({TRACK_ANNOTATION}: superseded): this ConfigMap loads nothing; delete it, or remove the annotation to offer it again"
            ),
            SourceKind::WasmPlugin => {
                "superseded: this WasmPlugin loads nothing; delete it, or edit its spec to offer it again".to_owned()
            }
        };
        (shown.last_error, shown.last_error_at) = (Some(message.clone()), Some(now.to_owned()));
        vec![self.status(&object, now), self.event(&object, EventType::Normal, "Superseded", "LoadPlugin", message)]
    }

    fn shadow_seated(
        &mut self,
        object: ObjectKey,
        id: u64,
        loaded: Version,
        pin: Option<Option<String>>,
        now: &str,
    ) -> Vec<Effect> {
        let note = format!(
            "version {} shadows plugin {}: called beside the serving version, compared, never written",
            loaded.version, loaded.plugin
        );
        let shown = self.shown(&object);
        shown.shadow = Some(Shadowing { id, loaded, findings: ShadowReport::default(), announced: false });
        (shown.last_error, shown.last_error_at, shown.reason) = (None, None, None);
        if let Some(pin) = pin {
            shown.pinned = pin;
        }
        vec![self.status(&object, now), self.event(&object, EventType::Normal, "ShadowStarted", "LoadPlugin", note)]
    }

    /// Shows a shadow's findings, with an Event the first time it differs.
    fn shadow_found(&mut self, object: ObjectKey, id: u64, report: ShadowReport, now: &str) -> Vec<Effect> {
        let Some(shown) = self.shown.get_mut(&object) else { return Vec::new() };
        // A report from a candidate since replaced is stale.
        let Some(shadow) = shown.shadow.as_mut().filter(|s| s.id == id) else { return Vec::new() };
        shadow.findings = report;
        let first = !shadow.announced && shadow.findings.differences() > 0;
        shadow.announced |= first;
        let where_ = match object.kind {
            SourceKind::ConfigMap => "the wasmloop.dev/status annotation counts",
            SourceKind::WasmPlugin => "the Shadowing condition counts",
        };
        let note = shadow.findings.latest.as_ref().filter(|_| first).map(|latest| {
            format!(
                "version {} of plugin {} {} from the serving version on {}; {where_} and shows the latest difference",
                shadow.loaded.version,
                shadow.loaded.plugin,
                if latest.result == ShadowResult::Failed { "failed where it did not" } else { "differs" },
                latest.object
            )
        });
        let mut effects = vec![self.status(&object, now)];
        if let Some(note) = note {
            effects.push(self.event(&object, EventType::Normal, "ShadowDiffers", "CompareShadow", note));
        }
        effects
    }
}

impl Shown {
    /// The generation under way is settled: what pins its version, when one was pending.
    fn settle(&mut self) -> Option<(i64, Option<String>)> {
        let (generation, pin) = self.pending.take()?;
        self.observed = Some(generation);
        Some((generation, pin))
    }
}

/// The ConfigMap an effect writes.
pub(super) fn object_key(effect: &Effect) -> &ObjectKey {
    match effect {
        Effect::Status { object, .. } | Effect::Supersede { object, .. } | Effect::Event { object, .. } => object,
    }
}

/// `effects` with each ConfigMap's status written once, the last one, where it came: a burst
/// of reports about one ConfigMap costs one write. A superseded mark carries its status too,
/// so a status before a ConfigMap's mark is dropped and the mark stays. Of the Events of one
/// reason about one ConfigMap, the last stays: a tenant who makes a refusal after refusal
/// gets one Event per batch, so the writer keeps pace with the reports, whatever their rate.
pub(super) fn coalesced(effects: Vec<Effect>) -> Vec<Effect> {
    let mut last_status: HashMap<ObjectKey, usize> = HashMap::new();
    let mut last_event: HashMap<(ObjectKey, &'static str), usize> = HashMap::new();
    for (at, effect) in effects.iter().enumerate() {
        match effect {
            Effect::Status { object, .. } | Effect::Supersede { object, .. } => {
                last_status.insert(object.clone(), at);
            }
            Effect::Event { object, reason, .. } => {
                last_event.insert((object.clone(), reason), at);
            }
        }
    }
    let kept = |(at, effect): &(usize, Effect)| match effect {
        Effect::Status { object, .. } => last_status.get(object) == Some(at),
        Effect::Supersede { .. } => true,
        Effect::Event { object, reason, .. } => last_event.get(&(object.clone(), *reason)) == Some(at),
    };
    effects.into_iter().enumerate().filter(kept).map(|(_, effect)| effect).collect()
}

fn status_effect(object: &ObjectKey, shown: &mut Shown, replica: Option<&str>, now: &str) -> Effect {
    Effect::Status { object: object.clone(), status: status_of_kind(object, shown, replica, now) }
}

/// What `object`'s status shows: a ConfigMap's annotation ([`status_of`]), or a `WasmPlugin`'s
/// status, whose conditions are kept in `shown` for their transition times.
fn status_of_kind(object: &ObjectKey, shown: &mut Shown, replica: Option<&str>, now: &str) -> serde_json::Value {
    match object.kind {
        SourceKind::ConfigMap => status_of(shown, replica),
        SourceKind::WasmPlugin => {
            let fresh = conditions::of(shown, now);
            shown.conditions = conditions::carried_over(&shown.conditions, fresh);
            conditions::status(shown, replica)
        }
    }
}

#[cfg(test)]
fn event(object: &ObjectKey, kind: EventType, reason: &'static str, action: &'static str, note: String) -> Effect {
    Effect::Event { object: object.clone(), plugin: None, kind, reason, action, note }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

/// The `wasmloop.dev/status` annotation of a ConfigMap: what serves from it, the last refusal,
/// and a quarantine. With `--shard`, `replica` names the replica that runs it.
pub(super) fn status_of(shown: &Shown, replica: Option<&str>) -> serde_json::Value {
    let mut status = match &shown.active {
        Some(active) => active.loaded.status("activeDigest"),
        None => json!({"activeDigest": null}),
    };
    if let (Some(_), Some(replica)) = (&shown.active, replica) {
        status["replica"] = json!(replica);
    }
    if let Some(shadow) = &shown.shadow {
        status["shadow"] = shadow.loaded.status("digest");
        status["shadow"]["findings"] = json!(shadow.findings);
    }
    status["lastError"] = json!(shown.last_error);
    if let Some(at) = &shown.last_error_at {
        status["lastErrorAt"] = json!(at);
    }
    if let Some(reason) = &shown.quarantined {
        status["quarantined"] = json!(reason);
    }
    if let (Some(_), Some(capped)) = (&shown.active, &shown.capped) {
        status["capped"] = json!(capped);
    }
    status
}

#[cfg(test)]
mod tests;
