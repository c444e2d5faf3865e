//! `Settings`: KvikIO's knobs, read once from the `KVIKIO_*` environment,
//! overridable through the API, each value kept with where it came from.
//!
//! Every setting is declared once, in one `declare_settings!` table in this
//! file: its field and default, getter and setter, its variables, how its
//! text is read (`settings/kind.rs`), its rule, its line in [`SETTINGS`]
//! (which lists them all) and in `describe`, and its key when serialized
//! all follow from that one entry. `kvik settings` prints the same table
//! with the values in force.
//!
//! Where we differ from KvikIO, on purpose:
//! * sizes also take units (`4MiB`, `16KiB`), and junk is an error naming the
//!   variable and the value — KvikIO reads `KVIKIO_TASK_SIZE=4MiB` as 4 bytes;
//! * `num_threads` defaults to the available cores (at most 16), not 1: one
//!   thread reads a page-cached file at about a sixth of the rate 16 reach;
//! * `num_threads` is at most [`MAX_THREADS`], and HTTP status codes must be
//!   ones HTTP defines (100 to 599; KvikIO takes any three digits);
//! * every bad variable is reported at once, not only the first.

use std::ffi::OsString;
use std::fmt;

use crate::CompatMode;
use crate::error::{Error, Result};

#[macro_use]
mod declare;
mod global;
mod kind;

pub use global::ScopedSettings;
pub use kind::parse_bool;
use kind::{Bytes, Compat, Count, Flag, Kind, Seconds, StatusCodes};

/// The most threads the default picks, whatever the core count (KvikIO's
/// measurements flatten out past 16).
pub const DEFAULT_MAX_THREADS: usize = 16;

/// The most threads anyone may ask for. KvikIO takes any number, so
/// `KVIKIO_NTHREADS=1000000` spawns a million threads (minutes, and
/// gigabytes of stacks) before the first read; past a few hundred, threads
/// only add contention on any storage there is.
pub const MAX_THREADS: usize = 1024;

