//! The contract's records as JSON: the shapes `wasmloop:plugin`'s WIT gives them, field names
//! in kebab-case, so an SDK sends what its glue would hand the host.

use serde::Deserialize;
use serde_json::Value;
use wasmloop_contract::action::PatchKind;
use wasmloop_contract::cache::Kept;
use wasmloop_contract::manifest::{
    GrantView, IndexView, KeepView, KindRef, ManifestView, ScopeView, SelectorView, Settings,
};
use wasmloop_contract::validate;

#[derive(Deserialize)]
pub(crate) struct Gvk {
    group: String,
    version: String,
    kind: String,
}

impl Gvk {
    fn view(&self) -> KindRef<'_> {
        KindRef { group: &self.group, version: &self.version, kind: &self.kind }
    }
}

#[derive(Deserialize)]
pub(crate) struct AnnotationMatch {
    key: String,
    #[serde(default)]
    value: Option<String>,
}

/// A selector in 0.3's shape; 0.2's single `namespace` is read too, for SDKs built before.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct KindSelector {
    kind: Gvk,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    label_selector: Option<String>,
    #[serde(default)]
    field_selector: Option<String>,
    #[serde(default)]
    annotations: Vec<AnnotationMatch>,
    #[serde(default)]
    generation_changed: bool,
}

impl KindSelector {
    fn view(&self) -> SelectorView<'_> {
        SelectorView {
            kind: self.kind.view(),
            namespaces: self.namespaces.iter().chain(&self.namespace).map(String::as_str).collect(),
            label_selector: self.label_selector.as_deref(),
            field_selector: self.field_selector.as_deref(),
            annotations: self.annotations.iter().map(|a| (a.key.as_str(), a.value.as_deref())).collect(),
            generation_changed: self.generation_changed,
        }
    }
}

/// A read: 0.3's selector, or 0.2's kind alone.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Read {
    Selected(KindSelector),
    Kind(Gvk),
}

