"""Errors a reconcile raises. The host records a Warning Event with the reason and message.

A ``TransientError`` is retried with backoff (or after ``retry_after`` seconds); a
``PermanentError`` waits until the object or the plugin changes. Any other exception escaping
``reconcile`` is a bug in the plugin: the host gets it as a transient error naming the
exception and where it was raised, and retries with backoff.
"""

from __future__ import annotations

from typing import Iterable, Optional

from .actions import Action, Event, Status, duration_millis as _outcome_millis


class ReconcileError(Exception):
    """Base of the two errors; use one of them."""

    transient = True

    def __init__(
        self,
        message: str,
        *,
        reason: Optional[str] = None,
        retry_after: Optional[float] = None,
        actions: Iterable[Action] = (),
    ) -> None:
        super().__init__(message)
        if not isinstance(message, str):
            raise TypeError(f"an error's message must be a string, not {type(message).__name__}")
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"an error's reason must be a string or None, not {type(reason).__name__}")
        self.message = message
        self.reason = reason
        self.retry_after = retry_after
        self.actions = list(actions)
        for action in self.actions:
            if not isinstance(action, (Status, Event)):
                raise TypeError(
                    f"an error carries status and event actions only, not {type(action).__name__}"
                )
        if retry_after is not None:
            _outcome_millis(retry_after, "retry_after")


class TransientError(ReconcileError):
    """Retry with backoff: a conflict, a dependency not ready yet."""

    transient = True


class PermanentError(ReconcileError):
    """Do not retry until the object or the plugin changes: an invalid spec."""

    transient = False

    def __init__(self, message: str, *, reason: Optional[str] = None, actions: Iterable[Action] = ()) -> None:
        super().__init__(message, reason=reason, actions=actions)


class CacheError(Exception):
    """The host refused a cache look-up. ``case`` is the contract's case name
    (``undeclared-kind``, ``invalid-selector``, ``out-of-scope``, ``access-revoked``,
    ``invalid-continue``, ``unknown-index``). Left uncaught, ``access-revoked`` is retried and the rest wait
    for a change, as in the Rust SDK."""

    def __init__(self, case: str, message: str) -> None:
        super().__init__(message)
        self.case = case
        self.message = message

    @property
    def transient(self) -> bool:
        return self.case == "access-revoked"
