//! Bounds on what a guest returns: entry counts and string bytes, checked before the host
//! decodes or acts on any of it.
//!
//! # Caveats
//! wasmtime 48 lifts a call's results and runs the guest's post-return (which frees them)
//! inside the call, so [`wasmtime::component::WasmStr`] results point at freed memory and
//! cannot be read afterwards. The counts here are therefore checked after wasmtime has copied
//! the response: a guest whose list entries all point at one buffer still makes the host copy
//! each entry once (bounded by the entry count times the guest's memory). Counting inside the
//! lift, before the copy, needs a `Lift` implementation of our own; it is the next step.

use crate::bindings::wit;
use crate::error::CallFailure;

/// What one response may hold: list entries, and string bytes counted per use.
pub(crate) struct Budget {
    item_limit: usize,
    bytes_used: usize,
    byte_limit: usize,
    /// What the items are, for the error: "actions", "references", "manifest kinds".
    what: &'static str,
}

impl Budget {
    pub(crate) fn new(item_limit: usize, byte_limit: usize, what: &'static str) -> Budget {
        Budget { item_limit, bytes_used: 0, byte_limit, what }
    }

    fn items(&self, count: usize) -> Result<(), CallFailure> {
        if count > self.item_limit {
            return Err(CallFailure::TooManyItems { what: self.what, count, limit: self.item_limit });
        }
        Ok(())
    }

    fn bytes(&mut self, strings: &[&str]) -> Result<(), CallFailure> {
        for s in strings {
            self.bytes_used = self.bytes_used.saturating_add(s.len());
        }
        if self.bytes_used > self.byte_limit {
            return Err(CallFailure::ResponseTooLarge { size: self.bytes_used, limit: self.byte_limit });
        }
        Ok(())
    }

    fn object_ref(&mut self, r: &wit::ObjectRef) -> Result<(), CallFailure> {
        let ns = r.namespace.as_deref().unwrap_or_default();
        let uid = r.uid.as_deref().unwrap_or_default();
        self.bytes(&[&r.api_version, &r.kind, &r.name, ns, uid])
    }

    fn gvk(&mut self, g: &crate::Gvk) -> Result<(), CallFailure> {
        self.bytes(&[&g.group, &g.version, &g.kind])
    }

    fn selector(&mut self, s: &wit::KindSelector) -> Result<(), CallFailure> {
        self.gvk(&s.kind)?;
        self.bytes(&[s.namespace.as_deref().unwrap_or_default(), s.label_selector.as_deref().unwrap_or_default()])
    }
}

/// Checks a reconcile result against `budget`.
pub(crate) fn response(
    result: &Result<wit::Response, wit::ReconcileError>,
    mut budget: Budget,
) -> Result<(), CallFailure> {
    match result {
        Ok(r) => actions(&r.actions, &mut budget),
        Err(e) => {
            budget.bytes(&[&e.message, e.reason.as_deref().unwrap_or_default()])?;
            actions(&e.actions, &mut budget)
        }
    }
}

fn actions(actions: &[wit::Action], budget: &mut Budget) -> Result<(), CallFailure> {
    budget.items(actions.len())?;
    actions.iter().try_for_each(|a| match a {
        wit::Action::Apply(s) | wit::Action::Status(s) => budget.bytes(&[s]),
        wit::Action::Delete(r) => budget.object_ref(r),
        wit::Action::Patch(p) => {
            budget.object_ref(&p.target)?;
            budget.bytes(&[&p.patch])
        }
        wit::Action::Event(e) => budget.bytes(&[&e.reason, &e.message, e.action.as_deref().unwrap_or_default()]),
    })
}

/// Checks what `map` returned against `budget`.
pub(crate) fn object_refs(refs: &[wit::ObjectRef], mut budget: Budget) -> Result<(), CallFailure> {
    budget.items(refs.len())?;
    refs.iter().try_for_each(|r| budget.object_ref(r))
}

/// Checks a manifest against `budget`.
pub(crate) fn manifest(m: &wit::PluginManifest, mut budget: Budget) -> Result<(), CallFailure> {
    let namespaces = |g: &wit::WriteGrant| match &g.scope {
        wit::WriteScope::Namespaces(list) => list.len(),
        _ => 0,
    };
    let grants: usize = m.writes.iter().map(|g| 1usize.saturating_add(namespaces(g))).fold(0, usize::saturating_add);
    budget.items(m.owns.len() + m.watches.len() + m.reads.len() + m.metadata_only.len() + grants)?;
    budget.bytes(&[&m.name, &m.version, m.finalizer.as_deref().unwrap_or_default()])?;
    budget.selector(&m.primary)?;
    m.owns.iter().chain(&m.reads).chain(&m.metadata_only).try_for_each(|g| budget.gvk(g))?;
    m.watches.iter().try_for_each(|w| budget.selector(w))?;
    m.writes.iter().try_for_each(|g| {
        budget.gvk(&g.kind)?;
        match &g.scope {
            wit::WriteScope::Namespaces(list) => list.iter().try_for_each(|ns| budget.bytes(&[ns])),
            _ => Ok(()),
        }
    })
}
