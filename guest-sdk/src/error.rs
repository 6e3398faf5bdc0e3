//! The error a reconcile returns.

use std::fmt;

/// A failed reconcile: a message for humans, and whether retrying can help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, naming the object and what the user should do.
    pub message: String,
    /// True: the host retries with backoff. False: it waits for the next change.
    pub transient: bool,
    /// Reason of the Warning Event the host records (`ReconcileError` when none).
    pub reason: Option<String>,
}

impl Error {
    /// A failure that may go away on retry (a dependency not ready, a conflict).
    pub fn transient(message: impl Into<String>) -> Self {
        Error { message: message.into(), transient: true, reason: None }
    }

    /// Sets the reason of the Warning Event the host records for this failure.
    #[must_use]
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// A failure that needs the object to change (an invalid spec).
    pub fn permanent(message: impl Into<String>) -> Self {
        Error { message: message.into(), transient: false, reason: None }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.transient { "transient" } else { "permanent" };
        write!(f, "{kind} error: {}", self.message)
    }
}

impl std::error::Error for Error {}
