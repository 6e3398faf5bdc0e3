//! What the source remembers of one object, and the steps of its life that need nothing
//! else: whether content is new, whether an event waits for a load, which pull or load report
//! is stale, and when a retry is due.

use std::time::Duration;

use wasmloop_contract::names::Name;

use super::Shipper;
use crate::plugin_configmap::Track;

/// What the source remembers of one object.
#[derive(Default)]
pub(in crate::sources::namespace) struct Seen {
    /// The resourceVersion-independent content last handled (the component's digest, the
    /// config), so that an update of anything else (an annotation, a relist) reloads nothing.
    /// A digest, not the bytes: a rejected component is not kept in memory.
    pub(in crate::sources::namespace) handled: Option<Content>,
    /// The fingerprint of the ConfigMap whose content is handled
    /// ([`crate::plugin_configmap::fingerprint`]): the same again is not read again.
    pub(in crate::sources::namespace) fingerprint: Option<u64>,
    /// Its last offer was refused.
    pub(in crate::sources::namespace) refused: bool,
    /// Its last offer asked that a refused version stop the one serving (`failurePolicy:
    /// Stop`).
    pub(in crate::sources::namespace) stop: bool,
    /// A retry of a plugin that failed to start is scheduled.
    pub(in crate::sources::namespace) retry_pending: bool,
    /// The plugin its last offer named (a ConfigMap's label, a `WasmPlugin`'s name).
    pub(in crate::sources::namespace) plugin: Option<String>,
    /// Retries of the same content in a row: each waits twice as long as the last.
    pub(in crate::sources::namespace) retries: u32,
    /// What is under way for it.
    pub(in crate::sources::namespace) work: Work,
}

/// What is under way for one object: one thing at most.
#[derive(Default)]
pub(in crate::sources::namespace) enum Work {
    /// Nothing.
    #[default]
    Idle,
    /// A pull of the component the content handled names: its id, which its report carries
    /// (the shell keeps what aborts it).
    Pulling {
        /// The pull's id.
        id: u64,
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
pub(in crate::sources::namespace) enum Waiting {
    /// Its newest content.
    Offer(Box<Shipper>),
    /// It was deleted.
    Delete,
}

/// What an object offers, as far as loading goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::sources::namespace) struct Content {
    /// The component's SHA-256 (its reference, when it names one).
    pub(in crate::sources::namespace) digest: String,
    /// Why the object could not be read: another reason is another offer to refuse.
    pub(in crate::sources::namespace) unread: Option<String>,
    pub(in crate::sources::namespace) config: Option<String>,
    /// The ServiceAccount annotation.
    pub(in crate::sources::namespace) account: Option<String>,
    pub(in crate::sources::namespace) pin: Option<String>,
    pub(in crate::sources::namespace) signature: Option<String>,
    pub(in crate::sources::namespace) track: Track,
    /// The pull secret: naming another one (after fixing a refusal) pulls again.
    pub(in crate::sources::namespace) pull_secret: Option<Name>,
    /// The key that must have signed it (a `WasmPlugin`'s `signature.keyRef`).
    pub(in crate::sources::namespace) signer: Option<String>,
    /// Suspended: it serves nothing.
    pub(in crate::sources::namespace) suspend: bool,
    /// `failurePolicy: Stop`: an edit of it alone is a generation to show as handled.
    pub(in crate::sources::namespace) stop: bool,
    /// A `WasmPlugin`'s `settings`, as JSON: other settings are another version.
    pub(in crate::sources::namespace) settings: Option<String>,
}

/// What to do with an object the watch brought, before anything reads it.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::sources::namespace) enum Arrival {
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
pub(in crate::sources::namespace) enum OfferStep {
    /// A load is under way: the offer waits for its report, kept as [`Waiting::Offer`].
    Wait,
    /// The same content was handled already: a relist, or an update elsewhere in the
    /// object (the status writer's annotation or status).
    Same,
    /// New content, now the content handled: refuse, pull or load it.
    New {
        /// The pull of older content, to abort: its report will be stale.
        abandoned: Option<u64>,
    },
}

/// What to do when an object is deleted.
#[derive(Debug)]
pub(in crate::sources::namespace) enum DeleteStep {
    /// A load is under way: the deletion waits for its report, or the load could start the
    /// plugin after its removal.
    Wait,
    /// Unload what it serves or shadows.
    Unload {
        /// Its pull, to abort.
        abandoned: Option<u64>,
    },
}

/// What to do when an object's retry is due.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::sources::namespace) enum RetryStep {
    /// A pull or a load is under way, started by an edit since: it reports in its turn.
    Skip,
    /// Read the object and offer it, the content handled forgotten so that the same
    /// content is tried again.
    Offer,
}

