//! What the status writer shows for each plugin ConfigMap, decided without the API server: a
//! [`Statuses`] takes each report of the registry's stream ([`Statuses::report`]) and each
//! change of the quarantine board ([`Statuses::quarantines`]), keeps what each ConfigMap's
//! status shows ([`Shown`]), and returns the writes to carry out ([`Effect`]): a status
//! annotation, an Event.
//!
//! The status annotation is a pure function of what is shown ([`status_of`]).

use std::collections::{BTreeMap, HashMap};

use serde_json::json;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_contract::validate;
use wasmloop_runtime::compare::ShadowResult;
use wasmloop_runtime::registry::Loaded;
use wasmloop_runtime::registry::reports::{Report, Reported};
use wasmloop_runtime::shadow::ShadowReport;

use crate::plugin_configmap::{TRACK_ANNOTATION, configmap_of};

/// The longest refusal a status shows.
pub(super) const MAX_LAST_ERROR: usize = 4096;

/// A plugin version a ConfigMap loaded, serving or shadowing, as its status shows it: the
/// plugin's name, the manifest's version, the SHA-256 of component and configuration, and when
/// it loaded.
#[derive(Debug)]
pub(super) struct Version {
    plugin: String,
    version: String,
    digest: String,
    loaded_at: String,
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

/// What one ConfigMap's status shows.
#[derive(Debug, Default)]
pub(super) struct Shown {
    /// The version serving from it.
    pub(super) active: Option<Active>,
    /// The candidate shadowing from it, and what it found.
    pub(super) shadow: Option<Shadowing>,
    /// Why its last offer was refused, and when; none when it was accepted.
    pub(super) last_error: Option<String>,
    pub(super) last_error_at: Option<String>,
    /// Why its serving version is quarantined; none when it is not.
    pub(super) quarantined: Option<String>,
}

/// A ConfigMap: namespace and name, parsed.
pub(super) type ConfigMapKey = (Namespace, Name);

/// An Event's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

/// A write to carry out.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Effect {
    /// Write ConfigMap `configmap`'s status annotation.
    Status { configmap: ConfigMapKey, status: serde_json::Value },
    /// Mark ConfigMap `configmap` `wasmloop.dev/track: superseded` (a promoted shadow serves
    /// its plugin from another ConfigMap), with its status in the same write: the mark is what
    /// a restart reads, and the status says who serves now. Every replica marks; the status
    /// is the leader's to write, as always.
    Supersede { configmap: ConfigMapKey, status: serde_json::Value },
    /// Record an Event about ConfigMap `configmap`.
    Event { configmap: ConfigMapKey, kind: Kind, reason: &'static str, action: &'static str, note: String },
}

/// What every plugin ConfigMap's status shows, by ConfigMap.
#[derive(Debug, Default)]
pub(super) struct Statuses {
    shown: HashMap<ConfigMapKey, Shown>,
    /// With `--shard`, this replica's identity, shown in the status of what it runs.
    replica: Option<String>,
}

impl Statuses {
    /// Statuses of a replica named `replica` (`--shard`), which shows its name on what it runs.
    pub(super) fn new(replica: Option<String>) -> Statuses {
        Statuses { shown: HashMap::new(), replica }
    }

    /// What `report` changes, `now` being the time to show for what happens now. A report about
    /// a source other than a ConfigMap changes nothing.
    pub(super) fn report(&mut self, report: Report, now: &str) -> Vec<Effect> {
        let Some(configmap) = configmap_of(&report.source) else { return Vec::new() };
        match report.what {
            Reported::Loaded(loaded) => self.loaded(configmap, &loaded, now),
            Reported::Refused { reason, message } => self.refused(configmap, &reason, message, now),
            Reported::Retired { said } => self.retired(configmap, said, now),
            Reported::ShadowSeated { id, plugin, version, digest } => {
                let loaded = Version { plugin, version, digest, loaded_at: now.to_owned() };
                self.shadow_seated(configmap, id, loaded)
            }
            Reported::ShadowUnchanged => self.error_over(configmap),
            Reported::ShadowFindings { id, report } => self.shadow_found(configmap, id, report),
            Reported::Removed => {
                self.shown.remove(&configmap);
                Vec::new()
            }
        }
    }

