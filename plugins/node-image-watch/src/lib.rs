//! `node-image-watch`: keeps the annotation `wasmloop.dev/image-bytes` of each Node equal to
//! the sum of `status.images[].sizeBytes`, and records an `ImageStorageChanged` Event with
//! the old total, the new total and the delta whenever it moves.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;
use serde_json::json;
use wasmloop_sdk::prelude::*;

/// The annotation holding the last recorded total.
pub const ANNOTATION: &str = "wasmloop.dev/image-bytes";

#[derive(Debug, Default, Deserialize)]
struct NodeImages {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    status: Option<NodeStatus>,
}

#[derive(Debug, Default, Deserialize)]
struct Meta {
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
struct NodeStatus {
    #[serde(default)]
    images: Option<Vec<Image>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Image {
    #[serde(default)]
    size_bytes: Option<i64>,
}

/// The plugin.
pub struct NodeImageWatch;

impl Reconciler for NodeImageWatch {
    fn manifest() -> Manifest {
        // The Node is its own primary: annotating it is a patch, which needs a grant.
        Manifest::new("node-image-watch", env!("CARGO_PKG_VERSION"))
            .primary::<Node>()
            .writes(Grant::of::<Node>().patch())
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        if request.phase != Phase::Apply {
            return Ok(Vec::new());
        }
        let node: NodeImages = request.object()?;
        let total: i64 =
            node.status.and_then(|s| s.images).unwrap_or_default().iter().filter_map(|i| i.size_bytes).sum();
        let recorded = node.metadata.annotations.as_ref().and_then(|a| a.get(ANNOTATION));
        let old: i64 = match recorded {
            Some(text) => match text.parse() {
                Ok(n) => n,
                Err(_) => {
                    wasmloop_sdk::warn!(
                        "node {}: annotation {ANNOTATION}={text:?} is not a number; replacing it",
                        request.object.name
                    );
                    0
                }
            },
            None => 0,
        };
        if recorded.is_some_and(|r| r.parse() == Ok(total)) {
            return Ok(Vec::new());
        }
        let delta = total - old;
        Ok(vec![
            patch(
                request.object.to_ref(),
                PatchKind::Merge,
                &json!({"metadata": {"annotations": {ANNOTATION: total.to_string()}}}),
            ),
            event(
                EventType::Normal,
                "ImageStorageChanged",
                format!("image storage changed from {old} to {total} bytes (delta {delta:+})"),
            ),
        ])
    }
}

wasmloop_sdk::export_plugin!(NodeImageWatch);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use wasmloop_sdk::testing::TestCase;

    fn node(sizes: &[i64], annotation: Option<&str>) -> Value {
        let images: Vec<Value> = sizes.iter().map(|s| json!({"names": ["img"], "sizeBytes": s})).collect();
        let mut n = json!({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": "node-a", "uid": "n1"},
                           "status": {"images": images}});
        if let Some(a) = annotation {
            n["metadata"]["annotations"] = json!({ANNOTATION: a});
        }
        n
    }

    #[test]
    fn first_total_is_annotated_with_an_event_from_zero() {
        let outcome = TestCase::new(node(&[100, 250], None)).run::<NodeImageWatch>();
        let patches = outcome.patches();
        assert_eq!(patches[0].2, json!({"metadata": {"annotations": {ANNOTATION: "350"}}}));
        assert_eq!(patches[0].0.uid.as_deref(), Some("n1"));
        let events = outcome.events();
        assert_eq!(events[0].reason, "ImageStorageChanged");
        assert_eq!(events[0].message, "image storage changed from 0 to 350 bytes (delta +350)");
    }

    #[test]
    fn shrinking_images_report_a_negative_delta() {
        let outcome = TestCase::new(node(&[100], Some("350"))).run::<NodeImageWatch>();
        assert_eq!(outcome.events()[0].message, "image storage changed from 350 to 100 bytes (delta -250)");
    }

    #[test]
    fn matching_annotation_does_nothing() {
        assert!(TestCase::new(node(&[100, 250], Some("350"))).run::<NodeImageWatch>().actions().is_empty());
    }

    #[test]
    fn node_without_images_totals_zero() {
        let outcome = TestCase::new(node(&[], None)).run::<NodeImageWatch>();
        assert_eq!(outcome.patches()[0].2["metadata"]["annotations"][ANNOTATION], "0");
    }

    #[test]
    fn garbage_annotation_is_replaced_and_logged() {
        let outcome = TestCase::new(node(&[5], Some("lots"))).run::<NodeImageWatch>();
        assert_eq!(outcome.patches()[0].2["metadata"]["annotations"][ANNOTATION], "5");
        assert!(outcome.logged(wasmloop_sdk::log::Level::Warn, "is not a number"));
    }
}
