//! The host imports, behind one set of functions: the WIT imports in a component, the
//! thread-local test host of [`crate::testing`] in native builds.

use crate::kind::Gvk;
use crate::log::Level;
use crate::request::Object;

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::*;
    use crate::__private::bindings::wasmloop::plugin::host;
    use crate::__private::bindings::wasmloop::plugin::types as wit;

    fn wit_gvk(kind: &Gvk) -> wit::Gvk {
        wit::Gvk { group: kind.group.clone(), version: kind.version.clone(), kind: kind.kind.clone() }
    }

    pub(crate) fn log(level: Level, message: &str) {
        let level = match level {
            Level::Trace => wit::LogLevel::Trace,
            Level::Debug => wit::LogLevel::Debug,
            Level::Info => wit::LogLevel::Info,
            Level::Warn => wit::LogLevel::Warn,
            Level::Error => wit::LogLevel::Error,
        };
        host::log(level, message);
    }

    pub(crate) fn get(kind: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<Object>, String> {
        host::get_object(&wit_gvk(kind), namespace, name).map(|o| o.map(crate::__private::object_from_wit))
    }

    pub(crate) fn list(kind: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<Object>, String> {
        host::list_objects(&wit_gvk(kind), namespace, selector)
            .map(|objects| objects.into_iter().map(crate::__private::object_from_wit).collect())
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::*;

    pub(crate) fn log(level: Level, message: &str) {
        crate::testing::host_log(level, message);
    }

    pub(crate) fn get(kind: &Gvk, namespace: Option<&str>, name: &str) -> Result<Option<Object>, String> {
        crate::testing::host_get(kind, namespace, name)
    }

    pub(crate) fn list(kind: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Result<Vec<Object>, String> {
        crate::testing::host_list(kind, namespace, selector)
    }
}

pub(crate) use imp::*;
