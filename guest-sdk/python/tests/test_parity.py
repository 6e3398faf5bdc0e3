"""The SDK's port of the host's rules gives the host's answers: one table,
``guest-sdk/contract/tests/parity.json``, which the Rust crate's ``tests/parity.rs`` reads too."""

import json
from pathlib import Path

import pytest

from wasmloop import rules, selector

TABLE = json.loads((Path(__file__).resolve().parents[2] / "contract" / "tests" / "parity.json").read_text())


@pytest.mark.parametrize("case", TABLE["selectors"], ids=lambda c: repr(c["text"])[:40])
def test_a_selector_parses_passes_the_server_check_and_matches_as_the_host_s(case):
    try:
        parsed = selector.parse(case["text"])
    except ValueError:
        parsed = None
    assert (parsed is not None) == case["parses"]
    if parsed is None:
        return
    assert (rules.selector_for_server(case["text"]) is None) == case["server"]
    assert parsed(TABLE["labels"]) == case["matches"]


CHECKS = {
    "names": rules.name,
    "namespaces": rules.namespace,
    "kinds": rules.kind,
    "api_versions": rules.api_version,
    "uids": rules.uid,
    "event_words": lambda v: rules.event_word("reason", v),
    "finalizers": rules.finalizer,
}


@pytest.mark.parametrize(
    "field,value,ok", [(f, v, ok) for f in CHECKS for v, ok in TABLE[f]], ids=lambda x: repr(x)[:30]
)
def test_a_name_or_word_is_checked_as_the_host_checks_it(field, value, ok):
    assert (CHECKS[field](value) is None) == ok, CHECKS[field](value)
