"""foo-deployment's behaviour, natively: the same cases as the Rust plugin's unit tests."""

import pytest

from plugin import FooController
from wasmloop import kinds
from wasmloop.testing import TestCase


def foo(deployment_name="example-foo", replicas=1):
    return {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example-foo", "namespace": "default", "uid": "foo-uid"},
        "spec": {"deploymentName": deployment_name, "replicas": replicas},
    }


def deployment(owner_uid=None, available=0):
    owners = [] if owner_uid is None else [
        {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "example-foo", "uid": owner_uid, "controller": True}
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "example-foo", "namespace": "default", "uid": "dep-uid", "ownerReferences": owners},
        "status": {"availableReplicas": available},
    }


def test_new_foo_applies_the_nginx_deployment_with_its_replicas_and_labels():
    [d] = TestCase(foo(replicas=3)).run(FooController()).applied(kinds.Deployment)
    assert (d["metadata"]["name"], d["metadata"]["namespace"]) == ("example-foo", "default")
    assert d["spec"]["replicas"] == 3
    assert d["spec"]["template"]["metadata"]["labels"] == {"app": "nginx", "controller": "example-foo"}
    assert d["spec"]["template"]["spec"]["containers"] == [{"name": "nginx", "image": "nginx:latest"}]


def test_a_foo_with_its_deployment_asks_to_prune_every_other_child():
    assert TestCase(foo()).run(FooController()).prunes


def test_success_records_the_synced_event():
    last = TestCase(foo()).run(FooController()).events[-1]
    assert (last.type, last.reason, last.message) == ("Normal", "Synced", "Foo synced successfully")


def test_available_replicas_of_the_owned_deployment_are_mirrored_into_status():
    outcome = TestCase(foo(replicas=2)).owned(deployment("foo-uid", 2)).run(FooController())
    assert outcome.status == {"availableReplicas": 2}


def test_unchanged_status_is_not_written_again():
    primary = foo(replicas=2)
    primary["status"] = {"availableReplicas": 2}
    assert TestCase(primary).owned(deployment("foo-uid", 2)).run(FooController()).status is None


def test_deployment_not_controlled_by_the_foo_is_left_alone_with_err_resource_exists():
    error = TestCase(foo()).cached(deployment(None, 0)).run(FooController()).error
    assert error.transient
    assert error.reason == "ErrResourceExists"
    assert error.message == 'Resource "example-foo" already exists and is not managed by Foo'


def test_deployment_controlled_by_another_foo_is_left_alone():
    error = TestCase(foo()).cached(deployment("other-uid", 0)).run(FooController()).error
    assert error.reason == "ErrResourceExists"


def test_empty_deployment_name_fails_permanently_so_nothing_is_pruned():
    error = TestCase(foo("")).cached(deployment("foo-uid", 1)).run(FooController()).error
    assert not error.transient
    assert error.reason == "InvalidSpec"
    assert "spec.deploymentName must be specified" in error.message


@pytest.mark.parametrize("phase", ["cleanup", "deleted"])
def test_cleanup_and_deleted_phases_do_nothing(phase):
    assert TestCase(foo()).phase(phase).run(FooController()).actions == []


def test_malformed_foo_is_a_permanent_error_naming_the_object():
    primary = foo()
    primary["spec"]["replicas"] = "three"
    error = TestCase(primary).run(FooController()).error
    assert not error.transient
    assert "Foo default/example-foo" in error.message
