//! The host's view of a plugin's manifest: validated once at load.

use serde::Serialize;

use crate::PluginId;
use crate::bindings::{Gvk, parse_gvk, wit};
use wasmloop_contract::annotations::AnnotationMatch;
use wasmloop_contract::cache::{Kept, Visible};
use wasmloop_contract::fields::{FieldPath, FieldSelector};
use wasmloop_contract::manifest as contract;
use wasmloop_contract::names::{FieldManager, Invalid, LabelSelector, Namespace};

/// Which objects of a kind a plugin wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KindSelector {
    /// The kind.
    #[serde(serialize_with = "gvk_text")]
    pub kind: Gvk,
    /// Only these namespaces; empty for every namespace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<Namespace>,
    /// A label selector, as the API server accepts it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// A field selector, which the API server applies to the watch.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "text_of")]
    pub field_selector: Option<FieldSelector>,
    /// Annotation filters, which the host applies as objects arrive.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "texts_of")]
    pub annotations: Vec<AnnotationMatch>,
    /// Only generation changes call the plugin.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub generation_changed: bool,
}

impl KindSelector {
    /// Every object of `kind`.
    pub fn of(kind: Gvk) -> KindSelector {
        KindSelector {
            kind,
            namespaces: Vec::new(),
            label_selector: None,
            field_selector: None,
            annotations: Vec::new(),
            generation_changed: false,
        }
    }

    /// True when it narrows by something besides the kind.
    pub fn narrows(&self) -> bool {
        !self.namespaces.is_empty()
            || self.label_selector.as_ref().is_some_and(|s| !s.as_str().is_empty())
            || self.field_selector.is_some()
            || !self.annotations.is_empty()
    }
}

/// An index the host keeps over a cached kind (contract 0.3): each object is filed under the
/// values its field paths reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Index {
    /// Its name, a DNS label.
    pub name: String,
    /// The kind indexed.
    #[serde(serialize_with = "gvk_text")]
    pub kind: Gvk,
    /// The paths whose values are an object's keys.
    #[serde(serialize_with = "texts_of")]
    pub fields: Vec<FieldPath>,
}

/// Settings a plugin proposes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Concurrent reconciles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_reconciles: Option<u32>,
    /// Call deadline in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u32>,
    /// Memory ceiling in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// Response cap in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_limit_bytes: Option<u64>,
    /// Periodic requeue in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync_seconds: Option<u32>,
}

/// The contract a plugin was built for, which decides what its manifest means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Contract {
    /// `wasmloop:plugin@0.1.x`, served through the adapter: every declared kind is writable,
    /// as 0.1 allowed, and Kubernetes RBAC of the plugin's identity is the only wall.
    #[serde(rename = "0.1")]
    V0_1,
    /// `wasmloop:plugin@0.2.x`, served through the adapter: writes need a grant (`writes`)
    /// unless implied; every apply is forced, and the request carries no triggers.
    #[serde(rename = "0.2")]
    V0_2,
    /// `wasmloop:plugin@0.3.x`: triggers, indexes, predicates, apply options.
    #[serde(rename = "0.3")]
    V0_3,
}

/// Verbs of a write grant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WriteVerbs {
    /// Server-side apply.
    pub apply: bool,
    /// Merge or JSON patch.
    pub patch: bool,
    /// Delete.
    pub delete: bool,
}

/// Where a write grant applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WriteScope {
    /// The primary's namespace (cluster-scoped objects, for a cluster-scoped primary).
    PrimaryNamespace,
    /// These namespaces.
    Namespaces(Vec<Namespace>),
    /// Everywhere, cluster-scoped objects included.
    Any,
}

/// Leave to write a kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteGrant {
    /// The kind.
    #[serde(serialize_with = "gvk_text")]
    pub kind: Gvk,
    /// The verbs.
    pub verbs: WriteVerbs,
    /// Where.
    pub scope: WriteScope,
}

/// Fields of one kind the plugin's cache keeps (contract 0.2.1 `keep-fields`); every other
/// kind's objects reach it without `managedFields` and the last-applied annotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Keep {
    /// The kind.
    #[serde(serialize_with = "gvk_text")]
    pub kind: Gvk,
    /// `metadata.managedFields`.
    #[serde(rename = "managedFields")]
    pub managed_fields: bool,
    /// The `kubectl.kubernetes.io/last-applied-configuration` annotation.
    #[serde(rename = "lastApplied")]
    pub last_applied: bool,
}

