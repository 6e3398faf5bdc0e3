"""One reconcile's result in the contract's terms, shared by the component glue and the test
harness so that a test sees exactly what the host would. Not a public API."""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

from .actions import Action, Apply, Delete, Event, Patch, Prune, RequeueAfter, Status, duration_millis
from .errors import CacheError, PermanentError, ReconcileError, TransientError
from .request import Request

_ACTIONS = (Apply, Delete, Patch, Status, Event, Prune, RequeueAfter)


@dataclass
class Result:
    """``error`` is ``None`` on success; ``actions`` never hold a ``RequeueAfter``."""

    actions: List[Action] = field(default_factory=list)
    requeue_after_ms: Optional[int] = None
    error: Optional[ReconcileError] = None


def millis(seconds: float) -> int:
    return duration_millis(seconds, "a duration")


def to_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        raise TypeError(f"{what} is not JSON: {e}") from None


@dataclass
class Encoded:
    """What the component glue sends for a result: each action beside its JSON payload (none
    for a delete, an event, a prune), and an error's retry delay in milliseconds."""

    actions: List[Tuple[Action, Optional[str]]]
    error_actions: List[Tuple[Action, Optional[str]]]
    retry_after_ms: Optional[int]


_PAYLOADS = {Apply: ("object", "an applied object"), Status: ("status", "a status"), Patch: ("patch", "a patch")}


def _payload(action: Action, where: str) -> Optional[str]:
    field_name, what = _PAYLOADS.get(type(action), (None, ""))
    return None if field_name is None else to_json(getattr(action, field_name), f"{where}: {what}")


def encode(result: Result) -> Encoded:
    """``result`` as the component glue encodes it, the one place that decides what encodes:
    the glue sends it, the test harness checks it. Raises (``TypeError``, ``ValueError``) for
    what does not encode (a payload that is no JSON, a retry delay of no duration), which fails
    the call as a bug in the plugin would."""
    actions = [(a, _payload(a, f"actions[{i}]")) for i, a in enumerate(result.actions)]
    error = result.error
    if error is None:
        return Encoded(actions, [], None)
    error_actions = [(a, _payload(a, f"error.actions[{i}]")) for i, a in enumerate(error.actions)]
    retry = None if error.retry_after is None else duration_millis(error.retry_after, "retry_after")
    return Encoded(actions, error_actions, retry)


def _split(actions: Any) -> Result:
    if not isinstance(actions, (list, tuple)):
        raise TypeError(f"reconcile must return a list of actions, not {type(actions).__name__}")
    result = Result()
    for i, action in enumerate(actions):
        if not isinstance(action, _ACTIONS):
            raise TypeError(f"actions[{i}] is a {type(action).__name__}: build actions with wasmloop.apply, status, event, ...")
        if isinstance(action, RequeueAfter):
            ms = millis(action.seconds)
            result.requeue_after_ms = ms if result.requeue_after_ms is None else min(ms, result.requeue_after_ms)
        else:
            result.actions.append(action)
    return result


def _where(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno} in {last.name})"


def as_error(e: BaseException) -> ReconcileError:
    """Any exception as the error the host gets."""
    if isinstance(e, ReconcileError):
        return e
    if isinstance(e, CacheError):
        # As the Rust SDK: only lost access is worth retrying; the rest fail alike until
        # the plugin or the object changes.
        return TransientError(e.message) if e.transient else PermanentError(e.message)
    # A bug in the plugin: retried with backoff, as a guest panic is.
    return TransientError(f"plugin raised {type(e).__name__}: {e}{_where(e)}")


def reconcile(plugin: Any, request: Request) -> Result:
    try:
        return _split(plugin.reconcile(request))
    except Exception as e:  # noqa: BLE001 - every exception becomes the contract's error
        return Result(error=as_error(e))