declare_settings! {
    /// How device-memory requests are served: `ON` never uses cuFile (POSIX
    /// only), `OFF` always uses cuFile (an error where it cannot), `AUTO`
    /// uses cuFile where it has a direct path and POSIX elsewhere.
    compat_mode: CompatMode => CompatMode {
        set: set_compat_mode,
        variables: ["KVIKIO_COMPAT_MODE"],
        default: CompatMode::Auto => "AUTO",
        kind: Compat,
        rule: "on/true/yes/1 → ON, off/false/no/0 → OFF, auto → AUTO (any case)",
        example: "on",
    }
    /// Threads in the pool that runs a request's tasks.
    num_threads: usize => usize {
        set: set_num_threads,
        variables: ["KVIKIO_NTHREADS", "KVIKIO_NUM_THREADS"],
        default: default_num_threads() => "available cores, at most 16",
        kind: Count,
        check: kind::thread_count,
        rule: "a whole number from 1 to 1024",
        example: "17",
    }
    /// The size requests are cut into: each task moves at most this much.
    task_size: u64 => u64 {
        set: set_task_size,
        variables: ["KVIKIO_TASK_SIZE"],
        default: 4 << 20 => "4 MiB",
        kind: Bytes,
        check: kind::positive,
        rule: "a size > 0 (bytes, or 4MiB, 512KiB, …)",
        example: "1MiB",
    }
    /// Device-memory requests smaller than this skip cuFile.
    gds_threshold: u64 => u64 {
        set: set_gds_threshold,
        variables: ["KVIKIO_GDS_THRESHOLD"],
        default: 16 << 10 => "16 KiB",
        kind: Bytes,
        rule: "a size ≥ 0",
        example: "0",
    }
    /// The size of each bounce buffer that stages device memory through the host.
    bounce_buffer_size: u64 => u64 {
        set: set_bounce_buffer_size,
        variables: ["KVIKIO_BOUNCE_BUFFER_SIZE"],
        default: 16 << 20 => "16 MiB",
        kind: Bytes,
        check: kind::positive,
        rule: "a size > 0",
        example: "32MiB",
    }
    /// Host reads use O_DIRECT for their page-aligned middle.
    auto_direct_io_read: bool => bool {
        set: set_auto_direct_io_read,
        variables: ["KVIKIO_AUTO_DIRECT_IO_READ"],
        default: false => "false",
        kind: Flag,
        rule: "true/on/yes/1 or false/off/no/0",
        example: "yes",
    }
    /// Host writes use O_DIRECT for their page-aligned middle.
    auto_direct_io_write: bool => bool {
        set: set_auto_direct_io_write,
        variables: ["KVIKIO_AUTO_DIRECT_IO_WRITE"],
        default: true => "true",
        kind: Flag,
        rule: "true/on/yes/1 or false/off/no/0",
        example: "off",
    }
    /// Host reads: a task of at least 1 MiB whose range is cold (its first
    /// page is not cached, and at most a quarter of it is) reads with
    /// O_DIRECT, which keeps the disk busier than the page cache's readahead.
    /// Ours; KvikIO has no such setting. Off: cold reads go through the page
    /// cache (which then holds them for the next read).
    cold_reads_direct: bool => bool {
        set: set_cold_reads_direct,
        variables: ["KVIK_COLD_READS_DIRECT"],
        default: true => "true",
        kind: Flag,
        rule: "true/on/yes/1 or false/off/no/0",
        example: "off",
    }
    /// Remote reads: how many times a request is tried (the first attempt
    /// included) while the server answers with one of
    /// [`Settings::http_status_codes`].
    http_max_attempts: usize => usize {
        set: set_http_max_attempts,
        variables: ["KVIKIO_HTTP_MAX_ATTEMPTS"],
        default: 3 => "3",
        kind: Count,
        check: kind::positive,
        rule: "a whole number > 0",
        example: "5",
    }
    /// Remote reads: the time, in seconds, one transfer may take.
    http_timeout: u64 => u64 {
        set: set_http_timeout,
        variables: ["KVIKIO_HTTP_TIMEOUT"],
        default: 60 => "60 seconds",
        kind: Seconds,
        check: kind::positive,
        rule: "whole seconds > 0",
        example: "10",
    }
    /// Remote reads: the HTTP status codes after which a request is tried
    /// again (up to [`Settings::http_max_attempts`] attempts).
    http_status_codes: Vec<u16> => &[u16] {
        set: set_http_status_codes,
        variables: ["KVIKIO_HTTP_STATUS_CODES"],
        default: vec![429, 500, 502, 503, 504] => "429,500,502,503,504",
        kind: StatusCodes,
        check: kind::http_status_codes,
        rule: "three-digit HTTP status codes (100 to 599) separated by commas",
        example: "429,503",
    }
}

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Nobody set it.
    Default,
    /// A `KVIKIO_*` environment variable.
    Environment { variable: &'static str },
    /// A program (or a `kvik` command-line option) set it through the API.
    Api,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Environment { variable } => write!(f, "environment ({variable})"),
            Source::Api => f.write_str("API"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Setting<T> {
    fn default(value: T) -> Self {
        Setting {
            value,
            source: Source::Default,
        }
    }
    fn api(value: T) -> Self {
        Setting {
            value,
            source: Source::Api,
        }
    }
}

/// One bad environment variable.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EnvProblem {
    pub variable: &'static str,
    /// The value as set (lossily decoded when it is not UTF-8).
    pub value: String,
    /// What is wrong, and what would be right.
    pub problem: String,
}

impl EnvProblem {
    pub(crate) fn describe_all(problems: &[EnvProblem]) -> String {
        problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl fmt::Display for EnvProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={} is invalid: {}",
            self.variable,
            crate::error::quote_value(&self.value),
            self.problem
        )
    }
}

