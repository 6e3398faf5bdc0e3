"""configmap-mirror's behaviour, natively: the same cases as the Rust plugin's unit tests."""

from plugin import MIRROR_LABEL, MIRROR_OF, MIRROR_OF_UID, MIRROR_TO, ConfigMapMirror
from wasmloop import ObjectRef, kinds
from wasmloop.testing import TestCase


def source(to):
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "platform", "uid": "src-uid",
                     "labels": {MIRROR_LABEL: "true", "team": "core"}, "annotations": {MIRROR_TO: to}},
        "data": {"level": "debug"},
    }


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": name}}


def copy(ns):
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": ns, "uid": f"copy-{ns}",
                     "labels": {MIRROR_OF_UID: "src-uid", "team": "core"}, "annotations": {MIRROR_OF: "platform/settings"}},
        "data": {"level": "debug"},
    }


def test_copies_are_applied_into_every_listed_namespace():
    outcome = TestCase(source("a, b")).cached(namespace("a"), namespace("b")).run(ConfigMapMirror())
    applied = outcome.applied(kinds.ConfigMap)
    assert [c["metadata"]["namespace"] for c in applied] == ["a", "b"]
    labels = applied[0]["metadata"]["labels"]
    assert labels[MIRROR_OF_UID] == "src-uid"
    assert MIRROR_LABEL not in labels, "a copy must not be a source"
    assert applied[0]["data"]["level"] == "debug"
    assert outcome.events[0].reason == "Mirrored"


def test_no_wasmloop_label_travels_with_a_copy():
    src = source("a")
    src["metadata"]["labels"]["wasmloop.dev/plugin"] = "foo-deployment"
    [applied] = TestCase(src).cached(namespace("a")).run(ConfigMapMirror()).applied(kinds.ConfigMap)
    assert sorted(applied["metadata"]["labels"]) == sorted(["team", MIRROR_OF_UID])


def test_a_configmap_that_is_not_a_copy_is_never_overwritten():
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "a", "uid": "someone-elses"}}
    outcome = TestCase(source("a, b")).cached(namespace("a"), namespace("b"), foreign).run(ConfigMapMirror())
    assert [c["metadata"]["namespace"] for c in outcome.applied(kinds.ConfigMap)] == ["b"]
    [warning] = [e for e in outcome.events if e.reason == "TargetExists"]
    assert "a/settings" in warning.message


def test_namespace_taken_off_the_list_loses_its_copy():
    outcome = TestCase(source("a")).cached(namespace("a"), copy("a"), copy("b")).run(ConfigMapMirror())
    [gone] = outcome.deletes
    assert (gone.namespace, gone.uid) == ("b", "copy-b")


def test_cleanup_deletes_every_copy():
    outcome = TestCase(source("a,b")).cached(copy("a"), copy("b")).phase("cleanup").run(ConfigMapMirror())
    assert len(outcome.deletes) == 2
    assert outcome.applied() == []


def test_missing_namespace_is_reported_and_skipped():
    outcome = TestCase(source("a,ghost")).cached(namespace("a")).run(ConfigMapMirror())
    assert len(outcome.applied(kinds.ConfigMap)) == 1
    [warning] = [e for e in outcome.events if e.type == "Warning"]
    assert warning.reason == "NamespaceNotFound"
    assert "ghost" in warning.message


def test_a_copy_that_outlives_its_namespace_is_neither_added_nor_counted_twice():
    outcome = TestCase(source("a,b")).cached(namespace("a"), copy("a"), copy("b")).run(ConfigMapMirror())
    assert [e.reason for e in outcome.events] == ["NamespaceNotFound"], "nothing was added, so nothing is announced"
    outcome = TestCase(source("a,b,c")).cached(namespace("a"), namespace("c"), copy("a"), copy("b")).run(ConfigMapMirror())
    mirrored = next(e for e in outcome.events if e.reason == "Mirrored")
    assert mirrored.message == "mirrored to 2 namespace(s), 1 copy(ies) added, 0 removed"


def test_own_namespace_is_never_a_target():
    assert TestCase(source("platform")).cached(namespace("platform")).run(ConfigMapMirror()).actions == []


def test_steady_state_reapplies_without_an_event():
    outcome = TestCase(source("a")).cached(namespace("a"), copy("a")).run(ConfigMapMirror())
    assert len(outcome.applied(kinds.ConfigMap)) == 1
    assert outcome.events == []


def test_a_copy_maps_back_to_its_source():
    assert TestCase(source("a")).map(ConfigMapMirror(), copy("a")) == [ObjectRef("v1", "ConfigMap", "settings", "platform")]


def test_a_new_namespace_maps_to_the_sources_that_list_it():
    assert TestCase(source("a,b")).map(ConfigMapMirror(), namespace("b")) == [ObjectRef("v1", "ConfigMap", "settings", "platform")]
    assert TestCase(source("a")).map(ConfigMapMirror(), namespace("z")) == []
