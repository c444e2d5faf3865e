//! `Settings`: KvikIO's knobs, read once from the `KVIKIO_*` environment,
//! overridable through the API, each value kept with where it came from.
//!
//! | setting | variable | default | rule |
//! |---|---|---|---|
//! | compat_mode | `KVIKIO_COMPAT_MODE` | AUTO | on/true/yes/1, off/false/no/0, auto |
//! | num_threads | `KVIKIO_NTHREADS` (alias `KVIKIO_NUM_THREADS`) | available cores, at most 16 | > 0 |
//! | task_size | `KVIKIO_TASK_SIZE` | 4 MiB | > 0 |
//! | gds_threshold | `KVIKIO_GDS_THRESHOLD` | 16 KiB | ≥ 0 |
//! | bounce_buffer_size | `KVIKIO_BOUNCE_BUFFER_SIZE` | 16 MiB | > 0 |
//! | auto_direct_io_read | `KVIKIO_AUTO_DIRECT_IO_READ` | false | boolean |
//! | auto_direct_io_write | `KVIKIO_AUTO_DIRECT_IO_WRITE` | true | boolean |
//!
//! Where we differ from KvikIO, on purpose:
//! * sizes also take units (`4MiB`, `16KiB`), and junk is an error naming the
//!   variable and the value — KvikIO reads `KVIKIO_TASK_SIZE=4MiB` as 4 bytes;
//! * `num_threads` defaults to the available cores (at most 16), not 1: one
//!   thread reads a page-cached file at a sixth of what 16 do (SPEC §7);
//! * every bad variable is reported at once, not only the first.

use std::ffi::OsString;
use std::fmt;
use std::sync::{OnceLock, RwLock};

use crate::error::{Error, Result};
use crate::{CompatMode, parse_size};

/// The most threads the default picks, whatever the core count (KvikIO's
/// measurements flatten out past 16).
pub const DEFAULT_MAX_THREADS: usize = 16;

/// The most threads anyone may ask for. KvikIO takes any number, so
/// `KVIKIO_NTHREADS=1000000` spawns a million threads (minutes, and
/// gigabytes of stacks) before the first read; past a few hundred, threads
/// only add contention on any storage there is.
pub const MAX_THREADS: usize = 1024;

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

/// The effective KvikIO settings. Cheap to clone; every request takes a
/// snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    compat_mode: Setting<CompatMode>,
    num_threads: Setting<usize>,
    task_size: Setting<u64>,
    gds_threshold: Setting<u64>,
    bounce_buffer_size: Setting<u64>,
    auto_direct_io_read: Setting<bool>,
    auto_direct_io_write: Setting<bool>,
}

/// How a setting is named, where it is read from and what it must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingInfo {
    pub name: &'static str,
    /// The environment variables, the main one first.
    pub variables: &'static [&'static str],
    pub default: &'static str,
    pub rule: &'static str,
}

/// Every setting, in the order `kvik settings` prints them.
pub const SETTINGS: [SettingInfo; 7] = [
    SettingInfo {
        name: "compat_mode",
        variables: &["KVIKIO_COMPAT_MODE"],
        default: "AUTO",
        rule: "on/true/yes/1 → ON, off/false/no/0 → OFF, auto → AUTO (any case)",
    },
    SettingInfo {
        name: "num_threads",
        variables: &["KVIKIO_NTHREADS", "KVIKIO_NUM_THREADS"],
        default: "available cores, at most 16",
        rule: "a whole number from 1 to 1024",
    },
    SettingInfo {
        name: "task_size",
        variables: &["KVIKIO_TASK_SIZE"],
        default: "4 MiB",
        rule: "a size > 0 (bytes, or 4MiB, 512KiB, …)",
    },
    SettingInfo {
        name: "gds_threshold",
        variables: &["KVIKIO_GDS_THRESHOLD"],
        default: "16 KiB",
        rule: "a size ≥ 0",
    },
    SettingInfo {
        name: "bounce_buffer_size",
        variables: &["KVIKIO_BOUNCE_BUFFER_SIZE"],
        default: "16 MiB",
        rule: "a size > 0",
    },
    SettingInfo {
        name: "auto_direct_io_read",
        variables: &["KVIKIO_AUTO_DIRECT_IO_READ"],
        default: "false",
        rule: "true/on/yes/1 or false/off/no/0",
    },
    SettingInfo {
        name: "auto_direct_io_write",
        variables: &["KVIKIO_AUTO_DIRECT_IO_WRITE"],
        default: "true",
        rule: "true/on/yes/1 or false/off/no/0",
    },
];

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

