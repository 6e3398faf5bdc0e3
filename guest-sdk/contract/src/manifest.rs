//! The rules a plugin's manifest is held to, for the host when it loads a component and for
//! the SDK's `TestCase` before it runs a plugin's tests: one function, one set of sentences.
//!
//! Both sides hold their own manifest types (the host's come from the WIT bindings, the SDK's
//! are its builder); each lends a [`ManifestView`] of borrowed fields to [`validate`].
//!
//! ```
//! use wasmloop_contract::manifest::{KindRef, ManifestView, SelectorView, validate};
//! let configmap = KindRef { group: "", version: "v1", kind: "ConfigMap" };
//! let mut view = ManifestView::new("mirror", SelectorView { kind: configmap, namespace: None, label_selector: None });
//! assert_eq!(validate(&view), Ok(()));
//! view.finalizer = Some("cleanup");
//! assert!(validate(&view).unwrap_err().contains("must look like `example.com/name`"));
//! ```

use std::fmt;

use crate::cache::Visible;
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

/// A kind with a namespace and a label selector (the primary, a watch).
#[derive(Debug, Clone, Copy)]
pub struct SelectorView<'a> {
    /// The kind.
    pub kind: KindRef<'a>,
    /// Its namespace; none for every namespace.
    pub namespace: Option<&'a str>,
    /// Its label selector, as text.
    pub label_selector: Option<&'a str>,
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
    pub reads: Vec<KindRef<'a>>,
    /// Metadata-only kinds.
    pub metadata_only: Vec<KindRef<'a>>,
    /// Write grants.
    pub writes: Vec<GrantView<'a>>,
    /// Fields kept on cached objects, by kind.
    pub keeps: Vec<KeepView<'a>>,
    /// The finalizer.
    pub finalizer: Option<&'a str>,
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
            finalizer: None,
            settings: Settings::default(),
        }
    }
}

impl ManifestView<'_> {
    /// Which objects of `kind` the plugin's caches hold: the rule of [`crate::cache::Visible`].
    /// Whole for the primary, owned and read kinds, and for a kind with a watch of every
    /// namespace that selects everything; otherwise what its watches select, each in its
    /// namespace. A selector that does not parse selects nothing here; [`validate`] refuses it
    /// before any cache is built.
    ///
    /// ```
    /// use wasmloop_contract::cache::Visible;
    /// use wasmloop_contract::manifest::{KindRef, ManifestView, SelectorView};
    /// let (cm, pod) = (KindRef { group: "", version: "v1", kind: "ConfigMap" }, KindRef { group: "", version: "v1", kind: "Pod" });
    /// let mut view = ManifestView::new("p", SelectorView { kind: cm, namespace: None, label_selector: Some("a=b") });
    /// view.watches.push(SelectorView { kind: pod, namespace: None, label_selector: Some("app=web") });
    /// assert_eq!(view.visible(&cm), Visible::All, "the primary is held whole, selector or not");
    /// assert_eq!(view.visible(&pod), Visible::Selected(vec![(None, "app=web".parse().unwrap())]));
    /// ```
    pub fn visible(&self, kind: &KindRef<'_>) -> Visible {
        let whole = self.primary.kind == *kind || self.owns.contains(kind) || self.reads.contains(kind);
        let mut watches = self.watches.iter().filter(|w| w.kind == *kind).peekable();
        if whole || watches.peek().is_none() {
            return Visible::All;
        }
        let mut selections = Vec::new();
        for watch in watches {
            let selector = match watch.label_selector.map(str::parse::<Selector>) {
                None => Selector::default(),
                Some(Ok(selector)) => selector,
                Some(Err(_)) => continue,
            };
            if selector.0.is_empty() && watch.namespace.is_none() {
                return Visible::All;
            }
            selections.push((watch.namespace.map(str::to_owned), selector));
        }
        Visible::Selected(selections)
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
    m.owns.iter().try_for_each(|k| check_kind(k, "owned"))?;
    m.watches.iter().try_for_each(|w| check_selector(w, "watched"))?;
    m.reads.iter().try_for_each(|k| check_kind(k, "read"))?;
    m.writes.iter().try_for_each(check_grant)?;
    m.metadata_only.iter().try_for_each(|k| check_kind(k, "metadata-only"))?;
    m.keeps.iter().try_for_each(|k| check_kind(&k.kind, "kept"))?;
    let declared =
        |k: &KindRef<'_>| m.owns.contains(k) || m.reads.contains(k) || m.watches.iter().any(|w| w.kind == *k);
    if let Some(k) = m.metadata_only.iter().find(|k| !declared(k)) {
        return Err(format!(
            "metadata-only kind {k} is not under owns, watches or reads; declare how the plugin sees it there too"
        ));
    }
    check_keeps(m)?;
    if let Some(f) = m.finalizer {
        check_finalizer(f)?;
    }
    check_settings(&m.settings)
}

