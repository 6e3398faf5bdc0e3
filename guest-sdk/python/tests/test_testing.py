"""The test harness refuses and serves what the host would."""

from pathlib import Path

import pytest

from wasmloop import CacheError, Grant, Index, Manifest, ObjectRef, Reconciler, TransientError, Trigger, Watch, apply, cache, delete, event, kinds, log, patch, prune, ref, requeue_after, status
from wasmloop.testing import TestCase

PRIMARY = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns", "uid": "u"}}


def plugin(reconcile, **manifest):
    """A Reconciler with this manifest (primary ConfigMap) and reconcile function."""
    class P(Reconciler):
        def manifest(self):
            return Manifest("p", "0", primary=manifest.pop("primary", kinds.ConfigMap), **manifest)

        def reconcile(self, request):
            return reconcile(request)

    return P()


def cm(name, ns="ns", labels=None, **extra):
    meta = {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "labels": labels or {}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **extra}


def test_reading_an_undeclared_kind_fails_the_call_even_when_the_plugin_catches_it():
    def reconcile(_):
        try:
            cache.get(kinds.Secret, "s")
        except CacheError:
            pass
        return [status({"ok": True})]

    error = TestCase(PRIMARY).run(plugin(reconcile)).error
    assert not error.transient
    assert "read kind v1/Secret, which its manifest does not declare" in error.message


def test_an_apply_outside_what_is_owned_or_granted_is_refused_naming_the_grant_to_declare():
    other = cm("b", ns="elsewhere")
    error = TestCase(PRIMARY).run(plugin(lambda _: [apply(other)], owns=[kinds.ConfigMap])).error
    assert "no write grant lets it apply v1/ConfigMap in namespace elsewhere" in error.message


def test_a_grant_covers_writes_in_its_namespaces():
    granted = plugin(lambda _: [delete(cm("b", ns="elsewhere"))], writes=[Grant(kinds.ConfigMap, delete=True, namespaces=["elsewhere"])])
    assert len(TestCase(PRIMARY).run(granted).deletes) == 1


def test_prune_without_the_manifest_allowing_it_is_refused():
    error = TestCase(PRIMARY).run(plugin(lambda _: [prune()])).error
    assert "prune needs the manifest to allow it" in error.message


def test_prune_outside_phase_apply_is_refused():
    finalizing = plugin(lambda _: [prune()], prune=True, finalizer="example.com/cleanup")
    error = TestCase(PRIMARY).phase("cleanup").run(finalizing).error
    assert "phase apply only, not cleanup" in error.message


def test_a_list_comes_in_pages_in_namespace_and_name_order_without_repeats():
    objects = [cm(f"c{i:04}", ns=f"n{i % 3}") for i in range(1203)]
    pages = []
    TestCase(PRIMARY).cached(*objects).run(plugin(lambda _: pages.extend(cache.pages(kinds.ConfigMap)) or []))
    assert [len(p) for p in pages] == [500, 500, 204]
    places = [(o["metadata"]["namespace"], o["metadata"]["name"]) for p in pages for o in p]
    assert places == sorted(set(places))


def test_a_label_selector_filters_a_list():
    objects = [cm("web", labels={"app": "web"}), cm("db", labels={"app": "db"})]
    seen = []
    TestCase(PRIMARY).cached(*objects).run(plugin(lambda _: seen.extend(cache.list(kinds.ConfigMap, selector="app in (web)")) or []))
    assert [o["metadata"]["name"] for o in seen] == ["web"]


def test_a_selector_that_does_not_parse_is_a_permanent_error():
    error = TestCase(PRIMARY).run(plugin(lambda _: cache.list(kinds.ConfigMap, selector="a in b c"))).error
    assert not error.transient
    assert 'invalid label selector "a in b c"' in error.message


def test_a_kind_watched_only_through_a_selector_holds_only_what_it_selects():
    services = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": n, "namespace": "ns", "labels": {"app": n}}}
        for n in ("web", "db")
    ]
    seen = []
    p = plugin(lambda _: seen.extend(cache.list(kinds.Service)) or [], watches=[Watch(kinds.Service, labels="app=web")])
    TestCase(PRIMARY).cached(*services).run(p)
    assert [o["metadata"]["name"] for o in seen] == ["web"]


