//! `RemoteSettings`: KvikIO's HTTP knobs, read from the environment with the
//! same rules as the other `KVIKIO_*` variables.
//!
//! | setting | variable | default | rule |
//! |---|---|---|---|
//! | http_max_attempts | `KVIKIO_HTTP_MAX_ATTEMPTS` | 3 | a whole number ≥ 1: attempts per request, the first included |
//! | http_timeout | `KVIKIO_HTTP_TIMEOUT` | 60 s | seconds > 0: the most one attempt may take, body included |
//! | http_status_codes | `KVIKIO_HTTP_STATUS_CODES` | 429,500,502,503,504 | comma-separated 3-digit codes: the answers that are retried |
//!
//! An attempt that times out is retried too (KvikIO's rule); any other
//! failure is not. Between attempts we wait as KvikIO does: 500 ms, then
//! twice as long each time, at most 4 s.
//!
//! Where we differ from KvikIO, on purpose: `KVIKIO_HTTP_TIMEOUT` also takes a
//! fraction of a second (`0.5`); KvikIO takes whole seconds only. Every bad
//! variable is reported at once, each with its value.
//!
//! These three belong with kvik-policy's `Settings` (one declaration per
//! setting); until they are declared there, this type reads them, with
//! kvik-policy's parsers and its [`EnvProblem`], and with the names KvikIO's
//! `kvikio.defaults` uses, so the switch is a rename.

use std::ffi::OsString;
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use kvik_policy::settings::{EnvProblem, Setting, Source};

use crate::error::{Error, Result};

/// The variables this type reads, the main one first in each row.
pub const VARIABLES: [&str; 3] = [
    "KVIKIO_HTTP_MAX_ATTEMPTS",
    "KVIKIO_HTTP_TIMEOUT",
    "KVIKIO_HTTP_STATUS_CODES",
];

/// KvikIO's default list of retried HTTP statuses.
pub const DEFAULT_STATUS_CODES: [u16; 5] = [429, 500, 502, 503, 504];

/// The retry and timeout policy of remote requests.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteSettings {
    http_max_attempts: Setting<u32>,
    http_timeout: Setting<Duration>,
    http_status_codes: Setting<StatusCodes>,
}

/// HTTP statuses, in the order given.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct StatusCodes(pub Vec<u16>);

impl StatusCodes {
    pub fn contains(&self, status: u16) -> bool {
        self.0.contains(&status)
    }
}

impl fmt::Display for StatusCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let codes: Vec<String> = self.0.iter().map(u16::to_string).collect();
        f.write_str(&codes.join(", "))
    }
}

impl Default for RemoteSettings {
    /// KvikIO's defaults, ignoring the environment.
    fn default() -> Self {
        RemoteSettings {
            http_max_attempts: default(3),
            http_timeout: default(Duration::from_secs(60)),
            http_status_codes: default(StatusCodes(DEFAULT_STATUS_CODES.to_vec())),
        }
    }
}

fn default<T>(value: T) -> Setting<T> {
    Setting {
        value,
        source: Source::Default,
    }
}

fn api<T>(value: T) -> Setting<T> {
    Setting {
        value,
        source: Source::Api,
    }
}

impl RemoteSettings {
    /// Read the process environment (every call reads it anew;
    /// [`RemoteSettings::global`] reads it once).
    pub fn from_env() -> Result<RemoteSettings> {
        RemoteSettings::from_vars(|name| std::env::var_os(name))
    }

