//! Plugin references of any text (`oci::PluginRef::parse`, what `data["plugin.ref"]` and
//! `--ref` hold): an accepted one names its registry explicitly, in lower case, any digest is
//! a sha256, and it prints as it parses; a refusal is bounded.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmloop::oci::PluginRef;

fuzz_target!(|text: &str| {
    match PluginRef::parse(text) {
        Ok(reference) => {
            let registry = reference.registry();
            assert!(!registry.is_empty() && !registry.bytes().any(|b| b.is_ascii_uppercase()), "{registry}");
            if let Some(digest) = reference.digest() {
                let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
                assert!(hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{digest}");
            }
            let printed = reference.to_string();
            assert_eq!(PluginRef::parse(&printed).ok(), Some(reference), "{printed} does not parse back");
        }
        Err(refused) => {
            let text = refused.to_string();
            assert!(text.len() <= 1024, "a refusal of {} bytes: {text:.300}", text.len());
        }
    }
});