impl Read {
    fn view(&self) -> SelectorView<'_> {
        match self {
            Read::Selected(s) => s.view(),
            Read::Kind(k) => SelectorView::of(k.view()),
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Index {
    name: String,
    kind: Gvk,
    #[serde(default)]
    fields: Vec<String>,
}

impl Index {
    fn view(&self) -> IndexView<'_> {
        IndexView { name: &self.name, kind: self.kind.view(), fields: self.fields.iter().map(String::as_str).collect() }
    }
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum Verb {
    Apply,
    Patch,
    Delete,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Scope {
    PrimaryNamespace,
    Namespaces(Vec<String>),
    Any,
}

#[derive(Deserialize)]
pub(crate) struct Grant {
    kind: Gvk,
    verbs: Vec<Verb>,
    scope: Scope,
}

impl Grant {
    fn view(&self) -> GrantView<'_> {
        GrantView {
            kind: self.kind.view(),
            apply: self.verbs.contains(&Verb::Apply),
            patch: self.verbs.contains(&Verb::Patch),
            delete: self.verbs.contains(&Verb::Delete),
            scope: match &self.scope {
                Scope::PrimaryNamespace => ScopeView::PrimaryNamespace,
                Scope::Namespaces(list) => ScopeView::Namespaces(list),
                Scope::Any => ScopeView::Any,
            },
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Keep {
    kind: Gvk,
    #[serde(default)]
    managed_fields: bool,
    #[serde(default)]
    last_applied: bool,
}

/// Numbers as JSON carries them: the range of the WIT's integer is checked when the manifest is
/// read, as the glue would.
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case", default)]
pub(crate) struct WireSettings {
    max_concurrent_reconciles: Option<Value>,
    deadline_ms: Option<Value>,
    memory_limit_bytes: Option<Value>,
    response_limit_bytes: Option<Value>,
    resync_seconds: Option<Value>,
}

/// `value` as the WIT's integer type of at most `max`, or why it cannot cross.
fn within(name: &str, value: Option<&Value>, max: u64) -> Result<Option<u64>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|v| v <= max) => Ok(n.as_u64()),
        Some(other) => Err(format!(
            "setting {name} is {}, which the contract's type cannot carry; give an integer from 1 to {max}, or leave it unset for the host default",
            validate::cut(other.to_string(), validate::MAX_QUOTED)
        )),
    }
}

impl WireSettings {
    fn view(&self) -> Result<Settings, String> {
        let u32_of =
            |name, value| within(name, value, u32::MAX.into()).map(|v| v.map(|v| u32::try_from(v).unwrap_or(u32::MAX)));
        Ok(Settings {
            max_concurrent_reconciles: u32_of("max-concurrent-reconciles", self.max_concurrent_reconciles.as_ref())?,
            deadline_ms: u32_of("deadline-ms", self.deadline_ms.as_ref())?,
            memory_limit_bytes: within("memory-limit-bytes", self.memory_limit_bytes.as_ref(), u64::MAX)?,
            response_limit_bytes: within("response-limit-bytes", self.response_limit_bytes.as_ref(), u64::MAX)?,
            resync_seconds: u32_of("resync-seconds", self.resync_seconds.as_ref())?,
        })
    }
}

/// The WIT's `plugin-manifest`, with the `keep-fields` of contract 0.2.1. Fields the rules do
/// not read (`version`, `prune`, the deliveries) may be present.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct Manifest {
    name: String,
    primary: KindSelector,
    #[serde(default)]
    owns: Vec<Gvk>,
    #[serde(default)]
    watches: Vec<KindSelector>,
    #[serde(default)]
    reads: Vec<Read>,
    #[serde(default)]
    metadata_only: Vec<Gvk>,
    #[serde(default)]
    writes: Vec<Grant>,
    #[serde(default)]
    keep_fields: Vec<Keep>,
    #[serde(default)]
    indexes: Vec<Index>,
    #[serde(default)]
    finalizer: Option<String>,
    #[serde(default)]
    deliver_deleted: bool,
    #[serde(default)]
    settings: WireSettings,
}

impl Manifest {
    pub(crate) fn view(&self) -> Result<ManifestView<'_>, String> {
        let mut view = ManifestView::new(&self.name, self.primary.view());
        view.owns = self.owns.iter().map(Gvk::view).collect();
        view.watches = self.watches.iter().map(KindSelector::view).collect();
        view.reads = self.reads.iter().map(Read::view).collect();
        view.metadata_only = self.metadata_only.iter().map(Gvk::view).collect();
        view.writes = self.writes.iter().map(Grant::view).collect();
        view.keeps = self
            .keep_fields
            .iter()
            .map(|k| KeepView {
                kind: k.kind.view(),
                kept: Kept { managed_fields: k.managed_fields, last_applied: k.last_applied },
            })
            .collect();
        view.indexes = self.indexes.iter().map(Index::view).collect();
        view.finalizer = self.finalizer.as_deref();
        view.deliver_deleted = self.deliver_deleted;
        view.settings = self.settings.view()?;
        Ok(view)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct ObjectRef {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) namespace: Option<String>,
    #[serde(default)]
    pub(crate) uid: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum WirePatchKind {
    Merge,
    Json,
    Strategic,
}

impl From<WirePatchKind> for PatchKind {
    fn from(kind: WirePatchKind) -> PatchKind {
        match kind {
            WirePatchKind::Merge => PatchKind::Merge,
            WirePatchKind::Json => PatchKind::Json,
            WirePatchKind::Strategic => PatchKind::Strategic,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct Patch {
    pub(crate) target: ObjectRef,
    pub(crate) kind: WirePatchKind,
    pub(crate) patch: String,
}

#[derive(Deserialize)]
pub(crate) struct Event {
    pub(crate) reason: String,
    #[serde(default)]
    pub(crate) action: Option<String>,
}

/// 0.3's `apply-object`; 0.2's apply was the object's text alone.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum ApplyObject {
    Record {
        object: String,
        #[serde(default)]
        uid: Option<String>,
    },
    Text(String),
}

impl ApplyObject {
    pub(crate) fn object(&self) -> &str {
        match self {
            ApplyObject::Record { object, .. } | ApplyObject::Text(object) => object,
        }
    }

    pub(crate) fn uid(&self) -> Option<&str> {
        match self {
            ApplyObject::Record { uid, .. } => uid.as_deref(),
            ApplyObject::Text(_) => None,
        }
    }
}

/// The WIT's `action`: objects and documents are JSON text inside, as they cross.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Action {
    Apply(ApplyObject),
    Delete(ObjectRef),
    Patch(Patch),
    Status(String),
    Event(Event),
    Prune,
}
