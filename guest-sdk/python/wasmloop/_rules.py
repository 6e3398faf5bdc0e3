"""The host's rules, asked of the contract's rules component (``wit/rules/rules.wit``, built
from ``guest-sdk/rules`` and shipped here by ``scripts/sdk-assets``) through wasmtime: the
test harness refuses what the host refuses, in the host's words, and no rule is written twice.
Not a public API; the harness (``wasmloop.testing``) is its one user.

Each check returns ``None`` when the host accepts the value, else the host's sentence.

>>> check_value("namespace", "team-a") is None
True
>>> check_value("event-reason", "Not synced")
'the event reason "Not synced" must be a CamelCase word of letters and digits'
"""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

from .actions import Action, Apply, Delete, Event, ObjectRef, Patch, Prune, Status
from .manifest import Manifest, Watch

COMPONENT = Path(__file__).resolve().parent / "rules" / "rules.wasm"
VERSION = "0.1.1"
# Each function the harness asks, under the interface that exports it.
_FUNCTIONS = {
    "rules": ("check-value", "check-selector", "selector-matches", "check-manifest", "check-response", "check-action"),
    "cache-rules": ("holds", "index-keys"),
}


class _Component:
    """One instance of the rules component, its calls one at a time (a store is not shared
    across threads)."""

    def __init__(self) -> None:
        try:
            from wasmtime import Engine, Store, WasiConfig
            from wasmtime.component import Component, Linker
        except ImportError:
            raise RuntimeError(
                "wasmloop.testing asks the host's rules of a component it runs with wasmtime, which is not "
                "installed: run scripts/python-env in the checkout (or pip install 'wasmloop-sdk[test]')"
            ) from None
        if not COMPONENT.is_file():
            raise RuntimeError(
                f"the contract's rules component is missing ({COMPONENT}): run scripts/sdk-assets in the "
                "checkout, which builds guest-sdk/rules and ships it into the SDK"
            )
        engine = Engine()
        self._store = Store(engine)
        self._store.set_wasi(WasiConfig())
        linker = Linker(engine)
        linker.add_wasip2()
        instance = linker.instantiate(self._store, Component.from_file(engine, str(COMPONENT)))
        self._functions = {}
        for interface_name, names in _FUNCTIONS.items():
            qualified = f"wasmloop:rules/{interface_name}@{VERSION}"
            interface = instance.get_export_index(self._store, qualified)
            if interface is None:
                raise RuntimeError(f"{COMPONENT} exports no {qualified}: run scripts/sdk-assets again")
            for name in names:
                self._functions[name] = instance.get_func(self._store, instance.get_export_index(self._store, name, interface))
        self._lock = threading.Lock()

    def call(self, name: str, *args: Any) -> Any:
        with self._lock:
            return self._functions[name](self._store, *args)


@functools.lru_cache(maxsize=None)
def _component() -> _Component:
    return _Component()


def check_value(rule: str, value: str) -> Optional[str]:
    """``rule`` is one of the WIT's ``value-rule`` cases: ``name``, ``namespace``, ``kind``,
    ``api-version``, ``uid``, ``event-reason``, ``event-action``, ``finalizer``,
    ``plugin-name``."""
    return _component().call("check-value", rule, value)


def check_selector(text: str) -> Optional[str]:
    """A label selector as a watch sends it to the API server."""
    return _component().call("check-selector", text)


def selector_matches(text: str, labels: Any) -> bool:
    """Whether ``text`` selects these labels, as the host's cache filters; ``ValueError`` with
    the host's sentence when it does not parse. Labels that are not strings are no labels, as
    the host reads JSON."""
    pairs = [(k, v) for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)] if isinstance(labels, dict) else []
    return _result(_component().call("selector-matches", text, pairs), bool)


def _result(answer: Any, ok: type) -> Any:
    # A result's two sides differ in type here: `ok` is `ok`'s type, `err` the sentence.
    if isinstance(answer, str) and ok is not str:
        raise ValueError(answer)
    return answer


def cache_holds(manifest: Manifest, obj: dict) -> bool:
    """Whether the host's cache holds ``obj`` for a plugin with this manifest: its namespaces,
    labels, fields, annotations and finalizer, as the informers select."""
    return _result(_component().call("holds", _json(manifest_record(manifest)), _json(obj)), bool)


