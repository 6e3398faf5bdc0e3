"""The one class a plugin writes."""

from __future__ import annotations

from typing import Any, List

from .actions import Action, ObjectRef
from .manifest import Manifest
from .request import Related, Request


class Reconciler:
    """Subclass it, give ``manifest`` and ``reconcile``, and optionally ``map``.

    ``reconcile`` returns the actions that bring the world to the primary's spec, or raises
    ``TransientError`` / ``PermanentError``. It must not keep state between calls: the host
    may run every call in a fresh instance, and one reconcile never sees another's.
    """

    def manifest(self) -> Manifest:
        raise NotImplementedError("a Reconciler must define manifest()")

    def reconcile(self, request: Request) -> List[Action]:
        raise NotImplementedError("a Reconciler must define reconcile(request)")

    def map(self, related: dict, config: Any) -> List[ObjectRef]:
        """The primaries to requeue when ``related`` (an object of a watched kind) changes.
        ``wasmloop.cache.by_index`` finds the primaries that name it."""
        return []

    def map_change(self, change: Related, config: Any) -> List[ObjectRef]:
        """``map``, told whether the object was deleted (or left the watch's selection). The
        default calls ``map`` with the object."""
        return self.map(change.object, config)
