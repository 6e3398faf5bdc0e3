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

from . import rules
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

# The settings of WIT type u64; the others are u32.
_SETTING_MAX = {"memory_limit_bytes": 2**64 - 1, "response_limit_bytes": 2**64 - 1}


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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

    def validate(self) -> None:
        """Raises ``ValueError`` naming what the host would refuse at load (the rules of
        ``wasmloop_contract::manifest::validate``)."""
        where = f"plugin {self.name!r}"
        name_ok = isinstance(self.name, str) and 0 < len(self.name) <= 63 and all(c.isascii() and (c.islower() or c.isdigit() or c == "-") for c in self.name)
        if not name_ok:
            raise ValueError(f"{where}: name {self.name!r} must be 1-63 characters of a-z, 0-9 and '-'")
        declared = list(self.declared_kinds())
        for kind in declared + [g.kind for g in self.writes]:
            if not (kind.version and kind.kind):
                raise ValueError(f"{where}: kind {kind!r} needs a version and a kind")
        for role, watch in [("primary", self.primary_watch), *(("watched", w) for w in self.watch_list)]:
            if watch.labels is not None:
                error = rules.selector_for_server(watch.labels)
                if error is not None:
                    raise ValueError(f"{where}: {role} {watch.kind}: {error}")
        for grant in self.writes:
            if isinstance(grant.namespaces, tuple):
                error = rules.grant_namespaces(str(grant.kind), grant.namespaces)
                if error is not None:
                    raise ValueError(f"{where}: {error}")
        # The primary is not enough: a metadata-only kind is one the plugin also owns, watches
        # or reads.
        others = [*self.owns, *(w.kind for w in self.watch_list), *self.reads]
        for kind in self.metadata_only:
            if kind not in others:
                raise ValueError(f"{where}: metadata_only kind {kind} must also be owned, watched or read")
        for kind, managed_fields, _ in self.keeps():
            if kind not in declared:
                raise ValueError(f"{where}: kept fields of {kind}: the kind must be declared")
            if managed_fields and kind in self.metadata_only:
                raise ValueError(f"{where}: kept managedFields of {kind}: a metadata-only kind is served without them")
        if self.finalizer is not None:
            error = rules.finalizer(self.finalizer)
            if error is not None:
                raise ValueError(f"{where}: {error}")
        for name, value in vars(self.settings).items():
            # The WIT type's range: componentize-py refuses a larger value only in the glue.
            top = _SETTING_MAX.get(name, 2**32 - 1)
            if value is not None and not (_whole(value) and 0 < value <= top):
                raise ValueError(f"{where}: setting {name} must be an integer from 1 to {top}; leave it unset for the default")
