"""What one reconcile sees: the primary, its owned children, the phase, the config, and why
it runs (its triggers).

Objects cross the boundary as JSON text with their routing fields beside it; each is parsed
into a plain dict the first time the plugin reads it, so filtering children by kind parses
nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any, List, Optional, Tuple

from .actions import ObjectRef
from .kinds import Kind

PHASES = ("apply", "cleanup", "deleted")


@dataclass
class Envelope:
    """One object as it crossed the boundary: routing fields and unparsed JSON."""

    api_version: str
    kind: str
    name: str
    namespace: Optional[str]
    uid: str
    json: str

    @staticmethod
    def of(obj: dict) -> "Envelope":
        meta = obj.get("metadata") or {}
        for key, value in (("apiVersion", obj.get("apiVersion")), ("kind", obj.get("kind")), ("metadata.name", meta.get("name"))):
            if not isinstance(value, str) or not value:
                raise ValueError(f"object has no {key}: give every object apiVersion, kind and metadata.name")
        return Envelope(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"), meta.get("uid") or "", json.dumps(obj))

    def is_kind(self, kind: Kind) -> bool:
        return self.api_version == kind.api_version and self.kind == kind.kind

    def parse(self) -> dict:
        return json.loads(self.json)


@dataclass(frozen=True)
class FieldConflict:
    """A field another manager owns (``manager``, ``field`` as ``.spec.replicas``)."""

    manager: str
    field: str


@dataclass(frozen=True)
class ApplyConflict:
    """A non-forced apply that wrote nothing, since other managers own fields it sets."""

    target: ObjectRef
    fields: Tuple[FieldConflict, ...] = ()
    more: int = 0


TRIGGER_KINDS = ("primary-changed", "owned-changed", "related-changed", "resync", "requeue", "retry", "conflict")


@dataclass(frozen=True)
class Trigger:
    """Why a reconcile runs. ``kind`` is one of ``TRIGGER_KINDS``; ``ref`` names the object of
    ``owned-changed`` and ``related-changed``; ``generation`` is ``(old, new)`` for
    ``primary-changed``; ``conflict`` is the ``ApplyConflict`` of ``conflict``.

    >>> Trigger("related-changed", ref=ObjectRef("v1", "Secret", "db", "shop")).ref.name
    'db'
    """

    kind: str
    ref: Optional[ObjectRef] = None
    generation: Optional[Tuple[Optional[int], Optional[int]]] = None
    conflict: Optional[ApplyConflict] = None

    def __post_init__(self) -> None:
        if self.kind not in TRIGGER_KINDS:
            raise ValueError(f"trigger kind {self.kind!r}: one of {TRIGGER_KINDS}")


@dataclass(frozen=True)
class Related:
    """A change of a related object, as ``Reconciler.map_change`` sees it: its new state (its
    last, when ``deleted``: it was deleted or left the watch's selection)."""

    object: dict
    deleted: bool = False


class Request:
    """One reconcile's input. ``phase`` is ``"apply"``, ``"cleanup"`` or ``"deleted"``."""

    def __init__(
        self,
        object: Envelope,
        owned: List[Envelope],
        phase: str,
        previous: Optional[Envelope] = None,
        attempt: int = 0,
        config: str = "{}",
        triggers: Optional[List[Trigger]] = None,
        triggers_dropped: int = 0,
    ) -> None:
        if phase not in PHASES:
            raise ValueError(f"phase {phase!r}: one of {PHASES}")
        self.envelope = object
        self.owned_envelopes = owned
        self.phase = phase
        self.previous_envelope = previous
        self.attempt = attempt
        self.config_json = config
        #: Why it runs: every trigger since the last call, oldest first (at most 32).
        self.triggers: List[Trigger] = list(triggers or [])
        #: Triggers beyond those listed.
        self.triggers_dropped = triggers_dropped

    @property
    def name(self) -> str:
        return self.envelope.name

    @property
    def namespace(self) -> Optional[str]:
        return self.envelope.namespace

    @property
    def uid(self) -> str:
        return self.envelope.uid

    def ref(self) -> ObjectRef:
        """A reference to the primary, pinned to its UID."""
        e = self.envelope
        return ObjectRef(e.api_version, e.kind, e.name, e.namespace, e.uid or None)

    def describe(self) -> str:
        """``Kind namespace/name``, the way the host names an object in messages."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.envelope.kind} {where}"

    @cached_property
    def object(self) -> dict:
        """The primary as a dict: ``spec`` is the desired state, ``status`` the last reported."""
        return self.envelope.parse()

    @cached_property
    def owned(self) -> List[dict]:
        """The primary's children of owned kinds, from the cache."""
        return [e.parse() for e in self.owned_envelopes]

    def owned_of(self, kind: Kind) -> List[dict]:
        """The children of one kind; only those are parsed."""
        return [e.parse() for e in self.owned_envelopes if e.is_kind(kind)]

    @cached_property
    def previous(self) -> Optional[dict]:
        """With ``deliver_previous``: the primary at this plugin's last successful reconcile."""
        return None if self.previous_envelope is None else self.previous_envelope.parse()

    @cached_property
    def config(self) -> Any:
        """The plugin's configuration (``{}`` when none is given)."""
        return json.loads(self.config_json or "{}")
