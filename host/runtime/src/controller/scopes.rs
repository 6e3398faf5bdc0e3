//! Which informers a plugin's controller watches through: a pure function of its manifest and
//! the operator's confinement, table-tested.
//!
//! - Each declaration is watched in each namespace it is served: those it lists (one informer
//!   each), or the operator's, or every namespace.
//! - The primary's field selector narrows its watch. With annotation filters, its informer
//!   itself keeps what its labels and annotations select ([`Filter`]), and whatever carries its
//!   finalizer, so that a primary leaving its selection is told apart from one deleted; with
//!   labels alone, its kind is watched whole and shared, and the labels select what is
//!   reconciled (as before contract 0.3: a plugin may read what it does not reconcile).
//! - A watched or read kind that every declaration narrows is watched through them (labels and
//!   fields by the API server, annotations by the informer); any other is watched whole and
//!   shared with every plugin that reads it so (the rule of
//!   [`wasmloop_contract::cache::Visible`]).
//! - Reads of a kind that name no namespace are served from the primary's namespaces.

use wasmloop_contract::cache::Visible;
use wasmloop_contract::names::Namespace;
use wasmloop_sandbox::{Gvk, KindSelector, Manifest, Selector};

use super::config::effective_namespace;
use crate::informer::{Filter, InformerScope};

/// The informers of one controller.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scopes {
    /// The primary kind's, one per namespace served.
    pub(crate) primaries: Vec<InformerScope>,
    /// Each owned kind's, in the primaries' namespaces.
    pub(crate) owned: Vec<InformerScope>,
    /// Each watch's, with the label selector its changes are held to before `map`.
    pub(crate) watched: Vec<(InformerScope, Selector)>,
    /// Each read kind's.
    pub(crate) read: Vec<InformerScope>,
}

impl Scopes {
    /// Every scope, the primaries' first.
    pub(crate) fn all(&self) -> impl Iterator<Item = &InformerScope> {
        self.primaries.iter().chain(&self.owned).chain(self.watched.iter().map(|(s, _)| s)).chain(&self.read)
    }
}

/// A declaration the operator's confinement does not allow: which, and what to change.
pub(crate) type Confined = (String, String);

/// The namespaces `declared` is served from under the operator's `operator`: none means every
/// namespace.
fn served(
    declared: &[Namespace],
    operator: Option<&Namespace>,
    what: &str,
) -> Result<Vec<Option<Namespace>>, Confined> {
    if declared.is_empty() {
        return Ok(vec![operator.cloned()]);
    }
    declared
        .iter()
        .map(|ns| effective_namespace(Some(ns), operator).map_err(|reason| (what.to_owned(), reason)))
        .collect()
}

/// The informer scope of `kind` in `namespace` for a plugin with `manifest`. A plugin that
/// keeps managedFields or last-applied of a kind gets an informer of its own for it; the rest
/// share the stripped one. A metadata-only kind is watched as metadata, shared with other
/// plugins that declare it so, apart from those that read it whole.
pub(crate) fn informer_scope(manifest: &Manifest, kind: &Gvk, namespace: Option<Namespace>) -> InformerScope {
    InformerScope {
        kept: manifest.kept(kind),
        metadata: manifest.is_metadata_only(kind),
        ..InformerScope::new(kind.clone(), namespace)
    }
}

/// The scope of one watch or read `s` in `namespace`: narrowed as it says when the kind is
/// narrowed at all, whole otherwise.
fn narrowed_scope(manifest: &Manifest, s: &KindSelector, namespace: Option<Namespace>) -> InformerScope {
    let scope = informer_scope(manifest, &s.kind, namespace);
    if manifest.visible(&s.kind) == Visible::All {
        return scope;
    }
    let filter = (!s.annotations.is_empty()).then(|| Filter {
        labels: None,
        annotations: s.annotations.clone(),
        finalizer: None,
    });
    InformerScope {
        selector: s.label_selector.clone().filter(|l| !l.as_str().is_empty()),
        fields: s.field_selector.clone(),
        filter,
        ..scope
    }
}

