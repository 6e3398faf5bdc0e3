//! Contract 0.2 served on the 0.3 host: 0.2's `log` and `cache` imports answered by the same
//! code as 0.3's. Its exports are lifted into 0.3's types by `lift/v0_2.rs`: its manifest's
//! selectors narrow by namespace and labels only and it declares no index; every apply it
//! returns is forced, as 0.2's were, and has no UID precondition; its request carries no
//! triggers ([`super::Request02`]) and its `map` gets the related object alone.
//!
//! 0.2.1's `cache-options` interface (`keep-fields`) is probed for and called after
//! `manifest` when present; a component built for 0.2.0 lacks it and keeps nothing. Tests run
//! components built for 0.2.0 and 0.2.1 from checked-in binaries
//! (`host/tests/fixtures/contract-0.2.0/`, `host/tests/fixtures/contract-0.2.1/`).

use crate::bindings::{Object, v0_2, wit};
use crate::state::State;

fn gvk(g: v0_2::Gvk) -> wit::Gvk {
    wit::Gvk { group: g.group, version: g.version, kind: g.kind }
}

fn object(o: Object) -> v0_2::Object {
    v0_2::Object {
        api_version: o.api_version,
        kind: o.kind,
        name: o.name,
        namespace: o.namespace,
        uid: o.uid,
        json: o.json,
    }
}

fn level(l: v0_2::LogLevel) -> wit::LogLevel {
    match l {
        v0_2::LogLevel::Trace => wit::LogLevel::Trace,
        v0_2::LogLevel::Debug => wit::LogLevel::Debug,
        v0_2::LogLevel::Info => wit::LogLevel::Info,
        v0_2::LogLevel::Warn => wit::LogLevel::Warn,
        v0_2::LogLevel::Error => wit::LogLevel::Error,
    }
}

fn error(e: wit::CacheError) -> v0_2::CacheError {
    match e {
        wit::CacheError::UndeclaredKind(s) => v0_2::CacheError::UndeclaredKind(s),
        wit::CacheError::InvalidSelector(s) => v0_2::CacheError::InvalidSelector(s),
        wit::CacheError::OutOfScope(s) => v0_2::CacheError::OutOfScope(s),
        wit::CacheError::AccessRevoked(s) => v0_2::CacheError::AccessRevoked(s),
        wit::CacheError::InvalidContinue(s) => v0_2::CacheError::InvalidContinue(s),
        // 0.2 has no `list-by-index`, so no look-up of its can name an index.
        wit::CacheError::UnknownIndex(s) => v0_2::CacheError::UndeclaredKind(s),
    }
}

impl v0_2::TypesHost for State {}

impl v0_2::LogHost for State {
    fn log(&mut self, l: v0_2::LogLevel, message: String) {
        State::log(self, level(l), &message);
    }
}

impl v0_2::CacheHost for State {
    fn get_object(
        &mut self,
        kind: v0_2::Gvk,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<v0_2::Object>, v0_2::CacheError> {
        self.get(gvk(kind), namespace, name).map(|found| found.map(object)).map_err(error)
    }

    fn list_objects(
        &mut self,
        kind: v0_2::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
        limit: u32,
        continue_token: Option<String>,
    ) -> Result<v0_2::Page, v0_2::CacheError> {
        let page = self.list_page(gvk(kind), namespace, label_selector, limit, continue_token).map_err(error)?;
        Ok(v0_2::Page { items: page.items.into_iter().map(object).collect(), continue_token: page.continue_token })
    }
}