    /// Shows each serving plugin's quarantine, entered or lifted: `board` maps a quarantined
    /// plugin to why.
    pub(super) fn quarantines(&mut self, board: &BTreeMap<String, String>) -> Vec<Effect> {
        let mut effects = Vec::new();
        for (configmap, shown) in &mut self.shown {
            let Some(active) = &shown.active else { continue };
            let now = board.get(&active.id).cloned();
            if now != shown.quarantined {
                shown.quarantined = now;
                effects.push(status_effect(configmap, shown, self.replica.as_deref()));
            }
        }
        effects.sort_by(|a, b| configmap_key(a).cmp(configmap_key(b)));
        effects
    }

    fn shown(&mut self, configmap: &ConfigMapKey) -> &mut Shown {
        self.shown.entry(configmap.clone()).or_default()
    }

    fn status(&mut self, configmap: &ConfigMapKey) -> Effect {
        let replica = self.replica.clone();
        status_effect(configmap, self.shown(configmap), replica.as_deref())
    }

    fn loaded(&mut self, configmap: ConfigMapKey, loaded: &Loaded, now: &str) -> Vec<Effect> {
        let (id, version, superseded) = match loaded {
            Loaded::Started { name, version, .. } | Loaded::Replaced { name, version, .. } => (name, version, None),
            Loaded::Promoted { name, version, superseded, .. } => (name, version, superseded.as_deref()),
            Loaded::Parked { .. } => {
                // Another replica runs it, and says so in the status. Nothing is made for a
                // ConfigMap not shown (deleted since).
                if let Some(shown) = self.shown.get_mut(&configmap) {
                    shown.active = None;
                }
                return Vec::new();
            }
            // Back to what serves after a refusal (as the refusal advised): the error is over.
            Loaded::Unchanged { .. } => return self.error_over(configmap),
        };
        let plugin = wasmloop_sandbox::name_in_id(id).to_owned();
        let mut effects = Vec::new();
        // The ConfigMap that served before, unless deleted since (then nothing is shown for it).
        if let Some((old, old_shown)) =
            superseded.and_then(configmap_of).and_then(|old| self.shown.get_mut(&old).map(|s| (old, s)))
        {
            let by = source_text(&configmap);
            old_shown.active = None;
            old_shown.last_error = Some(format!(
                "superseded: plugin {plugin} is served from {by} now (a promoted shadow); delete this ConfigMap"
            ));
            old_shown.last_error_at = Some(now.to_owned());
            let status = status_of(old_shown, self.replica.as_deref());
            effects.push(Effect::Supersede { configmap: old, status });
        }
        let loaded_version = Version {
            plugin: plugin.clone(),
            version: version.clone(),
            digest: loaded.digest().to_owned(),
            loaded_at: now.to_owned(),
        };
        let shown = self.shown(&configmap);
        // Serving now: whatever this ConfigMap shadowed before is unseated. A new version
        // starts healthy.
        *shown = Shown { active: Some(Active { id: id.clone(), loaded: loaded_version }), ..Shown::default() };
        effects.push(self.status(&configmap));
        let note = format!("plugin {plugin} {version} serving (sha256 {})", short(loaded.digest()));
        effects.push(event(&configmap, Kind::Normal, "PluginLoaded", "LoadPlugin", note));
        effects
    }

    /// A refusal is over: what serves (or shadows) is what the source offers.
    fn error_over(&mut self, configmap: ConfigMapKey) -> Vec<Effect> {
        let shown = self.shown(&configmap);
        if shown.last_error.take().is_none() {
            return Vec::new();
        }
        shown.last_error_at = None;
        vec![self.status(&configmap)]
    }

    fn refused(&mut self, configmap: ConfigMapKey, reason: &str, message: String, now: &str) -> Vec<Effect> {
        // Refusals quote what others wrote (a registry, a manifest, a compiler on a component):
        // a status annotation past the API's limits would lose the whole status.
        let message = validate::cut(message, MAX_LAST_ERROR);
        let shown = self.shown(&configmap);
        if shown.last_error.as_deref() == Some(message.as_str()) {
            // Said already: the same words again would say nothing new.
            return Vec::new();
        }
        shown.last_error = Some(message.clone());
        shown.last_error_at = Some(now.to_owned());
        let note = format!("{reason}: {message}");
        vec![self.status(&configmap), event(&configmap, Kind::Warning, "PluginRejected", "LoadPlugin", note)]
    }

