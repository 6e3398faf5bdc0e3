"""Kubernetes label selectors (``app=web,tier!=cache,env in (a,b),!legacy``), parsed and
matched the way the host's cache does, for the test harness.

>>> matches("app=web,tier notin (db)", {"app": "web", "tier": "cache"})
True
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^()]*)\)$")
_EQ = re.compile(rf"^({_KEY})\s*(==|=|!=)\s*({_VALUE})$")
_EXISTS = re.compile(rf"^(!?)\s*({_KEY})$")

Requirement = Callable[[Dict[str, str]], bool]


def _requirements(text: str) -> List[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return parts


def _requirement(text: str) -> Requirement:
    if m := _SET.match(text):
        key, op, values = m.group(1), m.group(3), {v.strip() for v in m.group(4).split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQ.match(text):
        key, op, value = m.group(1), m.group(3), m.group(4)
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS.match(text):
        negated, key = m.group(1) == "!", m.group(2)
        return lambda labels: (key in labels) != negated
    raise ValueError(f"label selector requirement {text!r} does not parse")


def parse(text: str) -> Requirement:
    """A predicate over a label dict; raises ``ValueError`` when ``text`` does not parse."""
    if not text.strip():
        return lambda labels: True
    requirements = [_requirement(r) for r in _requirements(text)]
    return lambda labels: all(r(labels) for r in requirements)


def matches(text: str, labels: Dict[str, str]) -> bool:
    return parse(text)(labels)
