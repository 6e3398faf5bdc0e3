//! Record/replay case files of any text (`replay::parse_case`, `replay::request_of`): a case
//! that parses becomes a request or a bounded refusal, and what `--record-dir` would write of
//! it parses back to the same case.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wasmloop::replay::{parse_case, request_of};

fuzz_target!(|text: &str| {
    let Ok(case) = parse_case(text) else {
        return;
    };
    if let Err(refused) = request_of(&case) {
        let refused = refused.to_string();
        assert!(refused.len() <= 1024, "a refusal of {} bytes: {refused:.300}", refused.len());
    }
    let written = wasmloop::recording::to_text(&case).expect("a parsed case can be written");
    assert_eq!(parse_case(&written).as_ref(), Ok(&case), "written as:\n{written:.2000}");
});