impl Keep {
    /// As the shared rules see it.
    pub fn kept(&self) -> Kept {
        Kept { managed_fields: self.managed_fields, last_applied: self.last_applied }
    }
}

/// A validated manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Plugin name (field manager `wasmloop/<name>`).
    pub name: String,
    /// The plugin namespace of the source that offered it (a plugin ConfigMap's), none for
    /// the operator's files: set by the host ([`crate::Plugin::in_realm`]), never by the
    /// guest. Names are unique within a realm, so the two are what the host knows the plugin
    /// by ([`Manifest::id`]).
    #[serde(skip)]
    pub realm: Option<Namespace>,
    /// Plugin version.
    pub version: String,
    /// The primary kind.
    pub primary: KindSelector,
    /// Owned child kinds.
    #[serde(serialize_with = "gvk_list")]
    pub owns: Vec<Gvk>,
    /// Watched related kinds.
    pub watches: Vec<KindSelector>,
    /// Kinds only read.
    pub reads: Vec<KindSelector>,
    /// Kinds served as metadata only.
    #[serde(serialize_with = "gvk_list", skip_serializing_if = "Vec::is_empty")]
    pub metadata_only: Vec<Gvk>,
    /// Write grants beyond the implied ones.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<WriteGrant>,
    /// Indexes over cached kinds (0.3).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<Index>,
    /// Fields kept on cached objects (0.2.1; empty for components that do not export
    /// `cache-options`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keeps: Vec<Keep>,
    /// The contract the plugin was built for.
    pub contract: Contract,
    /// The finalizer held on primaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalizer: Option<String>,
    /// Prune owned children not applied.
    pub prune: bool,
    /// Deliver phase `deleted`.
    pub deliver_deleted: bool,
    /// Deliver `previous`.
    pub deliver_previous: bool,
    /// Proposed settings.
    pub settings: Settings,
}

fn gvk_text<S: serde::Serializer>(g: &Gvk, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(g)
}

fn gvk_list<S: serde::Serializer>(gs: &[Gvk], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(gs.iter().map(ToString::to_string))
}

fn text_of<T: std::fmt::Display, S: serde::Serializer>(t: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.collect_str(t),
        None => s.serialize_none(),
    }
}

fn texts_of<T: std::fmt::Display, S: serde::Serializer>(ts: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ts.iter().map(ToString::to_string))
}

/// A kind the guest declared as `role`, parsed; the error names the role and the rule.
fn kind(g: &wit::Gvk, role: &str) -> Result<Gvk, String> {
    parse_gvk(g).map_err(|e| e.within(format_args!("the {role} kind")).into())
}

fn kinds(gs: &[wit::Gvk], role: &str) -> Result<Vec<Gvk>, String> {
    gs.iter().map(|g| kind(g, role)).collect()
}

