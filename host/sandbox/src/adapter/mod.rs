//! The contracts the host serves besides its own: 0.2 and 0.1 components, called through
//! their own imports and the shapes of their own exports, with the meanings their versions
//! gave them.
//!
//! What the host hands an older guest is borrowed, never copied: [`Request02`] and
//! [`Object`]s lower with the shapes of 0.2's (and 0.1's) `request` and `object`. What it gets
//! back is lifted through the counted mirrors of `lift/`.

mod v0_1;
mod v0_2;

use wasmtime::component::{ComponentType, Lower};

use crate::bindings::{Object, Phase, Request};

/// 0.2's `request` (and 0.1's, of the same shape): 0.3's without the triggers, borrowed.
#[derive(ComponentType, Lower)]
#[component(record)]
pub(crate) struct Request02<'a> {
    object: &'a Object,
    owned: &'a [Object],
    phase: Phase,
    previous: Option<&'a Object>,
    attempt: u32,
    config: &'a str,
}

impl<'a> Request02<'a> {
    /// `request` as a 0.2 or 0.1 guest sees it.
    pub(crate) fn of(request: &'a Request) -> Request02<'a> {
        Request02 {
            object: &request.object,
            owned: &request.owned,
            phase: request.phase,
            previous: request.previous.as_ref(),
            attempt: request.attempt,
            config: &request.config,
        }
    }
}