/// The primary's scope in `namespace`.
fn primary_scope(manifest: &Manifest, namespace: Option<Namespace>) -> InformerScope {
    let p = &manifest.primary;
    let labels = p.label_selector.clone().filter(|l| !l.as_str().is_empty());
    let filter = (!p.annotations.is_empty()).then(|| Filter {
        labels,
        annotations: p.annotations.clone(),
        finalizer: manifest.finalizer.clone(),
    });
    InformerScope { fields: p.field_selector.clone(), filter, ..informer_scope(manifest, &p.kind, namespace) }
}

/// The informers of a plugin with `manifest`, confined to `operator`'s namespace if any.
///
/// # Errors
/// A declaration naming a namespace outside the operator's, and what to change.
pub(crate) fn scopes(manifest: &Manifest, operator: Option<&Namespace>) -> Result<Scopes, Confined> {
    let primary_namespaces = served(&manifest.primary.namespaces, operator, "its primary kind")?;
    let primaries = primary_namespaces.iter().map(|ns| primary_scope(manifest, ns.clone())).collect();
    let owned = manifest
        .owns
        .iter()
        .flat_map(|k| primary_namespaces.iter().map(move |ns| informer_scope(manifest, k, ns.clone())))
        .collect();
    let mut watched = Vec::new();
    for w in &manifest.watches {
        let selector = w.label_selector.as_ref().map(|l| l.selector()).unwrap_or_default();
        for ns in served(&w.namespaces, operator, &format!("watched kind {}", w.kind))? {
            watched.push((narrowed_scope(manifest, w, ns), selector.clone()));
        }
    }
    let mut read = Vec::new();
    for r in &manifest.reads {
        // A read that names no namespace is served from the primaries': a plugin confined to
        // one must not see every namespace's objects of a kind it reads.
        let namespaces = match r.namespaces.is_empty() {
            true => primary_namespaces.clone(),
            false => served(&r.namespaces, operator, &format!("read kind {}", r.kind))?,
        };
        read.extend(namespaces.into_iter().map(|ns| narrowed_scope(manifest, r, ns)));
    }
    Ok(Scopes { primaries, owned, watched, read })
}

#[cfg(test)]
mod tests {
    use wasmloop_contract::annotations::AnnotationMatch;

    use super::*;

    fn gvk(api_version: &str, kind: &str) -> Gvk {
        Gvk::from_api_version(api_version, kind).unwrap()
    }

    fn ns(text: &str) -> Namespace {
        text.parse().unwrap()
    }

    fn deployments() -> Manifest {
        Manifest::declaring("roller", gvk("apps/v1", "Deployment"))
    }

    fn secrets() -> KindSelector {
        KindSelector::of(gvk("v1", "Secret"))
    }

    #[test]
    fn a_primary_of_every_namespace_is_one_shared_whole_informer() {
        let s = scopes(&deployments(), None).unwrap();
        assert_eq!(s.primaries, vec![InformerScope::new(gvk("apps/v1", "Deployment"), None)]);
    }

    #[test]
    fn each_namespace_a_primary_lists_is_an_informer_of_its_own() {
        let mut m = deployments();
        m.primary.namespaces = vec![ns("a"), ns("b")];
        let s = scopes(&m, None).unwrap();
        let served: Vec<_> = s.primaries.iter().map(|p| p.namespace.clone()).collect();
        assert_eq!(served, vec![Some(ns("a")), Some(ns("b"))]);
    }

    #[test]
    fn an_operator_confinement_serves_its_namespace_and_refuses_others() {
        let mut m = deployments();
        assert_eq!(scopes(&m, Some(&ns("t"))).unwrap().primaries[0].namespace, Some(ns("t")));
        m.primary.namespaces = vec![ns("t"), ns("u")];
        let (what, reason) = scopes(&m, Some(&ns("t"))).unwrap_err();
        assert_eq!(what, "its primary kind");
        assert!(
            reason.contains("declares namespace u but the operator confines the plugin to namespace t"),
            "{reason}"
        );
    }