fn selector(s: &wit::KindSelector, role: &str) -> Result<KindSelector, String> {
    let kind = kind(&s.kind, role)?;
    let within = |e: Invalid| -> String { e.within(format_args!("the {role} kind {kind}")).into() };
    let namespaces = s.namespaces.iter().map(|ns| Namespace::parse(ns)).collect::<Result<_, _>>().map_err(within)?;
    let label_selector = s.label_selector.as_deref().map(LabelSelector::parse).transpose().map_err(within)?;
    let field_selector = s
        .field_selector
        .as_deref()
        .map(str::parse::<FieldSelector>)
        .transpose()
        .map_err(|e| format!("{role} {kind}: {e}"))?;
    let annotations = s
        .annotations
        .iter()
        .map(|a| AnnotationMatch::new(&a.key, a.value.as_deref()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{role} {kind}: {e}"))?;
    Ok(KindSelector {
        kind,
        namespaces,
        label_selector,
        field_selector,
        annotations,
        generation_changed: s.generation_changed,
    })
}

fn index(i: &wit::Index) -> Result<Index, String> {
    let fields = i.fields.iter().map(|f| f.parse::<FieldPath>()).collect::<Result<_, _>>();
    Ok(Index {
        name: i.name.clone(),
        kind: kind(&i.kind, "indexed")?,
        fields: fields.map_err(|e| format!("index {}: {e}", i.name))?,
    })
}

fn grant(g: &wit::WriteGrant) -> Result<WriteGrant, String> {
    let kind = kind(&g.kind, "written")?;
    let verbs = WriteVerbs {
        apply: g.verbs.contains(wit::WriteVerbs::APPLY),
        patch: g.verbs.contains(wit::WriteVerbs::PATCH),
        delete: g.verbs.contains(wit::WriteVerbs::DELETE),
    };
    let scope = match &g.scope {
        wit::WriteScope::PrimaryNamespace => WriteScope::PrimaryNamespace,
        wit::WriteScope::Any => WriteScope::Any,
        wit::WriteScope::Namespaces(list) => {
            if list.len() > contract::MAX_GRANT_NAMESPACES {
                return Err(format!(
                    "the write grant on {kind} lists {} namespaces; list 1 to {}, or use scope any",
                    list.len(),
                    contract::MAX_GRANT_NAMESPACES
                ));
            }
            let parsed = list.iter().map(|ns| Namespace::parse(ns)).collect::<Result<Vec<_>, _>>();
            WriteScope::Namespaces(
                parsed.map_err(|e| -> String { e.within(format_args!("the write grant on {kind}")).into() })?,
            )
        }
    };
    Ok(WriteGrant { kind, verbs, scope })
}

fn kind_ref(g: &Gvk) -> contract::KindRef<'_> {
    contract::KindRef { group: g.group(), version: g.version(), kind: g.kind() }
}

fn selector_view(s: &KindSelector) -> contract::SelectorView<'_> {
    contract::SelectorView {
        kind: kind_ref(&s.kind),
        namespaces: s.namespaces.iter().map(Namespace::as_str).collect(),
        label_selector: s.label_selector.as_ref().map(LabelSelector::as_str),
        field_selector: s.field_selector.as_ref().map(FieldSelector::as_str),
        annotations: s.annotations.iter().map(|a| (a.key(), a.value())).collect(),
        generation_changed: s.generation_changed,
    }
}

fn wit_kind(g: &wit::Gvk) -> contract::KindRef<'_> {
    contract::KindRef { group: &g.group, version: &g.version, kind: &g.kind }
}

fn wit_selector(s: &wit::KindSelector) -> contract::SelectorView<'_> {
    contract::SelectorView {
        kind: wit_kind(&s.kind),
        namespaces: s.namespaces.iter().map(String::as_str).collect(),
        label_selector: s.label_selector.as_deref(),
        field_selector: s.field_selector.as_deref(),
        annotations: s.annotations.iter().map(|a| (a.key.as_str(), a.value.as_deref())).collect(),
        generation_changed: s.generation_changed,
    }
}

fn wit_index(i: &wit::Index) -> contract::IndexView<'_> {
    contract::IndexView {
        name: &i.name,
        kind: wit_kind(&i.kind),
        fields: i.fields.iter().map(String::as_str).collect(),
    }
}

/// The manifest as the guest returned it, as the shared rules see it: checked whole before any
/// field is parsed, so that the first refusal is the rules' own sentence, the one the SDKs'
/// harnesses give through the rules component.
fn wit_view(m: &wit::PluginManifest) -> contract::ManifestView<'_> {
    let s = &m.settings;
    let mut view = contract::ManifestView::new(&m.name, wit_selector(&m.primary));
    view.owns = m.owns.iter().map(wit_kind).collect();
    view.watches = m.watches.iter().map(wit_selector).collect();
    view.reads = m.reads.iter().map(wit_selector).collect();
    view.metadata_only = m.metadata_only.iter().map(wit_kind).collect();
    view.writes = m.writes.iter().map(wit_grant).collect();
    view.indexes = m.indexes.iter().map(wit_index).collect();
    view.finalizer = m.finalizer.as_deref();
    view.deliver_deleted = m.deliver_deleted;
    view.settings = contract::Settings {
        max_concurrent_reconciles: s.max_concurrent_reconciles,
        deadline_ms: s.deadline_ms,
        memory_limit_bytes: s.memory_limit_bytes,
        response_limit_bytes: s.response_limit_bytes,
        resync_seconds: s.resync_seconds,
    };
    view
}