/// How a setting is named, where it is read from and what it must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingInfo {
    pub name: &'static str,
    /// The environment variables, the main one first, then its aliases.
    pub variables: &'static [&'static str],
    pub default: &'static str,
    pub rule: &'static str,
    /// A valid value other than the default, as it would be written in the
    /// environment.
    pub example: &'static str,
}

/// One line of `kvik settings`: a setting, its value as text, its source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SettingView {
    pub name: &'static str,
    pub value: String,
    pub source: Source,
    pub variables: &'static [&'static str],
    pub default: &'static str,
    pub rule: &'static str,
}

/// The number of threads used when nobody says otherwise: the cores this
/// process may run on, at most [`DEFAULT_MAX_THREADS`].
pub fn default_num_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(DEFAULT_MAX_THREADS)
}

impl Settings {
    /// Read the process environment (every call reads it anew; the global
    /// settings, [`Settings::global`], read it once).
    pub fn from_env() -> Result<Settings> {
        Settings::from_vars(|name| std::env::var_os(name))
    }
}

/// Read one setting from its variables (the main one, then its aliases):
/// each set variable must hold a valid value, and all set ones the same
/// value; the first set one is the source. Problems go to `problems`.
fn read_variables<K: Kind>(
    variables: &'static [&'static str],
    lookup: &dyn Fn(&str) -> Option<OsString>,
    check: Option<kind::Rule<K::Value>>,
    problems: &mut Vec<EnvProblem>,
) -> Option<Setting<K::Value>>
where
    K::Value: PartialEq,
{
    let mut found: Option<(&'static str, String, K::Value)> = None;
    for &variable in variables {
        let Some(raw) = lookup(variable) else {
            continue;
        };
        let text = match raw.into_string() {
            Ok(text) => text,
            Err(raw) => {
                problems.push(EnvProblem {
                    variable,
                    value: raw.to_string_lossy().into_owned(),
                    problem: "not valid UTF-8".into(),
                });
                continue;
            }
        };
        let value = K::parse(&text).and_then(|value| match check.map(|check| check(&value)) {
            Some(Err(rule)) => Err(rule.to_string()),
            _ => Ok(value),
        });
        match (value, &found) {
            (Err(problem), _) => problems.push(EnvProblem {
                variable,
                value: text,
                problem,
            }),
            (Ok(value), None) => found = Some((variable, text, value)),
            (Ok(value), Some((first, first_text, first_value))) if *first_value != value => {
                problems.push(EnvProblem {
                    variable: first,
                    value: first_text.clone(),
                    problem: format!(
                        "{variable}={} disagrees; they are aliases: set one, or both to the \
                         same value",
                        K::show(&value)
                    ),
                })
            }
            (Ok(_), Some(_)) => {}
        }
    }
    found.map(|(variable, _, value)| Setting {
        value,
        source: Source::Environment { variable },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn problems(result: Result<Settings>) -> Vec<EnvProblem> {
        match result {
            Err(Error::Environment { problems }) => problems,
            other => panic!("expected environment problems, got {other:?}"),
        }
    }

    /// Every declared setting, through each of its variables: the example
    /// value set in the environment is what the getter returns, what
    /// `describe` shows with its source, and what the JSON holds; the API
    /// setter gives the same value; nothing else changes.
    #[test]
    fn every_declared_setting_agrees_from_environment_to_json() {
        assert_eq!(DECLARED.len(), SETTINGS.len());
        let defaults = Settings::default();
        let default_json = serde_json::to_value(&defaults).unwrap();
        assert_eq!(default_json.as_object().unwrap().len(), SETTINGS.len());
        let mut variables_seen = 0;
        for (i, (info, declared)) in SETTINGS.iter().zip(DECLARED).enumerate() {
            assert_eq!(info.name, declared.name);
            assert_eq!(info.example, declared.example);
            assert_eq!(
                (declared.get)(&defaults),
                default_json[info.name]["value"],
                "{}: the getter and the JSON agree on the default",
                info.name
            );
            // KvikIO's names; ours (settings KvikIO lacks) start with KVIK_.
            assert!(
                info.variables
                    .iter()
                    .all(|v| v.starts_with("KVIK_") || v.starts_with("KVIKIO_"))
            );
            for &variable in info.variables {
                variables_seen += 1;
                let s = Settings::from_vars(|name| (name == variable).then(|| info.example.into()))
                    .unwrap_or_else(|e| panic!("{variable}={}: {e}", info.example));
                let got = (declared.get)(&s);
                assert_ne!(
                    got,
                    (declared.get)(&defaults),
                    "{variable}: not the default"
                );
                let json = serde_json::to_value(&s).unwrap();
                assert_eq!(json[info.name]["value"], got, "{variable}");
                assert_eq!(json[info.name]["source"]["kind"], "environment");
                assert_eq!(json[info.name]["source"]["variable"], variable);
                let views = s.describe();
                assert_eq!(views.len(), SETTINGS.len());
                assert_eq!(views[i].name, info.name);
                assert_eq!(views[i].source, Source::Environment { variable });
                assert_eq!(views[i].variables, info.variables);
                for (j, other) in SETTINGS.iter().enumerate().filter(|(j, _)| *j != i) {
                    assert_eq!(
                        views[j].source,
                        Source::Default,
                        "{variable} set {}",
                        other.name
                    );
                    assert_eq!(json[other.name], default_json[other.name]);
                }

                let mut api = Settings::default();
                (declared.set_example)(&mut api).unwrap();
                assert_eq!(
                    (declared.get)(&api),
                    got,
                    "{}: API and environment",
                    info.name
                );
                let api_views = api.describe();
                assert_eq!(api_views[i].value, views[i].value);
                assert_eq!(api_views[i].source, Source::Api);
                let changed = defaults.changes(&api);
                assert_eq!(changed.count(), 1, "{}", info.name);
                let mut overlaid = Settings::default();
                overlaid.overlay(&api, &changed);
                assert_eq!(overlaid, api);
            }
        }
        assert_eq!(
            variables_seen,
            SETTINGS.iter().map(|i| i.variables.len()).sum::<usize>()
        );
    }

    #[test]
    fn http_settings_as_kvikio() {
        let s = Settings::default();
        assert_eq!(s.http_max_attempts(), 3);
        assert_eq!(s.http_timeout(), 60);
        assert_eq!(s.http_status_codes(), &[429, 500, 502, 503, 504]);
        let s = Settings::from_vars(vars(&[
            ("KVIKIO_HTTP_MAX_ATTEMPTS", "1"),
            ("KVIKIO_HTTP_TIMEOUT", " 5 "),
            ("KVIKIO_HTTP_STATUS_CODES", "503 , 429"),
        ]))
        .unwrap();
        assert_eq!(
            (
                s.http_max_attempts(),
                s.http_timeout(),
                s.http_status_codes()
            ),
            (1, 5, &[503, 429][..])
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json["http_status_codes"]["value"],
            serde_json::json!([503, 429])
        );
        for (variable, value, says) in [
            ("KVIKIO_HTTP_MAX_ATTEMPTS", "0", "greater than 0"),
            ("KVIKIO_HTTP_TIMEOUT", "0", "greater than 0"),
            ("KVIKIO_HTTP_TIMEOUT", "1.5", "whole number"),
            ("KVIKIO_HTTP_STATUS_CODES", "429,", "three-digit"),
            ("KVIKIO_HTTP_STATUS_CODES", "429,1000", "three-digit"),
            ("KVIKIO_HTTP_STATUS_CODES", "429,099", "100 to 599"),
        ] {
            let err = Settings::from_vars(vars(&[(variable, value)])).unwrap_err();
            assert!(
                err.to_string().contains(says),
                "{variable}={value:?}: {err}"
            );
        }
        let mut api = Settings::default();
        api.set_http_status_codes(vec![]).unwrap();
        assert_eq!(api.describe().last().unwrap().value, "none");
        let err = api.set_http_status_codes(vec![700]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidSetting {
                    setting: "http_status_codes",
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            api.http_status_codes().is_empty(),
            "a rejected value changes nothing"
        );
    }

    #[test]
    fn defaults_without_environment() {
        let s = Settings::from_vars(vars(&[])).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(s.compat_mode(), CompatMode::Auto);
        assert_eq!(s.task_size(), 4 << 20);
        assert_eq!(s.gds_threshold(), 16 << 10);
        assert_eq!(s.bounce_buffer_size(), 16 << 20);
        assert!(!s.auto_direct_io_read());
        assert!(s.auto_direct_io_write());
        assert_eq!(s.http_max_attempts(), 3);
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(s.num_threads(), cores.min(16));
        assert!(s.describe().iter().all(|v| v.source == Source::Default));
    }

    #[test]
    fn every_variable_is_read_with_its_source() {
        let s = Settings::from_vars(vars(&[
            ("KVIKIO_COMPAT_MODE", " on "),
            ("KVIKIO_NTHREADS", "8"),
            ("KVIKIO_TASK_SIZE", "1048576"),
            ("KVIKIO_GDS_THRESHOLD", "0"),
            ("KVIKIO_BOUNCE_BUFFER_SIZE", "32MiB"),
            ("KVIKIO_AUTO_DIRECT_IO_READ", "Yes"),
            ("KVIKIO_AUTO_DIRECT_IO_WRITE", "off"),
        ]))
        .unwrap();
        assert_eq!(s.compat_mode(), CompatMode::On);
        assert_eq!(s.num_threads(), 8);
        assert_eq!(s.task_size(), 1 << 20);
        assert_eq!(s.gds_threshold(), 0);
        assert_eq!(s.bounce_buffer_size(), 32 << 20);
        assert!(s.auto_direct_io_read());
        assert!(!s.auto_direct_io_write());
        let views = s.describe();
        assert_eq!(
            views[1].source,
            Source::Environment {
                variable: "KVIKIO_NTHREADS"
            }
        );
        assert_eq!(views[2].value, "1 MiB (1048576 bytes)");
        assert_eq!(views[3].value, "0 bytes");
    }

    #[test]
    fn sizes_take_units_and_plain_bytes_as_kvikio() {
        for (text, bytes) in [
            ("4194304", 4 << 20),
            ("4MiB", 4 << 20),
            ("4M", 4 << 20),
            ("16KiB", 16 << 10),
            (" 8 MiB ", 8 << 20),
        ] {
            let s = Settings::from_vars(vars(&[("KVIKIO_TASK_SIZE", text)])).unwrap();
            assert_eq!(s.task_size(), bytes, "{text:?}");
        }
    }

    #[test]
    fn junk_is_rejected_naming_the_variable_and_value() {
        for (variable, value, says) in [
            ("KVIKIO_TASK_SIZE", "4x", "unknown unit"),
            ("KVIKIO_TASK_SIZE", "0", "greater than 0"),
            ("KVIKIO_TASK_SIZE", "-1", "negative"),
            ("KVIKIO_TASK_SIZE", "", "no number"),
            ("KVIKIO_BOUNCE_BUFFER_SIZE", "0", "greater than 0"),
            ("KVIKIO_GDS_THRESHOLD", "lots", "no number"),
            ("KVIKIO_NTHREADS", "0", "greater than 0"),
            ("KVIKIO_NTHREADS", "4 threads", "whole number"),
            ("KVIKIO_NUM_THREADS", "-2", "whole number"),
            ("KVIKIO_COMPAT_MODE", "maybe", "on/true/yes/1"),
            ("KVIKIO_AUTO_DIRECT_IO_READ", "sometimes", "true/on/yes/1"),
            ("KVIKIO_AUTO_DIRECT_IO_WRITE", "2", "false/off/no/0"),
        ] {
            let err = Settings::from_vars(vars(&[(variable, value)])).unwrap_err();
            let text = err.to_string();
            assert!(text.starts_with(&format!("{variable}={value:?}")), "{text}");
            assert!(text.contains(says), "{variable}={value:?}: {text}");
        }
    }

    #[test]
    fn every_bad_variable_is_reported_at_once() {
        let p = problems(Settings::from_vars(vars(&[
            ("KVIKIO_TASK_SIZE", "4x"),
            ("KVIKIO_COMPAT_MODE", "maybe"),
            ("KVIKIO_NTHREADS", "4"),
        ])));
        let names: Vec<&str> = p.iter().map(|p| p.variable).collect();
        assert_eq!(names, vec!["KVIKIO_COMPAT_MODE", "KVIKIO_TASK_SIZE"]);
    }

    #[test]
    fn thread_aliases_agree_or_conflict() {
        let s = Settings::from_vars(vars(&[("KVIKIO_NUM_THREADS", "3")])).unwrap();
        assert_eq!(s.num_threads(), 3);
        assert_eq!(
            s.describe()[1].source,
            Source::Environment {
                variable: "KVIKIO_NUM_THREADS"
            }
        );
        let same = Settings::from_vars(vars(&[
            ("KVIKIO_NTHREADS", "5"),
            ("KVIKIO_NUM_THREADS", " 5"),
        ]))
        .unwrap();
        assert_eq!(same.num_threads(), 5);
        let p = problems(Settings::from_vars(vars(&[
            ("KVIKIO_NTHREADS", "4"),
            ("KVIKIO_NUM_THREADS", "8"),
        ])));
        assert_eq!(p.len(), 1);
        assert!(
            p[0].to_string().contains("KVIKIO_NTHREADS=\"4\""),
            "{}",
            p[0]
        );
        assert!(p[0].problem.contains("KVIKIO_NUM_THREADS=8"), "{}", p[0]);
    }

    #[test]
    fn compat_mode_uses_kvikios_string_table() {
        for (text, mode) in [
            ("ON", CompatMode::On),
            ("true", CompatMode::On),
            ("1", CompatMode::On),
            ("no", CompatMode::Off),
            ("0", CompatMode::Off),
            ("Auto", CompatMode::Auto),
        ] {
            let s = Settings::from_vars(vars(&[("KVIKIO_COMPAT_MODE", text)])).unwrap();
            assert_eq!(s.compat_mode(), mode, "{text}");
        }
    }

    #[test]
    fn non_utf8_values_are_reported() {
        use std::os::unix::ffi::OsStringExt;
        let p = problems(Settings::from_vars(|name| {
            (name == "KVIKIO_TASK_SIZE").then(|| OsString::from_vec(vec![b'4', 0xff]))
        }));
        assert_eq!(p[0].problem, "not valid UTF-8");
    }

    #[test]
    fn api_setters_validate_and_record_the_source() {
        let mut s = Settings::default();
        s.set_num_threads(3).unwrap().set_task_size(199).unwrap();
        s.set_compat_mode(CompatMode::On).set_gds_threshold(0);
        assert_eq!((s.num_threads(), s.task_size()), (3, 199));
        let views = s.describe();
        assert_eq!(views[0].source, Source::Api);
        assert_eq!(views[1].source, Source::Api);
        assert_eq!(views[4].source, Source::Default);
        for err in [
            s.set_num_threads(0).unwrap_err(),
            s.set_task_size(0).unwrap_err(),
            s.set_bounce_buffer_size(0).unwrap_err(),
        ] {
            assert!(err.to_string().contains("must be greater than 0"), "{err}");
        }
        assert_eq!(s.num_threads(), 3, "a rejected value changes nothing");
    }

    #[test]
    fn json_has_values_and_sources() {
        let mut s = Settings::default();
        s.set_task_size(1 << 20).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["task_size"]["value"], 1 << 20);
        assert_eq!(v["task_size"]["source"]["kind"], "api");
        assert_eq!(v["compat_mode"]["value"], "AUTO");
        assert_eq!(v["compat_mode"]["source"]["kind"], "default");
    }
}