    /// Read the settings from any source of variables (`lookup` returns a
    /// variable's value, `None` when unset). Every bad variable is reported.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<OsString>) -> Result<RemoteSettings> {
        let mut settings = RemoteSettings::default();
        let mut problems = Vec::new();
        for variable in VARIABLES {
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
            let source = Source::Environment { variable };
            let parsed = match variable {
                "KVIKIO_HTTP_MAX_ATTEMPTS" => parse_attempts(&text).map(|value| {
                    settings.http_max_attempts = Setting { value, source };
                }),
                "KVIKIO_HTTP_TIMEOUT" => parse_seconds(&text).map(|value| {
                    settings.http_timeout = Setting { value, source };
                }),
                _ => parse_status_codes(&text).map(|value| {
                    settings.http_status_codes = Setting { value, source };
                }),
            };
            if let Err(problem) = parsed {
                problems.push(EnvProblem {
                    variable,
                    value: text,
                    problem,
                });
            }
        }
        if problems.is_empty() {
            Ok(settings)
        } else {
            Err(kvik_policy::Error::Environment { problems }.into())
        }
    }

    /// The environment's settings, read on first use, once. A bad
    /// environment is an error every time it is asked for.
    pub fn global() -> Result<RemoteSettings> {
        static ENVIRONMENT: OnceLock<std::result::Result<RemoteSettings, Vec<EnvProblem>>> =
            OnceLock::new();
        ENVIRONMENT
            .get_or_init(|| {
                RemoteSettings::from_env().map_err(|e| match e {
                    Error::Policy(e) => match *e {
                        kvik_policy::Error::Environment { problems } => problems,
                        other => unreachable!("from_env only reports the environment: {other}"),
                    },
                    other => unreachable!("from_env only reports the environment: {other}"),
                })
            })
            .clone()
            .map_err(|problems| kvik_policy::Error::Environment { problems }.into())
    }

    /// Attempts per request, the first included (KvikIO's `http_max_attempts`).
    pub fn http_max_attempts(&self) -> u32 {
        self.http_max_attempts.value
    }
    /// The most one attempt may take, from sending the request to the last
    /// byte of the body (KvikIO's `http_timeout`).
    pub fn http_timeout(&self) -> Duration {
        self.http_timeout.value
    }
    /// The HTTP statuses that are retried (KvikIO's `http_status_codes`).
    pub fn http_status_codes(&self) -> &StatusCodes {
        &self.http_status_codes.value
    }

    /// Attempts per request; must be ≥ 1.
    pub fn set_http_max_attempts(&mut self, attempts: u32) -> Result<&mut Self> {
        if attempts == 0 {
            return Err(invalid("http_max_attempts", "0", "must be at least 1"));
        }
        self.http_max_attempts = api(attempts);
        Ok(self)
    }
    /// The time limit of one attempt; must be > 0.
    pub fn set_http_timeout(&mut self, timeout: Duration) -> Result<&mut Self> {
        if timeout.is_zero() {
            return Err(invalid("http_timeout", "0", "must be greater than 0"));
        }
        self.http_timeout = api(timeout);
        Ok(self)
    }
    /// The statuses that are retried; each must be a status (100 to 599).
    pub fn set_http_status_codes(&mut self, codes: Vec<u16>) -> Result<&mut Self> {
        if let Some(bad) = codes.iter().find(|c| !(100..=599).contains(*c)) {
            return Err(invalid(
                "http_status_codes",
                &bad.to_string(),
                "each must be an HTTP status, 100 to 599",
            ));
        }
        self.http_status_codes = api(StatusCodes(codes));
        Ok(self)
    }

    /// Each setting's value (as text) and source, in [`VARIABLES`] order.
    pub fn describe(&self) -> [(&'static str, String, Source); 3] {
        [
            (
                "http_max_attempts",
                self.http_max_attempts.value.to_string(),
                self.http_max_attempts.source,
            ),
            (
                "http_timeout",
                format!("{} s", self.http_timeout.value.as_secs_f64()),
                self.http_timeout.source,
            ),
            (
                "http_status_codes",
                self.http_status_codes.value.to_string(),
                self.http_status_codes.source,
            ),
        ]
    }
}

impl serde::Serialize for RemoteSettings {
    /// `{"http_timeout": {"value": 60.0, "source": {"kind": "default"}}, …}`
    /// (the timeout in seconds).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("http_max_attempts", &self.http_max_attempts)?;
        map.serialize_entry(
            "http_timeout",
            &Setting {
                value: self.http_timeout.value.as_secs_f64(),
                source: self.http_timeout.source,
            },
        )?;
        map.serialize_entry("http_status_codes", &self.http_status_codes)?;
        map.end()
    }
}