fn wit_grant(g: &wit::WriteGrant) -> contract::GrantView<'_> {
    contract::GrantView {
        kind: wit_kind(&g.kind),
        apply: g.verbs.contains(wit::WriteVerbs::APPLY),
        patch: g.verbs.contains(wit::WriteVerbs::PATCH),
        delete: g.verbs.contains(wit::WriteVerbs::DELETE),
        scope: match &g.scope {
            wit::WriteScope::PrimaryNamespace => contract::ScopeView::PrimaryNamespace,
            wit::WriteScope::Namespaces(list) => contract::ScopeView::Namespaces(list),
            wit::WriteScope::Any => contract::ScopeView::Any,
        },
    }
}

fn wit_keep(k: &wit::Keep) -> contract::KeepView<'_> {
    let kept = Kept {
        managed_fields: k.fields.contains(wit::KeptFields::MANAGED_FIELDS),
        last_applied: k.fields.contains(wit::KeptFields::LAST_APPLIED),
    };
    contract::KeepView { kind: wit_kind(&k.kind), kept }
}

/// Longest plugin version text kept.
const MAX_VERSION: usize = 128;

impl Manifest {
    /// A 0.3 manifest of plugin `name` that declares `primary` and nothing else, for tools and
    /// tests that build one by hand (a guest's comes from [`crate::Plugin::manifest`]).
    pub fn declaring(name: &str, primary: Gvk) -> Manifest {
        Manifest {
            name: name.to_owned(),
            realm: None,
            version: "1".into(),
            primary: KindSelector::of(primary),
            owns: Vec::new(),
            watches: Vec::new(),
            reads: Vec::new(),
            metadata_only: Vec::new(),
            writes: Vec::new(),
            indexes: Vec::new(),
            keeps: Vec::new(),
            contract: Contract::V0_3,
            finalizer: None,
            prune: false,
            deliver_deleted: false,
            deliver_previous: false,
            settings: Settings::default(),
        }
    }

    /// Validates a manifest as the guest returned it (a 0.1 one comes through the adapter),
    /// with the fields its `keep-fields` export asked to keep (0.2.1; none for a component
    /// that does not export `cache-options`): checked whole first, as the SDKs' harnesses check
    /// it, so the first refusal is the same sentence.
    ///
    /// # Errors
    /// A sentence naming the first invalid field.
    pub(crate) fn from_wit(
        m: wit::PluginManifest,
        keeps: Vec<wit::Keep>,
        contract: Contract,
    ) -> Result<Manifest, String> {
        let mut whole = wit_view(&m);
        whole.keeps = keeps.iter().map(wit_keep).collect();
        contract::validate(&whole)?;
        let manifest = Manifest {
            name: m.name,
            realm: None,
            version: wasmloop_contract::validate::cut(m.version, MAX_VERSION),
            primary: selector(&m.primary, "primary")?,
            owns: kinds(&m.owns, "owned")?,
            watches: m.watches.iter().map(|w| selector(w, "watched")).collect::<Result<_, _>>()?,
            reads: m.reads.iter().map(|r| selector(r, "read")).collect::<Result<_, _>>()?,
            metadata_only: kinds(&m.metadata_only, "metadata-only")?,
            writes: m.writes.iter().map(grant).collect::<Result<_, _>>()?,
            indexes: m.indexes.iter().map(index).collect::<Result<_, _>>()?,
            keeps: Vec::new(),
            contract,
            finalizer: m.finalizer,
            prune: m.prune,
            deliver_deleted: m.deliver_deleted,
            deliver_previous: m.deliver_previous,
            settings: Settings {
                max_concurrent_reconciles: m.settings.max_concurrent_reconciles,
                deadline_ms: m.settings.deadline_ms,
                memory_limit_bytes: m.settings.memory_limit_bytes,
                response_limit_bytes: m.settings.response_limit_bytes,
                resync_seconds: m.settings.resync_seconds,
            },
        };
        manifest.with_keeps(&keeps)
    }

    /// The manifest with the fields its `keep-fields` export asked to keep, parsed.
    fn with_keeps(mut self, keeps: &[wit::Keep]) -> Result<Manifest, String> {
        self.keeps = keeps
            .iter()
            .map(|k| {
                Ok(Keep {
                    kind: kind(&k.kind, "kept")?,
                    managed_fields: k.fields.contains(wit::KeptFields::MANAGED_FIELDS),
                    last_applied: k.fields.contains(wit::KeptFields::LAST_APPLIED),
                })
            })
            .collect::<Result<_, String>>()?;
        contract::validate(&self.view())?;
        Ok(self)
    }

