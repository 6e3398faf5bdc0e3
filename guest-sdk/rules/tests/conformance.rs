//! The conformance suite, `conformance.json`, answered by the host's rules natively. The
//! Python and JavaScript SDKs answer the same file through the rules component.
//!
//! `WASMLOOP_BLESS=1` rewrites the file's answers from the rules instead of checking them: for
//! a rule that changed on purpose, with the diff reviewed.

use std::path::PathBuf;

use serde_json::{Value, json};
use wasmloop_contract::action::Phase;
use wasmloop_rules::{
    ActionKind, ValueRule, cache_holds, check_action, check_manifest, check_response, check_selector, check_value,
    index_keys, selector_matches,
};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance.json")
}

fn answer(given: Option<String>) -> Value {
    given.map_or(Value::Null, Value::String)
}

/// Each case's answers from the rules, under the fields the file holds them in.
fn answers(section: &str, case: &Value) -> Vec<(&'static str, Value)> {
    match section {
        "values" => {
            let rule: ValueRule = serde_json::from_value(case["rule"].clone()).expect("a value-rule");
            vec![("answer", answer(check_value(rule, case["value"].as_str().expect("a value"))))]
        }
        "selectors" => {
            let text = case["selector"].as_str().expect("a selector");
            let labels: Vec<(String, String)> = case["labels"]
                .as_object()
                .expect("labels")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("a label value").to_owned()))
                .collect();
            let (matches, refused) = match selector_matches(text, &labels) {
                Ok(matched) => (json!(matched), Value::Null),
                Err(refused) => (Value::Null, json!(refused)),
            };
            vec![("server", answer(check_selector(text))), ("matches", matches), ("refused", refused)]
        }
        "manifests" => vec![("answer", answer(check_manifest(&case["manifest"].to_string())))],
        "actions" => {
            let deleted = case["deleted"].as_bool().expect("deleted");
            vec![("answer", answer(check_action(&case["action"].to_string(), deleted)))]
        }
        "responses" => {
            let kinds: Vec<ActionKind> = serde_json::from_value(case["actions"].clone()).expect("action-kinds");
            let phase = match case["phase"].as_str() {
                Some("apply") => Phase::Apply,
                Some("cleanup") => Phase::Cleanup,
                Some("deleted") => Phase::Deleted,
                other => panic!("no phase {other:?}"),
            };
            let (failed, allowed) = (case["failed"].as_bool().expect("failed"), case["prune-allowed"] == true);
            vec![("answer", answer(check_response(&kinds, failed, phase, allowed)))]
        }
        "caches" => {
            let holds = cache_holds(&case["manifest"].to_string(), &case["object"].to_string());
            vec![("holds", holds.map_or_else(Value::String, Value::Bool))]
        }
        "indexes" => {
            let index = case["index"].as_str().expect("an index name");
            let keys = index_keys(&case["manifest"].to_string(), index, &case["object"].to_string());
            vec![("keys", keys.map_or_else(Value::String, |keys| json!(keys)))]
        }
        other => panic!("conformance.json has an unknown section {other}"),
    }
}

const SECTIONS: [&str; 7] = ["values", "selectors", "manifests", "actions", "responses", "caches", "indexes"];

#[test]
fn the_host_s_rules_answer_every_case_as_the_suite_says() {
    let text = std::fs::read_to_string(path()).expect("conformance.json reads");
    let mut suite: Value = serde_json::from_str(&text).expect("conformance.json parses");
    let bless = std::env::var_os("WASMLOOP_BLESS").is_some();
    let mut wrong = Vec::new();
    for section in SECTIONS {
        let cases = suite[section].as_array_mut().expect("a list of cases");
        assert!(!cases.is_empty(), "conformance.json's {section} holds no case");
        for case in cases {
            for (field, given) in answers(section, case) {
                if bless {
                    case[field] = given;
                } else if case[field] != given {
                    wrong.push(format!("{section}: {case}\n  {field}: the rules say {given}"));
                }
            }
        }
    }
    if bless {
        let blessed = serde_json::to_string_pretty(&suite).expect("the suite serialises") + "\n";
        std::fs::write(path(), blessed).expect("conformance.json writes");
    }
    assert!(wrong.is_empty(), "{} cases answered otherwise:\n{}", wrong.len(), wrong.join("\n"));
}
