//! Bounds on what a guest returns, counted while wasmtime lifts it out of guest memory.
//!
//! The canonical ABI hands the host a list as a pointer and a length, and a string the same
//! way, so a guest can return 10,000 entries that all point at one 64 MiB string: copied
//! naively, that is 640 GB of host memory for 64 MiB of guest memory. So the host does not lift
//! a response into `String`s and `Vec`s directly. It lifts into mirror types whose strings
//! ([`Text`]) and lists ([`List`]) charge their length to the call's [`Budget`] *before*
//! wasmtime copies them; the first charge over the budget stops the lift with a
//! [`CallFailure`], having copied no more than the budget allows.
//!
//! The budget reaches the lift through a thread-local that [`counted`] sets around every poll
//! of the guest call: wasmtime lifts results synchronously inside the poll that sees the guest
//! return (and runs the guest's post-return right after, so results cannot be borrowed from
//! guest memory and counted later).
//!
//! Lengths are charged as the UTF-8 bytes they may become (a UTF-16 code unit as 3:
//! `string_bytes`), and a lift outside a budget fails rather than go uncounted. Measured: a
//! guest returning 2,000 strings that alias one 1 MiB buffer peaks the host at 47 MB (39 MB
//! for an empty response) and fails as `PluginResponseTooLarge`; without the counting,
//! wasmtime's own hostcall fuel stopped the copy at 328 MB, with a trap.
//!
//! The mirror types are checked against the WIT by shape when the typed function is looked up,
//! like the bindgen types; [`IntoWit`] turns them into those, moving the strings. The types
//! every version shares are here; each version's own are in `v0_3`, `v0_2` and `v0_1`, and an
//! older version's lift into 0.3's types with the meanings it gave them.

pub(crate) mod v0_1;
pub(crate) mod v0_2;
pub(crate) mod v0_3;

use std::cell::RefCell;
use std::future::Future;
use std::sync::{Arc, Mutex};

use wasmtime::ValRaw;
use wasmtime::component::__internal::wasmtime_environ::component::StringEncoding;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

use crate::bindings::wit;
use crate::error::CallFailure;

/// What one response may hold: list entries and string bytes, each counted per use.
#[derive(Debug)]
pub(crate) struct Budget {
    item_limit: usize,
    items_used: usize,
    byte_limit: usize,
    bytes_used: usize,
    /// What the items are, for the error: "actions", "references", "manifest kinds".
    what: &'static str,
}

impl Budget {
    pub(crate) fn new(item_limit: usize, byte_limit: usize, what: &'static str) -> Budget {
        Budget { item_limit, items_used: 0, byte_limit, bytes_used: 0, what }
    }

    fn items(&mut self, count: usize) -> Result<(), CallFailure> {
        self.items_used = self.items_used.saturating_add(count);
        if self.items_used > self.item_limit {
            return Err(CallFailure::TooManyItems { what: self.what, count: self.items_used, limit: self.item_limit });
        }
        Ok(())
    }

    fn bytes(&mut self, count: usize) -> Result<(), CallFailure> {
        self.bytes_used = self.bytes_used.saturating_add(count);
        if self.bytes_used > self.byte_limit {
            return Err(CallFailure::ResponseTooLarge { size: self.bytes_used, limit: self.byte_limit });
        }
        Ok(())
    }
}

thread_local! {
    /// The budget of the guest call being polled on this thread, if any.
    static CURRENT: RefCell<Option<Arc<Mutex<Budget>>>> = const { RefCell::new(None) };
}

/// Puts a budget in place for one poll, and the previous one back after it (even on panic).
struct Scope(Option<Arc<Mutex<Budget>>>);

impl Scope {
    fn enter(budget: &Arc<Mutex<Budget>>) -> Scope {
        Scope(CURRENT.with(|c| c.replace(Some(budget.clone()))))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = self.0.take());
    }
}

/// Runs `call`, a guest call whose results are lifted into [`Text`] and [`List`], with every
/// lift in it charged to `budget`. A charge over the budget fails the call with a
/// `wasmtime::Error` holding the [`CallFailure`].
pub(crate) async fn counted<F: Future>(budget: Budget, call: F) -> F::Output {
    let budget = Arc::new(Mutex::new(budget));
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        let _scope = Scope::enter(&budget);
        call.as_mut().poll(cx)
    })
    .await
}