def test_cached_objects_arrive_without_managed_fields_or_the_last_applied_annotation():
    annotated = cm("b", managedFields=[])
    annotated["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    annotated["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    seen = []
    TestCase(PRIMARY).cached(annotated).run(plugin(lambda _: seen.append(cache.get(kinds.ConfigMap, "b", "ns")) or []))
    assert "managedFields" not in seen[0]["metadata"]
    assert "annotations" not in seen[0]["metadata"]


def test_a_metadata_only_kind_arrives_without_spec_or_status():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": {}, "status": {}}
    seen = []
    p = plugin(lambda _: seen.append(cache.get(kinds.Pod, "p", "ns")) or [], reads=[kinds.Pod], metadata_only=[kinds.Pod])
    TestCase(PRIMARY).cached(pod).run(p)
    assert sorted(seen[0]) == ["apiVersion", "kind", "metadata"]


def test_an_unexpected_exception_is_a_transient_error_naming_the_exception_and_where():
    def reconcile(request):
        return request.object["spec"]["missing"]

    error = TestCase(PRIMARY).run(plugin(reconcile)).error
    assert error.transient
    assert error.message.startswith("plugin raised KeyError: 'spec' (at test_testing.py:")


def test_the_shortest_requeue_wins_and_is_not_an_action():
    outcome = TestCase(PRIMARY).run(plugin(lambda _: [requeue_after(30), event("Normal", "R", "m"), requeue_after(1.5)]))
    assert outcome.requeue_after == 1.5
    assert len(outcome.actions) == 1


def test_an_object_that_is_not_json_fails_the_call():
    error = TestCase(PRIMARY).run(plugin(lambda _: [status({"when": object()})])).error
    assert "is not JSON" in error.message


def test_returning_something_other_than_actions_fails_the_call_saying_how_to_build_them():
    error = TestCase(PRIMARY).run(plugin(lambda _: ["apply"])).error
    assert "build actions with wasmloop.apply" in error.message


def test_log_lines_are_collected():
    outcome = TestCase(PRIMARY).run(plugin(lambda _: log.info("hello") or []))
    assert outcome.logged("info", "hello")


def test_a_manifest_the_host_would_refuse_fails_the_test():
    with pytest.raises(AssertionError, match="the host would refuse this plugin at load"):
        TestCase(PRIMARY).run(plugin(lambda _: [], metadata_only=[kinds.Pod]))


def test_the_sdk_ships_the_contract_it_is_built_against():
    repo_wit = Path(__file__).resolve().parents[3] / "wit" / "plugin.wit"
    shipped = Path(__file__).resolve().parents[1] / "wasmloop" / "wit" / "plugin.wit"
    assert shipped.read_text() == repo_wit.read_text(), "run scripts/sdk-assets: it ships wit/plugin.wit into the SDK"


@pytest.mark.parametrize(
    "change,refusal",
    [
        ({"finalizer": "cleanup"}, 'finalizer "cleanup" must look like `example.com/name`'),
        ({"metadata_only": [kinds.ConfigMap]}, "metadata-only kind v1/ConfigMap is not under owns, watches or reads"),
        ({"primary": Watch(kinds.ConfigMap, labels="a in ()")}, 'the set of "a" holds 0 values'),
        ({"watches": [Watch(kinds.Pod, labels="-a")]}, '"-a" is not a label key'),
        ({"writes": [Grant(kinds.Pod, apply=True, namespaces=[])]}, "lists 0 namespaces; list 1 to 64"),
        ({"writes": [Grant(kinds.Pod, apply=True, namespaces=["Team_A"])]}, 'namespace "Team_A" is not a valid namespace'),
        ({"writes": [Grant(kinds.Pod, apply=True, namespaces=[f"n{i}" for i in range(65)])]}, "lists 65 namespaces"),
    ],
    ids=["finalizer-form", "metadata-only-primary", "empty-set", "label-key", "no-namespaces", "bad-namespace", "too-many-namespaces"],
)
def test_a_manifest_the_host_refuses_is_refused_naming_the_field(change, refusal):
    with pytest.raises(AssertionError, match="the host would refuse this plugin at load") as refused:
        TestCase(PRIMARY).run(plugin(lambda _: [], **change))
    assert refusal in str(refused.value)


@pytest.mark.parametrize(
    "actions,phase,refusal",
    [
        (lambda: [event("Normal", "Not synced", "x")], "apply", 'actions[0]: the event reason "Not synced" must be a CamelCase word'),
        (lambda: [event("Normal", "Synced", "x", action="do it")], "apply", 'the event action "do it" must be a CamelCase word'),
        (lambda: [apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})], "apply", "needs apiVersion, kind and metadata.name"),
        (lambda: [apply(cm("Bad Name"))], "apply", 'name "Bad Name" is not a valid object name'),
        (lambda: [apply(cm("b", ns="Not/A/Namespace"))], "apply", "is not a valid namespace"),
        (lambda: [apply({"apiVersion": "v1", "kind": "Config Map", "metadata": {"name": "b"}})], "apply", "is not a valid kind"),
        (lambda: [status({"ok": True})], "deleted", "actions[0]: in phase deleted the primary is gone"),
        (lambda: [event("Normal", "Gone", "x")], "deleted", "in phase deleted the primary is gone"),
        (lambda: [patch(cm("b"), [{"op": "remove", "path": "/x"}])], "apply", "a merge patch must be a JSON object"),
        (lambda: [patch(cm("b"), {"a": 1}, kind="json")], "apply", "a JSON patch must be an array of operations"),
        (lambda: [delete(ObjectRef("v1", "ConfigMap", "b", "ns", uid="not a uid"))], "apply", "is not a valid UID"),
    ],
    ids=["reason", "action", "nameless", "bad-name", "bad-namespace", "bad-kind", "status-deleted", "event-deleted", "merge-list", "json-object", "bad-uid"],
)
def test_an_action_the_host_refuses_fails_the_call_naming_it(actions, phase, refusal):
    granted = plugin(
        lambda _: actions(),
        owns=[kinds.ConfigMap],
        deliver_deleted=True,
        writes=[Grant(kinds.ConfigMap, apply=True, patch=True, delete=True, namespaces="*")],
    )
    error = TestCase(PRIMARY).phase(phase).run(granted).error
    assert not error.transient
    assert refusal in error.message


