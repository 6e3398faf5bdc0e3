//! What one informer watches: a kind, a namespace, what its objects keep, and what narrows the
//! watch. Equal scopes share one informer.

use wasmloop_contract::annotations::AnnotationMatch;
use wasmloop_contract::cache::Kept;
use wasmloop_contract::fields::FieldSelector;
use wasmloop_contract::names::{LabelSelector, Namespace};
use wasmloop_sandbox::Gvk;

use crate::metrics::WatchLabels;

/// Longest watch selector a metric label shows.
const WATCH_SELECTOR_LABEL: usize = 128;

/// One kind in one namespace scope (none: all namespaces, or a cluster-scoped kind), with
/// the fields its objects keep.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InformerScope {
    /// The kind.
    pub kind: Gvk,
    /// The namespace, or none for all.
    pub namespace: Option<Namespace>,
    /// What it keeps of the fields informers strip; the default keeps neither, and is the
    /// informer every plugin that did not ask shares.
    pub kept: Kept,
    /// Only the objects' metadata: a `PartialObjectMetadata` watch, for kinds plugins declare
    /// metadata-only. The API server sends no spec or status, so none is decoded or kept.
    pub metadata: bool,
    /// The watch's label selector, in its canonical text (so equal selectors share a watch),
    /// as the API server accepts it. The API
    /// server then sends only what it selects, and reports an object that stops matching as
    /// deleted. Only for kinds a plugin declares under selected watches alone: a primary must
    /// never look deleted while it exists.
    pub selector: Option<LabelSelector>,
    /// The watch's field selector, in its canonical text: the API server sends only what it
    /// selects, like the label selector.
    pub fields: Option<FieldSelector>,
    /// What the informer itself keeps of what the watch sends ([`Filter`]).
    pub filter: Option<Filter>,
}

/// What an informer keeps of the objects its watch sends: those its labels and annotations
/// select, and those carrying its finalizer whatever they say. The API server cannot select by
/// annotation; and a primary leaving a label selection must not look deleted, which it would
/// in a watch the server filters, so a primary's labels are filtered here too. An object that
/// stops passing leaves the cache as [`super::Change::Left`], not as deleted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Filter {
    /// Labels.
    pub labels: Option<LabelSelector>,
    /// Annotations.
    pub annotations: Vec<AnnotationMatch>,
    /// Objects carrying it pass regardless: a primary's cleanup runs whatever became of it.
    pub finalizer: Option<String>,
}

impl Filter {
    /// Whether the filter selects an object of these labels and annotations: the finalizer
    /// aside.
    pub fn selects(
        &self,
        labels: Option<&std::collections::BTreeMap<String, String>>,
        annotations: Option<&std::collections::BTreeMap<String, String>>,
    ) -> bool {
        let labelled = self
            .labels
            .as_ref()
            .is_none_or(|s| s.selector().matches(|k| labels.and_then(|l| l.get(k)).map(String::as_str)));
        labelled
            && self.annotations.iter().all(|a| a.matches(|k| annotations.and_then(|m| m.get(k)).map(String::as_str)))
    }

    /// Whether the informer keeps an object: selected, or carrying the finalizer.
    pub fn keeps(&self, selected: bool, finalizers: Option<&[String]>) -> bool {
        selected || self.finalizer.as_ref().is_some_and(|f| finalizers.is_some_and(|all| all.contains(f)))
    }
}

impl InformerScope {
    /// `kind` in `namespace`, whole objects, stripped as by default.
    pub fn new(kind: Gvk, namespace: Option<Namespace>) -> InformerScope {
        InformerScope {
            kind,
            namespace,
            kept: Kept::default(),
            metadata: false,
            selector: None,
            fields: None,
            filter: None,
        }
    }
}

impl InformerScope {
    pub(super) fn labels(&self) -> WatchLabels {
        // Parsed types only: a kind and a namespace are short; a selector may hold thousands
        // of values, so its label is cut (series of equal cuts add up, as gauges should).
        WatchLabels {
            kind: self.kind.to_string(),
            namespace: self.namespace.as_ref().map(Namespace::to_string).unwrap_or_default(),
            view: if self.metadata { "metadata" } else { "full" }.to_owned(),
            selector: wasmloop_contract::validate::cut(self.selection_text(), WATCH_SELECTOR_LABEL),
        }
    }
}

impl InformerScope {
    /// What narrows the watch, as one text: labels, fields and the informer's own filter.
    fn selection_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = &self.selector {
            parts.push(s.to_string());
        }
        if let Some(f) = &self.fields {
            parts.push(format!("fields: {f}"));
        }
        if let Some(filter) = &self.filter {
            if let Some(l) = &filter.labels {
                parts.push(format!("kept: {l}"));
            }
            let annotations: Vec<String> = filter.annotations.iter().map(ToString::to_string).collect();
            if !annotations.is_empty() {
                parts.push(format!("annotated: {}", annotations.join(",")));
            }
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn filter(labels: Option<&str>, annotations: &[&str], finalizer: Option<&str>) -> Filter {
        Filter {
            labels: labels.map(|l| LabelSelector::parse(l).unwrap()),
            annotations: annotations
                .iter()
                .map(|a| {
                    let (key, value) = a.split_once('=').map_or((*a, None), |(k, v)| (k, Some(v)));
                    AnnotationMatch::new(key, value).unwrap()
                })
                .collect(),
            finalizer: finalizer.map(str::to_owned),
        }
    }

    #[test]
    fn a_filter_selects_by_its_labels_and_every_annotation() {
        let f = filter(Some("tier=web"), &["owner=team-a"], None);
        let (web, db) = (map(&[("tier", "web")]), map(&[("tier", "db")]));
        let owned = map(&[("owner", "team-a")]);
        assert!(f.selects(Some(&web), Some(&owned)));
        assert!(!f.selects(Some(&db), Some(&owned)), "another label");
        assert!(!f.selects(Some(&web), None), "no annotation");
        assert!(!f.selects(None, Some(&owned)), "no labels");
    }

    #[test]
    fn an_object_carrying_the_finalizer_is_kept_whatever_it_says() {
        let f = filter(Some("tier=web"), &[], Some("wasmloop.dev/cleanup"));
        let finalizers = ["wasmloop.dev/cleanup".to_owned()];
        assert!(f.keeps(false, Some(&finalizers)));
        assert!(!f.keeps(false, Some(&["other".to_owned()])));
        assert!(f.keeps(true, None));
    }

    #[test]
    fn a_watch_s_metric_labels_say_what_narrows_it() {
        let mut scope = InformerScope::new(Gvk::from_api_version("v1", "ConfigMap").unwrap(), None);
        scope.selector = Some(LabelSelector::parse("app=x").unwrap());
        scope.metadata = true;
        let labels = scope.labels();
        assert_eq!(
            (labels.view.as_str(), labels.selector.as_str(), labels.namespace.as_str()),
            ("metadata", "app=x", "")
        );
    }

    #[test]
    fn a_long_selection_is_cut_in_the_metric_label() {
        let mut scope = InformerScope::new(Gvk::from_api_version("v1", "ConfigMap").unwrap(), None);
        let values: Vec<String> = (0..64).map(|i| format!("value-{i}")).collect();
        scope.selector = Some(LabelSelector::parse(&format!("app in ({})", values.join(","))).unwrap());
        let shown = scope.labels().selector;
        assert!(shown.len() <= WATCH_SELECTOR_LABEL && shown.ends_with('…'), "{shown}");
    }
}