/// Charges the budget of the call being polled. Lifting a mirror type outside [`counted`] is a
/// bug of the host's, and fails the call rather than copy uncounted.
// Never inlined: the thread-local's address must not be cached across a fiber's suspension.
#[inline(never)]
fn charge(f: impl FnOnce(&mut Budget) -> Result<(), CallFailure>) -> wasmtime::Result<()> {
    CURRENT.with(|c| match c.borrow().as_ref() {
        Some(budget) => {
            f(&mut budget.lock().unwrap_or_else(std::sync::PoisonError::into_inner)).map_err(wasmtime::Error::new)
        }
        None => Err(wasmtime::Error::msg("wasmloop bug: a response was lifted outside its budget")),
    })
}

/// The length word of a (pointer, length) pair, as lowered to core values.
fn flat_len(src: &[ValRaw; 2]) -> u32 {
    src[1].get_u32()
}

/// The length word of a (pointer, length) pair stored in memory.
fn memory_len(bytes: &[u8]) -> u32 {
    bytes.get(4..8).and_then(|b| <[u8; 4]>::try_from(b).ok()).map_or(0, u32::from_le_bytes)
}

/// The UTF-8 bytes at most that a string of this length word becomes on the host. In compact
/// UTF-16 the top bit tags the encoding; a UTF-16 code unit becomes up to 3 UTF-8 bytes.
fn string_bytes(encoding: StringEncoding, len: u32) -> usize {
    const UTF16_TAG: u32 = 1 << 31;
    match encoding {
        StringEncoding::Utf8 => len as usize,
        StringEncoding::Utf16 => (len as usize).saturating_mul(3),
        StringEncoding::CompactUtf16 if len & UTF16_TAG != 0 => ((len ^ UTF16_TAG) as usize).saturating_mul(3),
        // Latin-1: a byte above 0x7f becomes two.
        StringEncoding::CompactUtf16 => (len as usize).saturating_mul(2),
    }
}

/// A WIT `string` whose length is charged to the call's budget before it is copied.
#[derive(Debug)]
pub(crate) struct Text(pub(crate) String);

// SAFETY: the same ABI and type check as `String`, to which the lift is delegated.
#[allow(unsafe_code)]
unsafe impl ComponentType for Text {
    type Lower = [ValRaw; 2];
    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <String as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: delegates to `String`'s lift after a bounds-free read of the length word.
#[allow(unsafe_code)]
unsafe impl Lift for Text {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        let len = string_bytes(cx.options().string_encoding, flat_len(src));
        charge(|b| b.bytes(len))?;
        <String as Lift>::linear_lift_from_flat(cx, ty, src).map(Text)
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        let len = string_bytes(cx.options().string_encoding, memory_len(bytes));
        charge(|b| b.bytes(len))?;
        <String as Lift>::linear_lift_from_memory(cx, ty, bytes).map(Text)
    }
}

/// A WIT `list` whose length is charged to the call's budget before any entry is lifted.
#[derive(Debug)]
pub(crate) struct List<T>(pub(crate) Vec<T>);

// SAFETY: the same ABI and type check as `Vec<T>`, to which the lift is delegated.
#[allow(unsafe_code)]
unsafe impl<T: ComponentType> ComponentType for List<T> {
    type Lower = [ValRaw; 2];
    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <Vec<T> as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: delegates to `Vec<T>`'s lift after a bounds-free read of the length word.
#[allow(unsafe_code)]
unsafe impl<T: Lift> Lift for List<T> {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        charge(|b| b.items(flat_len(src) as usize))?;
        <Vec<T> as Lift>::linear_lift_from_flat(cx, ty, src).map(List)
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        charge(|b| b.items(memory_len(bytes) as usize))?;
        <Vec<T> as Lift>::linear_lift_from_memory(cx, ty, bytes).map(List)
    }
}

/// Turns a counted mirror type into the bindgen type the host works with.
pub(crate) trait IntoWit {
    type Wit;
    fn into_wit(self) -> Self::Wit;
}

impl IntoWit for Text {
    type Wit = String;
    fn into_wit(self) -> String {
        self.0
    }
}

impl<T: IntoWit> IntoWit for List<T> {
    type Wit = Vec<T::Wit>;
    fn into_wit(self) -> Vec<T::Wit> {
        self.0.into_iter().map(IntoWit::into_wit).collect()
    }
}

impl<T: IntoWit> IntoWit for Option<T> {
    type Wit = Option<T::Wit>;
    fn into_wit(self) -> Option<T::Wit> {
        self.map(IntoWit::into_wit)
    }
}

