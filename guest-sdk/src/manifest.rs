//! What a plugin declares about itself.

pub use wasmloop_contract::cache::Kept;
use wasmloop_contract::manifest as contract;

use crate::kind::{Gvk, Kind};

/// Which objects of a kind a plugin wants to see: every filter given must hold, and the host's
/// cache keeps only what they select.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::Secret;
/// use wasmloop_sdk::KindSelector;
///
/// // Deployments that opted in, called only when their spec changes.
/// let opted = KindSelector::of::<Deployment>().annotated("roll.example.com/on-change").generation_changed();
/// // Only the TLS Secrets of two namespaces: the API server sends nothing else.
/// let tls = KindSelector::of::<Secret>().fields("type=kubernetes.io/tls").namespaces(["web", "api"]);
/// # let _ = (opted, tls);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindSelector {
    /// The kind.
    pub kind: Gvk,
    /// Only these namespaces; empty means all.
    pub namespaces: Vec<String>,
    /// A label selector in Kubernetes syntax; none selects all.
    pub label_selector: Option<String>,
    /// A field selector in Kubernetes syntax, applied by the API server; none selects all.
    pub field_selector: Option<String>,
    /// Annotations every selected object carries: a key, and the value asked for (none for
    /// presence).
    pub annotations: Vec<(String, Option<String>)>,
    /// Only changes of `metadata.generation` call the plugin.
    pub generation_changed: bool,
}

impl KindSelector {
    /// Every object of kind `K`.
    pub fn of<K: Kind>() -> Self {
        KindSelector::of_gvk(K::gvk())
    }

    /// Every object of `kind`.
    pub fn of_gvk(kind: Gvk) -> Self {
        KindSelector {
            kind,
            namespaces: Vec::new(),
            label_selector: None,
            field_selector: None,
            annotations: Vec::new(),
            generation_changed: false,
        }
    }

    /// Only objects matching `selector` (`app=web,tier!=cache`).
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects in `namespace` (one more, if called again).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespaces.push(namespace.into());
        self
    }

    /// Only objects in these namespaces.
    #[must_use]
    pub fn namespaces<S: Into<String>>(mut self, namespaces: impl IntoIterator<Item = S>) -> Self {
        self.namespaces.extend(namespaces.into_iter().map(Into::into));
        self
    }

    /// Only objects the field selector selects (`metadata.name=db`, `type=kubernetes.io/tls`):
    /// the API server applies it, so nothing else reaches the host. Which fields a kind
    /// supports is the API server's list; `metadata.name` and `metadata.namespace` always
    /// work.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Only objects carrying the annotation `key`, whatever its value.
    #[must_use]
    pub fn annotated(mut self, key: impl Into<String>) -> Self {
        self.annotations.push((key.into(), None));
        self
    }

    /// Only objects whose annotation `key` is exactly `value`.
    #[must_use]
    pub fn annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.push((key.into(), Some(value.into())));
        self
    }

    /// Calls the plugin only when `metadata.generation` changed (controller-runtime's
    /// `GenerationChangedPredicate`): a status-only or metadata-only update calls nothing.
    /// Creation, deletion and entering the selection always call; kinds without a generation
    /// are not filtered.
    #[must_use]
    pub fn generation_changed(mut self) -> Self {
        self.generation_changed = true;
        self
    }
}

/// An index the host keeps over a cached kind: each object filed under the values its field
/// paths reach, for [`crate::cache::list_by_index`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// The index's name (a DNS label).
    pub name: String,
    /// The kind indexed.
    pub kind: Gvk,
    /// Dotted field paths from the object's root, `[*]` after a list's name for each item.
    pub fields: Vec<String>,
}

pub use wasmloop_contract::manifest::Settings;

/// Where a write grant applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteScope {
    /// The primary's namespace (cluster-scoped objects, for a cluster-scoped primary).
    PrimaryNamespace,
    /// These namespaces.
    Namespaces(Vec<String>),
    /// Every namespace, and cluster-scoped objects.
    Any,
}

/// Leave to write a kind beyond what is implied: `status` and `event` on the primary, and
/// `apply` and `delete` of owned kinds in the primary's namespace, need no grant.
///
/// ```
/// use k8s_openapi::api::core::v1::{ConfigMap, Node};
/// use wasmloop_sdk::manifest::Grant;
///
/// let copies = Grant::of::<ConfigMap>().apply().delete().anywhere();
/// let annotate = Grant::of::<Node>().patch();
/// let quotas = Grant::of::<ConfigMap>().patch().in_namespaces(["team-a", "team-b"]);
/// # let _ = (copies, annotate, quotas);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The kind.
    pub kind: Gvk,
    /// Server-side apply.
    pub apply: bool,
    /// Merge and JSON patch.
    pub patch: bool,
    /// Delete.
    pub delete: bool,
    /// Where; the primary's namespace unless set.
    pub scope: WriteScope,
}

