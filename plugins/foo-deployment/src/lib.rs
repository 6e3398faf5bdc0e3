//! `foo-deployment`: Kubernetes' sample-controller as a wasmloop plugin.
//!
//! A `Foo` (`samplecontroller.k8s.io/v1alpha1`) names a Deployment and a replica count. The
//! plugin keeps that Deployment in shape (labels `app: nginx` and `controller: <foo>`, one
//! `nginx:latest` container, the replica count), mirrors its `status.availableReplicas` into
//! the Foo's status and records a `Synced` Event. A Deployment of that name that this Foo
//! does not control is never touched: the Foo gets an `ErrResourceExists` Warning and backs
//! off until someone resolves the clash.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use serde::Deserialize;
use serde_json::json;
use wasmloop_sdk::prelude::*;

/// The container image: sample-controller's `nginx:latest`, unless the build sets
/// `FOO_DEPLOYMENT_IMAGE` (the replay tests' next version does).
const IMAGE: &str = match option_env!("FOO_DEPLOYMENT_IMAGE") {
    Some(image) => image,
    None => "nginx:latest",
};

/// The Foo custom resource, reduced to the fields this plugin reads. Everything else in the
/// object (managed fields, annotations) is skipped by the parser, not materialised.
#[derive(Debug, Deserialize)]
pub struct Foo {
    /// The metadata the plugin needs.
    #[serde(default)]
    pub metadata: FooMeta,
    /// What the user asked for.
    #[serde(default)]
    pub spec: FooSpec,
    /// What the plugin last reported.
    #[serde(default)]
    pub status: Option<FooStatus>,
}

impl Kind for Foo {
    const API_VERSION: &'static str = "samplecontroller.k8s.io/v1alpha1";
    const KIND: &'static str = "Foo";
}

/// `Foo.metadata`, reduced to what the plugin reads.
#[derive(Debug, Default, Deserialize)]
pub struct FooMeta {
    /// The Foo's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The Foo's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `Foo.spec`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// Name of the Deployment to drive.
    #[serde(default)]
    pub deployment_name: String,
    /// Desired replicas; the Deployment default (1) when unset.
    #[serde(default)]
    pub replicas: Option<i32>,
}

/// `Foo.status`.
#[derive(Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// The Deployment's available replicas.
    #[serde(default)]
    pub available_replicas: i32,
}

