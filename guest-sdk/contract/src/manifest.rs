//! The rules a plugin's manifest is held to, for the host when it loads a component and for
//! the SDK's `TestCase` before it runs a plugin's tests: one function, one set of sentences.
//!
//! Both sides hold their own manifest types (the host's come from the WIT bindings, the SDK's
//! are its builder); each lends a [`ManifestView`] of borrowed fields to [`validate`].
//!
//! ```
//! use wasmloop_contract::manifest::{KindRef, ManifestView, SelectorView, validate};
//! let configmap = KindRef { group: "", version: "v1", kind: "ConfigMap" };
//! let mut view = ManifestView::new("mirror", SelectorView::of(configmap));
//! assert_eq!(validate(&view), Ok(()));
//! view.finalizer = Some("cleanup");
//! assert!(validate(&view).unwrap_err().contains("must look like `example.com/name`"));
//! ```

use std::fmt;

use crate::annotations::{AnnotationMatch, MAX_ANNOTATION_MATCHES};
use crate::cache::{Selection, Visible};
use crate::fields::{FieldPath, FieldSelector};
use crate::selector::Selector;
use crate::validate;

/// A kind, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindRef<'a> {
    /// API group, empty for core.
    pub group: &'a str,
    /// Version.
    pub version: &'a str,
    /// Kind name.
    pub kind: &'a str,
}

impl fmt::Display for KindRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.group {
            "" => write!(f, "{}/{}", self.version, self.kind),
            group => write!(f, "{group}/{}/{}", self.version, self.kind),
        }
    }
}

/// A kind and what narrows it (the primary, a watch, a read).
#[derive(Debug, Clone)]
pub struct SelectorView<'a> {
    /// The kind.
    pub kind: KindRef<'a>,
    /// Its namespaces; empty for every namespace.
    pub namespaces: Vec<&'a str>,
    /// Its label selector, as text.
    pub label_selector: Option<&'a str>,
    /// Its field selector, as text.
    pub field_selector: Option<&'a str>,
    /// Annotation filters: a key, and the value asked for (none for presence).
    pub annotations: Vec<(&'a str, Option<&'a str>)>,
    /// Only generation changes call the plugin.
    pub generation_changed: bool,
}

impl<'a> SelectorView<'a> {
    /// Every object of `kind`.
    pub fn of(kind: KindRef<'a>) -> SelectorView<'a> {
        SelectorView {
            kind,
            namespaces: Vec::new(),
            label_selector: None,
            field_selector: None,
            annotations: Vec::new(),
            generation_changed: false,
        }
    }

    /// The selections this declaration makes, one per namespace (`finalizer` is kept whatever
    /// else they say: a primary's); none when a part of it does not parse, which [`validate`]
    /// refuses before any cache is built.
    fn selections(&self, finalizer: Option<&str>) -> Option<Vec<Selection>> {
        let labels = match self.label_selector {
            None => Selector::default(),
            Some(text) => text.parse::<Selector>().ok()?,
        };
        let fields = match self.field_selector {
            None => None,
            Some(text) => Some(text.parse::<FieldSelector>().ok()?),
        };
        let annotations =
            self.annotations.iter().map(|(k, v)| AnnotationMatch::new(k, *v).ok()).collect::<Option<Vec<_>>>()?;
        let selection = |namespace: Option<&str>| Selection {
            namespace: namespace.map(str::to_owned),
            labels: labels.clone(),
            fields: fields.clone(),
            annotations: annotations.clone(),
            finalizer: finalizer.map(str::to_owned),
        };
        Some(if self.namespaces.is_empty() {
            vec![selection(None)]
        } else {
            self.namespaces.iter().map(|ns| selection(Some(ns))).collect()
        })
    }
}

/// An index over a cached kind (contract 0.3).
#[derive(Debug, Clone)]
pub struct IndexView<'a> {
    /// Its name.
    pub name: &'a str,
    /// The kind indexed.
    pub kind: KindRef<'a>,
    /// The field paths whose values are an object's keys.
    pub fields: Vec<&'a str>,
}