impl Grant {
    /// A grant on kind `K`, in the primary's namespace, with no verb yet.
    pub fn of<K: Kind>() -> Grant {
        Grant { kind: K::gvk(), apply: false, patch: false, delete: false, scope: WriteScope::PrimaryNamespace }
    }

    /// Allows server-side apply.
    #[must_use]
    pub fn apply(mut self) -> Grant {
        self.apply = true;
        self
    }

    /// Allows patches.
    #[must_use]
    pub fn patch(mut self) -> Grant {
        self.patch = true;
        self
    }

    /// Allows deletes.
    #[must_use]
    pub fn delete(mut self) -> Grant {
        self.delete = true;
        self
    }

    /// In these namespaces instead of the primary's.
    #[must_use]
    pub fn in_namespaces<S: Into<String>>(mut self, namespaces: impl IntoIterator<Item = S>) -> Grant {
        self.scope = WriteScope::Namespaces(namespaces.into_iter().map(Into::into).collect());
        self
    }

    /// In every namespace, and cluster-scoped objects.
    #[must_use]
    pub fn anywhere(mut self) -> Grant {
        self.scope = WriteScope::Any;
        self
    }
}

/// A plugin's declaration, built with chained setters.
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::Pod;
/// use wasmloop_sdk::{KindSelector, Manifest};
///
/// let m = Manifest::new("web", "1.0.0")
///     .primary_selector(KindSelector::of::<Deployment>().labels("tier=web"))
///     .owns::<Pod>()
///     .finalizer("web.example.com/cleanup")
///     .prune(true);
/// assert_eq!(m.owns[0].kind, "Pod");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Unique plugin name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// The primary kind.
    pub primary: KindSelector,
    /// Child kinds the plugin creates and owns.
    pub owns: Vec<Gvk>,
    /// Related kinds, mapped to primaries by [`crate::Reconciler::map`].
    pub watches: Vec<KindSelector>,
    /// Kinds only read from the cache.
    pub reads: Vec<KindSelector>,
    /// Kinds served as metadata only (also under owns, watches or reads).
    pub metadata_only: Vec<Gvk>,
    /// What the plugin writes beyond the implied grants.
    pub writes: Vec<Grant>,
    /// Indexes over cached kinds.
    pub indexes: Vec<Index>,
    /// Fields the host's cache keeps on objects of a kind, which it strips by default:
    /// see [`Manifest::keep_managed_fields`].
    pub keeps: Vec<(Gvk, Kept)>,
    /// A finalizer to hold on every primary until cleanup succeeds.
    pub finalizer: Option<String>,
    /// Delete owned children a reconcile did not apply.
    pub prune: bool,
    /// Deliver phase `deleted` once after a primary is gone.
    pub deliver_deleted: bool,
    /// Hand each reconcile the primary as last reconciled ([`crate::Request::previous`]).
    pub deliver_previous: bool,
    /// Default settings.
    pub settings: Settings,
}