impl<T: IntoWit, E: IntoWit> IntoWit for Result<T, E> {
    type Wit = Result<T::Wit, E::Wit>;
    fn into_wit(self) -> Result<T::Wit, E::Wit> {
        self.map(IntoWit::into_wit).map_err(IntoWit::into_wit)
    }
}

/// `object-ref`, the same in every version.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct ObjectRef {
    #[component(name = "api-version")]
    api_version: Text,
    kind: Text,
    name: Text,
    namespace: Option<Text>,
    uid: Option<Text>,
}

impl IntoWit for ObjectRef {
    type Wit = wit::ObjectRef;
    fn into_wit(self) -> wit::ObjectRef {
        wit::ObjectRef {
            api_version: self.api_version.0,
            kind: self.kind.0,
            name: self.name.0,
            namespace: self.namespace.into_wit(),
            uid: self.uid.into_wit(),
        }
    }
}

/// `event`, the same in every version.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Event {
    #[component(name = "event-type")]
    event_type: wit::EventType,
    reason: Text,
    message: Text,
    action: Option<Text>,
}

impl IntoWit for Event {
    type Wit = wit::Event;
    fn into_wit(self) -> wit::Event {
        wit::Event {
            event_type: self.event_type,
            reason: self.reason.0,
            message: self.message.0,
            action: self.action.into_wit(),
        }
    }
}

/// `gvk`, the same in every version.
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Kind {
    group: Text,
    version: Text,
    kind: Text,
}

impl IntoWit for Kind {
    type Wit = wit::Gvk;
    fn into_wit(self) -> wit::Gvk {
        wit::Gvk { group: self.group.0, version: self.version.0, kind: self.kind.0 }
    }
}

/// `write-scope` (since 0.2).
#[derive(ComponentType, Lift)]
#[component(variant)]
pub(crate) enum WriteScope {
    #[component(name = "primary-namespace")]
    PrimaryNamespace,
    #[component(name = "namespaces")]
    Namespaces(List<Text>),
    #[component(name = "any")]
    Any,
}

/// `write-grant` (since 0.2).
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct WriteGrant {
    kind: Kind,
    verbs: wit::WriteVerbs,
    scope: WriteScope,
}

impl IntoWit for WriteGrant {
    type Wit = wit::WriteGrant;
    fn into_wit(self) -> wit::WriteGrant {
        let scope = match self.scope {
            WriteScope::PrimaryNamespace => wit::WriteScope::PrimaryNamespace,
            WriteScope::Namespaces(list) => wit::WriteScope::Namespaces(list.into_wit()),
            WriteScope::Any => wit::WriteScope::Any,
        };
        wit::WriteGrant { kind: self.kind.into_wit(), verbs: self.verbs, scope }
    }
}

/// `cache-options.keep` (since 0.2.1).
#[derive(ComponentType, Lift)]
#[component(record)]
pub(crate) struct Keep {
    kind: Kind,
    fields: wit::KeptFields,
}

impl IntoWit for Keep {
    type Wit = wit::Keep;
    fn into_wit(self) -> wit::Keep {
        wit::Keep { kind: self.kind.into_wit(), fields: self.fields }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_counts_every_use_and_names_what_broke_it() {
        let mut budget = Budget::new(3, 10, "actions");
        assert!(budget.items(2).is_ok() && budget.bytes(6).is_ok());
        // The same string counted again counts again: that is the point.
        assert!(matches!(budget.bytes(6), Err(CallFailure::ResponseTooLarge { size: 12, limit: 10 })));
        assert!(matches!(
            budget.items(usize::MAX),
            Err(CallFailure::TooManyItems { what: "actions", count: usize::MAX, limit: 3 })
        ));
    }

    #[test]
    fn a_strings_length_word_is_charged_as_the_utf8_bytes_it_may_become() {
        let tagged: u32 = (1 << 31) | 5;
        let cases = [
            (StringEncoding::Utf8, 5, 5),
            (StringEncoding::Utf8, tagged, tagged as usize),
            (StringEncoding::Utf16, 5, 15),
            (StringEncoding::CompactUtf16, 5, 10),
            (StringEncoding::CompactUtf16, tagged, 15),
        ];
        for (encoding, len, bytes) in cases {
            assert_eq!(string_bytes(encoding, len), bytes, "{encoding:?} {len}");
        }
        assert_eq!(memory_len(&[0, 0, 0, 0, 0, 1, 0, 0]), 256);
        assert_eq!(memory_len(&[]), 0);
    }

    #[test]
    fn a_lift_outside_a_budget_is_refused_not_left_uncounted() {
        assert!(charge(|b| b.bytes(1)).is_err());
    }
}