def test_the_actions_of_an_error_are_checked_as_a_success_s_are():
    def reconcile(_):
        raise TransientError("not yet", actions=[event("Warning", "Not ready", "waiting")])

    error = TestCase(PRIMARY).run(plugin(reconcile)).error
    assert 'error.actions[0]: the event reason "Not ready" must be a CamelCase word' in error.message


@pytest.mark.parametrize("delay", [float("inf"), float("nan"), -1, "5"])
def test_a_retry_delay_without_a_finite_duration_is_refused_where_it_is_given(delay):
    with pytest.raises(ValueError, match="retry_after takes a finite duration"):
        TransientError("later", retry_after=delay)
    with pytest.raises(ValueError, match="requeue_after takes a finite duration"):
        requeue_after(delay)


def test_a_namespace_asked_for_finds_cluster_scoped_objects_as_the_host_does():
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "n"}}
    seen = []

    def reconcile(request):
        seen.append(cache.get(kinds.Node, "n1", namespace=request.namespace))
        seen.append(len(cache.list(kinds.Node, namespace="default")))
        return []

    TestCase(PRIMARY).cached(node).run(plugin(reconcile, reads=[kinds.Node]))
    assert seen[0] is not None and seen[0]["metadata"]["name"] == "n1"
    assert seen[1] == 1


def test_a_watch_of_one_namespace_without_a_selector_sees_only_that_namespace():
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns, "uid": ns}} for ns in ("a", "b")]
    seen = []
    watching = plugin(lambda _: seen.extend(cache.list(kinds.Pod)) or [], watches=[Watch(kinds.Pod, namespace="a")])
    TestCase(PRIMARY).cached(*pods).run(watching)
    assert [o["metadata"]["namespace"] for o in seen] == ["a"]


def test_a_metadata_only_object_loses_the_last_applied_annotation_before_it_is_reduced():
    child = cm("b")
    child["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}", "kept": "yes"}
    seen = []
    lean = plugin(lambda _: seen.append(cache.get(kinds.Secret, "b", "ns")) or [], reads=[kinds.Secret], metadata_only=[kinds.Secret])
    secret = {**child, "kind": "Secret", "data": {"k": "dg=="}}
    TestCase(PRIMARY).cached(secret).run(lean)
    assert seen[0] == {"apiVersion": "v1", "kind": "Secret", "metadata": {**child["metadata"], "annotations": {"kept": "yes"}}}