/// Where a write grant applies.
#[derive(Debug, Clone, Copy)]
pub enum ScopeView<'a> {
    /// The primary's namespace.
    PrimaryNamespace,
    /// These namespaces.
    Namespaces(&'a [String]),
    /// These namespaces, parsed already (the host's manifest holds them so).
    Parsed(&'a [crate::names::Namespace]),
    /// Everywhere.
    Any,
}

/// A write grant.
#[derive(Debug, Clone, Copy)]
pub struct GrantView<'a> {
    /// The kind written.
    pub kind: KindRef<'a>,
    /// Server-side apply.
    pub apply: bool,
    /// Patch.
    pub patch: bool,
    /// Delete.
    pub delete: bool,
    /// Where.
    pub scope: ScopeView<'a>,
}

/// Fields of one kind a plugin asks the host's cache to keep (contract 0.2.1).
#[derive(Debug, Clone, Copy)]
pub struct KeepView<'a> {
    /// The kind.
    pub kind: KindRef<'a>,
    /// What to keep of it.
    pub kept: crate::cache::Kept,
}

/// Defaults a plugin proposes; the operator's configuration overrides them. The SDK hands
/// it to plugin authors as `wasmloop_sdk::Settings`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    /// Reconciles that may run at once.
    pub max_concurrent_reconciles: Option<u32>,
    /// Wall-clock budget of one call, in milliseconds.
    pub deadline_ms: Option<u32>,
    /// Guest memory ceiling in bytes.
    pub memory_limit_bytes: Option<u64>,
    /// Largest response in bytes.
    pub response_limit_bytes: Option<u64>,
    /// Periodic requeue of every primary, in seconds.
    pub resync_seconds: Option<u32>,
}

/// A manifest, borrowed field by field.
#[derive(Debug, Clone)]
pub struct ManifestView<'a> {
    /// The plugin's name.
    pub name: &'a str,
    /// The primary kind.
    pub primary: SelectorView<'a>,
    /// Owned kinds.
    pub owns: Vec<KindRef<'a>>,
    /// Watched kinds.
    pub watches: Vec<SelectorView<'a>>,
    /// Read kinds.
    pub reads: Vec<SelectorView<'a>>,
    /// Metadata-only kinds.
    pub metadata_only: Vec<KindRef<'a>>,
    /// Write grants.
    pub writes: Vec<GrantView<'a>>,
    /// Fields kept on cached objects, by kind.
    pub keeps: Vec<KeepView<'a>>,
    /// Indexes over cached kinds.
    pub indexes: Vec<IndexView<'a>>,
    /// The finalizer.
    pub finalizer: Option<&'a str>,
    /// Phase `deleted` is delivered.
    pub deliver_deleted: bool,
    /// Settings.
    pub settings: Settings,
}

impl<'a> ManifestView<'a> {
    /// A manifest with a name and a primary kind, and nothing else declared.
    pub fn new(name: &'a str, primary: SelectorView<'a>) -> ManifestView<'a> {
        ManifestView {
            name,
            primary,
            owns: Vec::new(),
            watches: Vec::new(),
            reads: Vec::new(),
            metadata_only: Vec::new(),
            writes: Vec::new(),
            keeps: Vec::new(),
            indexes: Vec::new(),
            finalizer: None,
            deliver_deleted: false,
            settings: Settings::default(),
        }
    }
}

