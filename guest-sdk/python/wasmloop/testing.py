"""Run a plugin's logic in plain CPython (pytest), with no wasm and no cluster.

``TestCase`` plays the host: it builds the request, serves cache look-ups from the objects
you give it (only for kinds the manifest declares, and only what the plugin's watches select,
as the host does), strips cached objects as the host's cache does, collects log lines, and
refuses what the host would refuse (an undeclared read, a write no grant covers, a misused
prune, a response over the host's limits, a payload that is no JSON). ``run`` returns an
``Outcome`` with helpers to read the actions.

One difference stays: the host gives every reconcile a fresh instance of the plugin, so
module-level state never outlives a call there; here the plugin's module is imported once per
test process. Keep state out of module globals (the host would drop it anyway).

>>> from wasmloop import Manifest, Reconciler, kinds, status
>>> class P(Reconciler):
...     def manifest(self):
...         return Manifest("p", "0", primary=kinds.ConfigMap)
...     def reconcile(self, request):
...         return [status({"ok": True})]
>>> TestCase({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}).run(P()).status
{'ok': True}
"""

from __future__ import annotations

import copy
import json
from typing import Any, List, Optional, Tuple

from . import _host, _outcome, _rules
from .actions import Action, Apply, Delete, Event, ObjectRef, Patch, Prune, Status
from .errors import CacheError, PermanentError, ReconcileError
from .kinds import Kind
from .manifest import Manifest
from .reconciler import Reconciler
from .request import Envelope, Related, Request, Trigger

PAGE_SIZE = 500
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: The host's default limits on a response, and the default ceiling of a plugin's own
#: ``response_limit_bytes`` (``host/sandbox/src/config.rs``; an operator may set others).
MAX_ACTIONS = 10_000
RESPONSE_LIMIT_BYTES = 4 << 20
RESPONSE_LIMIT_CEILING = 16 << 20


def checked(plugin: Reconciler) -> Manifest:
    """``plugin``'s manifest, refused as the host would refuse it at load."""
    manifest = plugin.manifest()
    error = _rules.check_manifest(manifest)
    if error is not None:
        raise AssertionError(f"the host would refuse this plugin at load: plugin {manifest.name!r}: {error}; fix its manifest()")
    return manifest


def as_cached(manifest: Manifest, obj: dict) -> dict:
    """``obj`` as the host's cache holds it for this plugin: stripped first, then, for a
    metadata-only kind, reduced to its metadata (managedFields never kept there)."""
    obj = copy.deepcopy(obj)
    kind = Kind.of(obj.get("apiVersion", ""), obj.get("kind", ""))
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    if kind not in manifest.keep_managed_fields or kind in manifest.metadata_only:
        meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if kind not in manifest.keep_last_applied and isinstance(annotations, dict) and LAST_APPLIED in annotations:
        del annotations[LAST_APPLIED]
        if not annotations:
            del meta["annotations"]
    if kind in manifest.metadata_only:
        return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": meta}
    return obj