    fn retired(&mut self, configmap: ConfigMapKey, said: Option<String>, now: &str) -> Vec<Effect> {
        let shown = self.shown(&configmap);
        (shown.active, shown.shadow) = (None, None);
        if shown.last_error.is_none() {
            // The annotation's words, as anyone who may write the ConfigMap left them.
            shown.last_error = said.map(|said| validate::cut(said, MAX_LAST_ERROR));
        }
        // The promotion's own words name the successor: keep them, and say nothing again
        // after a restart.
        if shown.last_error.as_deref().is_some_and(|e| e.starts_with("superseded")) {
            return Vec::new();
        }
        let message = format!(
            "superseded ({TRACK_ANNOTATION}: superseded): this ConfigMap loads nothing; delete it, or remove the annotation to offer it again"
        );
        (shown.last_error, shown.last_error_at) = (Some(message.clone()), Some(now.to_owned()));
        vec![self.status(&configmap), event(&configmap, Kind::Normal, "Superseded", "LoadPlugin", message)]
    }

    fn shadow_seated(&mut self, configmap: ConfigMapKey, id: u64, loaded: Version) -> Vec<Effect> {
        let note = format!(
            "version {} shadows plugin {}: called beside the serving version, compared, never written",
            loaded.version, loaded.plugin
        );
        let shown = self.shown(&configmap);
        shown.shadow = Some(Shadowing { id, loaded, findings: ShadowReport::default(), announced: false });
        (shown.last_error, shown.last_error_at) = (None, None);
        vec![self.status(&configmap), event(&configmap, Kind::Normal, "ShadowStarted", "LoadPlugin", note)]
    }

    /// Shows a shadow's findings, with an Event the first time it differs.
    fn shadow_found(&mut self, configmap: ConfigMapKey, id: u64, report: ShadowReport) -> Vec<Effect> {
        let Some(shown) = self.shown.get_mut(&configmap) else { return Vec::new() };
        // A report from a candidate since replaced is stale.
        let Some(shadow) = shown.shadow.as_mut().filter(|s| s.id == id) else { return Vec::new() };
        shadow.findings = report;
        let first = !shadow.announced && shadow.findings.differences() > 0;
        shadow.announced |= first;
        let note = shadow.findings.latest.as_ref().filter(|_| first).map(|latest| {
            format!(
                "version {} of plugin {} {} from the serving version on {}; the wasmloop.dev/status annotation counts and shows the latest difference",
                shadow.loaded.version,
                shadow.loaded.plugin,
                if latest.result == ShadowResult::Failed { "failed where it did not" } else { "differs" },
                latest.object
            )
        });
        let mut effects = vec![self.status(&configmap)];
        if let Some(note) = note {
            effects.push(event(&configmap, Kind::Normal, "ShadowDiffers", "CompareShadow", note));
        }
        effects
    }
}

/// The ConfigMap an effect writes.
pub(super) fn configmap_key(effect: &Effect) -> &ConfigMapKey {
    match effect {
        Effect::Status { configmap, .. } | Effect::Supersede { configmap, .. } | Effect::Event { configmap, .. } => {
            configmap
        }
    }
}

