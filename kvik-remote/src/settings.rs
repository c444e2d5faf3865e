//! `RemoteSettings`: the retry and timeout policy of remote requests, taken
//! from kvik-policy's `Settings`, where KvikIO's HTTP knobs are declared
//! with the other `KVIKIO_*` variables (same parsing, same errors):
//!
//! | setting | variable | default | rule |
//! |---|---|---|---|
//! | http_max_attempts | `KVIKIO_HTTP_MAX_ATTEMPTS` | 3 | attempts per request, the first included |
//! | http_timeout | `KVIKIO_HTTP_TIMEOUT` | 60 s | the most one attempt may take, body included |
//! | http_status_codes | `KVIKIO_HTTP_STATUS_CODES` | 429,500,502,503,504 | the answers that are retried |
//!
//! An attempt that times out is retried too (KvikIO's rule); any other
//! failure is not. Between attempts we wait as KvikIO does: 500 ms, then
//! twice as long each time, at most 4 s. Through the API the timeout may
//! also be a fraction of a second (the environment takes whole seconds, as
//! KvikIO's does).

use std::ffi::OsString;
use std::time::Duration;

use kvik_policy::Settings;

use crate::error::{Error, Result};

/// HTTP statuses, in the order given.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct StatusCodes(pub Vec<u16>);

impl StatusCodes {
    pub fn contains(&self, status: u16) -> bool {
        self.0.contains(&status)
    }
}

/// The retry and timeout policy of remote requests.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteSettings {
    max_attempts: u32,
    timeout: Duration,
    status_codes: StatusCodes,
}

impl Default for RemoteSettings {
    /// KvikIO's defaults, ignoring the environment.
    fn default() -> Self {
        RemoteSettings::from_settings(&Settings::default())
    }
}

impl RemoteSettings {
    /// The policy `settings` declare.
    pub fn from_settings(settings: &Settings) -> RemoteSettings {
        RemoteSettings {
            max_attempts: u32::try_from(settings.http_max_attempts()).unwrap_or(u32::MAX),
            timeout: Duration::from_secs(settings.http_timeout()),
            status_codes: StatusCodes(settings.http_status_codes().to_vec()),
        }
    }

    /// The policy of the global settings (the environment, read once,
    /// with the program's overrides).
    pub fn global() -> Result<RemoteSettings> {
        Ok(RemoteSettings::from_settings(&Settings::global()?))
    }

    /// The policy any source of variables declares (`lookup` returns a
    /// variable's value, `None` when unset); every bad variable is reported.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<OsString>) -> Result<RemoteSettings> {
        Ok(RemoteSettings::from_settings(&Settings::from_vars(lookup)?))
    }

    /// Attempts per request, the first included.
    pub fn http_max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The most one attempt may take, body included.
    pub fn http_timeout(&self) -> Duration {
        self.timeout
    }

    /// The statuses that are retried.
    pub fn http_status_codes(&self) -> &StatusCodes {
        &self.status_codes
    }

    /// At least 1.
    pub fn set_http_max_attempts(&mut self, attempts: u32) -> Result<&mut Self> {
        if attempts == 0 {
            return Err(invalid("http_max_attempts", "0", "must be at least 1"));
        }
        self.max_attempts = attempts;
        Ok(self)
    }

    /// More than zero; may be a fraction of a second.
    pub fn set_http_timeout(&mut self, timeout: Duration) -> Result<&mut Self> {
        if timeout.is_zero() {
            return Err(invalid("http_timeout", "0", "must be more than 0 seconds"));
        }
        self.timeout = timeout;
        Ok(self)
    }

    /// HTTP statuses (100–599).
    pub fn set_http_status_codes(&mut self, codes: Vec<u16>) -> Result<&mut Self> {
        if let Some(bad) = codes.iter().find(|c| !(100..=599).contains(*c)) {
            return Err(invalid(
                "http_status_codes",
                &bad.to_string(),
                "HTTP statuses are 100 to 599",
            ));
        }
        self.status_codes = StatusCodes(codes);
        Ok(self)
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

/// How long to wait before attempt `next` (2, 3, …): KvikIO's backoff,
/// 500 ms doubling up to 4 s.
pub fn backoff(next: u32) -> Duration {
    let doublings = next.saturating_sub(2).min(3);
    Duration::from_millis(500 << doublings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_the_declared_settings() {
        let vars = [
            ("KVIKIO_HTTP_MAX_ATTEMPTS", "4"),
            ("KVIKIO_HTTP_TIMEOUT", "7"),
            ("KVIKIO_HTTP_STATUS_CODES", "503, 429"),
        ];
        let s = RemoteSettings::from_vars(|name| {
            vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.into())
        })
        .unwrap();
        assert_eq!(s.http_max_attempts(), 4);
        assert_eq!(s.http_timeout(), Duration::from_secs(7));
        assert_eq!(s.http_status_codes().0, vec![503, 429]);
        let defaults = RemoteSettings::default();
        assert_eq!(
            (
                defaults.http_max_attempts(),
                defaults.http_timeout().as_secs()
            ),
            (3, 60)
        );
        assert_eq!(
            defaults.http_status_codes().0,
            vec![429, 500, 502, 503, 504]
        );
    }

    #[test]
    fn bad_values_are_errors_naming_the_variable() {
        let err = RemoteSettings::from_vars(|name| {
            (name == "KVIKIO_HTTP_MAX_ATTEMPTS").then(|| "0".into())
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("KVIKIO_HTTP_MAX_ATTEMPTS"),
            "{err}"
        );
        let mut s = RemoteSettings::default();
        assert!(s.set_http_max_attempts(0).is_err());
        assert!(s.set_http_timeout(Duration::ZERO).is_err());
        assert!(s.set_http_status_codes(vec![99]).is_err());
        s.set_http_timeout(Duration::from_millis(250)).unwrap();
        assert_eq!(s.http_timeout(), Duration::from_millis(250));
    }

    #[test]
    fn backoff_doubles_from_half_a_second_to_four() {
        let waits: Vec<u64> = (2..=7).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(waits, vec![500, 1000, 2000, 4000, 4000, 4000]);
    }
}
