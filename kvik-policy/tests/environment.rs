//! Every `KVIKIO_*` variable with junk, empty values and huge numbers,
//! through the pure constructor (`Settings::from_vars`): each value is
//! either used or refused with an error that names the variable and quotes
//! the value (shortened when long); nothing panics, nothing is silently
//! dropped, and huge values cost nothing until used.

mod common;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use kvik_policy::settings::{MAX_THREADS, SETTINGS};
use kvik_policy::{CompatMode, Error, FileHandle, Settings};

fn one(variable: &str, value: OsString) -> kvik_policy::Result<Settings> {
    Settings::from_vars(|name| (name == variable).then(|| value.clone()))
}

fn junk() -> Vec<OsString> {
    let mut values: Vec<OsString> = [
        "",
        " ",
        "\t\n",
        "junk",
        "-1",
        "-0",
        "+4",
        "0x10",
        "1e3",
        "NaN",
        "inf",
        "∞",
        "4 MiB x",
        "4MiB4",
        "１２", // full-width digits
        "1_000",
        "1,000",
        "4\u{0}",
        "on off",
        "truee",
        "99999999999999999999999999999999999999999999",
        "18446744073709551616",
        "340282366920938463463374607431768211456",
        "16777216TiB",
        "0.0000000000000000000000000000001",
        "..",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    values.push(OsString::from("9".repeat(1 << 20)));
    values.push(OsString::from("x".repeat(1 << 20)));
    values.push(OsString::from_vec(vec![b'4', 0xff, 0xfe]));
    values
}

#[test]
fn junk_in_any_variable_is_refused_naming_it() {
    let mut refused = 0;
    for info in SETTINGS {
        for &variable in info.variables {
            for value in junk() {
                let shown = value.to_string_lossy().into_owned();
                match one(variable, value) {
                    Ok(s) => panic!("{variable}={shown:.40?} was accepted: {s:?}"),
                    Err(Error::Environment { problems }) => {
                        assert_eq!(problems.len(), 1, "{variable}");
                        assert_eq!(problems[0].variable, variable);
                        let text = Error::Environment { problems }.to_string();
                        assert!(text.starts_with(&format!("{variable}=")), "{text:.200}");
                        assert!(text.contains("is invalid: "), "{text:.200}");
                        assert!(
                            text.len() < 400,
                            "{variable}: a {} byte message for a {} byte value",
                            text.len(),
                            shown.len()
                        );
                        refused += 1;
                    }
                    Err(other) => panic!("{variable}: expected Environment, got {other}"),
                }
            }
        }
    }
    let variables: usize = SETTINGS.iter().map(|info| info.variables.len()).sum();
    assert_eq!(refused, variables * junk().len());
}

#[test]
fn empty_values_are_errors_as_in_kvikio() {
    // KvikIO's getenv_or parses "" and throws; so do we (an empty variable
    // is more often a broken script than a wish for the default).
    for info in SETTINGS {
        for &variable in info.variables {
            let err = one(variable, OsString::new()).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("{variable}=\"\" is invalid")),
                "{err}"
            );
        }
    }
}

#[test]
fn huge_numbers_are_refused_or_harmless() {
    let max = u64::MAX.to_string();
    // Sizes up to u64::MAX are sizes; a request then is simply one task.
    let s = one("KVIKIO_TASK_SIZE", max.clone().into()).unwrap();
    assert_eq!(s.task_size(), u64::MAX);
    assert_eq!(
        one("KVIKIO_GDS_THRESHOLD", max.clone().into())
            .unwrap()
            .gds_threshold(),
        u64::MAX
    );
    assert_eq!(
        one("KVIKIO_BOUNCE_BUFFER_SIZE", max.clone().into())
            .unwrap()
            .bounce_buffer_size(),
        u64::MAX
    );
    // Threads: a pool of a million threads is a denial of service, not a
    // setting.
    for variable in ["KVIKIO_NTHREADS", "KVIKIO_NUM_THREADS"] {
        for value in ["1025", "1000000", max.as_str()] {
            let err = one(variable, value.into()).unwrap_err().to_string();
            assert!(err.contains("at most 1024 threads"), "{err}");
        }
        let s = one(variable, MAX_THREADS.to_string().into()).unwrap();
        assert_eq!(s.num_threads(), MAX_THREADS);
    }
    let mut api = Settings::default();
    let err = api.set_num_threads(MAX_THREADS + 1).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidSetting {
                setting: "num_threads",
                ..
            }
        ),
        "{err}"
    );

    // The largest sizes work for real: one task, no huge allocation.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, common::random_bytes(100_000, 1)).unwrap();
    let mut s = one("KVIKIO_TASK_SIZE", max.into()).unwrap();
    s.set_compat_mode(CompatMode::On)
        .set_gds_threshold(u64::MAX)
        .set_bounce_buffer_size(u64::MAX)
        .unwrap();
    let f = FileHandle::open_with(&path, "r", &s).unwrap();
    let mut buf = vec![0u8; 100_000];
    let done = f.read_with_report(&mut buf, 0).unwrap();
    assert_eq!((done.bytes, done.report.task_count()), (100_000, 1));
}

#[test]
fn every_bad_variable_at_once() {
    let all: Vec<(&str, &str)> = SETTINGS
        .iter()
        .flat_map(|i| i.variables.iter().map(|&v| (v, "junk")))
        .collect();
    let err = Settings::from_vars(|name| {
        all.iter()
            .find(|(v, _)| *v == name)
            .map(|(_, value)| OsString::from(value))
    })
    .unwrap_err();
    match err {
        Error::Environment { problems } => {
            let mut named: Vec<&str> = problems.iter().map(|p| p.variable).collect();
            named.sort_unstable();
            let mut expected: Vec<&str> = all.iter().map(|(v, _)| *v).collect();
            expected.sort_unstable();
            assert_eq!(named, expected);
        }
        other => panic!("expected Environment, got {other}"),
    }
}
