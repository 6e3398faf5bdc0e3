"""Log lines go to the host's log, inside the span of the current reconcile."""

from __future__ import annotations

from . import _host

LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    """Writes ``message`` at ``level`` (one of ``LEVELS``)."""
    if level not in LEVELS:
        raise ValueError(f"log level {level!r}: use one of {LEVELS}")
    _host.current.log(level, str(message))


def trace(message: str) -> None:
    log("trace", message)


def debug(message: str) -> None:
    log("debug", message)


def info(message: str) -> None:
    log("info", message)


def warn(message: str) -> None:
    log("warn", message)


def error(message: str) -> None:
    log("error", message)
