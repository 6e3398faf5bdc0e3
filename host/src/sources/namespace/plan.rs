//! What a namespace's plugin source does for one object that ships a plugin (a plugin
//! ConfigMap, a `WasmPlugin`: a [`Shipper`]), decided without the API server, the registry or a
//! registry of images.
//!
//! The source keeps a [`Seen`] per object ([`Key`]): the content it last handled, whether it was
//! refused, and the [`Work`] under way for it, which is one of three legal states: nothing, a
//! pull, or a load (with the one event that came meanwhile, [`Waiting`]). The shell hands each
//! event to a step here, which updates the state and says what to carry out:
//! - new content ([`Seen::offer`]): wait for the load under way, ignore the same content
//!   again (a relist, or an update elsewhere in the object, such as the status writer's
//!   annotation), or handle it, abandoning an older pull;
//! - a deletion ([`Seen::delete`]): wait for the load under way, or unload;
//! - a retry ([`Seen::retry`]): skip it while a pull or a load will report anyway, or offer
//!   the object afresh;
//! - a pull's or a load's report ([`Seen::pulled`], [`Seen::load_finished`]): stale unless it
//!   is the one under way, and a load hands back what waited for it;
//! - a retry's delay ([`Seen::schedule_retry`]): one at a time, backing off to [`MAX_RETRY`]
//!   while the content stays the same;
//! - who holds a plugin name ([`claimant`], [`yielding`]): a `WasmPlugin` wins it over a plugin
//!   ConfigMap of the namespace, whichever came first.
//!
//! Content is named by what the object stores (`plugin_configmap::Stored::digest`), so an edit
//! elsewhere in it expands nothing.
//!
//! What the object's status shows is not the source's to know: the status writer
//! (`crate::status`) shows what the registry and the source report.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use tokio::task::AbortHandle;
use wasmloop_contract::names::{Name, Namespace};
use wasmloop_sandbox::{SourceId, SourceKind};

use crate::plugin_configmap::Track;
use crate::wasmplugin::WasmPlugin;

/// One object that ships a plugin: its kind and name (its namespace is the source's).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    /// Its kind.
    pub(super) kind: SourceKind,
    /// Its name.
    pub(super) name: Name,
}

impl Key {
    /// The source it is in `namespace`, as the registry and its reports know it.
    pub(super) fn source(&self, namespace: &Namespace) -> SourceId {
        SourceId::object(self.kind, namespace.clone(), self.name.clone())
    }
}

/// An object that ships a plugin, as the watch brought it.
#[derive(Debug, Clone)]
pub(super) enum Shipper {
    /// A plugin ConfigMap.
    ConfigMap(ConfigMap),
    /// A `WasmPlugin`.
    WasmPlugin(WasmPlugin),
}

impl Shipper {
    /// Which object it is.
    pub(super) fn key(&self) -> Key {
        let name = self.name();
        // The API server names objects more strictly than `Name` asks, and the watch lets
        // only parsed names through besides ([`Shipper::is_named`]).
        Key { kind: self.kind(), name: Name::parse(&name).expect("a watched object's name parses") }
    }

    /// Its kind.
    pub(super) fn kind(&self) -> SourceKind {
        match self {
            Shipper::ConfigMap(_) => SourceKind::ConfigMap,
            Shipper::WasmPlugin(_) => SourceKind::WasmPlugin,
        }
    }

    fn name(&self) -> String {
        match self {
            Shipper::ConfigMap(cm) => cm.name_any(),
            Shipper::WasmPlugin(plugin) => plugin.name_any(),
        }
    }

    /// Its name is an object name ([`Name`]): the API server's always is; anything else is not
    /// let in.
    pub(super) fn is_named(&self) -> bool {
        Name::parse(&self.name()).is_ok()
    }
}

