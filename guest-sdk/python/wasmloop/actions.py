"""What a reconcile asks the host to do, as plain values built by small helpers.

>>> from wasmloop import apply, status, event
>>> [type(a).__name__ for a in (apply({"apiVersion": "v1", "kind": "ConfigMap",
...      "metadata": {"name": "a"}}), status({"ready": True}), event("Normal", "Synced", "ok"))]
['Apply', 'Status', 'Event']
"""

from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import dataclass
from typing import Any, Optional, Union


@dataclass(frozen=True)
class ObjectRef:
    """Names one object. With ``uid`` set the host only acts while the live object has it."""

    api_version: str
    kind: str
    name: str
    namespace: Optional[str] = None
    uid: Optional[str] = None

    def __post_init__(self) -> None:
        # The contract's strings: anything else would fail in the component, not here.
        for field_name in ("api_version", "kind", "name"):
            _string(self, field_name)
        for field_name in ("namespace", "uid"):
            _string(self, field_name, optional=True)


def ref(obj: dict, *, with_uid: bool = True) -> ObjectRef:
    """A reference to ``obj`` (a plain dict), pinned to its UID unless ``with_uid`` is false."""
    meta = obj.get("metadata") or {}
    return ObjectRef(
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        name=meta["name"],
        namespace=meta.get("namespace"),
        uid=(meta.get("uid") or None) if with_uid else None,
    )


@dataclass(frozen=True)
class Apply:
    """Server-side apply of ``object``: the plugin's whole intent for the fields it manages
    (field manager ``wasmloop/<name>``), so a field it applied before and leaves out now is
    removed. Apply a partial dict naming only the fields the plugin owns.

    ``force`` takes fields other managers own; without it, an apply that would take one writes
    nothing and the next reconcile carries a ``conflict`` trigger naming them. ``uid``: act only
    while the live object has this UID."""

    object: dict
    force: bool = True
    uid: Optional[str] = None

    def __post_init__(self) -> None:
        if not isinstance(self.object, dict):
            raise TypeError(f"apply takes the object as a dict, not {type(self.object).__name__}")
        if not isinstance(self.force, bool):
            raise TypeError(f"Apply.force must be a bool, not {type(self.force).__name__}")
        _string(self, "uid", optional=True)


@dataclass(frozen=True)
class Delete:
    """Delete an object."""

    target: ObjectRef

    def __post_init__(self) -> None:
        if not isinstance(self.target, ObjectRef):
            raise TypeError(f"a delete targets an ObjectRef, not {type(self.target).__name__}")


@dataclass(frozen=True)
class Patch:
    """Patch an object a write grant covers; ``kind`` is ``"merge"``, ``"json"`` or
    ``"strategic"`` (built-in kinds only: lists merge by their key, a container by ``name``)."""

    target: ObjectRef
    kind: str
    patch: Any

    def __post_init__(self) -> None:
        if not isinstance(self.target, ObjectRef):
            raise TypeError(f"a patch targets an ObjectRef, not {type(self.target).__name__}")
        if self.kind not in PATCH_KINDS:
            raise ValueError(f"patch kind {self.kind!r}: use one of {PATCH_KINDS}")


@dataclass(frozen=True)
class Status:
    """Set the primary's status subresource (the ``status`` field's content)."""

    status: dict

    def __post_init__(self) -> None:
        if not isinstance(self.status, dict):
            raise TypeError(f"status takes the status content as a dict, not {type(self.status).__name__}")


@dataclass(frozen=True)
class Event:
    """An Event on the primary; ``type`` is ``"Normal"`` or ``"Warning"``."""

    type: str
    reason: str
    message: str
    action: Optional[str] = None

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPES:
            raise ValueError(f"event type {self.type!r}: use one of {EVENT_TYPES}")
        for field_name in ("reason", "message"):
            _string(self, field_name)
        _string(self, "action", optional=True)


@dataclass(frozen=True)
class Prune:
    """Delete every controlled child of an owned kind that no apply in the response names."""


@dataclass(frozen=True)
class RequeueAfter:
    """Reconcile again after ``seconds`` even without changes (the shortest one wins)."""

    seconds: float

    def __post_init__(self) -> None:
        duration_millis(self.seconds, "requeue_after")


def _string(value: Any, field_name: str, optional: bool = False) -> None:
    got = getattr(value, field_name)
    if not isinstance(got, str) and not (optional and got is None):
        kind = "a string or None" if optional else "a string"
        raise TypeError(f"{type(value).__name__}.{field_name} must be {kind}, not {type(got).__name__}")


Action = Union[Apply, Delete, Patch, Status, Event, Prune, RequeueAfter]

EVENT_TYPES = ("Normal", "Warning")
PATCH_KINDS = ("merge", "json", "strategic")


def apply(obj: dict, *, force: bool = True, uid: Optional[str] = None) -> Apply:
    """Server-side apply ``obj``. A namespaced object without a namespace goes to the primary's.
    ``force=False`` reports another manager's fields instead of taking them; ``uid`` makes the
    live object's UID a precondition."""
    return Apply(obj, force, uid)


def delete(target: Union[ObjectRef, dict]) -> Delete:
    """Delete ``target``: an ``ObjectRef`` or the object itself (pinned to its UID)."""
    return Delete(target if isinstance(target, ObjectRef) else ref(target))


def patch(target: Union[ObjectRef, dict], document: Any, kind: str = "merge") -> Patch:
    """Patch ``target`` with a JSON merge patch (a dict), with ``kind="json"`` an RFC 6902
    operation list, or with ``kind="strategic"`` a strategic merge patch (built-in kinds)."""
    return Patch(target if isinstance(target, ObjectRef) else ref(target), kind, document)


def status(content: dict) -> Status:
    """Set the primary's status to ``content``."""
    return Status(content)


def event(type: str, reason: str, message: str, action: Optional[str] = None) -> Event:
    """Record an Event on the primary."""
    return Event(type, reason, message, action)


def prune() -> Prune:
    """Ask the host to prune children this response does not apply (needs ``prune=True``)."""
    return Prune()


MAX_MILLIS = 2**64 - 1


def duration_millis(seconds: Any, what: str) -> int:
    """``seconds`` as the contract's ``u64`` milliseconds: the one encoding of a duration, for
    the component glue and the test harness alike. Raises ``ValueError`` for what has none (a
    negative, infinite or not-a-number duration, or not a number at all)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise ValueError(f"{what} takes a finite duration of 0 seconds or more, not {seconds!r}")
    if isinstance(seconds, float) and not math.isfinite(seconds):
        raise ValueError(f"{what} takes a finite duration of 0 seconds or more, not {seconds!r}")
    # As the Rust SDK's `Duration::from_secs_f64(s).as_millis()`: the float's exact value to
    # the nearest nanosecond (ties to even), then whole milliseconds, the rest dropped; so
    # 0.003 is 3 ms and 0.0015 is 1. Past the contract's range the wait is as good as
    # forever: clamped, not an overflow.
    nanos = round(Fraction(seconds) * 1_000_000_000)
    return min(nanos // 1_000_000, MAX_MILLIS)


def requeue_after(seconds: float) -> RequeueAfter:
    """Reconcile this primary again after ``seconds``."""
    return RequeueAfter(seconds)