    /// What the plugin keeps of objects of `kind`.
    pub fn kept(&self, kind: &Gvk) -> Kept {
        self.keeps.iter().find(|k| k.kind == *kind).map(Keep::kept).unwrap_or_default()
    }

    /// The manifest as the shared rules see it ([`wasmloop_contract::manifest::validate`]).
    pub fn view(&self) -> contract::ManifestView<'_> {
        let s = &self.settings;
        contract::ManifestView {
            name: &self.name,
            primary: selector_view(&self.primary),
            owns: self.owns.iter().map(kind_ref).collect(),
            watches: self.watches.iter().map(selector_view).collect(),
            reads: self.reads.iter().map(selector_view).collect(),
            metadata_only: self.metadata_only.iter().map(kind_ref).collect(),
            writes: self
                .writes
                .iter()
                .map(|g| contract::GrantView {
                    kind: kind_ref(&g.kind),
                    apply: g.verbs.apply,
                    patch: g.verbs.patch,
                    delete: g.verbs.delete,
                    scope: match &g.scope {
                        WriteScope::PrimaryNamespace => contract::ScopeView::PrimaryNamespace,
                        WriteScope::Namespaces(list) => contract::ScopeView::Parsed(list),
                        WriteScope::Any => contract::ScopeView::Any,
                    },
                })
                .collect(),
            keeps: self.keeps.iter().map(|k| contract::KeepView { kind: kind_ref(&k.kind), kept: k.kept() }).collect(),
            indexes: self
                .indexes
                .iter()
                .map(|i| contract::IndexView {
                    name: &i.name,
                    kind: kind_ref(&i.kind),
                    fields: i.fields.iter().map(FieldPath::as_str).collect(),
                })
                .collect(),
            finalizer: self.finalizer.as_deref(),
            deliver_deleted: self.deliver_deleted,
            settings: contract::Settings {
                max_concurrent_reconciles: s.max_concurrent_reconciles,
                deadline_ms: s.deadline_ms,
                memory_limit_bytes: s.memory_limit_bytes,
                response_limit_bytes: s.response_limit_bytes,
                resync_seconds: s.resync_seconds,
            },
        }
    }

    /// Every kind the plugin may read or act on.
    pub fn declared_kinds(&self) -> impl Iterator<Item = &Gvk> {
        std::iter::once(&self.primary.kind)
            .chain(&self.owns)
            .chain(self.watches.iter().map(|w| &w.kind))
            .chain(self.reads.iter().map(|r| &r.kind))
    }

    /// True when the plugin declared `kind`.
    pub fn declares(&self, kind: &Gvk) -> bool {
        self.declared_kinds().any(|k| k == kind)
    }

    /// True when the plugin names this `apiVersion` and `kind` anywhere in its manifest, so
    /// that a write of it is a question of grants ([`crate::capability::permits`]), not of a
    /// kind it never declared. Allocates nothing: it runs for every action of every reconcile.
    pub fn writes_api(&self, api_version: &str, kind: &str) -> bool {
        let is = |k: &Gvk| k.matches(api_version, kind);
        self.declared_kinds().any(is) || self.writes.iter().any(|g| is(&g.kind))
    }

    /// Which objects of `kind` the plugin's caches hold: whole, or what its declarations of
    /// the kind select (the rule of [`wasmloop_contract::cache::Visible`]).
    pub fn visible(&self, kind: &Gvk) -> Visible {
        self.view().visible(&kind_ref(kind))
    }

    /// The index named `name` on `kind`, if the manifest declares it.
    pub fn index(&self, kind: &Gvk, name: &str) -> Option<&Index> {
        self.indexes.iter().find(|i| i.kind == *kind && i.name == name)
    }

    /// True when the plugin is served objects of `kind` as metadata only.
    pub fn is_metadata_only(&self, kind: &Gvk) -> bool {
        self.metadata_only.contains(kind)
    }

    /// What the host knows the plugin by, in metrics, logs, quarantine and sharding: its
    /// name for one of the operator's files, `NAMESPACE/NAME` for one from a plugin ConfigMap
    /// in `NAMESPACE`. The name and namespace were parsed, so the id is too.
    pub fn id(&self) -> PluginId {
        PluginId::new(self.realm.clone(), &self.name).expect("a manifest's name was checked at load")
    }

    /// The field manager of the plugin's writes: by name alone, as the plugin's author
    /// chose it (two realms' plugins of one name write apart, each where its own
    /// ServiceAccount may).
    pub fn field_manager(&self) -> FieldManager {
        FieldManager::parse(&format!("wasmloop/{}", self.name)).expect("a manifest's name was checked at load")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selecting(kind: wit::Gvk) -> wit::KindSelector {
        wit::KindSelector {
            kind,
            namespaces: Vec::new(),
            label_selector: None,
            field_selector: None,
            annotations: Vec::new(),
            generation_changed: false,
        }
    }

    fn wit_manifest() -> wit::PluginManifest {
        let configmap = wit::Gvk { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() };
        wit::PluginManifest {
            name: "p".into(),
            version: "1".into(),
            primary: selecting(configmap),
            owns: Vec::new(),
            watches: Vec::new(),
            reads: Vec::new(),
            metadata_only: Vec::new(),
            writes: Vec::new(),
            indexes: Vec::new(),
            finalizer: None,
            prune: false,
            deliver_deleted: false,
            deliver_previous: false,
            settings: crate::bindings::wasmloop::plugin::types::Settings {
                max_concurrent_reconciles: None,
                deadline_ms: None,
                memory_limit_bytes: None,
                response_limit_bytes: None,
                resync_seconds: None,
            },
        }
    }

    #[test]
    fn a_plugin_is_known_by_its_name_in_the_operator_s_files_and_by_namespace_and_name_from_a_configmap() {
        let mut manifest = Manifest::from_wit(wit_manifest(), Vec::new(), Contract::V0_3).unwrap();
        assert_eq!(manifest.id(), "p");
        manifest.realm = Some(Namespace::parse("team-b").unwrap());
        assert_eq!((manifest.id().as_str(), manifest.field_manager().as_str()), ("team-b/p", "wasmloop/p"));
    }

    #[test]
    fn every_name_a_guest_declares_is_parsed_at_load_and_the_error_names_the_field_and_rule() {
        type Change = fn(&mut wit::PluginManifest);
        let cases: [(&str, Change, &str); 5] = [
            (
                "primary namespace",
                |m| m.primary.namespaces = vec!["a/../b".into()],
                "the primary kind v1/ConfigMap: namespace \"a/../b\" is not a valid namespace",
            ),
            (
                "watch namespace",
                |m| {
                    m.watches.push(wit::KindSelector {
                        namespaces: vec!["tenant-a/secrets?x=".into()],
                        ..selecting(m.primary.kind.clone())
                    })
                },
                "the watched kind v1/ConfigMap: namespace \"tenant-a/secrets?x=\"",
            ),
            (
                "read version",
                |m| {
                    m.reads.push(selecting(wit::Gvk {
                        group: String::new(),
                        version: "v1/namespaces/x/secrets/y".into(),
                        kind: "Secret".into(),
                    }))
                },
                "the read kind: version \"v1/namespaces/x/secrets/y\" is not a valid API version",
            ),
            (
                "owned group",
                |m| m.owns.push(wit::Gvk { group: "apps?x=".into(), version: "v1".into(), kind: "Deployment".into() }),
                "the owned kind: group \"apps?x=\"",
            ),
            (
                "grant namespace",
                |m| {
                    m.writes.push(wit::WriteGrant {
                        kind: m.primary.kind.clone(),
                        verbs: wit::WriteVerbs::PATCH,
                        scope: wit::WriteScope::Namespaces(vec!["kube-system/x".into()]),
                    })
                },
                "the write grant on v1/ConfigMap: namespace \"kube-system/x\"",
            ),
        ];
        for (case, change, expected) in cases {
            let mut m = wit_manifest();
            change(&mut m);
            let error = Manifest::from_wit(m, Vec::new(), Contract::V0_3).expect_err(case);
            assert!(error.contains(expected), "{case}: {error}");
        }
        assert!(Manifest::from_wit(wit_manifest(), Vec::new(), Contract::V0_3).is_ok());
    }
}
