//! Manifests of any shape through the shared rules (`manifest::validate`): a manifest they
//! accept names only kinds, namespaces and selectors that parse, and a refusal is a bounded
//! sentence naming the field.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use wasmloop_contract::annotations::AnnotationMatch;
use wasmloop_contract::fields::{FieldPath, FieldSelector};
use wasmloop_contract::manifest::{GrantView, IndexView, KindRef, ManifestView, ScopeView, SelectorView, validate};
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
    namespaces: Vec<String>,
    labels: Option<String>,
    fields: Option<String>,
    annotations: Vec<(String, Option<String>)>,
    generation_changed: bool,
}

#[derive(Debug, Arbitrary)]
struct Index {
    name: String,
    kind: Kind,
    fields: Vec<String>,
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
    reads: Vec<Selected>,
    writes: Vec<Grant>,
    indexes: Vec<Index>,
    finalizer: Option<String>,
    deliver_deleted: bool,
}

fn kind(k: &Kind) -> KindRef<'_> {
    KindRef { group: &k.group, version: &k.version, kind: &k.kind }
}

fn selected(s: &Selected) -> SelectorView<'_> {
    SelectorView {
        kind: kind(&s.kind),
        namespaces: s.namespaces.iter().map(String::as_str).collect(),
        label_selector: s.labels.as_deref(),
        field_selector: s.fields.as_deref(),
        annotations: s.annotations.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect(),
        generation_changed: s.generation_changed,
    }
}

fn parses(k: &Kind) -> bool {
    Gvk::new(&k.group, &k.version, &k.kind).is_ok()
}

fuzz_target!(|m: Manifest| {
    let mut view = ManifestView::new(&m.name, selected(&m.primary));
    view.owns = m.owns.iter().map(kind).collect();
    view.watches = m.watches.iter().map(selected).collect();
    view.reads = m.reads.iter().map(selected).collect();
    view.indexes = m
        .indexes
        .iter()
        .map(|i| IndexView {
            name: &i.name,
            kind: kind(&i.kind),
            fields: i.fields.iter().map(String::as_str).collect(),
        })
        .collect();
    view.deliver_deleted = m.deliver_deleted;
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
            let selectors = std::iter::once(&m.primary).chain(&m.watches).chain(&m.reads);
            for s in selectors {
                assert!(parses(&s.kind), "{:?}", s.kind);
                assert!(s.namespaces.iter().all(|ns| Namespace::parse(ns).is_ok()), "{s:?}");
                assert!(s.labels.as_deref().is_none_or(|l| LabelSelector::parse(l).is_ok()), "{s:?}");
                assert!(s.fields.as_deref().is_none_or(|f| f.parse::<FieldSelector>().is_ok()), "{s:?}");
                assert!(s.annotations.iter().all(|(k, v)| AnnotationMatch::new(k, v.as_deref()).is_ok()), "{s:?}");
            }
            for i in &m.indexes {
                assert!(parses(&i.kind) && i.fields.iter().all(|f| f.parse::<FieldPath>().is_ok()), "{i:?}");
            }
            for k in m.owns.iter().chain(m.writes.iter().map(|g| &g.kind)) {
                assert!(parses(k), "{k:?}");
            }
            for list in m.writes.iter().filter_map(|g| g.scope.as_ref()) {
                assert!(list.iter().all(|ns| Namespace::parse(ns).is_ok()), "{list:?}");
            }
        }
        Err(refused) => assert!(refused.len() <= 2048, "a refusal of {} bytes: {refused:.200}", refused.len()),
    }
});