impl Default for Settings {
    /// Our defaults, ignoring the environment.
    fn default() -> Self {
        Settings {
            compat_mode: Setting::default(CompatMode::Auto),
            num_threads: Setting::default(default_num_threads()),
            task_size: Setting::default(4 << 20),
            gds_threshold: Setting::default(16 << 10),
            bounce_buffer_size: Setting::default(16 << 20),
            auto_direct_io_read: Setting::default(false),
            auto_direct_io_write: Setting::default(true),
        }
    }
}

impl Settings {
    /// Read the process environment (every call reads it anew; the global
    /// settings, [`Settings::global`], read it once).
    pub fn from_env() -> Result<Settings> {
        Settings::from_vars(|name| std::env::var_os(name))
    }

    /// Read settings from any source of variables (`lookup` returns a
    /// variable's value, `None` when unset). Every bad variable is reported.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Settings> {
        let mut settings = Settings::default();
        let mut problems = Vec::new();
        let get = |variable: &'static str| {
            lookup(variable).map(|v| match v.into_string() {
                Ok(text) => Ok(text),
                Err(raw) => Err(EnvProblem {
                    variable,
                    value: raw.to_string_lossy().into_owned(),
                    problem: "not valid UTF-8".into(),
                }),
            })
        };
        // Parse one variable into `slot`, or record the problem.
        let mut read =
            |variable: &'static str, parse: &dyn Fn(&str) -> std::result::Result<(), String>| {
                match get(variable) {
                    None => {}
                    Some(Err(p)) => problems.push(p),
                    Some(Ok(text)) => {
                        if let Err(problem) = parse(&text) {
                            problems.push(EnvProblem {
                                variable,
                                value: text,
                                problem,
                            });
                        }
                    }
                }
            };

        let compat = std::cell::Cell::new(None);
        read("KVIKIO_COMPAT_MODE", &|text| {
            let mode = text.parse::<CompatMode>().map_err(|_| {
                "expected on/true/yes/1, off/false/no/0 or auto (any case)".to_string()
            })?;
            compat.set(Some(mode));
            Ok(())
        });
        let threads: [std::cell::Cell<Option<usize>>; 2] = Default::default();
        for (i, variable) in ["KVIKIO_NTHREADS", "KVIKIO_NUM_THREADS"].iter().enumerate() {
            read(variable, &|text| {
                threads[i].set(Some(parse_count(text)?));
                Ok(())
            });
        }
        let sizes: [std::cell::Cell<Option<u64>>; 3] = Default::default();
        for (i, (variable, positive)) in [
            ("KVIKIO_TASK_SIZE", true),
            ("KVIKIO_GDS_THRESHOLD", false),
            ("KVIKIO_BOUNCE_BUFFER_SIZE", true),
        ]
        .into_iter()
        .enumerate()
        {
            read(variable, &|text| {
                let bytes = parse_size(text).map_err(|e| {
                    format!(
                        "{} (write bytes like 4194304, or 4MiB, 16KiB, 1GiB)",
                        e.problem
                    )
                })?;
                if positive && bytes == 0 {
                    return Err("must be greater than 0".into());
                }
                sizes[i].set(Some(bytes));
                Ok(())
            });
        }
        let flags: [std::cell::Cell<Option<bool>>; 2] = Default::default();
        for (i, variable) in ["KVIKIO_AUTO_DIRECT_IO_READ", "KVIKIO_AUTO_DIRECT_IO_WRITE"]
            .into_iter()
            .enumerate()
        {
            read(variable, &|text| {
                flags[i].set(Some(parse_bool(text)?));
                Ok(())
            });
        }

        let from_env = |variable| Source::Environment { variable };
        if let Some(mode) = compat.get() {
            settings.compat_mode = Setting {
                value: mode,
                source: from_env("KVIKIO_COMPAT_MODE"),
            };
        }
        match (threads[0].get(), threads[1].get()) {
            (Some(a), Some(b)) if a != b => problems.push(EnvProblem {
                variable: "KVIKIO_NTHREADS",
                value: a.to_string(),
                problem: format!(
                    "KVIKIO_NUM_THREADS={b} disagrees; they are aliases: set one, or both to \
                     the same value"
                ),
            }),
            (Some(n), _) => {
                settings.num_threads = Setting {
                    value: n,
                    source: from_env("KVIKIO_NTHREADS"),
                }
            }
            (None, Some(n)) => {
                settings.num_threads = Setting {
                    value: n,
                    source: from_env("KVIKIO_NUM_THREADS"),
                }
            }
            (None, None) => {}
        }
        let size_slots = [
            (&mut settings.task_size, "KVIKIO_TASK_SIZE"),
            (&mut settings.gds_threshold, "KVIKIO_GDS_THRESHOLD"),
            (
                &mut settings.bounce_buffer_size,
                "KVIKIO_BOUNCE_BUFFER_SIZE",
            ),
        ];
        for ((slot, variable), value) in size_slots.into_iter().zip(&sizes) {
            if let Some(value) = value.get() {
                *slot = Setting {
                    value,
                    source: from_env(variable),
                };
            }
        }
        let flag_slots = [
            (
                &mut settings.auto_direct_io_read,
                "KVIKIO_AUTO_DIRECT_IO_READ",
            ),
            (
                &mut settings.auto_direct_io_write,
                "KVIKIO_AUTO_DIRECT_IO_WRITE",
            ),
        ];
        for ((slot, variable), value) in flag_slots.into_iter().zip(&flags) {
            if let Some(value) = value.get() {
                *slot = Setting {
                    value,
                    source: from_env(variable),
                };
            }
        }

        if problems.is_empty() {
            Ok(settings)
        } else {
            Err(Error::Environment { problems })
        }
    }

    pub fn compat_mode(&self) -> CompatMode {
        self.compat_mode.value
    }
    pub fn num_threads(&self) -> usize {
        self.num_threads.value
    }
    pub fn task_size(&self) -> u64 {
        self.task_size.value
    }
    pub fn gds_threshold(&self) -> u64 {
        self.gds_threshold.value
    }
    pub fn bounce_buffer_size(&self) -> u64 {
        self.bounce_buffer_size.value
    }
    pub fn auto_direct_io_read(&self) -> bool {
        self.auto_direct_io_read.value
    }
    pub fn auto_direct_io_write(&self) -> bool {
        self.auto_direct_io_write.value
    }

    pub fn set_compat_mode(&mut self, mode: CompatMode) -> &mut Self {
        self.compat_mode = Setting::api(mode);
        self
    }
    /// Threads in the pool that runs a request's tasks: 1 to [`MAX_THREADS`].
    pub fn set_num_threads(&mut self, threads: usize) -> Result<&mut Self> {
        positive("num_threads", threads as u64)?;
        if threads > MAX_THREADS {
            return Err(Error::InvalidSetting {
                setting: "num_threads",
                value: threads.to_string(),
                rule: "must be at most 1024 (MAX_THREADS)",
            });
        }
        self.num_threads = Setting::api(threads);
        Ok(self)
    }
    /// The size requests are cut into; must be > 0.
    pub fn set_task_size(&mut self, bytes: u64) -> Result<&mut Self> {
        positive("task_size", bytes)?;
        self.task_size = Setting::api(bytes);
        Ok(self)
    }
    /// Device requests below this size skip cuFile.
    pub fn set_gds_threshold(&mut self, bytes: u64) -> &mut Self {
        self.gds_threshold = Setting::api(bytes);
        self
    }
    /// The size of each bounce buffer; must be > 0.
    pub fn set_bounce_buffer_size(&mut self, bytes: u64) -> Result<&mut Self> {
        positive("bounce_buffer_size", bytes)?;
        self.bounce_buffer_size = Setting::api(bytes);
        Ok(self)
    }
    /// Host reads use O_DIRECT for their page-aligned middle.
    pub fn set_auto_direct_io_read(&mut self, on: bool) -> &mut Self {
        self.auto_direct_io_read = Setting::api(on);
        self
    }
    /// Host writes use O_DIRECT for their page-aligned middle.
    pub fn set_auto_direct_io_write(&mut self, on: bool) -> &mut Self {
        self.auto_direct_io_write = Setting::api(on);
        self
    }

    /// Each setting with its value and source, in [`SETTINGS`] order.
    pub fn describe(&self) -> Vec<SettingView> {
        let values: [(String, Source); 7] = [
            (self.compat_mode.value.to_string(), self.compat_mode.source),
            (self.num_threads.value.to_string(), self.num_threads.source),
            (
                crate::size::bytes_text(self.task_size.value),
                self.task_size.source,
            ),
            (
                crate::size::bytes_text(self.gds_threshold.value),
                self.gds_threshold.source,
            ),
            (
                crate::size::bytes_text(self.bounce_buffer_size.value),
                self.bounce_buffer_size.source,
            ),
            (
                self.auto_direct_io_read.value.to_string(),
                self.auto_direct_io_read.source,
            ),
            (
                self.auto_direct_io_write.value.to_string(),
                self.auto_direct_io_write.source,
            ),
        ];
        SETTINGS
            .iter()
            .zip(values)
            .map(|(info, (value, source))| SettingView {
                name: info.name,
                value,
                source,
                variables: info.variables,
                default: info.default,
                rule: info.rule,
            })
            .collect()
    }
}