class Mapper(Reconciler):
    def __init__(self, refs):
        self.refs = refs

    def manifest(self):
        return Manifest("p", "0", primary=kinds.ConfigMap, watches=[kinds.Secret])

    def reconcile(self, request):
        return []

    def map(self, related, config):
        return self.refs


SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns", "uid": "s"}}


@pytest.mark.parametrize(
    "refs, refused",
    [
        ([{"name": "a"}], "result [0] is a dict, not an ObjectRef"),
        ([ObjectRef("v1", "ConfigMap", "../x", "ns")], "result [0]: "),
        ([ObjectRef("v1", "Secret", "s", "ns")], "must name primaries (v1/ConfigMap)"),
        (ObjectRef("v1", "ConfigMap", "a", "ns"), "must return a list of ObjectRef"),
    ],
)
def test_map_fails_where_the_host_refuses_its_result(refs, refused):
    with pytest.raises(AssertionError, match=None) as failed:
        TestCase(PRIMARY).map(Mapper(refs), SECRET)
    assert refused in str(failed.value)


def test_map_returns_refs_to_primaries():
    refs = [ObjectRef("v1", "ConfigMap", "a", "ns")]
    assert TestCase(PRIMARY).map(Mapper(refs), SECRET) == refs


def test_more_actions_than_the_host_takes_fail_the_call():
    error = TestCase(PRIMARY).run(plugin(lambda _: [status({})] * 10_001)).error
    assert "10001 actions, over the limit of 10000" in error.message


def test_a_response_over_the_plugin_s_byte_limit_fails_the_call():
    from wasmloop.manifest import Settings

    big = plugin(lambda _: [status({"x": "y" * 2000})], settings=Settings(response_limit_bytes=1000))
    error = TestCase(PRIMARY).run(big).error
    assert "over the 1000-byte cap" in error.message


def test_an_error_s_actions_must_encode_as_json_as_the_glue_requires():
    def reconcile(_):
        raise TransientError("not yet", actions=[status({"r": float("nan")})])

    error = TestCase(PRIMARY).run(plugin(reconcile)).error
    assert "error.actions[0]: a status is not JSON" in error.message
    assert error.actions == []


def test_a_retry_delay_changed_to_no_duration_fails_as_the_glue_would():
    def reconcile(_):
        e = TransientError("not yet", retry_after=1)
        e.retry_after = float("inf")
        raise e

    error = TestCase(PRIMARY).run(plugin(reconcile)).error
    assert error.transient and "plugin raised ValueError: retry_after takes a finite duration" in error.message


def test_an_event_or_ref_of_the_wrong_types_is_refused_where_it_is_built():
    from wasmloop.actions import Event

    with pytest.raises(ValueError):
        Event("Info", "Reason", "message")
    with pytest.raises(TypeError):
        Event("Normal", "Reason", 5)
    with pytest.raises(TypeError):
        ObjectRef("v1", "ConfigMap", 5)
    with pytest.raises(TypeError):
        TransientError(["not", "a", "string"])


def test_a_wait_past_the_contract_s_range_is_clamped_not_an_overflow():
    from wasmloop.actions import MAX_MILLIS, duration_millis

    assert duration_millis(1e306, "requeue_after") == MAX_MILLIS
    assert duration_millis(1.5, "requeue_after") == 1500


def test_a_cluster_scoped_object_under_a_watch_of_one_namespace_is_served_as_the_host_serves_it():
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "n", "labels": {"role": "x"}}}
    seen = []
    watching = plugin(lambda _: seen.extend(cache.list(kinds.Node)) or [], watches=[Watch(kinds.Node, namespace="ns", labels="role=x")])
    TestCase(PRIMARY).cached(node).run(watching)
    assert [o["metadata"]["name"] for o in seen] == ["n1"]


def test_a_plugin_s_byte_limit_is_held_to_the_host_s_ceiling():
    from wasmloop.manifest import Settings
    from wasmloop.testing import RESPONSE_LIMIT_CEILING

    huge = plugin(lambda _: [status({"x": "y" * RESPONSE_LIMIT_CEILING})], settings=Settings(response_limit_bytes=1 << 30))
    error = TestCase(PRIMARY).run(huge).error
    assert f"over the {RESPONSE_LIMIT_CEILING}-byte cap" in error.message


