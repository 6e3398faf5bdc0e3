//! Contract 0.1 served on the 0.2 host: 0.1's exports lifted into 0.2's types, and 0.1's
//! `host` import answered by the same cache and log code as 0.2's `log` and `cache`.
//!
//! What a 0.1 plugin keeps: every kind it declares stays writable, anywhere, as 0.1 allowed
//! ([`crate::Contract::V0_1`]), with its identity's RBAC as the only wall. Cache errors reach
//! it as 0.1's strings, and lists come whole (bounded by the response limit).

use crate::bindings::wasmloop::plugin::types::Settings;
use crate::bindings::{Gvk, Object, v0_1, wit};
use crate::state::State;

/// A 0.1 manifest as a 0.2 one: no metadata-only kinds, no grants (the 0.1 rights come from
/// the contract version, not from grants it never declared).
pub(crate) fn manifest(m: v0_1::PluginManifest) -> wit::PluginManifest {
    let s = m.settings;
    wit::PluginManifest {
        name: m.name,
        version: m.version,
        primary: selector(m.primary),
        owns: m.owns.into_iter().map(gvk).collect(),
        watches: m.watches.into_iter().map(selector).collect(),
        reads: m.reads.into_iter().map(gvk).collect(),
        metadata_only: Vec::new(),
        writes: Vec::new(),
        finalizer: m.finalizer,
        prune: m.prune,
        deliver_deleted: m.deliver_deleted,
        deliver_previous: m.deliver_previous,
        settings: Settings {
            max_concurrent_reconciles: s.max_concurrent_reconciles,
            deadline_ms: s.deadline_ms,
            memory_limit_bytes: s.memory_limit_bytes,
            response_limit_bytes: s.response_limit_bytes,
            resync_seconds: s.resync_seconds,
        },
    }
}

fn gvk(g: v0_1::Gvk) -> Gvk {
    Gvk { group: g.group, version: g.version, kind: g.kind }
}

fn selector(s: v0_1::KindSelector) -> wit::KindSelector {
    wit::KindSelector { kind: gvk(s.kind), namespace: s.namespace, label_selector: s.label_selector }
}

fn object(o: Object) -> v0_1::Object {
    v0_1::Object {
        api_version: o.api_version,
        kind: o.kind,
        name: o.name,
        namespace: o.namespace,
        uid: o.uid,
        json: o.json,
    }
}

fn level(l: v0_1::LogLevel) -> wit::LogLevel {
    match l {
        v0_1::LogLevel::Trace => wit::LogLevel::Trace,
        v0_1::LogLevel::Debug => wit::LogLevel::Debug,
        v0_1::LogLevel::Info => wit::LogLevel::Info,
        v0_1::LogLevel::Warn => wit::LogLevel::Warn,
        v0_1::LogLevel::Error => wit::LogLevel::Error,
    }
}

/// A 0.1 error: no actions, the usual backoff.
pub(crate) fn reconcile_error(e: v0_1::ReconcileError) -> wit::ReconcileError {
    wit::ReconcileError {
        message: e.message,
        transient: e.transient,
        reason: e.reason,
        retry_after_ms: None,
        actions: Vec::new(),
    }
}

impl v0_1::TypesHost for State {}

impl v0_1::Host for State {
    fn log(&mut self, l: v0_1::LogLevel, message: String) {
        State::log(self, level(l), &message);
    }

    fn get_object(
        &mut self,
        kind: v0_1::Gvk,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<v0_1::Object>, String> {
        match self.get(gvk(kind), namespace, name) {
            Ok(found) => Ok(found.map(object)),
            Err(e) => Err(crate::state::cache_error_text(&e).to_owned()),
        }
    }

    fn list_objects(
        &mut self,
        kind: v0_1::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<v0_1::Object>, String> {
        match self.list_all(gvk(kind), namespace, label_selector) {
            Ok(all) => Ok(all.into_iter().map(object).collect()),
            Err(e) => Err(crate::state::cache_error_text(&e).to_owned()),
        }
    }
}