def _labels(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def _place(obj: dict) -> Tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


def _in_namespace(wanted: Optional[str], obj: dict) -> bool:
    """``wasmloop_contract::cache::in_namespace``: a namespace asked for finds cluster-scoped
    objects too (a Node is found whatever namespace is given)."""
    ns = _place(obj)[0]
    return wanted is None or not ns or ns == wanted


class _FakeHost:
    def __init__(self, manifest: Manifest, objects: List[dict]) -> None:
        self.manifest = manifest
        latest = {}
        for obj in objects:
            latest[(obj.get("apiVersion"), obj.get("kind"), *_place(obj))] = as_cached(manifest, obj)
        self.objects = [o for o in latest.values() if self._held(o)]
        self.logs: List[Tuple[str, str]] = []
        self.undeclared: Optional[str] = None

    def _held(self, obj: dict) -> bool:
        # The host's own answer: namespaces, labels, fields, annotations and the finalizer.
        return _rules.cache_holds(self.manifest, obj)

    def _of(self, kind: Kind) -> List[dict]:
        if kind not in self.manifest.declared_kinds():
            message = (
                f"plugin {self.manifest.name!r} read kind {kind}, which its manifest does not declare; "
                "add it to owns, watches or reads"
            )
            # The host fails the whole call for it, even if the plugin catches the error.
            self.undeclared = self.undeclared or message
            raise CacheError("undeclared-kind", message)
        return sorted((o for o in self.objects if kind.matches(o)), key=_place)

    def get(self, kind: Kind, namespace: Optional[str], name: str) -> Optional[dict]:
        for obj in self._of(kind):
            ns, n = _place(obj)
            if n == name and _in_namespace(namespace, obj):
                return copy.deepcopy(obj)
        return None

    def page(self, kind, namespace, label_selector, limit, token):
        of_kind = self._of(kind)
        text = label_selector or ""
        try:
            # The host refuses a selector that does not parse even when nothing is cached.
            _rules.selector_matches(text, {})
        except ValueError as e:
            raise CacheError("invalid-selector", str(e)) from None
        wanted = lambda labels: _rules.selector_matches(text, labels)  # noqa: E731
        return _page_of([o for o in of_kind if _in_namespace(namespace, o) and wanted(_labels(o))], limit, token)

    def index_page(self, kind, index, key, namespace, limit, token):
        of_kind = self._of(kind)
        if not any(i.kind == kind and i.name == index for i in self.manifest.indexes):
            raise CacheError(
                "unknown-index",
                f"plugin {self.manifest.name}: the manifest declares no index {json.dumps(index)} on {kind}; declare it under `indexes`",
            )
        filed = [o for o in of_kind if _in_namespace(namespace, o) and key in _rules.index_keys(self.manifest, index, o)]
        return _page_of(filed, limit, token)

    def log(self, level: str, message: str) -> None:
        self.logs.append((level, message))


def _page_of(items: List[dict], limit: int, token: Optional[str]) -> Tuple[List[dict], Optional[str]]:
    """One page of ``items`` (in (namespace, name) order) after ``token``, as the host pages."""
    after: Optional[Tuple[str, str]] = None
    if token is not None:
        try:
            ns, name = json.loads(token)
            after = (str(ns), str(name))
        except (ValueError, TypeError):
            raise CacheError("invalid-continue", f"continue token {token!r} is no position this host produced") from None
    items = [o for o in items if after is None or _place(o) > after]
    size = PAGE_SIZE if limit == 0 else min(limit, PAGE_SIZE)
    page = items[:size]
    next_token = json.dumps(list(_place(page[-1]))) if len(items) > size else None
    return [copy.deepcopy(o) for o in page], next_token


def _ungranted(manifest: Manifest, primary: dict, action: Action) -> Optional[str]:
    primary_ns = (primary.get("metadata") or {}).get("namespace")
    if isinstance(action, Apply):
        obj = action.object
        verb, kind, ns = "apply", Kind.of(obj.get("apiVersion", ""), obj.get("kind", "")), (obj.get("metadata") or {}).get("namespace")
    elif isinstance(action, (Patch, Delete)):
        t = action.target
        verb, kind, ns = ("patch" if isinstance(action, Patch) else "delete"), Kind.of(t.api_version, t.kind), t.namespace
    else:
        return None
    ns = ns or primary_ns
    implied = verb in ("apply", "delete") and ns == primary_ns and kind in manifest.owns
    if implied or any(g.kind == kind and g.allows(verb, ns, primary_ns) for g in manifest.writes):
        return None
    place = f"in namespace {ns}" if ns else "cluster-scoped"
    return (
        f"plugin {manifest.name!r}: no write grant lets it {verb} {kind} {place}; "
        f"declare one with Grant(Kind.of({kind.api_version!r}, {kind.kind!r}), {verb}=True, namespaces=...)"
    )


def _refused(manifest: Manifest, primary: dict, phase: str, encoded: List[Tuple[Action, Optional[str]]], failed: bool) -> Optional[str]:
    """The host's first refusal of a response's actions, in its order: the rules about the whole
    response, then each action decoded and its grant checked. The host's rules answer through
    the rules component; the grants are this harness's (the operator's confinement is not)."""
    where = f"plugin {manifest.name!r}"
    kinds = [_KINDS[type(action)] for action, _ in encoded]
    whole = _rules.check_response(kinds, failed, phase, manifest.prune)
    if whole is not None:
        return f"{where}: {whole}"
    field = "error.actions" if failed else "actions"
    for i, (action, payload) in enumerate(encoded):
        if isinstance(action, Prune):
            continue
        bad = _rules.check_action(action, payload, phase == "deleted")
        if bad is not None:
            return f"{where}: {field}[{i}]: {bad}"
        ungranted = _ungranted(manifest, primary, action)
        if ungranted is not None:
            return ungranted
    return None


_KINDS = {Apply: "apply", Delete: "delete", Patch: "patch", Status: "status", Event: "event", Prune: "prune"}


def _strings(action: Action) -> List[Optional[str]]:
    """The strings an action crosses the boundary as (``host/sandbox/src/lift.rs`` counts each)."""
    ref = getattr(action, "target", None)
    strings: List[Optional[str]] = []
    if isinstance(ref, ObjectRef):
        strings += [ref.api_version, ref.kind, ref.name, ref.namespace, ref.uid]
    if isinstance(action, Apply):
        strings += [_outcome.to_json(action.object, "an applied object"), action.uid]
    elif isinstance(action, Status):
        strings.append(_outcome.to_json(action.status, "a status"))
    elif isinstance(action, Patch):
        strings.append(_outcome.to_json(action.patch, "a patch"))
    elif isinstance(action, Event):
        strings += [action.reason, action.message, action.action]
    return strings


def _over_limits(manifest: Manifest, result: _outcome.Result) -> Optional[str]:
    """The host's limits on a response, counted as it lifts one: entries, then bytes of every
    string (the plugin's response-limit-bytes, or the host's default)."""
    error = result.error
    actions = result.actions if error is None else error.actions
    where = f"plugin {manifest.name!r}"
    if len(actions) > MAX_ACTIONS:
        return f"{where}: it returned {len(actions)} actions, over the limit of {MAX_ACTIONS}; return fewer"
    strings = [s for a in actions for s in _strings(a)]
    if error is not None:
        strings += [error.message, error.reason]
    return _over_bytes(manifest, strings)


def _response_limit(manifest: Manifest) -> int:
    own = manifest.settings.response_limit_bytes
    return RESPONSE_LIMIT_BYTES if own is None else min(own, RESPONSE_LIMIT_CEILING)


def _over_bytes(manifest: Manifest, strings: List[Optional[str]]) -> Optional[str]:
    where = f"plugin {manifest.name!r}"
    try:
        size = sum(len(s.encode()) for s in strings if s is not None)
    except UnicodeEncodeError:
        return f"{where}: a string of its response holds a lone surrogate, which the component's glue cannot send; the call fails"
    limit = _response_limit(manifest)
    if size > limit:
        return (
            f"{where}: the response is at least {size} bytes, over the {limit}-byte cap; return fewer or smaller "
            "actions, or raise response-limit-bytes in the plugin's settings"
        )
    return None


class Outcome:
    """What a native reconcile returned and logged."""

    def __init__(self, result: _outcome.Result, logs: List[Tuple[str, str]]) -> None:
        self.result = result
        self.logs = logs

    @property
    def actions(self) -> List[Action]:
        """The actions; fails the test when the reconcile failed."""
        if self.result.error is not None:
            e = self.result.error
            raise AssertionError(f"reconcile failed ({'transient' if e.transient else 'permanent'}): {e.message}")
        return self.result.actions

    @property
    def error(self) -> ReconcileError:
        """The error; fails the test when the reconcile succeeded."""
        if self.result.error is None:
            raise AssertionError(f"reconcile succeeded with {self.result.actions!r}")
        return self.result.error

    def applied(self, kind: Optional[Kind] = None) -> List[dict]:
        return [a.object for a in self.actions if isinstance(a, Apply) and (kind is None or kind.matches(a.object))]

    @property
    def status(self) -> Optional[dict]:
        found = [a.status for a in self.actions if isinstance(a, Status)]
        return found[-1] if found else None

    @property
    def events(self) -> List[Event]:
        return [a for a in self.actions if isinstance(a, Event)]

    @property
    def patches(self) -> List[Patch]:
        return [a for a in self.actions if isinstance(a, Patch)]

    @property
    def deletes(self) -> List[ObjectRef]:
        return [a.target for a in self.actions if isinstance(a, Delete)]

    @property
    def prunes(self) -> bool:
        return any(isinstance(a, Prune) for a in self.actions)

    @property
    def requeue_after(self) -> Optional[float]:
        """Seconds, the shortest asked for."""
        ms = self.result.requeue_after_ms
        return None if ms is None else ms / 1000

    def logged(self, level: str, text: str) -> bool:
        return any(lvl == level and text in message for lvl, message in self.logs)


class TestCase:
    """One native reconcile, set up as the host would set it up. Builder methods chain."""

    __test__ = False  # not a pytest test class

    def __init__(self, primary: dict) -> None:
        Envelope.of(primary)
        self._primary = primary
        self._owned: List[dict] = []
        self._cache: List[dict] = []
        self._config: Any = {}
        self._phase = "apply"
        self._previous: Optional[dict] = None
        self._attempt = 0
        self._triggers: List[Trigger] = []

    def owned(self, *children: dict) -> "TestCase":
        """Children handed over in ``request.owned`` (and readable from the cache)."""
        self._owned.extend(children)
        return self

    def cached(self, *objects: dict) -> "TestCase":
        """Other objects in the cache."""
        self._cache.extend(objects)
        return self

    def config(self, value: Any) -> "TestCase":
        self._config = value
        return self

    def phase(self, phase: str) -> "TestCase":
        self._phase = phase
        return self

    def previous(self, obj: dict) -> "TestCase":
        self._previous = obj
        return self

    def attempt(self, attempt: int) -> "TestCase":
        self._attempt = attempt
        return self

    def triggers(self, *triggers: Trigger) -> "TestCase":
        """Why the call happens (``request.triggers``), oldest first; the host keeps 32."""
        self._triggers.extend(triggers)
        return self

    def request(self, manifest: Manifest) -> Request:
        """The request the plugin gets, its objects as the host's cache holds them."""
        cached = lambda o: Envelope.of(as_cached(manifest, o))  # noqa: E731
        return Request(
            cached(self._primary),
            [cached(o) for o in self._owned],
            self._phase,
            None if self._previous is None else cached(self._previous),
            self._attempt,
            json.dumps(self._config),
            self._triggers[-32:],
            max(0, len(self._triggers) - 32),
        )

    def _host(self, manifest: Manifest) -> _FakeHost:
        return _FakeHost(manifest, [self._primary, *self._owned, *self._cache])

    def run(self, plugin: Reconciler) -> Outcome:
        """Runs ``plugin.reconcile`` and collects what it did, as the host would see it: the
        component glue's encoding first, then the host's limits, its decoding and its grants."""
        manifest = checked(plugin)
        request = self.request(manifest)
        host = self._host(manifest)
        previous = _host.install(host)
        try:
            result = _outcome.reconcile(plugin, request)
        finally:
            _host.install(previous)
        try:
            encoded = _outcome.encode(result)
        except Exception as e:  # noqa: BLE001 - as in the glue: whatever does not encode fails the call
            result = _outcome.Result(error=_outcome.as_error(e))
            encoded = _outcome.encode(result)
        failed = result.error is not None
        sent = encoded.error_actions if failed else encoded.actions
        refused = host.undeclared or _over_limits(manifest, result) or _refused(manifest, self._primary, self._phase, sent, failed)
        if refused is not None:
            result = _outcome.Result(error=PermanentError(refused))
        return Outcome(result, host.logs)

    def map(self, plugin: Reconciler, related: dict, deleted: bool = False) -> List[ObjectRef]:
        """Runs ``plugin.map_change`` (``map``, unless the plugin overrides it) on ``related``,
        deleted or not, with this case's cache and config. Fails the test
        where the host would fail the call: a result that is not a list of ``ObjectRef``s of
        the primary's kind with valid names, or a read of an undeclared kind."""
        manifest = checked(plugin)
        host = self._host(manifest)
        previous = _host.install(host)
        try:
            refs = plugin.map_change(Related(as_cached(manifest, related), deleted), copy.deepcopy(self._config))
        finally:
            _host.install(previous)
        where = f"plugin {manifest.name!r}: map"
        if host.undeclared is not None:
            raise AssertionError(host.undeclared)
        if not isinstance(refs, (list, tuple)):
            raise AssertionError(f"{where} must return a list of ObjectRef, not {type(refs).__name__}")
        if len(refs) > MAX_ACTIONS:
            raise AssertionError(f"{where} returned {len(refs)} references, over the limit of {MAX_ACTIONS}")
        primary = manifest.primary_watch.kind
        strings = [s for r in refs if isinstance(r, ObjectRef) for s in (r.api_version, r.kind, r.name, r.namespace, r.uid)]
        over = _over_bytes(manifest, strings)
        if over is not None:
            raise AssertionError(f"{over} (map)")
        for i, ref in enumerate(refs):
            if not isinstance(ref, ObjectRef):
                raise AssertionError(f"{where} result [{i}] is a {type(ref).__name__}, not an ObjectRef (wasmloop.ref or ObjectRef(...))")
            bad = _rules.check_ref(ref)
            if bad is not None:
                raise AssertionError(f"{where} result [{i}]: {bad}")
            if Kind.of(ref.api_version, ref.kind) != primary:
                raise AssertionError(f"{where} returned {ref.api_version}/{ref.kind} {ref.name!r}, but it must name primaries ({primary}) by name")
        return list(refs)
