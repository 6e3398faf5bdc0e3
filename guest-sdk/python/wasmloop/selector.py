"""Kubernetes label selectors (``app=web,tier!=cache,env in (a,b),!legacy``), parsed and
matched as the host's cache does: a line-for-line port of ``wasmloop_contract::selector``, held
to it by the shared table ``guest-sdk/contract/tests/parity.json``. The parse is lenient, as the
host's cache filter is; what the host sends to the API server is checked further by
``wasmloop.rules.selector_for_server``.

>>> matches("app=web,tier notin (db)", {"app": "web", "tier": "cache"})
True
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from .rules import rust_trim, rust_split_whitespace

# (operator, key, values): "=", "!=", "in", "notin", "exists", "!".
Requirement = Tuple[str, str, Tuple[str, ...]]


def _split_top_level(text: str) -> List[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _valid_key(key: str) -> bool:
    return bool(key) and all((c.isascii() and c.isalnum()) or c in "-_./" for c in key)


def _parse_set(rest: str) -> Optional[Tuple[str, ...]]:
    rest = rust_trim(rest)
    if not (rest.startswith("(") and rest.endswith(")")) or len(rest) < 2:
        return None
    return tuple(v for v in (rust_trim(v) for v in rest[1:-1].split(",")) if v)


def _requirement(part: str) -> Requirement:
    part = rust_trim(part)
    if part.startswith("!"):
        key = rust_trim(part[1:])
        if _valid_key(key):
            return ("!", key, ())
        raise ValueError(f"bad key in {part!r}")
    for op in ("!=", "==", "="):
        if op in part:
            key, value = part.split(op, 1)
            key, value = rust_trim(key), rust_trim(value)
            if not _valid_key(key):
                raise ValueError(f"bad key in {part!r}")
            return ("!=" if op == "!=" else "=", key, (value,))
    words = rust_split_whitespace(part)
    key = words[0]
    if not _valid_key(key):
        raise ValueError(f"bad key in {part!r}")
    if len(words) == 1:
        return ("exists", key, ())
    rest = rust_trim(words[1])
    if rest.startswith("notin"):
        op, rest = "notin", rest[len("notin"):]
    elif rest.startswith("in"):
        op, rest = "in", rest[len("in"):]
    else:
        raise ValueError(f"unknown operator in {part!r}")
    values = _parse_set(rest)
    if values is None:
        raise ValueError(f"expected a (value,...) set in {part!r}")
    return (op, key, values)


def requirements(text: str) -> List[Requirement]:
    """The requirements of ``text``; raises ``ValueError`` naming the selector when it does not
    parse."""
    if not rust_trim(text):
        return []
    try:
        return [_requirement(part) for part in _split_top_level(text)]
    except ValueError as e:
        raise ValueError(
            f"invalid label selector {text!r}: {e}; use the Kubernetes form `key=value,key!=value,key in (a,b),!key`"
        ) from None


def _holds(requirement: Requirement, labels: Dict[str, str]) -> bool:
    op, key, values = requirement
    value = labels.get(key) if isinstance(labels, dict) else None
    # As the host reads JSON labels: a value that is not a string is no label.
    value = value if isinstance(value, str) else None
    if op == "=":
        return value == values[0]
    if op == "!=":
        return value != values[0]
    if op == "in":
        return value is not None and value in values
    if op == "notin":
        return not (value is not None and value in values)
    if op == "exists":
        return value is not None
    return value is None


def parse(text: str) -> Callable[[Dict[str, str]], bool]:
    """A predicate over a label dict; raises ``ValueError`` when ``text`` does not parse."""
    parsed = requirements(text)
    return lambda labels: all(_holds(r, labels) for r in parsed)


def matches(text: str, labels: Dict[str, str]) -> bool:
    return parse(text)(labels)


def render(parsed: List[Requirement]) -> str:
    """The selector's string form, as the host shows it."""
    shown = []
    for op, key, values in parsed:
        if op in ("=", "!="):
            shown.append(f"{key}{op}{values[0]}")
        elif op in ("in", "notin"):
            shown.append(f"{key} {op} ({','.join(values)})")
        elif op == "exists":
            shown.append(key)
        else:
            shown.append(f"!{key}")
    return ",".join(shown)
