//! Any text through `parse_size`: nothing panics; an accepted size prints
//! (exactly) as text that parses back to it; plain digits mean bytes; a
//! refusal quotes the input and stays short however long the input is.

#![no_main]

use kvik_policy::{Size, parse_size};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_size(text) {
        Ok(bytes) => {
            assert_eq!(parse_size(&Size(bytes).to_string()), Ok(bytes));
            let t = text.trim();
            if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
                assert_eq!(t.parse::<u64>().ok(), Some(bytes), "{text:?}");
            }
        }
        Err(e) => {
            assert_eq!(e.value, text);
            assert!(!e.problem.is_empty());
            // Readable whatever the input: at most ~80 characters of it.
            let length = e.to_string().chars().count();
            assert!(length < 200, "{length} characters");
        }
    }
});