def test_a_payload_nested_past_the_encoder_s_depth_fails_the_call_as_the_glue_would():
    deep = {}
    for _ in range(100_000):
        deep = {"d": deep}
    error = TestCase(PRIMARY).run(plugin(lambda _: [status(deep)])).error
    assert error.transient and "a status is not JSON" in error.message


def test_an_integer_wait_past_the_contract_s_range_is_clamped():
    from wasmloop.actions import MAX_MILLIS, duration_millis

    assert duration_millis(10**400, "requeue_after") == MAX_MILLIS
    assert duration_millis(12345678901234567, "requeue_after") == 12345678901234567000


# Rust's `Duration::from_secs_f64(s).as_millis()` on each (checked with rustc), as the
# JavaScript SDK's test has it.
@pytest.mark.parametrize(
    "seconds, millis",
    [(0.003, 3), (0.0015, 1), (0.0005, 0), (0.0009999999, 1), (1.0, 1000), (2.5, 2500), (4503599627370.497, 4503599627370497)],
)
def test_a_float_wait_is_whole_milliseconds_as_the_rust_sdk_counts_them(seconds, millis):
    from wasmloop.actions import duration_millis

    assert duration_millis(seconds, "requeue_after") == millis


@pytest.mark.parametrize(
    "settings,refusal",
    [
        ({"deadline_ms": 2**32}, "setting deadline-ms is 4294967296, which the contract's type cannot carry"),
        ({"memory_limit_bytes": 2**64}, "setting memory-limit-bytes is 1.8446744073709552e+19, which the contract's type cannot carry"),
        ({"resync_seconds": 1.5}, "setting resync-seconds is 1.5, which the contract's type cannot carry"),
        ({"max_concurrent_reconciles": True}, "setting max-concurrent-reconciles is true, which the contract's type cannot carry"),
        ({"deadline_ms": 0}, "setting deadline-ms is 0; leave it unset for the host default"),
    ],
)
def test_a_setting_past_its_wit_type_is_refused(settings, refusal):
    from wasmloop.manifest import Settings

    with pytest.raises(AssertionError, match="the host would refuse this plugin at load") as refused:
        TestCase(PRIMARY).run(plugin(lambda _: [], settings=Settings(**settings)))
    assert refusal in str(refused.value)


def test_the_largest_setting_each_wit_type_holds_is_taken():
    from wasmloop.manifest import Settings

    largest = Settings(deadline_ms=2**32 - 1, memory_limit_bytes=2**64 - 1)
    assert TestCase(PRIMARY).run(plugin(lambda _: [status({})], settings=largest)).status == {}


def _nested(depth):
    value = {}
    for _ in range(depth):
        value = {"d": value}
    return value


@pytest.mark.parametrize(
    "payload, expected",
    [
        (_nested(200), "a status action is not valid JSON: recursion limit exceeded"),
        ({"n": 10**400}, "a status action is not valid JSON: number out of range"),
        ({"cut": "\ud800ok"}, "a status action is not valid JSON: unexpected end of hex escape"),
    ],
)
def test_a_payload_the_host_s_serde_json_cannot_read_fails_the_call(payload, expected):
    error = TestCase(PRIMARY).run(plugin(lambda _: [status(payload)])).error
    assert f"actions[0]: {expected}" in error.message


def test_the_deepest_payload_the_host_reads_is_taken():
    assert TestCase(PRIMARY).run(plugin(lambda _: [status(_nested(126))])).status == _nested(126)


def test_an_event_message_with_a_lone_surrogate_fails_the_call_instead_of_the_harness():
    error = TestCase(PRIMARY).run(plugin(lambda _: [event("Normal", "Cut", "\ud800")])).error
    assert "holds a lone surrogate" in error.message


def test_an_error_s_actions_changed_after_it_was_built_are_held_to_status_and_events():
    def reconcile(_):
        error = TransientError("not yet", actions=[status({"phase": "Waiting"})])
        error.actions.append(prune())
        raise error

    error = TestCase(PRIMARY).run(plugin(reconcile)).error
    assert "error.actions[1]: a failed reconcile may only set status and record events" in error.message


# ---- contract 0.3 -------------------------------------------------------------------------

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment"}


