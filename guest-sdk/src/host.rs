//! The host imports, behind one set of functions: the WIT imports in a component, the
//! thread-local test host of [`crate::testing`] in native builds.

use crate::cache::{CacheError, Page};
use crate::kind::Gvk;
use crate::log::Level;
use crate::request::Object;

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use crate::__private::bindings::wasmloop::plugin::types as wit;
    use crate::__private::bindings::wasmloop::plugin::{cache, log};

    fn wit_gvk(kind: &Gvk) -> wit::Gvk {
        wit::Gvk { group: kind.group.clone(), version: kind.version.clone(), kind: kind.kind.clone() }
    }

    fn error(e: cache::CacheError) -> CacheError {
        match e {
            cache::CacheError::UndeclaredKind(m) => CacheError::UndeclaredKind(m),
            cache::CacheError::InvalidSelector(m) => CacheError::InvalidSelector(m),
            cache::CacheError::OutOfScope(m) => CacheError::OutOfScope(m),
            cache::CacheError::AccessRevoked(m) => CacheError::AccessRevoked(m),
            cache::CacheError::InvalidContinue(m) => CacheError::InvalidContinue(m),
        }
    }

    pub(crate) fn log(level: Level, message: &str) {
        let level = match level {
            Level::Trace => wit::LogLevel::Trace,
            Level::Debug => wit::LogLevel::Debug,
            Level::Info => wit::LogLevel::Info,
            Level::Warn => wit::LogLevel::Warn,
            Level::Error => wit::LogLevel::Error,
        };
        log::log(level, message);
    }

    pub(crate) fn get(kind: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<Object>, CacheError> {
        cache::get_object(&wit_gvk(kind), namespace, name)
            .map(|o| o.map(crate::__private::object_from_wit))
            .map_err(error)
    }

    pub(crate) fn list_page(
        kind: &Gvk,
        namespace: Option<&str>,
        selector: Option<&str>,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, CacheError> {
        let page = cache::list_objects(&wit_gvk(kind), namespace, selector, limit, token).map_err(error)?;
        Ok(Page {
            items: page.items.into_iter().map(crate::__private::object_from_wit).collect(),
            continue_token: page.continue_token,
        })
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;

    pub(crate) fn log(level: Level, message: &str) {
        crate::testing::host_log(level, message);
    }

    pub(crate) fn get(kind: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<Object>, CacheError> {
        crate::testing::host_get(kind, namespace, name)
    }

    pub(crate) fn list_page(
        kind: &Gvk,
        namespace: Option<&str>,
        selector: Option<&str>,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, CacheError> {
        crate::testing::host_list_page(kind, namespace, selector, limit, token)
    }
}

pub(crate) use imp::*;