fn check_keeps(m: &ManifestView<'_>) -> Result<(), String> {
    for (i, keep) in m.keeps.iter().enumerate() {
        let k = &keep.kind;
        let declared =
            m.primary.kind == *k || m.owns.contains(k) || m.reads.contains(k) || m.watches.iter().any(|w| w.kind == *k);
        if !declared {
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

fn check_selector(s: &SelectorView<'_>, role: &str) -> Result<(), String> {
    check_kind(&s.kind, role)?;
    if let Some(ns) = s.namespace {
        validate::namespace(ns).map_err(|e| format!("the {role} kind {}: {e}", s.kind))?;
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

    fn base() -> ManifestView<'static> {
        ManifestView::new("p", SelectorView { kind: CM, namespace: None, label_selector: None })
    }

    #[test]
    fn a_kind_is_held_whole_unless_only_selected_watches_declare_it() {
        const POD: KindRef<'static> = KindRef { group: "", version: "v1", kind: "Pod" };
        let watch = |label_selector| SelectorView { kind: POD, namespace: None, label_selector };
        let watch_in = |ns, label_selector| SelectorView { kind: POD, namespace: Some(ns), label_selector };
        let selected = |pairs: &[(Option<&str>, &str)]| {
            Visible::Selected(pairs.iter().map(|(ns, t)| (ns.map(str::to_owned), t.parse().unwrap())).collect())
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
            ("also read", Box::new(move |m| { m.watches = vec![watch(Some("app=web"))]; m.reads = vec![POD]; }), Visible::All),
            ("the primary, selector and all", Box::new(move |m| { m.primary = watch(Some("app=web")); m.watches = vec![watch(Some("app=web"))]; }), Visible::All),
            ("a selector that does not parse selects nothing", Box::new(move |m| m.watches = vec![watch(Some("a in ("))]), selected(&[])),
        ];
        for (name, change, expected) in cases {
            let mut m = base();
            change(&mut m);
            assert_eq!(m.visible(&POD), expected, "{name}");
        }
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
            ("watch selector the server refuses", Box::new(|m| m.watches = vec![SelectorView { kind: CM, namespace: None, label_selector: Some("app=a&b") }]), Some("watched v1/ConfigMap: label selector app=a&b: \"a&b\" is not a label value")),
            ("grant without verbs", Box::new(move |m| m.writes = vec![grant(ScopeView::Any, false)]), Some("names no verb")),
            ("too many namespaces", Box::new(move |m| m.writes = vec![grant(ScopeView::Namespaces(many), true)]), Some("lists 65 namespaces")),
            ("no namespaces", Box::new(move |m| m.writes = vec![grant(ScopeView::Namespaces(&[]), true)]), Some("lists 0 namespaces")),
            ("invalid namespace", Box::new(move |m| m.writes = vec![grant(ScopeView::Namespaces(bad_ns), true)]), Some("the write grant on v1/ConfigMap:")),
            ("undeclared metadata-only", Box::new(|m| m.metadata_only = vec![CM]), Some("metadata-only kind v1/ConfigMap is not under")),
            ("declared metadata-only", Box::new(|m| { m.reads = vec![CM]; m.metadata_only = vec![CM]; }), None),
            ("bad finalizer", Box::new(|m| m.finalizer = Some("cleanup")), Some("must look like `example.com/name`")),
            ("good finalizer", Box::new(|m| m.finalizer = Some("example.com/cleanup")), None),
            ("smuggled watch namespace", Box::new(|m| m.watches = vec![SelectorView { kind: CM, namespace: Some("tenant-a/secrets?x="), label_selector: None }]), Some("the watched kind v1/ConfigMap: namespace \"tenant-a/secrets?x=\" is not a valid namespace")),
            ("smuggled primary namespace", Box::new(|m| m.primary.namespace = Some("a/../b")), Some("the primary kind v1/ConfigMap: namespace")),
            ("smuggled version", Box::new(|m| m.reads = vec![KindRef { group: "", version: "v1/namespaces/wasmloop-system/secrets/registry-creds", kind: "Secret" }]), Some("the read kind: version \"v1/namespaces/wasmloop-system/secrets/registry-creds\" is not a valid API version")),
            ("smuggled group", Box::new(|m| m.owns = vec![KindRef { group: "apps/v1/x?", version: "v1", kind: "Deployment" }]), Some("the owned kind: group")),
            ("smuggled kind", Box::new(|m| m.primary.kind = KindRef { group: "", version: "v1", kind: "ConfigMap/x" }), Some("the primary kind: kind")),
            ("undeclared metadata-only kind that is not a kind", Box::new(|m| m.metadata_only = vec![KindRef { group: "", version: "v1", kind: "a b" }]), Some("the metadata-only kind: kind")),
            ("zero setting", Box::new(|m| m.settings.deadline_ms = Some(0)), Some("setting deadline-ms is 0")),
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
