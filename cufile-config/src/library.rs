//! The libcufile versions whose configuration reading this crate models.

use std::fmt;

/// A libcufile release whose keys, ranges, defaults and environment variables
/// were read from the library itself (`strings` of the shipped `.so`, and
/// `cuFileGetParameter*` / `cuFileGetParameterMinMaxValue` before the driver
/// opens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize)]
pub enum Libcufile {
    /// libcufile 1.15 (the one CUDA 13.0 ships).
    #[default]
    #[serde(rename = "1.15")]
    V1_15,
    /// libcufile 1.20 (`nvidia-cufile==1.20.0.107`).
    #[serde(rename = "1.20")]
    V1_20,
}

impl Libcufile {
    pub const ALL: [Libcufile; 2] = [Libcufile::V1_15, Libcufile::V1_20];
    /// Both modelled versions read it.
    pub(crate) const BOTH: &'static [Libcufile] = &[Libcufile::V1_15, Libcufile::V1_20];
    /// Only 1.20 reads it (new since 1.15).
    pub(crate) const NEW: &'static [Libcufile] = &[Libcufile::V1_20];
    /// Only 1.15 reads it (1.20 dropped it).
    pub(crate) const OLD: &'static [Libcufile] = &[Libcufile::V1_15];

    /// `"1.15"` or `"1.20"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Libcufile::V1_15 => "1.15",
            Libcufile::V1_20 => "1.20",
        }
    }
}

impl fmt::Display for Libcufile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "libcufile {}", self.as_str())
    }
}

impl std::str::FromStr for Libcufile {
    type Err = String;

    /// Accepts `1.15`, `1.15.1.6`, `1.20`, `1.20.0.107` (a leading `v` too).
    fn from_str(s: &str) -> Result<Libcufile, String> {
        let s = s.trim().trim_start_matches('v');
        let mut parts = s.split('.');
        match (parts.next(), parts.next()) {
            (Some("1"), Some("15")) => Ok(Libcufile::V1_15),
            (Some("1"), Some("20")) => Ok(Libcufile::V1_20),
            _ => Err(format!(
                "libcufile version {s:?} is not modelled; known: 1.15, 1.20"
            )),
        }
    }
}
