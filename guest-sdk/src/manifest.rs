//! What a plugin declares about itself.

pub use wasmloop_contract::cache::Kept;
use wasmloop_contract::manifest as contract;

use crate::kind::{Gvk, Kind};

/// Which objects of a kind a plugin wants to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindSelector {
    /// The kind.
    pub kind: Gvk,
    /// Only this namespace; none means all.
    pub namespace: Option<String>,
    /// A label selector in Kubernetes syntax; none selects all.
    pub label_selector: Option<String>,
}

impl KindSelector {
    /// Every object of kind `K`.
    pub fn of<K: Kind>() -> Self {
        KindSelector { kind: K::gvk(), namespace: None, label_selector: None }
    }

    /// Only objects matching `selector` (`app=web,tier!=cache`).
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects in `namespace`.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }
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
    pub reads: Vec<Gvk>,
    /// Kinds served as metadata only (also under owns, watches or reads).
    pub metadata_only: Vec<Gvk>,
    /// What the plugin writes beyond the implied grants.
    pub writes: Vec<Grant>,
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
            primary: KindSelector {
                kind: Gvk { group: String::new(), version: String::new(), kind: String::new() },
                namespace: None,
                label_selector: None,
            },
            owns: Vec::new(),
            watches: Vec::new(),
            reads: Vec::new(),
            metadata_only: Vec::new(),
            writes: Vec::new(),
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

    /// Sets the primary kind with a namespace or label selector.
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
    /// A kind declared only under watches, each time with a label selector, is watched
    /// through the selectors: the host caches only what they select, so [`crate::cache`]
    /// finds nothing else of it (nor does `TestCase`), and an object that stops matching
    /// reaches `map` as deleted. Declare it under `reads` too to read all of it.
    #[must_use]
    pub fn watches(mut self, selector: KindSelector) -> Self {
        self.watches.push(selector);
        self
    }

    /// Declares a kind the plugin only reads from the cache. Reading grants no write: see
    /// [`Manifest::writes`].
    #[must_use]
    pub fn reads<K: Kind>(mut self) -> Self {
        self.reads.push(K::gvk());
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
            .chain(&self.reads)
    }
}

fn kind_ref(g: &Gvk) -> contract::KindRef<'_> {
    contract::KindRef { group: &g.group, version: &g.version, kind: &g.kind }
}

fn selector_view(s: &KindSelector) -> contract::SelectorView<'_> {
    contract::SelectorView {
        kind: kind_ref(&s.kind),
        namespace: s.namespace.as_deref(),
        label_selector: s.label_selector.as_deref(),
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
            reads: self.reads.iter().map(kind_ref).collect(),
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
            finalizer: self.finalizer.as_deref(),
            settings: self.settings,
        }
    }
}