impl ManifestView<'_> {
    /// Which objects of `kind` the plugin's caches hold: the rule of [`crate::cache::Visible`].
    /// Whole for owned kinds, for a primary narrowed by labels alone, and for a kind one of
    /// whose declarations narrows nothing; otherwise what its declarations (the primary's, its
    /// watches', its reads') select, and for the primary what carries the finalizer. A declaration that does not parse selects
    /// nothing here; [`validate`] refuses it before any cache is built.
    ///
    /// ```
    /// use wasmloop_contract::cache::Visible;
    /// use wasmloop_contract::manifest::{KindRef, ManifestView, SelectorView};
    /// let (cm, pod) = (KindRef { group: "", version: "v1", kind: "ConfigMap" }, KindRef { group: "", version: "v1", kind: "Pod" });
    /// let mut view = ManifestView::new("p", SelectorView::of(cm));
    /// view.watches.push(SelectorView { label_selector: Some("app=web"), ..SelectorView::of(pod) });
    /// assert_eq!(view.visible(&cm), Visible::All, "a primary that narrows nothing is held whole");
    /// let Visible::Selected(web) = view.visible(&pod) else { panic!() };
    /// assert_eq!(web[0].labels.to_string(), "app=web");
    /// ```
    pub fn visible(&self, kind: &KindRef<'_>) -> Visible {
        if self.owns.contains(kind) {
            return Visible::All;
        }
        // A primary's labels alone select what is reconciled, and leave its kind cached whole,
        // as they did before 0.3 (a plugin may read what it does not reconcile: a copy's
        // target); annotations and fields narrow its cache too.
        let p = &self.primary;
        let narrowed = !p.annotations.is_empty() || p.field_selector.is_some();
        let primary = (p.kind == *kind)
            .then(|| if narrowed { p.selections(self.finalizer) } else { Some(vec![Selection::default()]) });
        let others = self.watches.iter().chain(&self.reads).filter(|w| w.kind == *kind).map(|w| w.selections(None));
        let declared: Vec<Option<Vec<Selection>>> = primary.into_iter().chain(others).collect();
        if declared.is_empty() {
            return Visible::All;
        }
        let selections: Vec<Selection> = declared.into_iter().flatten().flatten().collect();
        if selections.iter().any(Selection::is_everything) {
            return Visible::All;
        }
        Visible::Selected(selections)
    }

    /// True when the manifest declares `kind` as its primary, or under owns, watches or reads.
    pub fn declares(&self, kind: &KindRef<'_>) -> bool {
        self.primary.kind == *kind
            || self.owns.contains(kind)
            || self.reads.iter().any(|r| r.kind == *kind)
            || self.watches.iter().any(|w| w.kind == *kind)
    }
}

/// A write grant's namespaces are at most this many.
pub const MAX_GRANT_NAMESPACES: usize = 64;

/// Checks a manifest as the host does when it loads the component.
///
/// # Errors
/// A sentence naming the first invalid field and what to change.
pub fn validate(m: &ManifestView<'_>) -> Result<(), String> {
    validate::plugin_name(m.name)?;
    check_selector(&m.primary, "primary")?;
    check_primary_fields(m)?;
    m.owns.iter().try_for_each(|k| check_kind(k, "owned"))?;
    m.watches.iter().try_for_each(|w| check_selector(w, "watched"))?;
    m.reads.iter().try_for_each(|r| check_selector(r, "read"))?;
    m.writes.iter().try_for_each(check_grant)?;
    m.metadata_only.iter().try_for_each(|k| check_kind(k, "metadata-only"))?;
    m.keeps.iter().try_for_each(|k| check_kind(&k.kind, "kept"))?;
    let declared = |k: &KindRef<'_>| {
        m.owns.contains(k) || m.reads.iter().any(|r| r.kind == *k) || m.watches.iter().any(|w| w.kind == *k)
    };
    if let Some(k) = m.metadata_only.iter().find(|k| !declared(k)) {
        return Err(format!(
            "metadata-only kind {k} is not under owns, watches or reads; declare how the plugin sees it there too"
        ));
    }
    check_keeps(m)?;
    check_indexes(m)?;
    if let Some(f) = m.finalizer {
        check_finalizer(f)?;
    }
    check_settings(&m.settings)
}