/// `effects` with each ConfigMap's status written once, the last one, where it came: a burst
/// of reports about one ConfigMap costs one write. A superseded mark carries its status too,
/// so a status before a ConfigMap's mark is dropped and the mark stays. Of the Events of one
/// reason about one ConfigMap, the last stays: a tenant who makes a refusal after refusal
/// gets one Event per batch, so the writer keeps pace with the reports, whatever their rate.
pub(super) fn coalesced(effects: Vec<Effect>) -> Vec<Effect> {
    let mut last_status: HashMap<ConfigMapKey, usize> = HashMap::new();
    let mut last_event: HashMap<(ConfigMapKey, &'static str), usize> = HashMap::new();
    for (at, effect) in effects.iter().enumerate() {
        match effect {
            Effect::Status { configmap, .. } | Effect::Supersede { configmap, .. } => {
                last_status.insert(configmap.clone(), at);
            }
            Effect::Event { configmap, reason, .. } => {
                last_event.insert((configmap.clone(), reason), at);
            }
        }
    }
    let kept = |(at, effect): &(usize, Effect)| match effect {
        Effect::Status { configmap, .. } => last_status.get(configmap) == Some(at),
        Effect::Supersede { .. } => true,
        Effect::Event { configmap, reason, .. } => last_event.get(&(configmap.clone(), *reason)) == Some(at),
    };
    effects.into_iter().enumerate().filter(kept).map(|(_, effect)| effect).collect()
}

fn status_effect(configmap: &ConfigMapKey, shown: &Shown, replica: Option<&str>) -> Effect {
    Effect::Status { configmap: configmap.clone(), status: status_of(shown, replica) }
}

fn event(configmap: &ConfigMapKey, kind: Kind, reason: &'static str, action: &'static str, note: String) -> Effect {
    Effect::Event { configmap: configmap.clone(), kind, reason, action, note }
}

fn source_text((namespace, name): &ConfigMapKey) -> String {
    crate::plugin_configmap::source_of(namespace, name)
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
    status
}

#[cfg(test)]
mod tests {
    use wasmloop_runtime::shadow::Difference;

    use super::*;

    const NOW: &str = "2026-11-27T12:00:00Z";
    const LATER: &str = "2026-11-27T12:05:00Z";

    fn key(name: &str) -> ConfigMapKey {
        (Namespace::parse("team-a").unwrap(), Name::parse(name).unwrap())
    }

    fn source(name: &str) -> String {
        format!("ConfigMap team-a/{name}")
    }

    fn loaded(name: &str, loaded: Loaded) -> Report {
        Report::new(source(name), Reported::Loaded(loaded))
    }

    fn started(version: &str, digest: &str) -> Loaded {
        Loaded::Started { name: "team-a/hello".into(), version: version.into(), digest: digest.into() }
    }

    /// `hello-shadow`'s version, promoted over what `hello` served.
    fn promoted() -> Loaded {
        Loaded::Promoted {
            name: "team-a/hello".into(),
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
        let what = Reported::ShadowSeated { id, plugin: "hello".into(), version: "2".into(), digest: "d".into() };
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
                Effect::Status { configmap, .. } => format!("status {}", configmap.1),
                Effect::Supersede { configmap, .. } => format!("supersede {}", configmap.1),
                Effect::Event { configmap, reason, .. } => format!("event {reason} {}", configmap.1),
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
                    loaded("hello", Loaded::Unchanged { name: "team-a/hello".into(), digest: "d1".into() }),
                ],
                vec!["status hello"],
            ),
            (
                "an offer of what serves, with nothing refused, writes nothing",
                vec![loaded("hello", Loaded::Unchanged { name: "team-a/hello".into(), digest: "d1".into() })],
                vec![],
            ),
            (
                "a version parked for another replica writes nothing here",
                vec![loaded("hello", Loaded::Parked { name: "team-a/hello".into(), digest: "d1".into() })],
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
                vec![Report::new("file a.wasm", Reported::Refused { reason: "X".into(), message: "m".into() })],
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
        assert_eq!(*kind, Kind::Warning);
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
        let effects = statuses.quarantines(&board);
        assert_eq!(said(&effects), ["status hello"], "only what serves the plugin");
        assert_eq!(status(&effects[0])["quarantined"], "crash loop");
        assert_eq!(status(&effects[0])["replica"], "replica-0");
        assert!(statuses.quarantines(&board).is_empty(), "shown already");
        let lifted = statuses.quarantines(&BTreeMap::new());
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
        let status = |name: &str, n: u64| Effect::Status { configmap: key(name), status: json!(n) };
        let note = |name: &str| event(&key(name), Kind::Normal, "PluginLoaded", "LoadPlugin", String::new());
        let burst = vec![status("a", 1), note("a"), status("b", 1), status("a", 2), note("b"), status("b", 2)];
        assert_eq!(coalesced(burst), vec![note("a"), status("a", 2), note("b"), status("b", 2)]);
    }

    #[test]
    fn a_burst_of_refusals_records_the_last_event_of_each_reason() {
        let refusal = |n: u32| event(&key("a"), Kind::Warning, "PluginRejected", "LoadPlugin", n.to_string());
        let loaded = event(&key("a"), Kind::Normal, "PluginLoaded", "LoadPlugin", String::new());
        assert_eq!(coalesced(vec![refusal(1), loaded.clone(), refusal(2), refusal(3)]), vec![loaded, refusal(3)]);
    }

    #[test]
    fn a_superseded_mark_carries_the_status_that_came_before_it() {
        let status = |name: &str, n: u64| Effect::Status { configmap: key(name), status: json!(n) };
        let mark = |name: &str, n: u64| Effect::Supersede { configmap: key(name), status: json!(n) };
        assert_eq!(coalesced(vec![status("a", 1), mark("a", 2)]), vec![mark("a", 2)]);
        assert_eq!(coalesced(vec![mark("a", 1), status("a", 2)]), vec![mark("a", 1), status("a", 2)]);
    }

    #[test]
    fn nothing_is_made_for_a_configmap_not_shown() {
        let mut statuses = Statuses::new(None);
        statuses.report(loaded("gone", Loaded::Parked { name: "team-a/gone".into(), digest: "d".into() }), NOW);
        assert!(statuses.shown.is_empty(), "a parked report of a ConfigMap not shown keeps nothing");
    }
}
