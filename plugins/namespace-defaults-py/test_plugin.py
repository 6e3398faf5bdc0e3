"""namespace-defaults' behaviour, natively: the same cases as the Rust plugin's unit tests."""

from plugin import ENABLED, LABEL, TEAM, NamespaceDefaults
from wasmloop import Apply, kinds
from wasmloop.testing import TestCase


def namespace(labels):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "uid": "ns-uid", "labels": labels}}


def child(api_version, kind, name):
    owner = {"apiVersion": "v1", "kind": "Namespace", "name": "team-a", "uid": "ns-uid", "controller": True}
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "team-a", "uid": f"{name}-uid", "ownerReferences": [owner]}}


def applied(outcome):
    return [f"{a.object['kind']} {a.object['metadata']['name']}" for a in outcome.actions if isinstance(a, Apply)]


def test_a_labelled_namespace_gets_its_three_defaults_and_an_event():
    outcome = TestCase(namespace({LABEL: ENABLED, TEAM: "payments"})).config({"teams": ["payments"]}).run(NamespaceDefaults())
    assert applied(outcome) == ["NetworkPolicy default-deny", "ResourceQuota default-resourcequota", "RoleBinding default-team"]
    binding = outcome.applied(kinds.RoleBinding)[0]
    assert binding["subjects"][0]["name"] == "payments" and binding["roleRef"]["name"] == "edit"
    assert outcome.prunes
    assert outcome.events[0].reason == "DefaultsApplied"


def test_without_a_team_there_is_no_rolebinding():
    outcome = TestCase(namespace({LABEL: ENABLED})).run(NamespaceDefaults())
    assert applied(outcome) == ["NetworkPolicy default-deny", "ResourceQuota default-resourcequota"]


def test_the_quota_comes_from_the_config():
    outcome = TestCase(namespace({LABEL: ENABLED})).config({"quota": {"pods": "10"}}).run(NamespaceDefaults())
    assert outcome.applied(kinds.ResourceQuota)[0]["spec"]["hard"] == {"pods": "10"}


def test_a_namespace_that_has_its_defaults_is_reapplied_without_an_event():
    outcome = (
        TestCase(namespace({LABEL: ENABLED}))
        .owned(child("networking.k8s.io/v1", "NetworkPolicy", "default-deny"), child("v1", "ResourceQuota", "default-resourcequota"))
        .run(NamespaceDefaults())
    )
    assert len(applied(outcome)) == 2 and outcome.events == []


def test_a_deleted_default_is_put_back_and_named():
    outcome = TestCase(namespace({LABEL: ENABLED})).owned(child("networking.k8s.io/v1", "NetworkPolicy", "default-deny")).run(NamespaceDefaults())
    assert outcome.events[0].message == "created or put back: ResourceQuota default-resourcequota"


def test_the_label_going_prunes_every_default():
    outcome = TestCase(namespace({LABEL: "disabled"})).owned(child("networking.k8s.io/v1", "NetworkPolicy", "default-deny")).run(NamespaceDefaults())
    assert outcome.prunes and applied(outcome) == []
    assert outcome.events[0].reason == "DefaultsRemoved"


def test_an_unlabelled_namespace_without_defaults_costs_nothing():
    assert TestCase(namespace({})).run(NamespaceDefaults()).actions == []


def test_a_namespace_being_deleted_is_left_alone():
    ns = namespace({LABEL: ENABLED})
    ns["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert TestCase(ns).run(NamespaceDefaults()).actions == []


def test_an_unknown_config_key_is_a_permanent_error_naming_it():
    error = TestCase(namespace({LABEL: ENABLED})).config({"quotas": {}}).run(NamespaceDefaults()).error
    assert not error.transient and "quotas" in error.message


def test_a_team_the_config_does_not_list_gets_no_rolebinding_and_a_warning():
    outcome = TestCase(namespace({LABEL: ENABLED, TEAM: "everyone"})).run(NamespaceDefaults())
    assert applied(outcome) == ["NetworkPolicy default-deny", "ResourceQuota default-resourcequota"]
    assert outcome.events[0].reason == "TeamNotAllowed"


def test_an_object_of_the_same_name_made_by_someone_else_is_never_taken_over():
    theirs = child("networking.k8s.io/v1", "NetworkPolicy", "default-deny")
    theirs["metadata"]["ownerReferences"] = []
    outcome = TestCase(namespace({LABEL: ENABLED})).cached(theirs).run(NamespaceDefaults())
    assert applied(outcome) == ["ResourceQuota default-resourcequota"]
    assert outcome.events[0].reason == "DefaultExists"


def test_an_excluded_namespace_gets_nothing_and_loses_what_it_had():
    system = namespace({LABEL: ENABLED})
    system["metadata"]["name"] = "kube-system"
    assert TestCase(system).run(NamespaceDefaults()).actions == []
    outcome = TestCase(system).owned(child("networking.k8s.io/v1", "NetworkPolicy", "default-deny")).run(NamespaceDefaults())
    assert outcome.prunes and applied(outcome) == []


def test_a_config_that_is_no_mapping_is_refused():
    error = TestCase(namespace({LABEL: ENABLED})).config([{"quota": {}}]).run(NamespaceDefaults()).error
    assert "expected a mapping" in error.message