/// A primary that leaves a server-side selection looks deleted; with a finalizer or phase
/// `deleted` that would run cleanup, or never take the finalizer off, for an object still there.
fn check_primary_fields(m: &ManifestView<'_>) -> Result<(), String> {
    let Some(text) = m.primary.field_selector else { return Ok(()) };
    let Ok(fields) = text.parse::<FieldSelector>() else { return Ok(()) };
    if (m.finalizer.is_some() || m.deliver_deleted) && !fields.on_immutable_fields() {
        return Err(format!(
            "the primary's field selector {} selects on fields that change, and a primary that leaves it would look deleted; with a finalizer or deliver-deleted, select on metadata.name and metadata.namespace only, or filter by label or annotation",
            validate::quoted(text)
        ));
    }
    Ok(())
}

/// Most indexes a manifest declares.
pub const MAX_INDEXES: usize = 16;
/// Most field paths one index evaluates.
pub const MAX_INDEX_FIELDS: usize = 16;

fn check_indexes(m: &ManifestView<'_>) -> Result<(), String> {
    if m.indexes.len() > MAX_INDEXES {
        return Err(format!("the manifest declares {} indexes; declare at most {MAX_INDEXES}", m.indexes.len()));
    }
    for (i, index) in m.indexes.iter().enumerate() {
        if !validate::is_dns1123_label(index.name) {
            return Err(format!(
                "index name {} is not a DNS label; use lower-case letters, digits and `-`",
                validate::quoted(index.name)
            ));
        }
        if m.indexes[..i].iter().any(|earlier| earlier.name == index.name) {
            return Err(format!("index {} is declared twice; give each index its own name", index.name));
        }
        check_kind(&index.kind, "indexed")?;
        if !m.declares(&index.kind) {
            return Err(format!(
                "index {} is on {}, which the manifest does not declare; declare it under primary, owns, watches or reads",
                index.name, index.kind
            ));
        }
        if index.fields.is_empty() || index.fields.len() > MAX_INDEX_FIELDS {
            return Err(format!(
                "index {} names {} field paths; name 1 to {MAX_INDEX_FIELDS}",
                index.name,
                index.fields.len()
            ));
        }
        for text in &index.fields {
            let path = text.parse::<FieldPath>().map_err(|e| format!("index {}: {e}", index.name))?;
            if m.metadata_only.contains(&index.kind) && !path.in_metadata() {
                return Err(format!(
                    "index {} reads {path} of {}, which is metadata-only and cached without it; index a metadata field, or drop metadata-only",
                    index.name, index.kind
                ));
            }
        }
    }
    Ok(())
}

fn check_keeps(m: &ManifestView<'_>) -> Result<(), String> {
    for (i, keep) in m.keeps.iter().enumerate() {
        let k = &keep.kind;
        if !m.declares(k) {
            return Err(format!(
                "keep-fields names {k}, which the manifest does not declare; declare it under primary, owns, watches or reads, or drop the keep"
            ));
        }
        if keep.kept.is_empty() {
            return Err(format!("keep-fields on {k} names no field; keep managed-fields, last-applied or both"));
        }
        if keep.kept.managed_fields && m.metadata_only.contains(k) {
            return Err(format!(
                "keep-fields keeps managedFields of {k}, which is metadata-only and served without them; drop one of the two"
            ));
        }
        if m.keeps[..i].iter().any(|earlier| earlier.kind == *k) {
            return Err(format!("keep-fields names {k} twice; name each kind once with every field it keeps"));
        }
    }
    Ok(())
}

/// A kind is checked before anything quotes it: every later message names it whole.
fn check_kind(kind: &KindRef<'_>, role: &str) -> Result<(), String> {
    if kind.version.is_empty() || kind.kind.is_empty() {
        return Err(format!(
            "the {role} kind (group {}, version {}, kind {}) has no version or kind name; give the kind its version and its name",
            validate::quoted(kind.group),
            validate::quoted(kind.version),
            validate::quoted(kind.kind)
        ));
    }
    crate::names::Gvk::new(kind.group, kind.version, kind.kind).map_err(|e| format!("the {role} kind: {e}"))?;
    Ok(())
}

