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
mod tests {
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
                vec![
                    seated("s", 2),
                    findings("s", 1, ShadowReport { compared: 1, same: 1, ..ShadowReport::default() }),
                ],
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
                vec![Report::new(
                    SourceId::file("a.wasm"),
                    Reported::Refused { reason: "X".into(), message: "m".into() },
                )],
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
            format!(
                r#"{{"plugin":"hello","version":"1.0.0","activeDigest":"d1","loadedAt":"{LATER}","lastError":null}}"#
            ),
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
                [
                    "Ready=False/Refused",
                    "Loaded=False/Refused",
                    "Degraded=False/AsExpected",
                    "Quarantined=False/Healthy",
                ],
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
        assert!(
            condition(status, "Quarantined")["message"].as_str().unwrap().contains("9 of its last 10 calls failed")
        );
        assert_eq!(condition(status, "Ready")["reason"], "Quarantined");
        let lifted = statuses.quarantines(&BTreeMap::new(), LATER);
        assert_eq!(condition(super::tests::status(&lifted[0]), "Ready")["status"], "True");
    }

    #[test]
    fn a_shadow_wasmplugin_counts_its_findings_in_the_shadowing_condition() {
        let mut statuses = Statuses::new(None);
        let what =
            Reported::ShadowSeated { id: 3, plugin: pid("team-a/hello"), version: "2".into(), digest: "d".into() };
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
}
