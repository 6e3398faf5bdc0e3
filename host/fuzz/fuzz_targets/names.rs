//! Every parsed name type against any text: a parse that succeeds keeps the text as given and
//! agrees with the rule in `validate`; one that fails says so in a bounded sentence; the cuts
//! hold their limits.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmloop_contract::names::{FieldManager, Group, Gvk, Kind, Name, Namespace, Version};
use wasmloop_contract::validate::{self, MAX_FOREIGN_TEXT, MAX_QUOTED};

/// The longest refusal a name may earn: the rule's sentence and the value, quoted cut.
const MAX_REFUSAL: usize = 512;

fn check<T: std::ops::Deref<Target = str>>(
    text: &str,
    parsed: Result<T, wasmloop_contract::names::Invalid>,
    rule: Result<(), String>,
) {
    match (parsed, rule) {
        (Ok(parsed), Ok(())) => assert_eq!(&*parsed, text),
        (Err(refused), Err(_)) => assert!(refused.message().len() <= MAX_REFUSAL, "{} bytes", refused.message().len()),
        (parsed, rule) => panic!("parse and rule disagree on {text:?}: {:?} / {rule:?}", parsed.is_ok()),
    }
}

fuzz_target!(|text: &str| {
    check(text, Namespace::parse(text), validate::namespace(text));
    check(text, Name::parse(text), validate::name(text));
    check(text, Kind::parse(text), validate::kind(text));
    check(text, Group::parse(text), validate::group_version(text, "v1"));
    check(text, Version::parse(text), validate::group_version("", text));
    check(text, FieldManager::parse(text), validate::field_manager(text));
    if let Ok(gvk) = Gvk::from_api_version(text, "Kind") {
        assert_eq!(gvk.api_version(), text);
        assert!(gvk.matches(text, "Kind"));
    }
    assert!(validate::quoted(text).len() <= MAX_QUOTED + 2);
    assert!(validate::foreign(text).len() <= MAX_FOREIGN_TEXT);
    for limit in [3, 7, 64] {
        assert!(validate::cut(text.to_owned(), limit).len() <= limit);
    }
});