/// Most namespaces one selector lists.
pub const MAX_SELECTOR_NAMESPACES: usize = 64;

fn check_selector(s: &SelectorView<'_>, role: &str) -> Result<(), String> {
    check_kind(&s.kind, role)?;
    if s.namespaces.len() > MAX_SELECTOR_NAMESPACES {
        return Err(format!(
            "the {role} kind {} lists {} namespaces; list at most {MAX_SELECTOR_NAMESPACES}, or none for every namespace",
            s.kind,
            s.namespaces.len()
        ));
    }
    for (i, ns) in s.namespaces.iter().enumerate() {
        validate::namespace(ns).map_err(|e| format!("the {role} kind {}: {e}", s.kind))?;
        if s.namespaces[..i].contains(ns) {
            return Err(format!("the {role} kind {} lists namespace {ns} twice; list each once", s.kind));
        }
    }
    if let Some(fields) = s.field_selector {
        fields.parse::<FieldSelector>().map_err(|e| format!("{role} {}: {e}", s.kind))?;
    }
    if s.annotations.len() > MAX_ANNOTATION_MATCHES {
        return Err(format!(
            "the {role} kind {} has {} annotation filters; give at most {MAX_ANNOTATION_MATCHES}",
            s.kind,
            s.annotations.len()
        ));
    }
    for (key, value) in &s.annotations {
        AnnotationMatch::new(key, *value).map_err(|e| format!("{role} {}: {e}", s.kind))?;
    }
    if let Some(sel) = s.label_selector {
        let parsed = sel.parse::<Selector>().map_err(|e| format!("{role} {}: {e}", s.kind))?;
        // A watch's selector goes to the API server as the watch's `labelSelector`; the
        // primary's is held to the same rules, since no label the server accepts could match
        // anything else.
        crate::selector::for_server(&parsed).map_err(|e| format!("{role} {}: {e}", s.kind))?;
    }
    Ok(())
}

fn check_grant(g: &GrantView<'_>) -> Result<(), String> {
    check_kind(&g.kind, "written")?;
    if !(g.apply || g.patch || g.delete) {
        return Err(format!("the write grant on {} names no verb; give apply, patch or delete", g.kind));
    }
    let count = match g.scope {
        ScopeView::Namespaces(list) => {
            for ns in list.iter().take(MAX_GRANT_NAMESPACES + 1) {
                validate::namespace(ns).map_err(|e| format!("the write grant on {}: {e}", g.kind))?;
            }
            list.len()
        }
        ScopeView::Parsed(list) => list.len(),
        ScopeView::PrimaryNamespace | ScopeView::Any => return Ok(()),
    };
    if count == 0 || count > MAX_GRANT_NAMESPACES {
        return Err(format!(
            "the write grant on {} lists {count} namespaces; list 1 to {MAX_GRANT_NAMESPACES}, or use scope any",
            g.kind
        ));
    }
    Ok(())
}

/// Checks a finalizer: a qualified name (`domain/name`), as the API server demands.
///
/// # Errors
/// A sentence naming the value and the form.
pub fn check_finalizer(f: &str) -> Result<(), String> {
    let ok = f.split_once('/').is_some_and(|(domain, name)| {
        domain.contains('.')
            && !name.is_empty()
            && f.len() <= 316
            && f.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '/' | '_'))
    });
    if ok { Ok(()) } else { Err(format!("finalizer {} must look like `example.com/name`", validate::quoted(f))) }
}