impl serde::Serialize for Settings {
    /// `{"task_size": {"value": 4194304, "source": {"kind": "default"}}, …}`
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(SETTINGS.len()))?;
        map.serialize_entry("compat_mode", &self.compat_mode)?;
        map.serialize_entry("num_threads", &self.num_threads)?;
        map.serialize_entry("task_size", &self.task_size)?;
        map.serialize_entry("gds_threshold", &self.gds_threshold)?;
        map.serialize_entry("bounce_buffer_size", &self.bounce_buffer_size)?;
        map.serialize_entry("auto_direct_io_read", &self.auto_direct_io_read)?;
        map.serialize_entry("auto_direct_io_write", &self.auto_direct_io_write)?;
        map.end()
    }
}

fn positive(setting: &'static str, value: u64) -> Result<()> {
    if value == 0 {
        return Err(Error::InvalidSetting {
            setting,
            value: "0".into(),
            rule: "must be greater than 0",
        });
    }
    Ok(())
}

/// A thread count: digits only (surrounding whitespace ignored), 1 to
/// [`MAX_THREADS`].
fn parse_count(text: &str) -> std::result::Result<usize, String> {
    let t = text.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a whole number greater than 0".into());
    }
    match t.parse::<usize>() {
        Ok(0) => Err("must be greater than 0".into()),
        Ok(n) if n <= MAX_THREADS => Ok(n),
        _ => Err(format!("too large: at most {MAX_THREADS} threads")),
    }
}