/// What the source remembers of one object.
#[derive(Default)]
pub(super) struct Seen {
    /// The resourceVersion-independent content last handled (the component's digest, the
    /// config), so that an update of anything else (an annotation, a relist) reloads nothing.
    /// A digest, not the bytes: a rejected component is not kept in memory.
    pub(super) handled: Option<Content>,
    /// The fingerprint of the ConfigMap whose content is handled
    /// ([`crate::plugin_configmap::fingerprint`]): the same again is not read again.
    pub(super) fingerprint: Option<u64>,
    /// Its last offer was refused.
    pub(super) refused: bool,
    /// Its last offer asked that a refused version stop the one serving (`failurePolicy:
    /// Stop`).
    pub(super) stop: bool,
    /// A retry of a plugin that failed to start is scheduled.
    pub(super) retry_pending: bool,
    /// The plugin its last offer named (a ConfigMap's label, a `WasmPlugin`'s name).
    pub(super) plugin: Option<String>,
    /// Retries of the same content in a row: each waits twice as long as the last.
    pub(super) retries: u32,
    /// What is under way for it.
    pub(super) work: Work,
}

/// What is under way for one object: one thing at most.
#[derive(Default)]
pub(super) enum Work {
    /// Nothing.
    #[default]
    Idle,
    /// A pull of the component the content handled names: its id, which its report carries,
    /// and the handle that aborts it.
    Pulling {
        /// The pull's id.
        id: u64,
        /// Aborts it.
        task: AbortHandle,
    },
    /// A load in the registry. While it runs, what the watch brings for the object waits,
    /// so that its events are handled in order, each load's outcome reported before the next
    /// event is looked at; other objects' loads go on.
    Loading {
        /// The load's id, which its report carries.
        id: u64,
        /// The latest event that came meanwhile.
        waiting: Option<Waiting>,
    },
}

/// An event for an object whose load is under way, handled when the load reports.
pub(super) enum Waiting {
    /// Its newest content.
    Offer(Box<Shipper>),
    /// It was deleted.
    Delete,
}

/// What an object offers, as far as loading goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Content {
    /// The component's SHA-256, or the reason it could not be read.
    pub(super) digest: String,
    pub(super) config: Option<String>,
    /// The ServiceAccount annotation.
    pub(super) account: Option<String>,
    pub(super) pin: Option<String>,
    pub(super) signature: Option<String>,
    pub(super) track: Track,
    /// The pull secret: naming another one (after fixing a refusal) pulls again.
    pub(super) pull_secret: Option<Name>,
    /// The key that must have signed it (a `WasmPlugin`'s `signature.keyRef`).
    pub(super) signer: Option<String>,
    /// Suspended: it serves nothing.
    pub(super) suspend: bool,
    /// `failurePolicy: Stop`: an edit of it alone is a generation to show as handled.
    pub(super) stop: bool,
    /// A `WasmPlugin`'s `settings`, as JSON: other settings are another version.
    pub(super) settings: Option<String>,
}

/// What to do with an object the watch brought, before anything reads it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Arrival {
    /// A load is under way: the object waits for its report, kept as [`Waiting::Offer`].
    Wait,
    /// What it offers was handled already: the echo of the host's own status write, or a
    /// relist. Nothing is read.
    Echo,
    /// Read it, and offer what it holds ([`Seen::offer`]).
    Read,
}

/// What to do with content an object offers.
#[derive(Debug)]
pub(super) enum OfferStep {
    /// A load is under way: the offer waits for its report, kept as [`Waiting::Offer`].
    Wait,
    /// The same content was handled already: a relist, or an update elsewhere in the
    /// object (the status writer's annotation or status).
    Same,
    /// New content, now the content handled: refuse, pull or load it.
    New {
        /// The pull of older content, to abort: its report will be stale.
        abandoned: Option<AbortHandle>,
    },
}

/// What to do when an object is deleted.
#[derive(Debug)]
pub(super) enum DeleteStep {
    /// A load is under way: the deletion waits for its report, or the load could start the
    /// plugin after its removal.
    Wait,
    /// Unload what it serves or shadows.
    Unload {
        /// Its pull, to abort.
        abandoned: Option<AbortHandle>,
    },
}

/// What to do when an object's retry is due.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum RetryStep {
    /// A pull or a load is under way, started by an edit since: it reports in its turn.
    Skip,
    /// Read the object and offer it, the content handled forgotten so that the same
    /// content is tried again.
    Offer,
}

