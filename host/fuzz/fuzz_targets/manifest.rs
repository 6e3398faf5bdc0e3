//! Manifests of any shape through the shared rules (`manifest::validate`): a manifest they
//! accept names only kinds, namespaces and selectors that parse, and a refusal is a bounded
//! sentence naming the field.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use wasmloop_contract::manifest::{GrantView, KindRef, ManifestView, ScopeView, SelectorView, validate};
use wasmloop_contract::names::{Gvk, LabelSelector, Namespace};

#[derive(Debug, Arbitrary)]
struct Kind {
    group: String,
    version: String,
    kind: String,
}

#[derive(Debug, Arbitrary)]
struct Selected {
    kind: Kind,
    namespace: Option<String>,
    labels: Option<String>,
}

#[derive(Debug, Arbitrary)]
struct Grant {
    kind: Kind,
    verbs: u8,
    scope: Option<Vec<String>>,
    any: bool,
}

#[derive(Debug, Arbitrary)]
struct Manifest {
    name: String,
    primary: Selected,
    owns: Vec<Kind>,
    watches: Vec<Selected>,
    reads: Vec<Kind>,
    writes: Vec<Grant>,
    finalizer: Option<String>,
}

fn kind(k: &Kind) -> KindRef<'_> {
    KindRef { group: &k.group, version: &k.version, kind: &k.kind }
}

fn selected(s: &Selected) -> SelectorView<'_> {
    SelectorView { kind: kind(&s.kind), namespace: s.namespace.as_deref(), label_selector: s.labels.as_deref() }
}

fn parses(k: &Kind) -> bool {
    Gvk::new(&k.group, &k.version, &k.kind).is_ok()
}

fuzz_target!(|m: Manifest| {
    let mut view = ManifestView::new(&m.name, selected(&m.primary));
    view.owns = m.owns.iter().map(kind).collect();
    view.watches = m.watches.iter().map(selected).collect();
    view.reads = m.reads.iter().map(kind).collect();
    view.writes = m
        .writes
        .iter()
        .map(|g| GrantView {
            kind: kind(&g.kind),
            apply: g.verbs & 1 != 0,
            patch: g.verbs & 2 != 0,
            delete: g.verbs & 4 != 0,
            scope: match (&g.scope, g.any) {
                (Some(list), _) => ScopeView::Namespaces(list),
                (None, true) => ScopeView::Any,
                (None, false) => ScopeView::PrimaryNamespace,
            },
        })
        .collect();
    view.finalizer = m.finalizer.as_deref();
    match validate(&view) {
        Ok(()) => {
            let selectors = std::iter::once(&m.primary).chain(&m.watches);
            for s in selectors {
                assert!(parses(&s.kind), "{:?}", s.kind);
                assert!(s.namespace.as_deref().is_none_or(|ns| Namespace::parse(ns).is_ok()), "{s:?}");
                assert!(s.labels.as_deref().is_none_or(|l| LabelSelector::parse(l).is_ok()), "{s:?}");
            }
            for k in m.owns.iter().chain(&m.reads).chain(m.writes.iter().map(|g| &g.kind)) {
                assert!(parses(k), "{k:?}");
            }
            for list in m.writes.iter().filter_map(|g| g.scope.as_ref()) {
                assert!(list.iter().all(|ns| Namespace::parse(ns).is_ok()), "{list:?}");
            }
        }
        Err(refused) => assert!(refused.len() <= 2048, "a refusal of {} bytes: {refused:.200}", refused.len()),
    }
});
