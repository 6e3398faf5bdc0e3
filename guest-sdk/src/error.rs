//! The error a reconcile returns.

use std::fmt;
use std::time::Duration;

use crate::action::Action;

/// A failed reconcile: a message for humans, whether retrying can help, and optionally when
/// to retry and what to report on the primary meanwhile.
///
/// ```
/// use std::time::Duration;
/// use wasmloop_sdk::prelude::*;
///
/// let e = Error::transient("database web-db is not ready")
///     .reason("DependencyNotReady")
///     .retry_after(Duration::from_secs(30))
///     .with_action(status(serde_json::json!({"ready": false, "waitingFor": "web-db"})));
/// assert_eq!(e.actions.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, naming the object and what the user should do.
    pub message: String,
    /// True: the host retries with backoff. False: it waits for the next change.
    pub transient: bool,
    /// Reason of the Warning Event the host records (`ReconcileError` when none).
    pub reason: Option<String>,
    /// For a transient error: retry after this long instead of the backoff.
    pub retry_after: Option<Duration>,
    /// Status and event actions the host carries out despite the failure.
    pub actions: Vec<Action>,
}

impl Error {
    /// A failure that may go away on retry (a dependency not ready, a conflict).
    pub fn transient(message: impl Into<String>) -> Self {
        Error { message: message.into(), transient: true, reason: None, retry_after: None, actions: Vec::new() }
    }

    /// A failure that needs the object to change (an invalid spec).
    pub fn permanent(message: impl Into<String>) -> Self {
        Error { transient: false, ..Error::transient(message) }
    }

    /// Sets the reason of the Warning Event the host records for this failure.
    #[must_use]
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Asks for a retry after `delay` instead of the exponential backoff (for a transient
    /// error; the host holds it to its requeue floor and backoff ceiling).
    #[must_use]
    pub fn retry_after(mut self, delay: Duration) -> Self {
        self.retry_after = Some(delay);
        self
    }

    /// Adds a `status` or `event` action for the host to carry out despite the failure. The
    /// host fails the call if any other action is given.
    #[must_use]
    pub fn with_action(mut self, action: Action) -> Self {
        self.actions.push(action);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.transient { "transient" } else { "permanent" };
        write!(f, "{kind} error: {}", self.message)
    }
}

impl std::error::Error for Error {}
