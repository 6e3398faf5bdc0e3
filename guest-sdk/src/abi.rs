//! The values that cross the host boundary in both directions: log levels, cache refusals
//! and list pages. They live apart from `log` and `cache` (which re-export them) because
//! `host` needs them too, and `log` and `cache` call into `host`: defined there, the two
//! would depend on each other.

use std::fmt;

use crate::request::Object;

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the plugin handled.
    Warn,
    /// Something failed.
    Error,
}

/// Why the host refused a look-up. Each case holds a sentence for humans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheError {
    /// The kind is not declared under primary, owns, watches or reads.
    UndeclaredKind(String),
    /// The label selector does not parse.
    InvalidSelector(String),
    /// The namespace is outside what the plugin is served.
    OutOfScope(String),
    /// The plugin's identity lost its read grant during the call; the host drops the call's
    /// answer and retries once the grant is back.
    AccessRevoked(String),
    /// A continue token the host did not produce.
    InvalidContinue(String),
    /// The manifest declares no index of that name on that kind.
    UnknownIndex(String),
}

impl CacheError {
    /// The host's sentence.
    pub fn message(&self) -> &str {
        match self {
            CacheError::UndeclaredKind(m)
            | CacheError::InvalidSelector(m)
            | CacheError::OutOfScope(m)
            | CacheError::AccessRevoked(m)
            | CacheError::InvalidContinue(m)
            | CacheError::UnknownIndex(m) => m,
        }
    }
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for CacheError {}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Objects in (namespace, name) order.
    pub items: Vec<Object>,
    /// Pass it to [`list_page`](crate::cache::list_page) for the next page; none after the
    /// last.
    pub continue_token: Option<String>,
}
