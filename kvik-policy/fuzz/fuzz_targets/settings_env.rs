//! Any values for the `KVIKIO_*` variables (the input is split at 0xff
//! bytes, one piece per variable; an empty piece leaves it unset, a piece
//! starting with 0xfe is set to the rest — possibly empty, possibly not
//! UTF-8) through `Settings::from_vars`, the pure constructor behind the
//! environment: nothing panics; accepted settings say which variable each
//! value came from and keep their rules; every refusal names a variable
//! that was set, and its message stays short.

#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use kvik_policy::settings::{MAX_THREADS, SETTINGS, Source};
use kvik_policy::{Error, Settings};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let names: Vec<&'static str> = SETTINGS
        .iter()
        .flat_map(|s| s.variables.iter().copied())
        .collect();
    let mut vars: Vec<(&'static str, OsString)> = Vec::new();
    for (name, piece) in names.iter().zip(data.split(|&b| b == 0xff)) {
        match piece {
            [] => {}
            [0xfe, rest @ ..] => vars.push((name, OsString::from_vec(rest.to_vec()))),
            value => vars.push((name, OsString::from_vec(value.to_vec()))),
        }
    }
    let lookup = |name: &str| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    match Settings::from_vars(lookup) {
        Ok(s) => {
            assert!(s.num_threads() >= 1 && s.num_threads() <= MAX_THREADS);
            assert!(s.task_size() > 0 && s.bounce_buffer_size() > 0);
            for view in s.describe() {
                match view.source {
                    Source::Environment { variable } => {
                        assert!(vars.iter().any(|(n, _)| *n == variable), "{variable}");
                    }
                    Source::Default => {}
                    Source::Api => panic!("nothing set {} through the API", view.name),
                }
            }
            serde_json::to_string(&s).unwrap();
        }
        Err(Error::Environment { problems }) => {
            assert!(!problems.is_empty());
            for p in &problems {
                assert!(vars.iter().any(|(n, _)| *n == p.variable), "{p}");
                let message = p.to_string();
                assert!(message.starts_with(p.variable), "{message}");
                let length = message.chars().count();
                assert!(length < 300, "{length} characters");
            }
        }
        Err(other) => panic!("from_vars reports only the environment: {other}"),
    }
});
