//! Logging through the host, inside the span of the current reconcile.
//!
//! ```
//! wasmloop_sdk::info!("pod {} is {}", "web-0", "Running");
//! ```

pub use crate::abi::Level;

/// Writes one line to the host's log.
pub fn write(level: Level, message: &str) {
    crate::host::log(level, message);
}

/// Logs at trace level, `format!` style.
#[macro_export]
macro_rules! trace { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Trace, &::std::format!($($t)*)) } }
/// Logs at debug level, `format!` style.
#[macro_export]
macro_rules! debug { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Debug, &::std::format!($($t)*)) } }
/// Logs at info level, `format!` style.
#[macro_export]
macro_rules! info { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Info, &::std::format!($($t)*)) } }
/// Logs at warn level, `format!` style.
#[macro_export]
macro_rules! warn { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Warn, &::std::format!($($t)*)) } }
/// Logs at error level, `format!` style.
#[macro_export]
macro_rules! error { ($($t:tt)*) => { $crate::log::write($crate::log::Level::Error, &::std::format!($($t)*)) } }
