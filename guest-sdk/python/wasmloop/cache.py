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


def index_pages(
    kind: Kind, index: str, key: str, namespace: Optional[str] = None, limit: int = 0
) -> Iterator[List[dict]]:
    """The objects of ``kind`` the manifest's index ``index`` files under ``key``, one page at a
    time, in (namespace, name) order. A look-up costs what its answer holds, not what the kind
    holds. An index the manifest does not declare raises ``CacheError("unknown-index")``."""
    if not 0 <= limit < 2**32:
        raise ValueError(f"list limit {limit!r}: give 0 (the host's page size) up to {PAGE_SIZE}")
    token: Optional[str] = None
    while True:
        items, token = _host.current.index_page(kind, index, key, namespace, limit, token)
        yield items
        if token is None:
            return


def by_index(kind: Kind, index: str, key: str, namespace: Optional[str] = None) -> List[dict]:
    """Every object of ``kind`` the index ``index`` files under ``key``, all pages.

    >>> # In a manifest: indexes=[Index("configmap", kinds.Deployment,
    >>> #     ["spec.template.spec.volumes[*].configMap.name"])]
    >>> # In map: cache.by_index(kinds.Deployment, "configmap", "settings", namespace="shop")
    """
    return [obj for page in index_pages(kind, index, key, namespace) for obj in page]
