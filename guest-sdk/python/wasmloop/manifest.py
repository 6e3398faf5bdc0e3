"""What a plugin declares about itself: its primary kind, what it owns, watches, reads and
writes. The host reads it once per load and refuses a manifest it cannot serve; so does the
test harness (``wasmloop.testing``), so a test of a plugin the host would refuse fails.

>>> from wasmloop import Manifest, kinds
>>> m = Manifest("hello", "0.1.0", primary=kinds.ConfigMap, owns=[kinds.Deployment], prune=True)
>>> sorted(str(k) for k in m.declared_kinds())
['apps/v1/Deployment', 'v1/ConfigMap']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from .kinds import Kind


@dataclass(frozen=True)
class Watch:
    """Objects of ``kind`` the plugin wants to see, optionally in one namespace and through a
    label selector in Kubernetes syntax (``app=web,tier!=cache``)."""

    kind: Kind
    namespace: Optional[str] = None
    labels: Optional[str] = None


@dataclass(frozen=True)
class Grant:
    """Leave to write ``kind`` beyond what is implied. ``namespaces``: ``None`` means the
    primary's namespace, a list means those namespaces, ``"*"`` means anywhere."""

    kind: Kind
    apply: bool = False
    patch: bool = False
    delete: bool = False
    namespaces: Union[None, Sequence[str], str] = None

    def __post_init__(self) -> None:
        if not (self.apply or self.patch or self.delete):
            raise ValueError(f"grant on {self.kind} allows no verb: set apply, patch or delete")
        if isinstance(self.namespaces, str) and self.namespaces != "*":
            raise ValueError(f"grant namespaces {self.namespaces!r}: give a list, or \"*\" for anywhere")
        if self.namespaces is not None and not isinstance(self.namespaces, str):
            object.__setattr__(self, "namespaces", tuple(self.namespaces))

    def allows(self, verb: str, namespace: Optional[str], primary_namespace: Optional[str]) -> bool:
        """True when this grant lets the plugin ``verb`` an object of its kind there."""
        if not getattr(self, verb):
            return False
        if self.namespaces is None:
            return namespace == primary_namespace
        if self.namespaces == "*":
            return True
        return namespace is not None and namespace in self.namespaces


@dataclass(frozen=True)
class Settings:
    """Defaults the plugin proposes; the operator's configuration wins. Zero is invalid."""

    max_concurrent_reconciles: Optional[int] = None
    deadline_ms: Optional[int] = None
    memory_limit_bytes: Optional[int] = None
    response_limit_bytes: Optional[int] = None
    resync_seconds: Optional[int] = None


KindOrWatch = Union[Kind, Watch]

@dataclass
class Manifest:
    """A plugin's manifest. Fields mirror the contract's ``plugin-manifest`` record."""

    name: str
    version: str
    primary: KindOrWatch
    owns: List[Kind] = field(default_factory=list)
    watches: List[KindOrWatch] = field(default_factory=list)
    reads: List[Kind] = field(default_factory=list)
    metadata_only: List[Kind] = field(default_factory=list)
    writes: List[Grant] = field(default_factory=list)
    finalizer: Optional[str] = None
    prune: bool = False
    deliver_deleted: bool = False
    deliver_previous: bool = False
    settings: Settings = field(default_factory=Settings)
    keep_managed_fields: List[Kind] = field(default_factory=list)
    keep_last_applied: List[Kind] = field(default_factory=list)

    @property
    def primary_watch(self) -> Watch:
        return self.primary if isinstance(self.primary, Watch) else Watch(self.primary)

    @property
    def watch_list(self) -> List[Watch]:
        return [w if isinstance(w, Watch) else Watch(w) for w in self.watches]

    def declared_kinds(self) -> Iterable[Kind]:
        """Every kind the plugin may read: primary, owned, watched and read."""
        seen = []
        for kind in [self.primary_watch.kind, *self.owns, *(w.kind for w in self.watch_list), *self.reads]:
            if kind not in seen:
                seen.append(kind)
        return seen

    def keeps(self) -> List[Tuple[Kind, bool, bool]]:
        """``(kind, managed_fields, last_applied)`` for every kind that keeps a stripped field."""
        kinds = []
        for kind in [*self.keep_managed_fields, *self.keep_last_applied]:
            if kind not in kinds:
                kinds.append(kind)
        return [(k, k in self.keep_managed_fields, k in self.keep_last_applied) for k in kinds]

    def visible(self, kind: Kind) -> Optional[List[Watch]]:
        """Which objects of ``kind`` the host caches for this plugin: ``None`` for all of them,
        else only what these selected watches select (a kind declared only under watches, each
        with a label selector). The primary is always whole."""
        if kind == self.primary_watch.kind or kind in self.owns or kind in self.reads:
            return None
        watches = [w for w in self.watch_list if w.kind == kind]
        # One watch of every namespace that selects everything sees it all; a watch of one
        # namespace sees only that namespace, selector or not.
        if not watches or any(not (w.labels or "").strip() and w.namespace is None for w in watches):
            return None
        return watches
