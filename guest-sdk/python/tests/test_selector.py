import pytest

from wasmloop import selector

LABELS = {"app": "web", "tier": "front"}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app=db", False),
        ("app", True),
        ("!app", False),
        ("!legacy", True),
        ("app in (web, db)", True),
        ("app notin (web)", False),
        ("tier notin (back)", True),
        ("app=web,tier=back", False),
        ("app=web, tier in (front)", True),
    ],
)
def test_a_selector_matches_as_the_api_server_does(text, expected):
    assert selector.matches(text, LABELS) is expected


@pytest.mark.parametrize("text", ["app=", "a b", "app in web", "=web", "app in (a"])
def test_a_malformed_selector_is_refused(text):
    if text == "app=":  # an empty value is valid: `app=` selects app set to ""
        assert selector.matches(text, {"app": ""})
        return
    with pytest.raises(ValueError):
        selector.parse(text)