    #[test]
    fn a_primarys_labels_and_annotations_are_kept_by_the_informer_with_its_finalizer() {
        let mut m = deployments();
        m.primary.annotations = vec![AnnotationMatch::present("roll.example.com/on-change").unwrap()];
        m.primary.label_selector = Some("tier=web".parse().unwrap());
        m.finalizer = Some("roll.example.com/cleanup".into());
        let p = &scopes(&m, None).unwrap().primaries[0];
        let filter = p.filter.as_ref().expect("a filter");
        assert_eq!(p.selector, None, "never narrowed by the server: leaving is not deletion");
        assert_eq!(filter.labels.as_ref().map(|l| l.as_str()), Some("tier=web"));
        assert_eq!(filter.finalizer.as_deref(), Some("roll.example.com/cleanup"));
    }

    #[test]
    fn a_primary_selected_by_labels_alone_is_watched_whole_and_shared() {
        let mut m = deployments();
        m.primary.label_selector = Some("tier=web".parse().unwrap());
        assert_eq!(scopes(&m, None).unwrap().primaries, vec![InformerScope::new(gvk("apps/v1", "Deployment"), None)]);
    }

    #[test]
    fn a_primarys_field_selector_narrows_its_watch() {
        let mut m = deployments();
        m.primary.field_selector = Some("metadata.name=web".parse().unwrap());
        assert_eq!(
            scopes(&m, None).unwrap().primaries[0].fields.as_ref().map(|f| f.as_str()),
            Some("metadata.name=web")
        );
    }

    #[test]
    fn a_field_selected_watch_is_watched_through_its_selector() {
        let mut m = deployments();
        m.watches = vec![KindSelector { field_selector: Some("type=kubernetes.io/tls".parse().unwrap()), ..secrets() }];
        let (scope, _) = &scopes(&m, None).unwrap().watched[0];
        assert_eq!(scope.fields.as_ref().map(|f| f.as_str()), Some("type=kubernetes.io/tls"));
    }

    #[test]
    fn a_watched_kind_also_read_whole_is_watched_whole() {
        let mut m = deployments();
        m.watches = vec![KindSelector { field_selector: Some("metadata.name=db".parse().unwrap()), ..secrets() }];
        m.reads = vec![secrets()];
        let s = scopes(&m, None).unwrap();
        assert_eq!(s.watched[0].0.fields, None);
        assert_eq!(s.read[0], InformerScope::new(gvk("v1", "Secret"), None));
    }

    #[test]
    fn an_annotated_watch_is_filtered_by_the_informer() {
        let mut m = deployments();
        let annotated = vec![AnnotationMatch::present("a.io/b").unwrap()];
        m.watches = vec![KindSelector { annotations: annotated.clone(), ..secrets() }];
        let (scope, _) = &scopes(&m, None).unwrap().watched[0];
        assert_eq!(scope.filter.as_ref().map(|f| f.annotations.clone()), Some(annotated));
    }

    #[test]
    fn reads_without_a_namespace_are_served_from_the_primarys() {
        let mut m = deployments();
        m.primary.namespaces = vec![ns("a"), ns("b")];
        m.reads =
            vec![secrets(), KindSelector { namespaces: vec![ns("vault")], ..KindSelector::of(gvk("v1", "ConfigMap")) }];
        let s = scopes(&m, None).unwrap();
        let read: Vec<_> = s.read.iter().map(|r| (r.kind.kind().to_string(), r.namespace.clone())).collect();
        assert_eq!(
            read,
            vec![
                ("Secret".into(), Some(ns("a"))),
                ("Secret".into(), Some(ns("b"))),
                ("ConfigMap".into(), Some(ns("vault"))),
            ]
        );
    }

    #[test]
    fn owned_kinds_are_watched_in_each_primary_namespace() {
        let mut m = deployments();
        m.primary.namespaces = vec![ns("a"), ns("b")];
        m.owns = vec![gvk("v1", "ConfigMap")];
        assert_eq!(scopes(&m, None).unwrap().owned.len(), 2);
    }
}
