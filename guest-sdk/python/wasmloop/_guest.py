"""The WIT glue: turns a ``Reconciler`` into the ``plugin`` and ``cache-options`` exports of
``wasmloop:plugin@0.3.0``. Imported only inside the component, where componentize-py's
``wit_world`` bindings exist. Not a public API."""

from __future__ import annotations

import json
from typing import List, Optional, Tuple

from wit_world import exports as wit_exports
from wit_world.exports import cache_options as wit_cache_options
from wit_world.exports import plugin as wit_plugin
from wit_world.imports import cache as wit_cache
from wit_world.imports import log as wit_log
from wit_world.imports import types as wit_types
from componentize_py_types import Err

from . import _host, _outcome
from .actions import Apply, Delete, Event, ObjectRef, Patch, Prune, Status
from .errors import CacheError
from .kinds import Kind
from .manifest import Manifest, Watch
from .reconciler import Reconciler
from .request import ApplyConflict, Envelope, FieldConflict, Related, Request, Trigger

_LEVELS = {
    "trace": wit_types.LogLevel.TRACE,
    "debug": wit_types.LogLevel.DEBUG,
    "info": wit_types.LogLevel.INFO,
    "warn": wit_types.LogLevel.WARN,
    "error": wit_types.LogLevel.ERROR,
}
_CACHE_ERRORS = {
    wit_cache.CacheError_UndeclaredKind: "undeclared-kind",
    wit_cache.CacheError_InvalidSelector: "invalid-selector",
    wit_cache.CacheError_OutOfScope: "out-of-scope",
    wit_cache.CacheError_AccessRevoked: "access-revoked",
    wit_cache.CacheError_InvalidContinue: "invalid-continue",
    wit_cache.CacheError_UnknownIndex: "unknown-index",
}
_PATCH_KINDS = {"merge": wit_plugin.PatchKind.MERGE, "json": wit_plugin.PatchKind.JSON, "strategic": wit_plugin.PatchKind.STRATEGIC}
_PHASES = {wit_plugin.Phase.APPLY: "apply", wit_plugin.Phase.CLEANUP: "cleanup", wit_plugin.Phase.DELETED: "deleted"}


def _gvk(kind: Kind) -> wit_types.Gvk:
    return wit_types.Gvk(kind.group, kind.version, kind.kind)


def _selector(watch: Watch) -> wit_types.KindSelector:
    return wit_types.KindSelector(
        _gvk(watch.kind),
        watch.namespace_list,
        watch.labels,
        watch.fields,
        [wit_types.AnnotationMatch(k, v) for k, v in watch.annotations.items()],
        watch.generation_changed,
    )


def _cache_error(e: Err) -> CacheError:
    return CacheError(_CACHE_ERRORS[type(e.value)], e.value.value)


class _ComponentHost:
    """The host's imports, in the SDK's terms."""

    def get(self, kind: Kind, namespace: Optional[str], name: str) -> Optional[dict]:
        try:
            found = wit_cache.get_object(_gvk(kind), namespace, name)
        except Err as e:
            raise _cache_error(e) from None
        return None if found is None else json.loads(found.json)

    def page(
        self, kind: Kind, namespace: Optional[str], selector: Optional[str], limit: int, token: Optional[str]
    ) -> Tuple[List[dict], Optional[str]]:
        try:
            page = wit_cache.list_objects(_gvk(kind), namespace, selector, limit, token)
        except Err as e:
            raise _cache_error(e) from None
        return [json.loads(o.json) for o in page.items], page.continue_token

    def index_page(
        self, kind: Kind, index: str, key: str, namespace: Optional[str], limit: int, token: Optional[str]
    ) -> Tuple[List[dict], Optional[str]]:
        try:
            page = wit_cache.list_by_index(_gvk(kind), index, key, namespace, limit, token)
        except Err as e:
            raise _cache_error(e) from None
        return [json.loads(o.json) for o in page.items], page.continue_token

    def log(self, level: str, message: str) -> None:
        wit_log.log(_LEVELS[level], message)


def _envelope(o: wit_types.Object) -> Envelope:
    return Envelope(o.api_version, o.kind, o.name, o.namespace, o.uid, o.json)


def _ref(r: ObjectRef) -> wit_types.ObjectRef:
    return wit_types.ObjectRef(r.api_version, r.kind, r.name, r.namespace, r.uid)


def _from_ref(r: wit_types.ObjectRef) -> ObjectRef:
    return ObjectRef(r.api_version, r.kind, r.name, r.namespace, r.uid)


def _trigger(t) -> Trigger:
    if isinstance(t, wit_plugin.Trigger_PrimaryChanged):
        return Trigger("primary-changed", generation=(t.value.old, t.value.new))
    if isinstance(t, wit_plugin.Trigger_OwnedChanged):
        return Trigger("owned-changed", ref=_from_ref(t.value))
    if isinstance(t, wit_plugin.Trigger_RelatedChanged):
        return Trigger("related-changed", ref=_from_ref(t.value))
    if isinstance(t, wit_plugin.Trigger_Conflict):
        c = t.value
        fields = tuple(FieldConflict(f.manager, f.field) for f in c.fields)
        return Trigger("conflict", ref=_from_ref(c.target), conflict=ApplyConflict(_from_ref(c.target), fields, c.more))
    kinds = {wit_plugin.Trigger_Resync: "resync", wit_plugin.Trigger_Requeue: "requeue", wit_plugin.Trigger_Retry: "retry"}
    return Trigger(kinds[type(t)])


