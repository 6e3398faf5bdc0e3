//! The rules the Python SDK ports (`guest-sdk/python/wasmloop/rules.py` and `selector.py`),
//! held to the same answers as this crate by one shared table, `parity.json`, which the Python
//! SDK's `tests/test_parity.py` reads too.

use serde_json::Value;
use wasmloop_contract::manifest::check_finalizer;
use wasmloop_contract::selector::{self, Selector};
use wasmloop_contract::validate;

fn table() -> Value {
    serde_json::from_str(include_str!("parity.json")).expect("parity.json parses")
}

fn cases<'a>(table: &'a Value, field: &str) -> impl Iterator<Item = (&'a str, bool)> {
    table[field].as_array().unwrap().iter().map(|case| (case[0].as_str().unwrap(), case[1].as_bool().unwrap()))
}

#[test]
fn selectors_parse_pass_the_server_check_and_match_as_the_table_says() {
    let table = table();
    let labels = table["labels"].as_object().unwrap();
    for case in table["selectors"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let parsed = text.parse::<Selector>();
        assert_eq!(parsed.is_ok(), case["parses"].as_bool().unwrap(), "{text:?} parses: {parsed:?}");
        let Ok(selector) = parsed else { continue };
        let server = selector::for_server(&selector);
        assert_eq!(server.is_ok(), case["server"].as_bool().unwrap(), "{text:?} for the server: {server:?}");
        let matched = selector.matches(|k| labels.get(k).and_then(Value::as_str));
        assert_eq!(matched, case["matches"].as_bool().unwrap(), "{text:?} matches {labels:?}");
    }
}

#[test]
fn names_and_words_are_checked_as_the_table_says() {
    let table = table();
    type Check = fn(&str) -> Result<(), String>;
    let checks: [(&str, Check); 7] = [
        ("names", validate::name),
        ("namespaces", validate::namespace),
        ("kinds", validate::kind),
        ("api_versions", validate::api_version),
        ("uids", validate::uid),
        ("event_words", |v| validate::event_word("reason", v)),
        ("finalizers", check_finalizer),
    ];
    for (field, check) in checks {
        for (value, ok) in cases(&table, field) {
            assert_eq!(check(value).is_ok(), ok, "{field}: {value:?}: {:?}", check(value));
        }
    }
}
