"""Read-only look-ups in the host's informer cache: no API call, only declared kinds.

Objects come back as plain dicts. A refused look-up raises ``wasmloop.CacheError``.
"""

from __future__ import annotations

from typing import Iterator, List, Optional

from . import _host
from .kinds import Kind

PAGE_SIZE = 500


def get(kind: Kind, name: str, namespace: Optional[str] = None) -> Optional[dict]:
    """The object of ``kind`` named ``name`` (in ``namespace``; for a namespaced kind, none
    finds it in any namespace), or ``None``."""
    return _host.current.get(kind, namespace, name)


def pages(
    kind: Kind, namespace: Optional[str] = None, selector: Optional[str] = None, limit: int = 0
) -> Iterator[List[dict]]:
    """Objects of ``kind`` one page at a time, in (namespace, name) order; ``selector`` is a
    label selector in Kubernetes syntax. ``limit`` 0 means the host's page size (500)."""
    if not 0 <= limit < 2**32:
        raise ValueError(f"list limit {limit!r}: give 0 (the host's page size) up to {PAGE_SIZE}")
    token: Optional[str] = None
    while True:
        items, token = _host.current.page(kind, namespace, selector, limit, token)
        yield items
        if token is None:
            return


def list(kind: Kind, namespace: Optional[str] = None, selector: Optional[str] = None) -> List[dict]:
    """Every object of ``kind`` (in ``namespace``, matching ``selector``), all pages."""
    return [obj for page in pages(kind, namespace, selector) for obj in page]