impl Seen {
    /// Object `shipper` came while a load is under way: true when it waits for the load's
    /// report (kept as [`Waiting::Offer`]), before anything reads it.
    pub(super) fn wait_for_load(&mut self, shipper: &Shipper) -> bool {
        let Work::Loading { waiting, .. } = &mut self.work else { return false };
        *waiting = Some(Waiting::Offer(Box::new(shipper.clone())));
        true
    }

    /// Object `shipper` came, of `fingerprint` (a ConfigMap's; none for a `WasmPlugin`, whose
    /// generation tells its edits apart): whether it is to be read.
    pub(super) fn arrive(&mut self, shipper: &Shipper, fingerprint: Option<u64>) -> Arrival {
        if self.wait_for_load(shipper) {
            return Arrival::Wait;
        }
        if fingerprint.is_some() && self.handled.is_some() && self.fingerprint == fingerprint {
            return Arrival::Echo;
        }
        Arrival::Read
    }

    /// Content `content` of object `shipper`, of `fingerprint`, is offered.
    pub(super) fn offer(&mut self, shipper: &Shipper, content: Content, fingerprint: Option<u64>) -> OfferStep {
        if self.wait_for_load(shipper) {
            return OfferStep::Wait;
        }
        self.fingerprint = fingerprint;
        if self.handled.as_ref() == Some(&content) {
            return OfferStep::Same;
        }
        if self.handled.is_some() {
            // Other content: a retry of it starts afresh.
            self.retries = 0;
        }
        self.handled = Some(content);
        OfferStep::New { abandoned: self.abandon_pull() }
    }

    /// The object was deleted.
    pub(super) fn delete(&mut self) -> DeleteStep {
        if let Work::Loading { waiting, .. } = &mut self.work {
            *waiting = Some(Waiting::Delete);
            return DeleteStep::Wait;
        }
        DeleteStep::Unload { abandoned: self.abandon_pull() }
    }

    /// Its retry is due.
    pub(super) fn retry(&mut self) -> RetryStep {
        self.retry_pending = false;
        if !matches!(self.work, Work::Idle) {
            return RetryStep::Skip;
        }
        (self.handled, self.fingerprint) = (None, None);
        RetryStep::Offer
    }

    /// Nothing is under way for it: no pull, no load.
    pub(super) fn idle(&self) -> bool {
        matches!(self.work, Work::Idle)
    }

    /// Whether a retry may be scheduled now, one at a time whatever the watch brings, and after
    /// how long: `first`, doubling with each retry of the same content, up to [`MAX_RETRY`], so
    /// that thousands of objects that keep failing (a ServiceAccount that does not exist) cost
    /// the API server a falling rate.
    pub(super) fn schedule_retry(&mut self, first: Duration) -> Option<Duration> {
        if std::mem::replace(&mut self.retry_pending, true) {
            return None;
        }
        let delay = first.saturating_mul(1 << self.retries.min(16)).min(MAX_RETRY.max(first));
        self.retries = self.retries.saturating_add(1);
        Some(delay)
    }

    /// The pull under way is abandoned, if any: returns the handle that aborts it.
    pub(super) fn abandon_pull(&mut self) -> Option<AbortHandle> {
        match std::mem::take(&mut self.work) {
            Work::Pulling { task, .. } => Some(task),
            other => {
                self.work = other;
                None
            }
        }
    }

    /// Pull `id` started.
    pub(super) fn pull_started(&mut self, id: u64, task: AbortHandle) {
        self.work = Work::Pulling { id, task };
    }

    /// Pull `id` reported: true when it is the pull under way, which is over now; a stale
    /// report changes nothing.
    pub(super) fn pulled(&mut self, id: u64) -> bool {
        let current = matches!(self.work, Work::Pulling { id: under_way, .. } if under_way == id);
        if current {
            self.work = Work::Idle;
        }
        current
    }

    /// Load `id` started.
    pub(super) fn load_started(&mut self, id: u64) {
        self.work = Work::Loading { id, waiting: None };
    }