def index_keys(manifest: Manifest, index: str, obj: dict) -> List[str]:
    """The keys the manifest's index ``index`` files ``obj`` under, as the host's index does;
    ``ValueError`` with the host's sentence when the manifest declares no such index."""
    return _result(_component().call("index-keys", _json(manifest_record(manifest)), index, _json(obj)), list)


def check_manifest(manifest: Manifest) -> Optional[str]:
    return _component().call("check-manifest", _json(manifest_record(manifest)))


def check_response(kinds: List[str], failed: bool, phase: str, prune_allowed: bool) -> Optional[str]:
    """The rules about a whole response: ``kinds`` are the WIT's ``action-kind`` names of its
    actions, in order; ``phase`` the WIT's ``phase`` name."""
    return _component().call("check-response", kinds, failed, phase, prune_allowed)


def check_action(action: Action, payload: Optional[str], deleted: bool) -> Optional[str]:
    """``action`` as the glue sends it, ``payload`` its JSON text (an apply's object, a status,
    a patch document)."""
    return _component().call("check-action", _json(action_record(action, payload)), deleted)


def check_ref(ref: ObjectRef) -> Optional[str]:
    """A reference (``map``'s result) as the host checks a delete's target."""
    return check_action(Delete(ref), None, False)


def _json(value: Any) -> str:
    """JSON as the glue writes it: compact (the host's sentences quote positions in it)."""
    return json.dumps(value, separators=(",", ":"))


def _gvk(kind) -> Dict[str, str]:
    return {"group": kind.group, "version": kind.version, "kind": kind.kind}


def _selector(watch: Watch) -> Dict[str, Any]:
    return {
        "kind": _gvk(watch.kind),
        "namespaces": watch.namespace_list,
        "label-selector": watch.labels,
        "field-selector": watch.fields,
        "annotations": [{"key": k, "value": v} for k, v in watch.annotations.items()],
        "generation-changed": watch.generation_changed,
    }


def manifest_record(m: Manifest) -> Dict[str, Any]:
    """``m`` as the WIT's ``plugin-manifest`` record in JSON, with ``keep-fields``: what the
    glue hands the host."""

    def grant(g) -> Dict[str, Any]:
        verbs = [verb for verb in ("apply", "patch", "delete") if getattr(g, verb)]
        scope: Any = "primary-namespace" if g.namespaces is None else "any" if g.namespaces == "*" else {"namespaces": list(g.namespaces)}
        return {"kind": _gvk(g.kind), "verbs": verbs, "scope": scope}

    s = m.settings
    return {
        "name": m.name,
        "version": m.version,
        "primary": _selector(m.primary_watch),
        "owns": [_gvk(k) for k in m.owns],
        "watches": [_selector(w) for w in m.watch_list],
        "reads": [_selector(r) for r in m.read_list],
        "metadata-only": [_gvk(k) for k in m.metadata_only],
        "writes": [grant(g) for g in m.writes],
        "indexes": [{"name": i.name, "kind": _gvk(i.kind), "fields": list(i.fields)} for i in m.indexes],
        "keep-fields": [{"kind": _gvk(k), "managed-fields": mf, "last-applied": la} for k, mf, la in m.keeps()],
        "finalizer": m.finalizer,
        "settings": {
            "max-concurrent-reconciles": s.max_concurrent_reconciles,
            "deadline-ms": s.deadline_ms,
            "memory-limit-bytes": s.memory_limit_bytes,
            "response-limit-bytes": s.response_limit_bytes,
            "resync-seconds": s.resync_seconds,
        },
    }


def _ref(r: ObjectRef) -> Dict[str, Any]:
    return {"api-version": r.api_version, "kind": r.kind, "name": r.name, "namespace": r.namespace, "uid": r.uid}


def action_record(a: Action, payload: Optional[str]) -> Any:
    """``a`` as the WIT's ``action`` variant in JSON."""
    if isinstance(a, Apply):
        return {"apply": {"object": payload, "force": a.force, "uid": a.uid}}
    if isinstance(a, Delete):
        return {"delete": _ref(a.target)}
    if isinstance(a, Patch):
        return {"patch": {"target": _ref(a.target), "kind": a.kind, "patch": payload}}
    if isinstance(a, Status):
        return {"status": payload}
    if isinstance(a, Event):
        kind = "normal" if a.type == "Normal" else "warning"
        return {"event": {"event-type": kind, "reason": a.reason, "message": a.message, "action": a.action}}
    assert isinstance(a, Prune)
    return "prune"
