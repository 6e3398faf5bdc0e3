"""The conformance suite, ``guest-sdk/rules/conformance.json``, answered through the rules
component as the harness asks it: every case gets the host's own sentence (the Rust crate's
``tests/conformance.rs`` and the JavaScript SDK answer the same file)."""

import json
from pathlib import Path

import pytest

from wasmloop import _rules

SUITE = json.loads((Path(__file__).resolve().parents[2] / "rules" / "conformance.json").read_text())


def _call(name, *args):
    return _rules._component().call(name, *args)


def _id(case):
    return repr(case.get("case") or case.get("value") or case.get("selector"))[:40]


@pytest.mark.parametrize("case", SUITE["values"], ids=_id)
def test_a_value_gets_the_host_s_answer(case):
    assert _rules.check_value(case["rule"], case["value"]) == case["answer"]


@pytest.mark.parametrize("case", SUITE["selectors"], ids=_id)
def test_a_selector_gets_the_host_s_answers(case):
    assert _rules.check_selector(case["selector"]) == case["server"]
    if case["refused"] is None:
        assert _rules.selector_matches(case["selector"], case["labels"]) is case["matches"]
    else:
        with pytest.raises(ValueError) as refused:
            _rules.selector_matches(case["selector"], case["labels"])
        assert str(refused.value) == case["refused"]


@pytest.mark.parametrize("case", SUITE["manifests"], ids=_id)
def test_a_manifest_gets_the_host_s_answer(case):
    assert _call("check-manifest", _rules._json(case["manifest"])) == case["answer"]


@pytest.mark.parametrize("case", SUITE["actions"], ids=_id)
def test_an_action_gets_the_host_s_answer(case):
    assert _call("check-action", _rules._json(case["action"]), case["deleted"]) == case["answer"]


@pytest.mark.parametrize("case", SUITE["responses"], ids=_id)
def test_a_response_gets_the_host_s_answer(case):
    answer = _rules.check_response(case["actions"], case["failed"], case["phase"], case["prune-allowed"])
    assert answer == case["answer"]


@pytest.mark.parametrize("case", SUITE["caches"], ids=_id)
def test_a_cache_holds_what_the_host_s_cache_holds(case):
    answer = _call("holds", _rules._json(case["manifest"]), _rules._json(case["object"]))
    assert answer == case["holds"]


@pytest.mark.parametrize("case", SUITE["indexes"], ids=_id)
def test_an_index_files_an_object_under_the_host_s_keys(case):
    answer = _call("index-keys", _rules._json(case["manifest"]), case["index"], _rules._json(case["object"]))
    assert answer == case["keys"]
