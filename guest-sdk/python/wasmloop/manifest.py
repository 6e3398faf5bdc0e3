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
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .kinds import Kind


@dataclass(frozen=True)
class Watch:
    """Which objects of ``kind`` the plugin wants to see. Every filter given must hold, and the
    host's cache keeps only what they select:

    - ``namespace`` or ``namespaces``: only these namespaces (none: every namespace);
    - ``labels``: a label selector in Kubernetes syntax (``app=web,tier!=cache``);
    - ``fields``: a field selector the API server applies (``metadata.name=db``,
      ``type=kubernetes.io/tls``);
    - ``annotations``: annotations each object carries, a dict of key to value (``None``: only
      present);
    - ``generation_changed``: call the plugin only when ``metadata.generation`` changed
      (status-only updates do not call it), for a primary.

    >>> from wasmloop import kinds
    >>> Watch(kinds.Secret, fields="metadata.name=db").fields
    'metadata.name=db'
    """

    kind: Kind
    namespace: Optional[str] = None
    labels: Optional[str] = None
    namespaces: Sequence[str] = ()
    fields: Optional[str] = None
    annotations: Mapping[str, Optional[str]] = field(default_factory=dict)
    generation_changed: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.namespaces, str):
            raise TypeError(f"Watch namespaces {self.namespaces!r}: give a list of namespaces")
        if not isinstance(self.annotations, Mapping):
            raise TypeError("Watch annotations: give a dict of key to value (None: only present)")
        object.__setattr__(self, "namespaces", tuple(self.namespaces))
        object.__setattr__(self, "annotations", dict(self.annotations))

    def __hash__(self) -> int:
        return hash((self.kind, self.namespace, self.labels, self.namespaces, self.fields, self.generation_changed))

    @property
    def namespace_list(self) -> List[str]:
        """Every namespace given, ``namespace`` and ``namespaces`` together."""
        return [*self.namespaces, *([self.namespace] if self.namespace is not None else [])]


@dataclass(frozen=True)
class Index:
    """An index the host keeps over a declared kind: ``cache.by_index(kind, name, key)`` finds
    the objects whose ``fields`` (paths such as ``spec.template.spec.volumes[*].configMap.name``)
    reach ``key``, without reading every object of the kind."""

    name: str
    kind: Kind
    fields: Sequence[str]

    def __post_init__(self) -> None:
        if isinstance(self.fields, str):
            raise TypeError(f"Index {self.name!r} fields: give a list of field paths")
        object.__setattr__(self, "fields", tuple(self.fields))


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
    reads: List[KindOrWatch] = field(default_factory=list)
    metadata_only: List[Kind] = field(default_factory=list)
    writes: List[Grant] = field(default_factory=list)
    finalizer: Optional[str] = None
    prune: bool = False
    deliver_deleted: bool = False
    deliver_previous: bool = False
    settings: Settings = field(default_factory=Settings)
    keep_managed_fields: List[Kind] = field(default_factory=list)
    keep_last_applied: List[Kind] = field(default_factory=list)
    indexes: List[Index] = field(default_factory=list)

    @property
    def primary_watch(self) -> Watch:
        return self.primary if isinstance(self.primary, Watch) else Watch(self.primary)

    @property
    def watch_list(self) -> List[Watch]:
        return [w if isinstance(w, Watch) else Watch(w) for w in self.watches]

    @property
    def read_list(self) -> List[Watch]:
        return [r if isinstance(r, Watch) else Watch(r) for r in self.reads]

    def declared_kinds(self) -> Iterable[Kind]:
        """Every kind the plugin may read: primary, owned, watched and read."""
        seen = []
        for kind in [self.primary_watch.kind, *self.owns, *(w.kind for w in self.watch_list), *(r.kind for r in self.read_list)]:
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
