"""Write a wasmloop reconcile plugin in Python: one ``Reconciler`` subclass.

The host runs the controller machinery (informers, work queue, server-side apply, owner
references, finalizers, events, backoff). A plugin answers one question: given this primary
object and what is observed around it, which actions bring the world to its spec?

>>> from wasmloop import Manifest, Reconciler, event, kinds
>>> class Hello(Reconciler):
...     def manifest(self):
...         return Manifest("hello", "0.1.0", primary=kinds.ConfigMap)
...     def reconcile(self, request):
...         keys = len(request.object.get("data") or {})
...         return [event("Normal", "Counted", f"{keys} keys")]
>>> from wasmloop.testing import TestCase
>>> outcome = TestCase({"apiVersion": "v1", "kind": "ConfigMap",
...     "metadata": {"name": "a", "namespace": "default", "uid": "1"}, "data": {"x": "1"}}).run(Hello())
>>> outcome.events[0].message
'1 keys'

Build it with ``python -m wasmloop build DIR`` (see ``wasmloop.build``).
"""

from . import cache, kinds, log
from .actions import (
    Action,
    Apply,
    Delete,
    Event,
    ObjectRef,
    Patch,
    Prune,
    RequeueAfter,
    Status,
    apply,
    delete,
    event,
    patch,
    prune,
    ref,
    requeue_after,
    status,
)
from .errors import CacheError, PermanentError, ReconcileError, TransientError
from .kinds import Kind
from .manifest import Grant, Index, Manifest, Settings, Watch
from .reconciler import Reconciler
from .request import ApplyConflict, FieldConflict, Related, Request, Trigger

__version__ = "0.3.0"

__all__ = [
    "Action", "Apply", "ApplyConflict", "CacheError", "Delete", "Event", "FieldConflict", "Grant",
    "Index", "Kind", "Manifest", "ObjectRef", "Patch", "PermanentError", "Prune", "ReconcileError",
    "Reconciler", "Related", "Request", "RequeueAfter", "Settings", "Status", "TransientError",
    "Trigger", "Watch", "apply", "cache", "delete", "event", "kinds",
    "log", "patch", "prune", "ref", "requeue_after", "status",
]