def _action(a, payload: Optional[str]) -> wit_plugin.Action:
    if isinstance(a, Apply):
        return wit_plugin.Action_Apply(wit_plugin.ApplyObject(payload, a.force, a.uid))
    if isinstance(a, Delete):
        return wit_plugin.Action_Delete(_ref(a.target))
    if isinstance(a, Patch):
        return wit_plugin.Action_Patch(wit_plugin.Patch(_ref(a.target), _PATCH_KINDS[a.kind], payload))
    if isinstance(a, Status):
        return wit_plugin.Action_Status(payload)
    if isinstance(a, Event):
        kind = wit_plugin.EventType.NORMAL if a.type == "Normal" else wit_plugin.EventType.WARNING
        return wit_plugin.Action_Event(wit_plugin.Event(kind, a.reason, a.message, a.action))
    assert isinstance(a, Prune)
    return wit_plugin.Action_Prune()


def _manifest(m: Manifest) -> wit_types.PluginManifest:
    def grant(g) -> wit_types.WriteGrant:
        verbs = wit_types.WriteVerbs(0)
        for on, verb in ((g.apply, wit_types.WriteVerbs.APPLY), (g.patch, wit_types.WriteVerbs.PATCH), (g.delete, wit_types.WriteVerbs.DELETE)):
            if on:
                verbs |= verb
        if g.namespaces is None:
            scope = wit_types.WriteScope_PrimaryNamespace()
        elif g.namespaces == "*":
            scope = wit_types.WriteScope_Any()
        else:
            scope = wit_types.WriteScope_Namespaces(list(g.namespaces))
        return wit_types.WriteGrant(_gvk(g.kind), verbs, scope)

    s = m.settings
    return wit_types.PluginManifest(
        name=m.name,
        version=m.version,
        primary=_selector(m.primary_watch),
        owns=[_gvk(k) for k in m.owns],
        watches=[_selector(w) for w in m.watch_list],
        reads=[_selector(r) for r in m.read_list],
        metadata_only=[_gvk(k) for k in m.metadata_only],
        writes=[grant(g) for g in m.writes],
        finalizer=m.finalizer,
        prune=m.prune,
        deliver_deleted=m.deliver_deleted,
        deliver_previous=m.deliver_previous,
        indexes=[wit_types.Index(i.name, _gvk(i.kind), list(i.fields)) for i in m.indexes],
        settings=wit_types.Settings(s.max_concurrent_reconciles, s.deadline_ms, s.memory_limit_bytes, s.response_limit_bytes, s.resync_seconds),
    )


def component_exports(reconciler: Reconciler):
    """The ``Plugin`` and ``CacheOptions`` classes componentize-py looks for."""
    _host.install(_ComponentHost())

    class Plugin(wit_exports.Plugin):
        def manifest(self) -> wit_types.PluginManifest:
            return _manifest(reconciler.manifest())

        def reconcile(self, request: wit_plugin.Request) -> wit_plugin.Response:
            req = Request(
                _envelope(request.object),
                [_envelope(o) for o in request.owned],
                _PHASES[request.phase],
                None if request.previous is None else _envelope(request.previous),
                request.attempt,
                request.config,
                [_trigger(t) for t in request.triggers],
                request.triggers_dropped,
            )
            result = _outcome.reconcile(reconciler, req)
            try:
                encoded = _outcome.encode(result)
            except Exception as e:  # noqa: BLE001 - an export that raises traps: report it instead
                result, encoded = _outcome.Result(error=_outcome.as_error(e)), _outcome.Encoded([], [], None)
            error = result.error
            if error is None:
                actions = [_action(a, payload) for a, payload in encoded.actions]
                return wit_plugin.Response(actions, result.requeue_after_ms)
            error_actions = [_action(a, payload) for a, payload in encoded.error_actions]
            reconcile_error = wit_plugin.ReconcileError(
                error.message, error.transient, error.reason, encoded.retry_after_ms, error_actions
            )
            raise Err(reconcile_error)

        def map(self, change: wit_plugin.RelatedChange, config: str) -> List[wit_types.ObjectRef]:
            related = change.object
            try:
                refs = reconciler.map_change(Related(json.loads(related.json), change.deleted), json.loads(config or "{}"))
                return [_ref(r) for r in refs]
            except Exception as e:
                # map has no error channel: say why in the host's log before the call fails.
                wit_log.log(wit_types.LogLevel.ERROR, f"map of {related.kind} {related.name}: {_outcome.as_error(e).message}")
                raise

    class CacheOptions(wit_exports.CacheOptions):
        def keep_fields(self) -> List[wit_cache_options.Keep]:
            keeps = []
            for kind, managed, last_applied in reconciler.manifest().keeps():
                fields = wit_cache_options.KeptFields(0)
                if managed:
                    fields |= wit_cache_options.KeptFields.MANAGED_FIELDS
                if last_applied:
                    fields |= wit_cache_options.KeptFields.LAST_APPLIED
                keeps.append(wit_cache_options.Keep(_gvk(kind), fields))
            return keeps

    return Plugin, CacheOptions
