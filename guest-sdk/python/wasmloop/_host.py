"""The one seam between the SDK and whoever plays the host: the component's imports when the
plugin runs in wasmloop, a fake when it runs under ``wasmloop.testing``. Not a public API."""

from __future__ import annotations

from typing import List, Optional, Protocol, Tuple

from .kinds import Kind


class Host(Protocol):
    def get(self, kind: Kind, namespace: Optional[str], name: str) -> Optional[dict]: ...

    def page(
        self, kind: Kind, namespace: Optional[str], selector: Optional[str], limit: int, token: Optional[str]
    ) -> Tuple[List[dict], Optional[str]]: ...

    def index_page(
        self, kind: Kind, index: str, key: str, namespace: Optional[str], limit: int, token: Optional[str]
    ) -> Tuple[List[dict], Optional[str]]: ...

    def log(self, level: str, message: str) -> None: ...


class _Unset:
    """Stands in before a host is installed, saying how to get one."""

    def _fail(self, *_args, **_kwargs):
        raise RuntimeError(
            "no wasmloop host: run the plugin through wasmloop (built with `python -m wasmloop build`) "
            "or under wasmloop.testing.TestCase"
        )

    get = page = index_page = log = _fail


current: Host = _Unset()


def install(host: Host) -> Host:
    """Makes ``host`` the current one and returns the one it replaces."""
    global current
    previous, current = current, host
    return previous