fn check_settings(s: &Settings) -> Result<(), String> {
    let zero = [
        ("max-concurrent-reconciles", s.max_concurrent_reconciles.map(u64::from)),
        ("deadline-ms", s.deadline_ms.map(u64::from)),
        ("memory-limit-bytes", s.memory_limit_bytes),
        ("response-limit-bytes", s.response_limit_bytes),
        ("resync-seconds", s.resync_seconds.map(u64::from)),
    ]
    .into_iter()
    .find(|(_, v)| *v == Some(0));
    match zero {
        Some((name, _)) => {
            Err(format!("setting {name} is 0; leave it unset for the host default, or give a positive value"))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change to a valid manifest.
    type Change = Box<dyn Fn(&mut ManifestView<'static>)>;

    const CM: KindRef<'static> = KindRef { group: "", version: "v1", kind: "ConfigMap" };
    const POD_KIND: KindRef<'static> = KindRef { group: "", version: "v1", kind: "Pod" };

    fn base() -> ManifestView<'static> {
        ManifestView::new("p", SelectorView::of(CM))
    }

    #[test]
    fn a_kind_is_held_whole_unless_each_declaration_narrows_it() {
        const POD: KindRef<'static> = KindRef { group: "", version: "v1", kind: "Pod" };
        let watch = |label_selector| SelectorView { label_selector, ..SelectorView::of(POD) };
        let watch_in =
            |ns, label_selector| SelectorView { namespaces: vec![ns], label_selector, ..SelectorView::of(POD) };
        let selected = |pairs: &[(Option<&str>, &str)]| {
            Visible::Selected(
                pairs
                    .iter()
                    .map(|(ns, t)| Selection {
                        namespace: ns.map(str::to_owned),
                        labels: t.parse().unwrap(),
                        ..Selection::default()
                    })
                    .collect(),
            )
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, Change, Visible)> = vec![
            ("undeclared", Box::new(|_| {}), Visible::All),
            ("one selected watch", Box::new(move |m| m.watches = vec![watch(Some("app=web"))]), selected(&[(None, "app=web")])),
            ("two selected watches: either selects", Box::new(move |m| m.watches = vec![watch(Some("app=web")), watch(Some("tier"))]), selected(&[(None, "app=web"), (None, "tier")])),
            ("a selected watch in a namespace", Box::new(move |m| m.watches = vec![watch_in("a", Some("app=web")), watch(Some("tier"))]), selected(&[(Some("a"), "app=web"), (None, "tier")])),
            ("a watch of one namespace selects all of it", Box::new(move |m| m.watches = vec![watch_in("a", None), watch(Some("tier"))]), selected(&[(Some("a"), ""), (None, "tier")])),
            ("a watch without a selector", Box::new(move |m| m.watches = vec![watch(Some("app=web")), watch(None)]), Visible::All),
            ("a watch with the empty selector", Box::new(move |m| m.watches = vec![watch(Some(" "))]), Visible::All),
            ("also owned", Box::new(move |m| { m.watches = vec![watch(Some("app=web"))]; m.owns = vec![POD]; }), Visible::All),
            ("also read whole", Box::new(move |m| { m.watches = vec![watch(Some("app=web"))]; m.reads = vec![SelectorView::of(POD)]; }), Visible::All),
            ("also read narrowed", Box::new(move |m| { m.watches = vec![watch(Some("app=web"))]; m.reads = vec![watch_in("b", None)]; }), selected(&[(None, "app=web"), (Some("b"), "")])),
            ("the primary's labels alone leave it whole", Box::new(move |m| m.primary = watch(Some("app=web"))), Visible::All),
            ("a selector that does not parse selects nothing", Box::new(move |m| m.watches = vec![watch(Some("a in ("))]), selected(&[])),
        ];
        for (name, change, expected) in cases {
            let mut m = base();
            change(&mut m);
            assert_eq!(m.visible(&POD), expected, "{name}");
        }
    }

    #[test]
    fn a_primarys_selection_keeps_what_carries_its_finalizer() {
        let mut m = base();
        m.primary.annotations = vec![("roll/on-change", None)];
        m.finalizer = Some("example.com/cleanup");
        let finalized = serde_json::json!({"metadata": {"finalizers": ["example.com/cleanup"]}});
        let annotated = serde_json::json!({"metadata": {"annotations": {"roll/on-change": "yes"}}});
        let neither = serde_json::json!({"metadata": {"name": "x"}});
        let visible = m.visible(&CM);
        assert!(visible.admits(&finalized) && visible.admits(&annotated) && !visible.admits(&neither));
    }

    #[test]
    fn field_and_annotation_filters_narrow_as_labels_do() {
        const SECRET: KindRef<'static> = KindRef { group: "", version: "v1", kind: "Secret" };
        let mut m = base();
        m.watches = vec![SelectorView { field_selector: Some("metadata.name=db"), ..SelectorView::of(SECRET) }];
        let visible = m.visible(&SECRET);
        assert!(visible.admits(&serde_json::json!({"metadata": {"name": "db"}})));
        assert!(!visible.admits(&serde_json::json!({"metadata": {"name": "web"}})));
    }

    #[test]
    fn each_rule_refuses_with_a_sentence_naming_the_field() {
        let many: &'static [String] = Box::leak(vec!["a".to_owned(); 65].into_boxed_slice());
        let bad_ns: &'static [String] = Box::leak(vec!["Bad_NS".to_owned()].into_boxed_slice());
        let grant = |scope, apply| GrantView { kind: CM, apply, patch: false, delete: false, scope };
        #[rustfmt::skip]
        let cases: Vec<(&str, Change, Option<&str>)> = vec![
            ("valid", Box::new(|_| {}), None),
            ("empty name", Box::new(|m| m.name = ""), Some("name \"\" must be 1-63 characters")),
            ("upper-case name", Box::new(|m| m.name = "Mirror"), Some("must be 1-63 characters")),
            ("no primary", Box::new(|m| m.primary.kind = KindRef { group: "", version: "", kind: "" }), Some("the primary kind")),
            ("bad selector", Box::new(|m| m.primary.label_selector = Some("a in (")), Some("primary v1/ConfigMap")),
            ("watch selector the server refuses", Box::new(|m| m.watches = vec![SelectorView { label_selector: Some("app=a&b"), ..SelectorView::of(CM) }]), Some("watched v1/ConfigMap: label selector app=a&b: \"a&b\" is not a label value")),
            ("grant without verbs", Box::new(move |m| m.writes = vec![grant(ScopeView::Any, false)]), Some("names no verb")),
            ("too many namespaces", Box::new(move |m| m.writes = vec![grant(ScopeView::Namespaces(many), true)]), Some("lists 65 namespaces")),
            ("no namespaces", Box::new(move |m| m.writes = vec![grant(ScopeView::Namespaces(&[]), true)]), Some("lists 0 namespaces")),
            ("invalid namespace", Box::new(move |m| m.writes = vec![grant(ScopeView::Namespaces(bad_ns), true)]), Some("the write grant on v1/ConfigMap:")),
            ("undeclared metadata-only", Box::new(|m| m.metadata_only = vec![CM]), Some("metadata-only kind v1/ConfigMap is not under")),
            ("declared metadata-only", Box::new(|m| { m.reads = vec![SelectorView::of(CM)]; m.metadata_only = vec![CM]; }), None),
            ("bad finalizer", Box::new(|m| m.finalizer = Some("cleanup")), Some("must look like `example.com/name`")),
            ("good finalizer", Box::new(|m| m.finalizer = Some("example.com/cleanup")), None),
            ("smuggled watch namespace", Box::new(|m| m.watches = vec![SelectorView { namespaces: vec!["tenant-a/secrets?x="], ..SelectorView::of(CM) }]), Some("the watched kind v1/ConfigMap: namespace \"tenant-a/secrets?x=\" is not a valid namespace")),
            ("smuggled primary namespace", Box::new(|m| m.primary.namespaces = vec!["a/../b"]), Some("the primary kind v1/ConfigMap: namespace")),
            ("smuggled version", Box::new(|m| m.reads = vec![SelectorView::of(KindRef { group: "", version: "v1/namespaces/wasmloop-system/secrets/registry-creds", kind: "Secret" })]), Some("the read kind: version \"v1/namespaces/wasmloop-system/secrets/registry-creds\" is not a valid API version")),
            ("smuggled group", Box::new(|m| m.owns = vec![KindRef { group: "apps/v1/x?", version: "v1", kind: "Deployment" }]), Some("the owned kind: group")),
            ("smuggled kind", Box::new(|m| m.primary.kind = KindRef { group: "", version: "v1", kind: "ConfigMap/x" }), Some("the primary kind: kind")),
            ("undeclared metadata-only kind that is not a kind", Box::new(|m| m.metadata_only = vec![KindRef { group: "", version: "v1", kind: "a b" }]), Some("the metadata-only kind: kind")),
            ("zero setting", Box::new(|m| m.settings.deadline_ms = Some(0)), Some("setting deadline-ms is 0")),
            ("namespace twice", Box::new(|m| m.primary.namespaces = vec!["a", "a"]), Some("lists namespace a twice")),
            ("bad field selector", Box::new(|m| m.primary.field_selector = Some("name")), Some("primary v1/ConfigMap: field selector term \"name\" has no operator")),
            ("bad annotation key", Box::new(|m| m.primary.annotations = vec![("a b", None)]), Some("annotation filter key \"a b\" is not a qualified name")),
            ("changing field of a finalized primary", Box::new(|m| { m.primary.field_selector = Some("status.phase=Running"); m.finalizer = Some("example.com/x"); }), Some("selects on fields that change")),
            ("changing field of a primary delivered deleted", Box::new(|m| { m.primary.field_selector = Some("type=x"); m.deliver_deleted = true; }), Some("selects on fields that change")),
            ("name field of a finalized primary", Box::new(|m| { m.primary.field_selector = Some("metadata.name=a"); m.finalizer = Some("example.com/x"); }), None),
            ("index on an undeclared kind", Box::new(|m| m.indexes = vec![IndexView { name: "by-cm", kind: KindRef { group: "apps", version: "v1", kind: "Deployment" }, fields: vec!["spec.x"] }]), Some("index by-cm is on apps/v1/Deployment, which the manifest does not declare")),
            ("index without paths", Box::new(|m| m.indexes = vec![IndexView { name: "x", kind: CM, fields: vec![] }]), Some("index x names 0 field paths")),
            ("index with a bad path", Box::new(|m| m.indexes = vec![IndexView { name: "x", kind: CM, fields: vec!["data[0]"] }]), Some("index x: field path \"data[0]\"")),
            ("index with a bad name", Box::new(|m| m.indexes = vec![IndexView { name: "By", kind: CM, fields: vec!["data.x"] }]), Some("index name \"By\" is not a DNS label")),
            ("index twice", Box::new(|m| m.indexes = vec![IndexView { name: "x", kind: CM, fields: vec!["data.x"] }; 2]), Some("index x is declared twice")),
            ("index of a metadata-only kind outside metadata", Box::new(|m| { m.reads = vec![SelectorView::of(POD_KIND)]; m.metadata_only = vec![POD_KIND]; m.indexes = vec![IndexView { name: "x", kind: POD_KIND, fields: vec!["spec.nodeName"] }]; }), Some("which is metadata-only")),
            ("index of a metadata-only kind in metadata", Box::new(|m| { m.reads = vec![SelectorView::of(POD_KIND)]; m.metadata_only = vec![POD_KIND]; m.indexes = vec![IndexView { name: "x", kind: POD_KIND, fields: vec!["metadata.name"] }]; }), None),
        ];
        for (case, change, expected) in cases {
            let mut m = base();
            change(&mut m);
            match (validate(&m), expected) {
                (Ok(()), None) => {}
                (Err(got), Some(part)) => assert!(got.contains(part), "{case}: {got}"),
                (got, expected) => panic!("{case}: got {got:?}, expected {expected:?}"),
            }
        }
    }
}