impl Manifest {
    /// A manifest with the given name and version. Set the primary with
    /// [`Manifest::primary`]; until then the primary kind is empty and the host rejects the
    /// manifest.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Manifest {
            name: name.into(),
            version: version.into(),
            primary: KindSelector::of_gvk(Gvk { group: String::new(), version: String::new(), kind: String::new() }),
            owns: Vec::new(),
            watches: Vec::new(),
            reads: Vec::new(),
            metadata_only: Vec::new(),
            writes: Vec::new(),
            indexes: Vec::new(),
            keeps: Vec::new(),
            finalizer: None,
            prune: false,
            deliver_deleted: false,
            deliver_previous: false,
            settings: Settings::default(),
        }
    }

    /// Sets the primary kind: every object of kind `K`.
    #[must_use]
    pub fn primary<K: Kind>(self) -> Self {
        self.primary_selector(KindSelector::of::<K>())
    }

    /// Sets the primary kind with what narrows it: namespaces, labels, fields, annotations, or
    /// the generation-changed predicate. With annotations or fields, the host's cache holds
    /// only the primaries it selects, and those that carry the plugin's finalizer (their
    /// cleanup runs); with labels alone, the labels select what is reconciled and the kind is
    /// cached whole, so the plugin can still read objects of it that it does not reconcile.
    #[must_use]
    pub fn primary_selector(mut self, selector: KindSelector) -> Self {
        self.primary = selector;
        self
    }

    /// Declares an owned child kind.
    #[must_use]
    pub fn owns<K: Kind>(mut self) -> Self {
        self.owns.push(K::gvk());
        self
    }

    /// Declares a watched related kind; changes reach [`crate::Reconciler::map`].
    ///
    /// A kind declared only under watches and reads, each time with a selector that narrows
    /// it, is watched through the selectors: the host caches only what they select, so
    /// [`crate::cache`] finds nothing else of it (nor does `TestCase`), and an object that
    /// stops matching reaches `map` as deleted. Declare it under `reads` without a selector to
    /// read all of it.
    #[must_use]
    pub fn watches(mut self, selector: KindSelector) -> Self {
        self.watches.push(selector);
        self
    }

    /// Declares a kind the plugin only reads from the cache. Reading grants no write: see
    /// [`Manifest::writes`].
    #[must_use]
    pub fn reads<K: Kind>(self) -> Self {
        self.reads_selected(KindSelector::of::<K>())
    }

    /// Declares a kind the plugin only reads, narrowed as [`Manifest::watches`] are: the host
    /// caches only what `selector` selects (say, a few named Secrets).
    #[must_use]
    pub fn reads_selected(mut self, selector: KindSelector) -> Self {
        self.reads.push(selector);
        self
    }

    /// Declares an index over kind `K`: each object filed under the values `fields` reach
    /// (dotted paths from the object's root, `[*]` after a list's name for each item), so
    /// [`crate::cache::list_by_index`] finds the objects that name a key without reading the
    /// rest. `K` must be declared.
    ///
    /// ```
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use wasmloop_sdk::{KindSelector, Manifest};
    /// let m = Manifest::new("roller", "1.0.0")
    ///     .primary::<Deployment>()
    ///     .watches(KindSelector::of::<ConfigMap>())
    ///     .index::<Deployment>("configmap", [
    ///         "spec.template.spec.volumes[*].configMap.name",
    ///         "spec.template.spec.containers[*].envFrom[*].configMapRef.name",
    ///     ]);
    /// assert_eq!(m.validate(), Ok(()));
    /// ```
    #[must_use]
    pub fn index<K: Kind>(mut self, name: impl Into<String>, fields: impl IntoIterator<Item = &'static str>) -> Self {
        let fields = fields.into_iter().map(str::to_owned).collect();
        self.indexes.push(Index { name: name.into(), kind: K::gvk(), fields });
        self
    }

    /// Declares that the plugin needs only the metadata of kind `K`'s objects (it counts or
    /// names them): they reach it without spec, status and managed fields. `K` must also be
    /// under owns, watches or reads.
    #[must_use]
    pub fn metadata_only<K: Kind>(mut self) -> Self {
        self.metadata_only.push(K::gvk());
        self
    }

    /// Declares a write beyond the implied ones; the host refuses any write no grant covers,
    /// before it reaches the API server.
    #[must_use]
    pub fn writes(mut self, grant: Grant) -> Self {
        self.writes.push(grant);
        self
    }

    /// Keeps `metadata.managedFields` on the objects of kind `K` the plugin receives.
    ///
    /// The host strips them from every cached object by default (they record which field
    /// manager set which field, and are often most of an object's size); a plugin that reads
    /// them, to find who else manages a field, asks here. `K` must be declared, and not
    /// metadata-only. Needs a host serving contract 0.2.1; an older 0.2 host ignores it.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use wasmloop_sdk::Manifest;
    /// let m = Manifest::new("audit", "1.0.0").primary::<ConfigMap>().keep_managed_fields::<ConfigMap>();
    /// assert!(m.keeps[0].1.managed_fields && !m.keeps[0].1.last_applied);
    /// assert_eq!(m.validate(), Ok(()));
    /// ```
    #[must_use]
    pub fn keep_managed_fields<K: Kind>(self) -> Self {
        self.keep(K::gvk(), Kept { managed_fields: true, last_applied: false })
    }

    /// Keeps the `kubectl.kubernetes.io/last-applied-configuration` annotation on the objects
    /// of kind `K` the plugin receives; the host strips it by default, like `managedFields`.
    #[must_use]
    pub fn keep_last_applied<K: Kind>(self) -> Self {
        self.keep(K::gvk(), Kept { managed_fields: false, last_applied: true })
    }

    fn keep(mut self, kind: Gvk, kept: Kept) -> Self {
        match self.keeps.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, earlier)) => *earlier = earlier.union(kept),
            None => self.keeps.push((kind, kept)),
        }
        self
    }

    /// What the plugin keeps of kind `kind`'s objects.
    pub fn kept(&self, kind: &Gvk) -> Kept {
        self.keeps.iter().find(|(k, _)| k == kind).map(|(_, kept)| *kept).unwrap_or_default()
    }

    /// Holds `finalizer` on every primary until phase `cleanup` succeeds.
    #[must_use]
    pub fn finalizer(mut self, finalizer: impl Into<String>) -> Self {
        self.finalizer = Some(finalizer.into());
        self
    }

    /// Lets the plugin ask for pruning: deleting owned children it no longer wants.
    ///
    /// Declaring this deletes nothing by itself. A reconcile prunes only when its response
    /// holds [`crate::action::prune`]: then the host deletes every child the primary controls,
    /// of an owned kind, that the response did not apply. Without the declaration, a response
    /// holding `prune()` is refused. A response without `prune()`, and every
    /// [`crate::Error`], deletes nothing it does not name, so a reconcile that cannot build
    /// the whole set (an invalid spec, a dependency not ready) simply leaves `prune()` out, or
    /// returns an error.
    #[must_use]
    pub fn prune(mut self, prune: bool) -> Self {
        self.prune = prune;
        self
    }

    /// Delivers phase `deleted` once after a primary is gone.
    #[must_use]
    pub fn deliver_deleted(mut self, deliver: bool) -> Self {
        self.deliver_deleted = deliver;
        self
    }

    /// Hands each reconcile the primary as it was at the last successful reconcile.
    #[must_use]
    pub fn deliver_previous(mut self, deliver: bool) -> Self {
        self.deliver_previous = deliver;
        self
    }

    /// Sets default settings.
    #[must_use]
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Every kind the plugin may read or act on.
    pub fn declared_kinds(&self) -> impl Iterator<Item = &Gvk> {
        std::iter::once(&self.primary.kind)
            .chain(&self.owns)
            .chain(self.watches.iter().map(|w| &w.kind))
            .chain(self.reads.iter().map(|r| &r.kind))
    }
}

