//! Contract 0.1 served on the 0.3 host: 0.1's `host` import answered by the same cache and log
//! code as 0.3's `log` and `cache`. Its exports take 0.2's request ([`super::Request02`], the
//! same shape) and are lifted into 0.3's types by `lift/v0_1.rs` (its `Manifest`, `Response`,
//! `Action` and `ReconcileError`): 0.1's manifest becomes one without grants or
//! metadata-only kinds, its response one without `prune` (a 0.1 plugin that sets the
//! manifest's `prune` prunes after every successful apply, as 0.1 did) whose applies are
//! forced, its error one without actions or retry delay.
//!
//! What a 0.1 plugin keeps: every kind it declares stays writable, anywhere, as 0.1 allowed
//! ([`crate::Contract::V0_1`]), within the operator's confinement and its identity's RBAC.
//! Cache errors reach it as 0.1's strings, and lists come whole, as in 0.1, up to 10,000
//! objects, past which they are refused (`State::list_all`). The host logs at load that such a
//! plugin writes what it declares, and suggests a rebuild. A test runs `configmap-mirror` as
//! built for 0.1 (`host/tests/fixtures/contract-0.1/`), offline and on the control plane.

use crate::bindings::{Object, v0_1, wit};
use crate::state::State;

fn gvk(g: v0_1::Gvk) -> wit::Gvk {
    wit::Gvk { group: g.group, version: g.version, kind: g.kind }
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
