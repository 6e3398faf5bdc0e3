//! Label selectors from any text: one the API server would accept prints back to a selector
//! equal to it (the text a watch is keyed and sent by), the server-side rules and
//! `LabelSelector` agree, and a refusal is a bounded sentence. (A selector only the host's
//! lenient cache filter accepts, `ap=,envv======== inn` say, need not print back: fuzzing found
//! that, and only a `LabelSelector`'s text keys or makes a watch.)

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmloop_contract::names::LabelSelector;
use wasmloop_contract::selector::{self, Selector};

fuzz_target!(|text: &str| {
    match text.parse::<Selector>() {
        Ok(selector) => {
            let printed = selector.to_string();
            let server = selector::for_server(&selector);
            if server.is_ok() {
                assert_eq!(printed.parse::<Selector>().as_ref(), Ok(&selector), "{text:?} printed as {printed:?}");
            }
            let parsed = LabelSelector::parse(text);
            assert_eq!(server.is_ok(), parsed.is_ok(), "{text:?}");
            if let Ok(parsed) = parsed {
                assert_eq!(parsed.as_str(), printed);
                assert_eq!(parsed.selector(), selector);
            }
            if let Err(refused) = server {
                assert!(refused.len() <= 1024, "{} bytes", refused.len());
            }
        }
        Err(error) => assert!(error.to_string().len() <= 1024, "{} bytes", error.to_string().len()),
    }
});
