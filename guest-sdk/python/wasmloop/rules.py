"""The host's rules for what a plugin hands it, ported from ``wasmloop_contract::validate`` and
``wasmloop_contract::manifest`` so that the test harness refuses what the host refuses. The
shared table ``guest-sdk/contract/tests/parity.json`` holds both to the same answers.

Each check returns ``None`` when the value passes, else the host's sentence.

>>> namespace("team-a") is None
True
>>> event_word("reason", "Not synced")
"the event reason 'Not synced' must be a CamelCase word of letters and digits"
"""

from __future__ import annotations

from typing import List, Optional, Sequence

MAX_NAMESPACE = 63
MAX_NAME = 253
MAX_KIND = 63
MAX_UID = 128
MAX_EVENT_REASON = 128
MAX_LABEL = 63
MAX_SELECTOR_REQUIREMENTS = 32
MAX_SELECTOR_VALUES = 64
MAX_GRANT_NAMESPACES = 64
MAX_FINALIZER = 316

# Rust's `char::is_whitespace` (Unicode White_Space). Python's `str.isspace` also counts
# U+001C to U+001F, which Rust does not: a plugin that trims as Python does would disagree with
# its Rust twin on them.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)


def rust_trim(text: str) -> str:
    """``text`` trimmed as Rust's ``str::trim`` trims it."""
    return text.strip(RUST_WHITESPACE)


def rust_split_whitespace(text: str) -> List[str]:
    """``text.splitn(2, char::is_whitespace)``: split at the first whitespace character."""
    for i, ch in enumerate(text):
        if ch in RUST_WHITESPACE:
            return [text[:i], text[i + 1 :]]
    return [text]


def _alnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _dns_label_chars(s: str) -> bool:
    return bool(s) and all(c.isascii() and (c.islower() or c.isdigit() or c == "-") for c in s) and s[0] != "-" and s[-1] != "-"


def is_dns1123_label(s: str) -> bool:
    return len(s) <= 63 and _dns_label_chars(s)


def is_dns1123_subdomain(s: str) -> bool:
    return len(s) <= 253 and all(_dns_label_chars(part) for part in s.split("."))


def is_dns1035_label(s: str) -> bool:
    return is_dns1123_label(s) and "a" <= s[0] <= "z"


def namespace(ns: str) -> Optional[str]:
    if isinstance(ns, str) and is_dns1123_label(ns):
        return None
    return f"namespace {ns!r} is not a valid namespace (1-{MAX_NAMESPACE} characters of a-z, 0-9 and '-', starting and ending alphanumeric)"


def name(value: str) -> Optional[str]:
    ok = (
        isinstance(value, str)
        and 0 < len(value) <= MAX_NAME
        and all(_alnum(c) or c in "-._:" for c in value)
        and value not in (".", "..")
    )
    if ok:
        return None
    return f"name {value!r} is not a valid object name (1-{MAX_NAME} characters of a-z, A-Z, 0-9, '-', '.', '_' and ':', not \".\" or \"..\")"


def kind(value: str) -> Optional[str]:
    ok = isinstance(value, str) and 0 < len(value) <= MAX_KIND and value[0].isascii() and value[0].isalpha() and all(_alnum(c) for c in value)
    if ok:
        return None
    return f"kind {value!r} is not a valid kind (1-{MAX_KIND} letters and digits, starting with a letter)"


def group_version(group: str, version: str) -> Optional[str]:
    if group and not is_dns1123_subdomain(group):
        return f"group {group!r} is not a valid API group (a DNS-1123 subdomain such as apps or example.com)"
    if not is_dns1035_label(version):
        return f"version {version!r} is not a valid API version (such as v1 or v1beta2)"
    return None


def api_version(value: str) -> Optional[str]:
    if not isinstance(value, str):
        return f"apiVersion {value!r} is not a string"
    if "/" in value:
        group, version = value.split("/", 1)
        if not group:
            return f"apiVersion {value!r} has an empty group"
    else:
        group, version = "", value
    error = group_version(group, version)
    return None if error is None else f"apiVersion {value!r} is invalid: {error}"


def uid(value: str) -> Optional[str]:
    if isinstance(value, str) and 0 < len(value) <= MAX_UID and all(_alnum(c) or c == "-" for c in value):
        return None
    return f"uid {value!r} is not a valid UID (1-{MAX_UID} letters, digits and '-')"


def event_word(field: str, value: str) -> Optional[str]:
    if not value:
        return f"an event needs a {field}"
    size = len(value.encode())
    if size > MAX_EVENT_REASON:
        return f"the event {field} is {size} bytes, over the limit of {MAX_EVENT_REASON}; use a short CamelCase word"
    if not all(_alnum(c) or c == "_" for c in value):
        return f"the event {field} {value!r} must be a CamelCase word of letters and digits"
    return None


def is_label_value(value: str) -> bool:
    return value == "" or (
        len(value) <= MAX_LABEL and all(_alnum(c) or c in "-_." for c in value) and _alnum(value[0]) and _alnum(value[-1])
    )


def is_label_key(key: str) -> bool:
    prefix, _, rest = key.partition("/")
    if _:
        return is_dns1123_subdomain(prefix) and rest != "" and is_label_value(rest)
    return key != "" and is_label_value(key)


def selector_for_server(text: str) -> Optional[str]:
    """A label selector the host sends to the API server (a watch's), checked whole: it parses,
    its keys and values are labels, each set holds 1 to 64 values, and 32 requirements at most."""
    from . import selector

    try:
        parsed = selector.requirements(text)
    except ValueError as e:
        return str(e)
    shown = selector.render(parsed)
    if len(parsed) > MAX_SELECTOR_REQUIREMENTS:
        return f"label selector {shown} has {len(parsed)} requirements, over the limit of {MAX_SELECTOR_REQUIREMENTS}"
    for op, key, values in parsed:
        if op in ("in", "notin") and not 0 < len(values) <= MAX_SELECTOR_VALUES:
            return f"label selector {shown}: the set of {key!r} holds {len(values)} values; give 1 to {MAX_SELECTOR_VALUES}"
        if not is_label_key(key):
            return f"label selector {shown}: {key!r} is not a label key"
        bad = next((v for v in values if not is_label_value(v)), None)
        if bad is not None:
            return f"label selector {shown}: {bad!r} is not a label value"
    return None


def finalizer(value: str) -> Optional[str]:
    """A finalizer must be a qualified name (``domain/name``), as the API server demands."""
    domain, slash, rest = value.partition("/")
    ok = (
        bool(slash)
        and "." in domain
        and rest != ""
        and len(value) <= MAX_FINALIZER
        and all(_alnum(c) or c in "-./_" for c in value)
    )
    return None if ok else f"finalizer {value!r} must look like `example.com/name`"


def grant_namespaces(kind: str, namespaces: Sequence[str]) -> Optional[str]:
    if not 0 < len(namespaces) <= MAX_GRANT_NAMESPACES:
        return f"the write grant on {kind} lists {len(namespaces)} namespaces; list 1 to {MAX_GRANT_NAMESPACES}, or use scope any"
    for ns in namespaces:
        error = namespace(ns)
        if error is not None:
            return f"the write grant on {kind}: {error}"
    return None