/// KvikIO's booleans: `true/on/yes/1` and `false/off/no/0`, any case,
/// surrounding whitespace ignored.
pub fn parse_bool(text: &str) -> std::result::Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err("expected true/on/yes/1 or false/off/no/0".into()),
    }
}

// The global settings: the environment, read once, unless the API replaced them.
static ENVIRONMENT: OnceLock<std::result::Result<Settings, Vec<EnvProblem>>> = OnceLock::new();
static OVERRIDE: RwLock<Option<Settings>> = RwLock::new(None);

impl Settings {
    /// The process-wide settings: the environment (read on first use, once)
    /// unless replaced through [`Settings::set_global`] or a
    /// [`Settings::scoped`] override. A bad environment is an error every
    /// time it is asked for, until the API replaces it.
    pub fn global() -> Result<Settings> {
        if let Some(settings) = OVERRIDE.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            return Ok(settings.clone());
        }
        Settings::environment()
    }

    /// The settings the environment gave when it was first read.
    pub fn environment() -> Result<Settings> {
        ENVIRONMENT
            .get_or_init(|| {
                Settings::from_env().map_err(|e| match e {
                    Error::Environment { problems } => problems,
                    other => unreachable!("from_env only reports the environment: {other}"),
                })
            })
            .clone()
            .map_err(|problems| Error::Environment { problems })
    }

    /// Replace the process-wide settings (until the next call, or
    /// [`Settings::reset_global`]).
    pub fn set_global(settings: Settings) {
        *OVERRIDE.write().unwrap_or_else(|e| e.into_inner()) = Some(settings);
    }

    /// Go back to the settings the environment gave.
    pub fn reset_global() {
        *OVERRIDE.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Change the process-wide settings until the returned guard drops, then
    /// restore exactly what was there before (KvikIO's
    /// `with kvikio.defaults.set(...)`). Guards nest; drop them in reverse
    /// order. An `update` that fails changes nothing.
    ///
    /// ```
    /// # use kvik_policy::Settings;
    /// let before = Settings::global().unwrap().task_size();
    /// {
    ///     let _scope = Settings::scoped(|s| s.set_task_size(1 << 20).map(drop)).unwrap();
    ///     assert_eq!(Settings::global().unwrap().task_size(), 1 << 20);
    /// }
    /// assert_eq!(Settings::global().unwrap().task_size(), before);
    /// ```
    pub fn scoped(update: impl FnOnce(&mut Settings) -> Result<()>) -> Result<ScopedSettings> {
        let mut guard = OVERRIDE.write().unwrap_or_else(|e| e.into_inner());
        let previous = guard.clone();
        let mut next = match &previous {
            Some(settings) => settings.clone(),
            None => Settings::environment()?,
        };
        update(&mut next)?;
        *guard = Some(next);
        Ok(ScopedSettings { previous })
    }
}

/// Restores the previous process-wide settings when dropped.
#[derive(Debug)]
#[must_use = "the override ends when this guard drops"]
pub struct ScopedSettings {
    previous: Option<Settings>,
}

impl Drop for ScopedSettings {
    fn drop(&mut self) {
        *OVERRIDE.write().unwrap_or_else(|e| e.into_inner()) = self.previous.take();
    }
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