fn invalid(setting: &'static str, value: &str, rule: &'static str) -> Error {
    kvik_policy::Error::InvalidSetting {
        setting,
        value: value.to_string(),
        rule,
    }
    .into()
}

/// A whole number ≥ 1 (surrounding whitespace ignored).
fn parse_attempts(text: &str) -> std::result::Result<u32, String> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a whole number of attempts, at least 1".into());
    }
    match t.parse::<u32>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("too large: at most {}", u32::MAX)),
    }
}

/// Seconds > 0: digits, optionally with a fraction (`60`, `0.5`).
fn parse_seconds(text: &str) -> std::result::Result<Duration, String> {
    let t = text.trim();
    let (whole, fraction) = t.split_once('.').unwrap_or((t, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err("expected seconds, like 60 or 0.5".into());
    }
    // Nanoseconds are the finest a Duration holds: more digits are dropped.
    let nanos: u32 = format!("{fraction:0<9}")[..9].parse().unwrap_or(0);
    let secs: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| "too large".to_string())?
    };
    let timeout = Duration::new(secs, nanos);
    if timeout.is_zero() {
        return Err("must be greater than 0".into());
    }
    Ok(timeout)
}

/// KvikIO's format: 3-digit codes separated by commas, spaces allowed
/// (`429, 500,503`); at least one. Each must be an HTTP status (100–599).
fn parse_status_codes(text: &str) -> std::result::Result<StatusCodes, String> {
    let mut codes = Vec::new();
    for part in text.split(',') {
        let p = part.trim();
        if p.len() != 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "expected comma-separated 3-digit HTTP statuses, like 429,500,503 (found {p:?})"
            ));
        }
        let code: u16 = p.parse().map_err(|_| "not a number".to_string())?;
        if !(100..=599).contains(&code) {
            return Err(format!("{code} is not an HTTP status (100 to 599)"));
        }
        codes.push(code);
    }
    Ok(StatusCodes(codes))
}