def deployment(name, configmaps=(), ns="ns"):
    volumes = [{"name": c, "configMap": {"name": c}} for c in configmaps]
    return {**DEPLOYMENT, "metadata": {"name": name, "namespace": ns, "uid": name}, "spec": {"template": {"spec": {"volumes": volumes}}}}


BY_CONFIGMAP = Index("configmap", kinds.Deployment, ["spec.template.spec.volumes[*].configMap.name"])


class Roller(Reconciler):
    """Maps a ConfigMap to the Deployments that mount it, through an index."""

    def manifest(self):
        return Manifest("roller", "0", primary=kinds.Deployment, watches=[kinds.ConfigMap], indexes=[BY_CONFIGMAP])

    def reconcile(self, request):
        return []

    def map(self, related, config):
        meta = related["metadata"]
        return [ref(d) for d in cache.by_index(kinds.Deployment, "configmap", meta["name"], namespace=meta["namespace"])]


def test_map_through_an_index_finds_the_objects_that_name_the_key():
    case = TestCase(deployment("web")).cached(deployment("web", ["settings"]), deployment("db", ["other"]), deployment("api", ["settings"], ns="far"))
    found = case.map(Roller(), cm("settings"))
    assert [r.name for r in found] == ["web"]


def test_a_look_up_by_an_undeclared_index_is_refused_as_the_host_refuses_it():
    def reconcile(_):
        cache.by_index(kinds.Deployment, "secret", "x")
        return []

    error = TestCase(deployment("web")).run(plugin(reconcile, primary=kinds.Deployment)).error
    assert 'the manifest declares no index "secret" on apps/v1/Deployment' in error.message


def test_an_annotation_filter_keeps_unannotated_objects_out_of_the_cache():
    tagged = {**cm("tagged"), "metadata": {**cm("tagged")["metadata"], "annotations": {"team": "a"}}}
    seen = plugin(lambda _: [status({"names": [c["metadata"]["name"] for c in cache.list(kinds.ConfigMap)]})], primary=Watch(kinds.ConfigMap, annotations={"team": "a"}))
    assert TestCase(tagged).cached(cm("plain")).run(seen).status == {"names": ["tagged"]}


def test_a_field_selected_read_holds_only_the_named_objects():
    secret = lambda name: {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "ns"}}  # noqa: E731
    seen = plugin(lambda _: [status({"names": [s["metadata"]["name"] for s in cache.list(kinds.Secret)]})], reads=[Watch(kinds.Secret, fields="metadata.name=db")])
    assert TestCase(PRIMARY).cached(secret("db"), secret("api")).run(seen).status == {"names": ["db"]}


def test_triggers_reach_the_reconcile():
    told = Trigger("related-changed", ref=ObjectRef("v1", "ConfigMap", "settings", "ns"))
    seen = plugin(lambda request: [status({"why": [t.kind for t in request.triggers], "what": request.triggers[0].ref.name})])
    assert TestCase(PRIMARY).triggers(told, Trigger("resync")).run(seen).status == {"why": ["related-changed", "resync"], "what": "settings"}


def test_an_apply_keeps_its_force_and_precondition():
    child = cm("child")
    outcome = TestCase(PRIMARY).run(plugin(lambda _: [apply(child, force=False, uid="u-1")], owns=[kinds.ConfigMap]))
    (action,) = outcome.actions
    assert (action.force, action.uid) == (False, "u-1")


def test_an_apply_whose_precondition_is_no_uid_is_refused_as_the_host_refuses_it():
    error = TestCase(PRIMARY).run(plugin(lambda _: [apply(cm("child"), uid="not a uid!")], owns=[kinds.ConfigMap])).error
    assert "an apply action's precondition" in error.message


def test_a_strategic_merge_patch_that_is_no_object_is_refused():
    granted = plugin(lambda _: [patch(cm("b"), [], kind="strategic")], writes=[Grant(kinds.ConfigMap, patch=True)])
    assert "a strategic merge patch must be a JSON object" in TestCase(PRIMARY).run(granted).error.message


def test_map_change_is_told_of_a_deletion():
    class Told(Roller):
        def map_change(self, change, config):
            return [] if change.deleted else super().map_change(change, config)

    case = TestCase(deployment("web")).cached(deployment("web", ["settings"]))
    assert case.map(Told(), cm("settings"), deleted=True) == []
    assert [r.name for r in case.map(Told(), cm("settings"))] == ["web"]