    /// Load `id` reported: when it is the load under way, which is over now, what waited for
    /// it (none when nothing did); none when the report is stale.
    pub(super) fn load_finished(&mut self, id: u64) -> Option<Option<Waiting>> {
        match std::mem::take(&mut self.work) {
            Work::Loading { id: under_way, waiting } if under_way == id => Some(waiting),
            other => {
                self.work = other;
                None
            }
        }
    }

    /// Refused while another object held its plugin or its shadow seat, serving nothing
    /// (`serving` says whether a version from it serves) and not pulling: it may load once
    /// that one is gone. A pull under way is not blocked, and starting it again would only
    /// lose its time.
    pub(super) fn blocked(&self, serving: bool) -> bool {
        self.refused && !serving && !matches!(self.work, Work::Pulling { .. })
    }
}

/// The longest a retry of an object waits.
pub(super) const MAX_RETRY: Duration = Duration::from_secs(300);

/// Which `WasmPlugin` of the namespace claims plugin `plugin` over a plugin ConfigMap that
/// offers it, given the `WasmPlugin`s that serve (none shadows): the one of that name. A
/// `WasmPlugin` wins over a ConfigMap of the same plugin name whichever came first, so every
/// replica, and every restart, ends with the same one serving.
pub(super) fn claimant<'a>(plugin: &str, serving_wasmplugins: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    serving_wasmplugins.into_iter().find(|name| *name == plugin)
}