impl Seen {
    /// Object `shipper` came while a load is under way: true when it waits for the load's
    /// report (kept as [`Waiting::Offer`]), before anything reads it.
    pub(in crate::sources::namespace) fn wait_for_load(&mut self, shipper: &Shipper) -> bool {
        let Work::Loading { waiting, .. } = &mut self.work else { return false };
        *waiting = Some(Waiting::Offer(Box::new(shipper.clone())));
        true
    }

    /// Object `shipper` came, of `fingerprint` (a ConfigMap's; none for a `WasmPlugin`, whose
    /// generation tells its edits apart): whether it is to be read.
    pub(in crate::sources::namespace) fn arrive(&mut self, shipper: &Shipper, fingerprint: Option<u64>) -> Arrival {
        if self.wait_for_load(shipper) {
            return Arrival::Wait;
        }
        if fingerprint.is_some() && self.handled.is_some() && self.fingerprint == fingerprint {
            return Arrival::Echo;
        }
        Arrival::Read
    }

    /// Content `content` of object `shipper`, of `fingerprint`, is offered.
    pub(in crate::sources::namespace) fn offer(
        &mut self,
        shipper: &Shipper,
        content: Content,
        fingerprint: Option<u64>,
    ) -> OfferStep {
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
    pub(in crate::sources::namespace) fn delete(&mut self) -> DeleteStep {
        if let Work::Loading { waiting, .. } = &mut self.work {
            *waiting = Some(Waiting::Delete);
            return DeleteStep::Wait;
        }
        DeleteStep::Unload { abandoned: self.abandon_pull() }
    }

    /// Its retry is due.
    pub(in crate::sources::namespace) fn retry(&mut self) -> RetryStep {
        self.retry_pending = false;
        if !matches!(self.work, Work::Idle) {
            return RetryStep::Skip;
        }
        (self.handled, self.fingerprint) = (None, None);
        RetryStep::Offer
    }

    /// Nothing is under way for it: no pull, no load.
    pub(in crate::sources::namespace) fn idle(&self) -> bool {
        matches!(self.work, Work::Idle)
    }

    /// Whether a retry may be scheduled now, one at a time whatever the watch brings, and after
    /// how long: `first`, doubling with each retry of the same content, up to [`MAX_RETRY`], so
    /// that thousands of objects that keep failing (a ServiceAccount that does not exist) cost
    /// the API server a falling rate.
    pub(in crate::sources::namespace) fn schedule_retry(&mut self, first: Duration) -> Option<Duration> {
        if std::mem::replace(&mut self.retry_pending, true) {
            return None;
        }
        let delay = first.saturating_mul(1 << self.retries.min(16)).min(MAX_RETRY.max(first));
        self.retries = self.retries.saturating_add(1);
        Some(delay)
    }

    /// The pull under way is abandoned, if any: returns its id, to abort it.
    pub(in crate::sources::namespace) fn abandon_pull(&mut self) -> Option<u64> {
        match std::mem::take(&mut self.work) {
            Work::Pulling { id } => Some(id),
            other => {
                self.work = other;
                None
            }
        }
    }

    /// Pull `id` started.
    pub(in crate::sources::namespace) fn pull_started(&mut self, id: u64) {
        self.work = Work::Pulling { id };
    }

    /// Pull `id` reported: true when it is the pull under way, which is over now; a stale
    /// report changes nothing.
    pub(in crate::sources::namespace) fn pulled(&mut self, id: u64) -> bool {
        let current = matches!(self.work, Work::Pulling { id: under_way } if under_way == id);
        if current {
            self.work = Work::Idle;
        }
        current
    }

    /// Load `id` started.
    pub(in crate::sources::namespace) fn load_started(&mut self, id: u64) {
        self.work = Work::Loading { id, waiting: None };
    }

    /// Load `id` reported: when it is the load under way, which is over now, what waited for
    /// it (none when nothing did); none when the report is stale.
    pub(in crate::sources::namespace) fn load_finished(&mut self, id: u64) -> Option<Option<Waiting>> {
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
    pub(in crate::sources::namespace) fn blocked(&self, serving: bool) -> bool {
        self.refused && !serving && !matches!(self.work, Work::Pulling { .. })
    }
}

/// The longest a retry of an object waits.
pub(in crate::sources::namespace) const MAX_RETRY: Duration = Duration::from_secs(300);
