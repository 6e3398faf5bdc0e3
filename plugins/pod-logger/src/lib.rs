//! `pod-logger`: logs each Pod's lifecycle (seen, phase changed, deleted) through the host.
//!
//! It writes nothing to the cluster. Transitions come from `request.previous`, which the host
//! keeps because the manifest asks for it; the plugin itself holds no state.

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use wasmloop_sdk::prelude::*;

/// The only part of a Pod the plugin reads.
#[derive(Debug, Default, Deserialize)]
struct PodPhase {
    #[serde(default)]
    status: Option<Status>,
}

#[derive(Debug, Default, Deserialize)]
struct Status {
    #[serde(default)]
    phase: Option<String>,
}

fn phase_of(object: &Object) -> Result<String, Error> {
    let pod: PodPhase = object.parse()?;
    Ok(pod.status.and_then(|s| s.phase).unwrap_or_else(|| "Unknown".into()))
}

/// The plugin.
pub struct PodLogger;

impl Reconciler for PodLogger {
    fn manifest() -> Manifest {
        Manifest::new("pod-logger", env!("CARGO_PKG_VERSION"))
            .primary::<Pod>()
            .deliver_deleted(true)
            .deliver_previous(true)
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        let pod = request.object.display_name();
        let phase = phase_of(&request.object)?;
        match (request.phase, &request.previous) {
            (Phase::Deleted, _) => wasmloop_sdk::info!("pod {pod} deleted (last phase {phase})"),
            (_, None) => wasmloop_sdk::info!("pod {pod} seen (phase {phase})"),
            (_, Some(previous)) => {
                let before = phase_of(previous)?;
                if before != phase {
                    wasmloop_sdk::info!("pod {pod} phase changed {before} -> {phase}");
                }
            }
        }
        Ok(Vec::new())
    }
}

wasmloop_sdk::export_plugin!(PodLogger);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use wasmloop_sdk::log::Level;
    use wasmloop_sdk::testing::{Outcome, TestCase};

    fn pod(phase: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-0", "namespace": "shop", "uid": "p1"},
               "status": {"phase": phase}})
    }

    fn pod_without_status() -> Value {
        let mut p = pod("x");
        p.as_object_mut().unwrap().remove("status");
        p
    }

    fn messages(outcome: &Outcome) -> Vec<&str> {
        outcome.logs.iter().map(|(_, m)| m.as_str()).collect()
    }

    #[test]
    fn first_sight_logs_seen_with_the_phase() {
        let outcome = TestCase::new(pod("Pending")).run::<PodLogger>();
        assert!(outcome.logged(Level::Info, "pod shop/web-0 seen (phase Pending)"), "{:?}", outcome.logs);
    }

    #[test]
    fn a_phase_change_is_logged_with_both_phases() {
        let outcome = TestCase::new(pod("Running")).previous(pod("Pending")).run::<PodLogger>();
        assert!(outcome.logged(Level::Info, "pod shop/web-0 phase changed Pending -> Running"), "{:?}", outcome.logs);
    }

    #[test]
    fn an_unchanged_phase_logs_nothing() {
        let outcome = TestCase::new(pod("Running")).previous(pod("Running")).run::<PodLogger>();
        assert!(outcome.logs.is_empty(), "{:?}", outcome.logs);
    }

    #[test]
    fn a_deletion_is_logged_with_the_last_phase() {
        let outcome = TestCase::new(pod("Succeeded")).phase(Phase::Deleted).run::<PodLogger>();
        assert!(outcome.logged(Level::Info, "pod shop/web-0 deleted (last phase Succeeded)"), "{:?}", outcome.logs);
    }

    #[test]
    fn a_deletion_is_logged_only_as_a_deletion_even_when_the_phase_changed() {
        // Whatever phase the Pod last had before, its deletion is the news.
        let outcome = TestCase::new(pod("Succeeded")).previous(pod("Running")).phase(Phase::Deleted).run::<PodLogger>();
        assert_eq!(messages(&outcome), ["pod shop/web-0 deleted (last phase Succeeded)"]);
    }

    #[test]
    fn a_pod_without_status_is_reported_as_unknown() {
        let outcome = TestCase::new(pod_without_status()).run::<PodLogger>();
        assert!(outcome.logged(Level::Info, "pod shop/web-0 seen (phase Unknown)"), "{:?}", outcome.logs);
    }

    #[test]
    fn a_previous_state_without_status_counts_as_unknown() {
        let outcome = TestCase::new(pod("Running")).previous(pod_without_status()).run::<PodLogger>();
        assert!(outcome.logged(Level::Info, "pod shop/web-0 phase changed Unknown -> Running"), "{:?}", outcome.logs);
    }

    #[test]
    fn a_pod_whose_phase_does_not_decode_fails_permanently() {
        // Retrying cannot help: the same object would fail the same way until it changes.
        let mut broken = pod("x");
        broken["status"]["phase"] = json!(42);
        let outcome = TestCase::new(broken).run::<PodLogger>();
        let error = outcome.error();
        assert!(!error.transient, "{error}");
        assert!(error.message.contains("cannot decode Pod shop/web-0"), "{error}");
    }

    #[test]
    fn no_reconcile_writes_anything_to_the_cluster() {
        let cases = [
            TestCase::new(pod("Pending")),
            TestCase::new(pod("Running")).previous(pod("Pending")),
            TestCase::new(pod("Running")).previous(pod("Running")),
            TestCase::new(pod("Succeeded")).phase(Phase::Deleted),
        ];
        for case in cases {
            let outcome = case.run::<PodLogger>();
            assert!(outcome.actions().is_empty(), "{case:?} returned {:?}", outcome.actions());
        }
    }
}
