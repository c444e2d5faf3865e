//! `CompatMode`: KvikIO's switch between cuFile and its POSIX path.
//!
//! Parsed exactly as KvikIO parses `KVIKIO_COMPAT_MODE`: case-insensitive,
//! surrounding whitespace ignored; `on/true/yes/1` → ON, `off/false/no/0` →
//! OFF, `auto` → AUTO; anything else is an error.

use std::fmt;
use std::str::FromStr;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "UPPERCASE")]
/// KvikIO's compat mode: whether device-memory requests may go to cuFile.
///
/// Parsed as KvikIO parses `KVIKIO_COMPAT_MODE`: case-insensitive,
/// surrounding whitespace ignored; `on/true/yes/1` → ON, `off/false/no/0`
/// → OFF, `auto` → AUTO; anything else is an error.
///
/// ```
/// use kvik_policy::CompatMode;
///
/// assert_eq!(" Yes ".parse::<CompatMode>(), Ok(CompatMode::On));
/// assert_eq!("AUTO".parse::<CompatMode>(), Ok(CompatMode::Auto));
/// assert_eq!(CompatMode::default(), CompatMode::Auto);
/// let err = "maybe".parse::<CompatMode>().unwrap_err();
/// assert!(err.to_string().contains("expected on/true/yes/1"));
/// ```
pub enum CompatMode {
    /// Never load libcufile: POSIX only.
    On,
    /// Always cuFile (also cuFile's own compatibility mode); a failure is an error.
    Off,
    /// cuFile where it has a direct path, POSIX elsewhere, with the reason kept.
    #[default]
    Auto,
}

/// A value that is not a compat mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not a compat mode: expected on/true/yes/1, off/false/no/0 or auto",
    crate::error::quote_value(value)
)]
pub struct ParseCompatModeError {
    /// The text that was given.
    pub value: String,
}

impl FromStr for CompatMode {
    type Err = ParseCompatModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" | "1" => Ok(CompatMode::On),
            "off" | "false" | "no" | "0" => Ok(CompatMode::Off),
            "auto" => Ok(CompatMode::Auto),
            _ => Err(ParseCompatModeError {
                value: s.to_string(),
            }),
        }
    }
}

impl fmt::Display for CompatMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompatMode::On => "ON",
            CompatMode::Off => "OFF",
            CompatMode::Auto => "AUTO",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kvikio_string_table() {
        let table = [
            ("ON", CompatMode::On),
            ("on", CompatMode::On),
            ("True", CompatMode::On),
            ("yes", CompatMode::On),
            ("1", CompatMode::On),
            ("OFF", CompatMode::Off),
            ("false", CompatMode::Off),
            ("No", CompatMode::Off),
            ("0", CompatMode::Off),
            ("AUTO", CompatMode::Auto),
            ("  auto\t", CompatMode::Auto),
            (" On ", CompatMode::On),
        ];
        for (text, mode) in table {
            assert_eq!(text.parse::<CompatMode>(), Ok(mode), "{text:?}");
        }
    }

    #[test]
    fn junk_is_an_error_that_quotes_the_value() {
        for junk in ["", "2", "onn", "automatic", "o n", "ja"] {
            let err = junk.parse::<CompatMode>().unwrap_err();
            assert_eq!(err.value, junk);
            assert!(err.to_string().contains(&format!("{junk:?}")));
        }
    }

    #[test]
    fn display_round_trips() {
        for mode in [CompatMode::On, CompatMode::Off, CompatMode::Auto] {
            assert_eq!(mode.to_string().parse::<CompatMode>(), Ok(mode));
        }
    }
}