/// The plugin ConfigMaps of `seen` that a `WasmPlugin` serving `plugin` takes it from: those
/// whose last offer named it.
pub(super) fn yielding<'a>(plugin: &str, seen: impl IntoIterator<Item = (&'a Key, &'a Seen)>) -> Vec<&'a Key> {
    seen.into_iter()
        .filter(|(key, seen)| key.kind == SourceKind::ConfigMap && seen.plugin.as_deref() == Some(plugin))
        .map(|(key, _)| key)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_of_the_same_content_back_off_to_a_ceiling_and_new_content_starts_afresh() {
        let first = Duration::from_secs(15);
        let mut seen = Seen::default();
        seen.offer(&cm(), content("a"), None);
        let mut delays = Vec::new();
        for _ in 0..8 {
            delays.push(seen.schedule_retry(first).expect("none pending").as_secs());
            assert_eq!(seen.schedule_retry(first), None, "one retry at a time");
            seen.retry();
            seen.offer(&cm(), content("a"), None);
        }
        assert_eq!(delays, [15, 30, 60, 120, 240, 300, 300, 300]);
        seen.offer(&cm(), content("b"), None);
        assert_eq!(seen.schedule_retry(first), Some(first), "new content retries at once again");
    }

    #[test]
    fn a_wasmplugin_of_the_same_name_claims_a_plugin_over_a_configmap_whichever_came_first() {
        let cases: [(&str, &[&str], Option<&str>); 4] = [
            ("hello", &[], None),
            ("hello", &["other"], None),
            ("hello", &["other", "hello"], Some("hello")),
            ("hello", &["hello-shadow"], None),
        ];
        for (plugin, wasmplugins, expected) in cases {
            assert_eq!(claimant(plugin, wasmplugins.iter().copied()), expected, "{plugin} among {wasmplugins:?}");
        }
    }

    #[test]
    fn the_configmaps_a_wasmplugin_takes_its_plugin_from_are_those_that_named_it() {
        let key = |kind, name: &str| Key { kind, name: Name::parse(name).unwrap() };
        let named = |plugin: &str| Seen { plugin: Some(plugin.to_owned()), ..Seen::default() };
        let seen = [
            (key(SourceKind::ConfigMap, "a"), named("hello")),
            (key(SourceKind::ConfigMap, "b"), named("other")),
            (key(SourceKind::WasmPlugin, "hello"), named("hello")),
            (key(SourceKind::ConfigMap, "c"), Seen::default()),
        ];
        let yielding = yielding("hello", seen.iter().map(|(k, s)| (k, s)));
        assert_eq!(yielding, [&key(SourceKind::ConfigMap, "a")]);
    }

    fn content(digest: &str) -> Content {
        Content { digest: digest.to_owned(), ..Content::default() }
    }

    fn cm() -> Shipper {
        Shipper::ConfigMap(ConfigMap::default())
    }

    fn task() -> AbortHandle {
        tokio::spawn(std::future::pending::<()>()).abort_handle()
    }

    /// One step of an object's life, and what it must decide.
    enum Event {
        Offer(&'static str, &'static str),
        Delete(&'static str),
        Retry(RetryStep),
        PullStarted(u64),
        Pulled(u64, bool),
        LoadStarted(u64),
        LoadFinished(u64, &'static str),
    }

    fn run(events: Vec<Event>) {
        let mut seen = Seen::default();
        for (at, event) in events.into_iter().enumerate() {
            match event {
                Event::Offer(digest, expected) => {
                    let step = seen.offer(&cm(), content(digest), None);
                    let got = match &step {
                        OfferStep::Wait => "wait",
                        OfferStep::Same => "same",
                        OfferStep::New { abandoned: Some(_) } => "new, abandoning a pull",
                        OfferStep::New { abandoned: None } => "new",
                    };
                    assert_eq!(got, expected, "step {at}");
                }
                Event::Delete(expected) => {
                    let got = match seen.delete() {
                        DeleteStep::Wait => "wait",
                        DeleteStep::Unload { abandoned: Some(_) } => "unload, abandoning a pull",
                        DeleteStep::Unload { abandoned: None } => "unload",
                    };
                    assert_eq!(got, expected, "step {at}");
                }
                Event::Retry(expected) => assert_eq!(seen.retry(), expected, "step {at}"),
                Event::PullStarted(id) => seen.pull_started(id, task()),
                Event::Pulled(id, current) => assert_eq!(seen.pulled(id), current, "step {at}"),
                Event::LoadStarted(id) => seen.load_started(id),
                Event::LoadFinished(id, expected) => {
                    let got = match seen.load_finished(id) {
                        None => "stale",
                        Some(None) => "nothing waited",
                        Some(Some(Waiting::Offer(_))) => "an offer waited",
                        Some(Some(Waiting::Delete)) => "a deletion waited",
                    };
                    assert_eq!(got, expected, "step {at}");
                }
            }
        }
    }

    #[tokio::test]
    async fn a_configmaps_events_follow_the_rules() {
        use Event::*;
        let cases: Vec<(&str, Vec<Event>)> = vec![
            ("the same content again changes nothing", vec![Offer("d1", "new"), Offer("d1", "same")]),
            ("other content is new", vec![Offer("d1", "new"), Offer("d2", "new")]),
            (
                "an offer during a load waits for it, and is handed back",
                vec![Offer("d1", "new"), LoadStarted(1), Offer("d2", "wait"), LoadFinished(1, "an offer waited")],
            ),
            (
                "even the same content waits during a load",
                vec![Offer("d1", "new"), LoadStarted(1), Offer("d1", "wait"), LoadFinished(1, "an offer waited")],
            ),
            (
                "a deletion during a load waits for it",
                vec![Offer("d1", "new"), LoadStarted(1), Delete("wait"), LoadFinished(1, "a deletion waited")],
            ),
            ("a load with nothing waiting hands nothing back", vec![LoadStarted(1), LoadFinished(1, "nothing waited")]),
            (
                "another load's report is stale",
                vec![LoadStarted(2), LoadFinished(1, "stale"), LoadFinished(2, "nothing waited")],
            ),
            (
                "a load is over once it reported",
                vec![LoadStarted(1), LoadFinished(1, "nothing waited"), Offer("d1", "new")],
            ),
            (
                "new content abandons the pull of older content, whose report is then stale",
                vec![Offer("d1", "new"), PullStarted(1), Offer("d2", "new, abandoning a pull"), Pulled(1, false)],
            ),
            ("the pull under way reports", vec![PullStarted(1), Pulled(1, true), Pulled(1, false)]),
            ("a deletion abandons the pull", vec![PullStarted(1), Delete("unload, abandoning a pull")]),
            ("a deletion with nothing under way unloads", vec![Offer("d1", "new"), Delete("unload")]),
            ("a retry while pulling is skipped", vec![PullStarted(1), Retry(RetryStep::Skip)]),
            ("a retry while loading is skipped", vec![LoadStarted(1), Retry(RetryStep::Skip)]),
            (
                "a retry forgets the content handled, so the same content is tried again",
                vec![Offer("d1", "new"), Retry(RetryStep::Offer), Offer("d1", "new")],
            ),
        ];
        for (case, events) in cases {
            eprintln!("case: {case}");
            run(events);
        }
    }

    #[test]
    fn one_retry_is_scheduled_at_a_time() {
        let (mut seen, first) = (Seen::default(), Duration::from_secs(15));
        assert!(seen.schedule_retry(first).is_some());
        assert!(seen.schedule_retry(first).is_none());
        assert_eq!(seen.retry(), RetryStep::Offer);
        assert!(seen.schedule_retry(first).is_some());
    }

    #[tokio::test]
    async fn a_refused_configmap_is_blocked_unless_it_serves_or_pulls() {
        let refused = || Seen { refused: true, ..Seen::default() };
        assert!(refused().blocked(false));
        assert!(!Seen::default().blocked(false), "nothing refused");
        assert!(!refused().blocked(true), "it serves");
        let mut pulling = refused();
        pulling.pull_started(1, task());
        assert!(!pulling.blocked(false), "its pull reports anyway");
        let mut loading = refused();
        loading.load_started(1);
        assert!(loading.blocked(false), "a retry of a loading object is skipped when due");
    }

    /// What happens to a plugin ConfigMap, for [`reads_of`].
    enum Life {
        /// It arrives, of this fingerprint, offering this content when read.
        Arrives(Option<u64>, &'static str),
        /// Its retry is due.
        Retried,
        /// A load of what it offers starts.
        Loads,
    }

    /// How many times the source reads the object over `life`.
    fn reads_of(life: Vec<Life>) -> usize {
        let (mut seen, mut reads) = (Seen::default(), 0);
        for event in life {
            match event {
                Life::Arrives(fingerprint, digest) => {
                    if seen.arrive(&cm(), fingerprint) == Arrival::Read {
                        reads += 1;
                        seen.offer(&cm(), content(digest), fingerprint);
                    }
                }
                Life::Retried => assert_eq!(seen.retry(), RetryStep::Offer),
                Life::Loads => seen.load_started(1),
            }
        }
        reads
    }

    #[test]
    fn an_object_is_read_only_when_what_it_offers_may_have_changed() {
        use Life::*;
        let cases: Vec<(&str, Vec<Life>, usize)> = vec![
            (
                "the echo of the host's own status write is not read",
                vec![Arrives(Some(1), "d1"), Arrives(Some(1), "d1")],
                1,
            ),
            (
                "nor are many echoes and relists",
                vec![Arrives(Some(1), "d1"), Arrives(Some(1), "d1"), Arrives(Some(1), "d1"), Arrives(Some(1), "d1")],
                1,
            ),
            ("an edit is read", vec![Arrives(Some(1), "d1"), Arrives(Some(2), "d2")], 2),
            (
                "an edit back to what was handled is read: the fingerprint is the last one's",
                vec![Arrives(Some(1), "d1"), Arrives(Some(2), "d2"), Arrives(Some(1), "d1")],
                3,
            ),
            ("a retry reads the same again", vec![Arrives(Some(1), "d1"), Retried, Arrives(Some(1), "d1")], 2),
            (
                "an object with no fingerprint (a WasmPlugin) is read each time",
                vec![Arrives(None, "d1"), Arrives(None, "d1")],
                2,
            ),
            (
                "during a load, even an echo waits for the load's report",
                vec![Arrives(Some(1), "d1"), Loads, Arrives(Some(1), "d1")],
                1,
            ),
        ];
        for (case, life, expected) in cases {
            assert_eq!(reads_of(life), expected, "{case}");
        }
    }

    #[test]
    fn an_echo_during_a_load_waits_rather_than_being_dropped() {
        let mut seen = Seen::default();
        seen.offer(&cm(), content("d1"), Some(1));
        seen.load_started(1);
        assert_eq!(seen.arrive(&cm(), Some(1)), Arrival::Wait);
        assert!(matches!(seen.load_finished(1), Some(Some(Waiting::Offer(_)))));
    }
}