/// How long to wait before attempt `next` (2, 3, …): KvikIO's backoff,
/// 500 ms doubling up to 4 s.
pub fn backoff(next: u32) -> Duration {
    let doublings = next.saturating_sub(2).min(3);
    Duration::from_millis(500 << doublings)
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

    #[test]
    fn defaults_are_kvikios() {
        let s = RemoteSettings::from_vars(vars(&[])).unwrap();
        assert_eq!(s, RemoteSettings::default());
        assert_eq!(s.http_max_attempts(), 3);
        assert_eq!(s.http_timeout(), Duration::from_secs(60));
        assert_eq!(s.http_status_codes().0, vec![429, 500, 502, 503, 504]);
        assert!(
            s.describe()
                .iter()
                .all(|(_, _, src)| *src == Source::Default)
        );
    }

    #[test]
    fn every_variable_is_read_with_its_source() {
        let s = RemoteSettings::from_vars(vars(&[
            ("KVIKIO_HTTP_MAX_ATTEMPTS", " 5 "),
            ("KVIKIO_HTTP_TIMEOUT", "0.25"),
            ("KVIKIO_HTTP_STATUS_CODES", "503, 429 ,500"),
        ]))
        .unwrap();
        assert_eq!(s.http_max_attempts(), 5);
        assert_eq!(s.http_timeout(), Duration::from_millis(250));
        assert_eq!(s.http_status_codes().0, vec![503, 429, 500]);
        let described = s.describe();
        assert_eq!(
            described[1].2,
            Source::Environment {
                variable: "KVIKIO_HTTP_TIMEOUT"
            }
        );
        assert_eq!(described[2].1, "503, 429, 500");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["http_timeout"]["value"], 0.25);
        assert_eq!(json["http_status_codes"]["value"][0], 503);
    }

    #[test]
    fn whole_seconds_as_kvikio_and_fractions() {
        for (text, timeout) in [
            ("60", Duration::from_secs(60)),
            ("1", Duration::from_secs(1)),
            ("0.5", Duration::from_millis(500)),
            (".5", Duration::from_millis(500)),
            ("2.", Duration::from_secs(2)),
        ] {
            let s = RemoteSettings::from_vars(vars(&[("KVIKIO_HTTP_TIMEOUT", text)])).unwrap();
            assert_eq!(s.http_timeout(), timeout, "{text:?}");
        }
    }

    #[test]
    fn junk_is_rejected_naming_the_variable_and_value() {
        for (variable, value, says) in [
            ("KVIKIO_HTTP_MAX_ATTEMPTS", "0", "at least 1"),
            ("KVIKIO_HTTP_MAX_ATTEMPTS", "-1", "whole number"),
            ("KVIKIO_HTTP_MAX_ATTEMPTS", "3x", "whole number"),
            ("KVIKIO_HTTP_MAX_ATTEMPTS", "99999999999", "too large"),
            ("KVIKIO_HTTP_TIMEOUT", "0", "greater than 0"),
            ("KVIKIO_HTTP_TIMEOUT", "0.0", "greater than 0"),
            ("KVIKIO_HTTP_TIMEOUT", "10s", "seconds"),
            ("KVIKIO_HTTP_TIMEOUT", "-5", "seconds"),
            ("KVIKIO_HTTP_TIMEOUT", ".", "seconds"),
            ("KVIKIO_HTTP_TIMEOUT", "", "seconds"),
            ("KVIKIO_HTTP_STATUS_CODES", "", "3-digit"),
            ("KVIKIO_HTTP_STATUS_CODES", "500,", "3-digit"),
            ("KVIKIO_HTTP_STATUS_CODES", "5000", "3-digit"),
            ("KVIKIO_HTTP_STATUS_CODES", "503;504", "3-digit"),
            ("KVIKIO_HTTP_STATUS_CODES", "999", "not an HTTP status"),
        ] {
            let err = RemoteSettings::from_vars(vars(&[(variable, value)])).unwrap_err();
            let text = err.to_string();
            assert!(text.starts_with(&format!("{variable}={value:?}")), "{text}");
            assert!(text.contains(says), "{variable}={value:?}: {text}");
        }
    }

    #[test]
    fn every_bad_variable_is_reported_at_once() {
        let err = RemoteSettings::from_vars(vars(&[
            ("KVIKIO_HTTP_MAX_ATTEMPTS", "zero"),
            ("KVIKIO_HTTP_STATUS_CODES", "5xx"),
            ("KVIKIO_HTTP_TIMEOUT", "30"),
        ]))
        .unwrap_err();
        let Error::Policy(policy) = err else {
            panic!("expected kvik-policy's error, got {err:?}");
        };
        let kvik_policy::Error::Environment { problems } = *policy else {
            panic!("expected environment problems, got {policy:?}");
        };
        let names: Vec<&str> = problems.iter().map(|p| p.variable).collect();
        assert_eq!(
            names,
            vec!["KVIKIO_HTTP_MAX_ATTEMPTS", "KVIKIO_HTTP_STATUS_CODES"]
        );
    }

    #[test]
    fn api_setters_validate_and_record_the_source() {
        let mut s = RemoteSettings::default();
        s.set_http_max_attempts(1)
            .unwrap()
            .set_http_timeout(Duration::from_millis(100))
            .unwrap();
        assert_eq!(s.describe()[0].2, Source::Api);
        assert_eq!(s.describe()[2].2, Source::Default);
        assert!(s.set_http_max_attempts(0).is_err());
        assert!(s.set_http_timeout(Duration::ZERO).is_err());
        let err = s.set_http_status_codes(vec![503, 42]).unwrap_err();
        assert!(err.to_string().contains("http_status_codes = 42"), "{err}");
        assert_eq!(s.http_max_attempts(), 1, "a rejected value changes nothing");
    }

    #[test]
    fn backoff_is_kvikios() {
        let waits: Vec<u64> = (2..=7).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(waits, vec![500, 1000, 2000, 4000, 4000, 4000]);
    }
}