fn kind_ref(g: &Gvk) -> contract::KindRef<'_> {
    contract::KindRef { group: &g.group, version: &g.version, kind: &g.kind }
}

fn selector_view(s: &KindSelector) -> contract::SelectorView<'_> {
    contract::SelectorView {
        kind: kind_ref(&s.kind),
        namespaces: s.namespaces.iter().map(String::as_str).collect(),
        label_selector: s.label_selector.as_deref(),
        field_selector: s.field_selector.as_deref(),
        annotations: s.annotations.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect(),
        generation_changed: s.generation_changed,
    }
}

impl Manifest {
    /// Checks the manifest by the rules the host applies when it loads the plugin
    /// ([`wasmloop_contract::manifest::validate`]); `TestCase` runs it before every test.
    ///
    /// # Errors
    /// The host's sentence naming the first invalid field.
    pub fn validate(&self) -> Result<(), String> {
        contract::validate(&self.view())
    }

    /// Which objects of `kind` the host's cache holds for this plugin: whole, or only what
    /// its watches of the kind select ([`wasmloop_contract::cache::Visible`]). `TestCase`
    /// drops the rest of a test's cache, as the host would never see them.
    pub fn visible(&self, kind: &Gvk) -> wasmloop_contract::cache::Visible {
        self.view().visible(&kind_ref(kind))
    }

    fn view(&self) -> contract::ManifestView<'_> {
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
                    apply: g.apply,
                    patch: g.patch,
                    delete: g.delete,
                    scope: match &g.scope {
                        WriteScope::PrimaryNamespace => contract::ScopeView::PrimaryNamespace,
                        WriteScope::Namespaces(list) => contract::ScopeView::Namespaces(list),
                        WriteScope::Any => contract::ScopeView::Any,
                    },
                })
                .collect(),
            keeps: self.keeps.iter().map(|(k, kept)| contract::KeepView { kind: kind_ref(k), kept: *kept }).collect(),
            indexes: self
                .indexes
                .iter()
                .map(|i| contract::IndexView {
                    name: &i.name,
                    kind: kind_ref(&i.kind),
                    fields: i.fields.iter().map(String::as_str).collect(),
                })
                .collect(),
            finalizer: self.finalizer.as_deref(),
            deliver_deleted: self.deliver_deleted,
            settings: self.settings,
        }
    }
}