/// The parts of an existing Deployment the plugin looks at: who controls it, how available
/// it is. Parsing only these keeps decoding cheap.
#[derive(Debug, Default, Deserialize)]
struct ObservedDeployment {
    #[serde(default)]
    metadata: ObservedMeta,
    #[serde(default)]
    status: ObservedStatus,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObservedMeta {
    #[serde(default)]
    owner_references: Vec<OwnerReference>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObservedStatus {
    #[serde(default)]
    available_replicas: Option<i32>,
}

/// The plugin.
pub struct FooController;

/// The Deployment a Foo asks for. Owner references are the host's job.
pub fn desired_deployment(foo: &Foo) -> Deployment {
    let labels = BTreeMap::from([
        ("app".to_owned(), "nginx".to_owned()),
        ("controller".to_owned(), foo.metadata.name.clone().unwrap_or_default()),
    ]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.metadata.namespace.clone(),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: foo.spec.replicas,
            selector: LabelSelector { match_labels: Some(labels.clone()), ..LabelSelector::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..ObjectMeta::default() }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: Some(IMAGE.into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

fn controlled_by(deployment: &ObservedDeployment, uid: &str) -> bool {
    deployment.metadata.owner_references.iter().any(|o| o.controller == Some(true) && o.uid == uid)
}

impl Reconciler for FooController {
    fn manifest() -> Manifest {
        Manifest::new("foo-deployment", env!("CARGO_PKG_VERSION")).primary::<Foo>().owns::<Deployment>().prune(true)
    }

    fn reconcile(request: &Request) -> Result<Vec<Action>, Error> {
        if request.phase != Phase::Apply {
            return Ok(Vec::new());
        }
        let foo: Foo = request.object()?;
        let name = &request.object.name;
        // ASCII whitespace only, as the plugin's Python and JavaScript twins trim: each language's
        // own trim takes a different set of Unicode spaces.
        let deployment_name = foo.spec.deployment_name.trim_matches(|c: char| c.is_ascii_whitespace());
        if deployment_name.is_empty() {
            // As in sample-controller: report and wait for the spec to change, no retry loop.
            // An error, not a successful response holding only the Warning: a success without
            // the Deployment would let the host prune the Deployment that exists.
            return Err(Error::permanent(format!(
                "Foo {name}: spec.deploymentName must be specified; set it to the Deployment to manage"
            ))
            .reason("InvalidSpec"));
        }

        let existing = cache::get_object(&Deployment::gvk(), request.object.namespace.as_deref(), deployment_name)?
            .map(|d| d.parse::<ObservedDeployment>())
            .transpose()?;
        if let Some(existing) = &existing {
            if !controlled_by(existing, &request.object.uid) {
                return Err(Error::transient(format!(
                    "Resource {deployment_name:?} already exists and is not managed by Foo"
                ))
                .reason("ErrResourceExists"));
            }
        }

        let available = existing.and_then(|d| d.status.available_replicas).unwrap_or(0);
        // The Deployment is the whole desired set: any other Deployment this Foo controls (the
        // one it managed before deploymentName changed) goes.
        let mut actions = vec![apply(&desired_deployment(&foo)), prune()];
        if foo.status.map(|s| s.available_replicas) != Some(available) {
            actions.push(status(json!({ "availableReplicas": available })));
        }
        actions.push(event(EventType::Normal, "Synced", "Foo synced successfully"));
        Ok(actions)
    }
}

wasmloop_sdk::export_plugin!(FooController);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use wasmloop_sdk::testing::TestCase;

    fn foo(deployment_name: &str, replicas: i32) -> Value {
        json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": "example-foo", "namespace": "default", "uid": "foo-uid"},
            "spec": {"deploymentName": deployment_name, "replicas": replicas}
        })
    }

    fn deployment(owner_uid: Option<&str>, available: i32) -> Value {
        let owners = owner_uid.map(|uid| {
            json!([{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                    "name": "example-foo", "uid": uid, "controller": true}])
        });
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "example-foo", "namespace": "default", "uid": "dep-uid",
                         "ownerReferences": owners.unwrap_or(json!([]))},
            "status": {"availableReplicas": available}
        })
    }

    #[test]
    fn new_foo_applies_the_nginx_deployment_with_its_replicas_and_labels() {
        let outcome = TestCase::new(foo("example-foo", 3)).run::<FooController>();
        let deployments = outcome.applied::<Deployment>();
        let d = &deployments[0];
        assert_eq!(d.metadata.name.as_deref(), Some("example-foo"));
        assert_eq!(d.metadata.namespace.as_deref(), Some("default"));
        let spec = &d.spec;
        assert_eq!(spec.replicas, Some(3));
        let labels = spec.template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels["app"], "nginx");
        assert_eq!(labels["controller"], "example-foo");
        let container = &spec.template.spec.as_ref().unwrap().containers[0];
        assert_eq!((container.name.as_str(), container.image.as_deref()), ("nginx", Some("nginx:latest")));
    }

    #[test]
    fn a_foo_with_its_deployment_asks_to_prune_every_other_child() {
        let outcome = TestCase::new(foo("example-foo", 1)).run::<FooController>();
        assert!(outcome.prunes(), "{:?}", outcome.result);
    }

    #[test]
    fn success_records_the_synced_event() {
        let outcome = TestCase::new(foo("example-foo", 1)).run::<FooController>();
        let events = outcome.events();
        assert_eq!(events.last().unwrap().reason, "Synced");
        assert_eq!(events.last().unwrap().message, "Foo synced successfully");
    }

    #[test]
    fn available_replicas_of_the_owned_deployment_are_mirrored_into_status() {
        let outcome = TestCase::new(foo("example-foo", 2)).owned(deployment(Some("foo-uid"), 2)).run::<FooController>();
        assert_eq!(outcome.status().unwrap(), json!({"availableReplicas": 2}));
    }

    #[test]
    fn unchanged_status_is_not_written_again() {
        let mut primary = foo("example-foo", 2);
        primary["status"] = json!({"availableReplicas": 2});
        let outcome = TestCase::new(primary).owned(deployment(Some("foo-uid"), 2)).run::<FooController>();
        assert_eq!(outcome.status(), None);
    }

    #[test]
    fn deployment_not_controlled_by_the_foo_is_left_alone_with_err_resource_exists() {
        let outcome = TestCase::new(foo("example-foo", 1)).cached(deployment(None, 0)).run::<FooController>();
        let error = outcome.error();
        assert!(error.transient);
        assert_eq!(error.reason.as_deref(), Some("ErrResourceExists"));
        assert_eq!(error.message, "Resource \"example-foo\" already exists and is not managed by Foo");
    }

    #[test]
    fn deployment_controlled_by_another_foo_is_left_alone() {
        let outcome =
            TestCase::new(foo("example-foo", 1)).cached(deployment(Some("other-uid"), 0)).run::<FooController>();
        assert_eq!(outcome.error().reason.as_deref(), Some("ErrResourceExists"));
    }

    #[test]
    fn empty_deployment_name_fails_permanently_so_nothing_is_pruned() {
        let outcome = TestCase::new(foo("", 1)).cached(deployment(Some("foo-uid"), 1)).run::<FooController>();
        let error = outcome.error();
        assert!(!error.transient, "{error}");
        assert_eq!(error.reason.as_deref(), Some("InvalidSpec"));
        assert!(error.message.contains("spec.deploymentName must be specified"), "{error}");
    }

    #[test]
    fn cleanup_and_deleted_phases_do_nothing() {
        for phase in [Phase::Cleanup, Phase::Deleted] {
            assert!(TestCase::new(foo("example-foo", 1)).phase(phase).run::<FooController>().actions().is_empty());
        }
    }

    #[test]
    fn malformed_foo_is_a_permanent_error_naming_the_object() {
        let mut primary = foo("example-foo", 1);
        primary["spec"]["replicas"] = json!("three");
        let error = TestCase::new(primary).run::<FooController>().error().clone();
        assert!(!error.transient);
        assert!(error.message.contains("Foo default/example-foo"), "{}", error.message);
    }
}
