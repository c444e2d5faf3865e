//! Byte sizes as users write them: `4194304`, `4MiB`, `4M`, `16KiB`, `1.5GiB`.
//!
//! KvikIO reads sizes as a C `int` and silently drops trailing junk
//! (`KVIKIO_TASK_SIZE=4MiB` becomes 4 bytes). We accept plain byte counts
//! exactly as KvikIO does, also accept units, and reject everything else.
//!
//! Units: `B`; binary `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB` (powers of
//! 1024, as `dd` and most storage tools read `K`/`M`/`G`); decimal `kB`/`KB`,
//! `MB`, `GB`, `TB` (powers of 1000). Case-insensitive; a space may separate
//! number and unit; a fraction is accepted when the result is whole bytes.
//!
//! ```
//! use kvik_policy::{Size, parse_size};
//!
//! assert_eq!(parse_size("4194304"), Ok(4 << 20));
//! assert_eq!(parse_size("4MiB"), Ok(4 << 20));
//! assert_eq!(parse_size("1.5 GiB"), Ok(3 << 29));
//! assert_eq!(parse_size("2MB"), Ok(2_000_000));
//! assert!(parse_size("4MiBs").is_err()); // KvikIO would read 4 bytes
//! assert_eq!(Size(4 << 20).to_string(), "4 MiB");
//! assert_eq!(Size((8 << 20) + 4096).to_string(), "8196 KiB"); // exact, never rounded
//! assert_eq!(Size(4097).to_string(), "4097 B");
//! ```

use std::fmt;

/// A size that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not a size: {problem} (write bytes like 4194304, or 4MiB, 16KiB, 1GiB)",
    crate::error::quote_value(value)
)]
pub struct ParseSizeError {
    /// The text that was given.
    pub value: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// Parse a size in bytes.
pub fn parse_size(text: &str) -> Result<u64, ParseSizeError> {
    let err = |problem| ParseSizeError {
        value: text.to_string(),
        problem,
    };
    let s = text.trim();
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = (&s[..number_end], s[number_end..].trim_start());
    if number.is_empty() {
        return Err(err(if s.starts_with('-') {
            "sizes cannot be negative"
        } else {
            "no number"
        }));
    }
    let multiplier: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(err("unknown unit")),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) if f.contains('.') || (w.is_empty() && f.is_empty()) => {
            return Err(err("malformed number"));
        }
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    let too_large = || err("too large");
    let parse = |digits: &str| -> Result<u128, ParseSizeError> {
        if digits.is_empty() {
            Ok(0)
        } else {
            digits.parse::<u128>().map_err(|_| too_large())
        }
    };
    if fraction.len() > 30 {
        return Err(too_large());
    }
    let scale = 10u128.pow(fraction.len() as u32);
    let scaled = parse(whole)?
        .checked_mul(scale)
        .and_then(|w| w.checked_add(parse(fraction).ok()?))
        .and_then(|v| v.checked_mul(multiplier))
        .ok_or_else(too_large)?;
    if scaled % scale != 0 {
        return Err(err("not a whole number of bytes"));
    }
    u64::try_from(scaled / scale).map_err(|_| too_large())
}

/// A size for people, exact and never rounded: the largest binary unit
/// that divides it (`1 GiB`, `8196 KiB`), else bytes (`4097 B`). What it
/// prints parses back to the same size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1 << 40, "TiB"),
            (1 << 30, "GiB"),
            (1 << 20, "MiB"),
            (1 << 10, "KiB"),
        ];
        for (unit, name) in UNITS {
            if self.0 >= unit && self.0 % unit == 0 {
                return write!(f, "{} {name}", self.0 / unit);
            }
        }
        write!(f, "{} B", self.0)
    }
}

/// `1 GiB (1073741824 bytes)`, or `4097 bytes`: exact, for reports.
pub(crate) fn bytes_text(bytes: u64) -> String {
    let exact = Size(bytes).to_string();
    if exact.ends_with(" B") {
        format!("{bytes} bytes")
    } else {
        format!("{exact} ({bytes} bytes)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_bytes_and_units() {
        let cases = [
            ("4194304", 4 << 20),
            ("0", 0),
            ("4MiB", 4 << 20),
            ("4M", 4 << 20),
            ("4m", 4 << 20),
            ("16KiB", 16 << 10),
            ("16 KiB", 16 << 10),
            (" 1GiB ", 1 << 30),
            ("1.5GiB", 3 << 29),
            ("2T", 2 << 40),
            ("10B", 10),
            ("1KB", 1000),
            ("1MB", 1_000_000),
            ("0.5K", 512),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_size(text), Ok(bytes), "{text:?}");
        }
    }

    #[test]
    fn junk_is_rejected_with_the_reason() {
        let cases = [
            ("", "no number"),
            ("MiB", "no number"),
            ("-4", "sizes cannot be negative"),
            ("4MiBs", "unknown unit"),
            ("4 MiB x", "unknown unit"),
            ("4x", "unknown unit"),
            ("1.2.3", "malformed number"),
            (".", "malformed number"),
            ("0.3B", "not a whole number of bytes"),
            ("99999999999999999999999", "too large"),
            ("16777216TiB", "too large"),
        ];
        for (text, problem) in cases {
            let err = parse_size(text).unwrap_err();
            assert_eq!(err.problem, problem, "{text:?}");
            assert_eq!(err.value, text);
        }
    }

    #[test]
    fn sizes_print_exactly() {
        assert_eq!(Size(1 << 30).to_string(), "1 GiB");
        assert_eq!(Size(256 << 20).to_string(), "256 MiB");
        assert_eq!(Size((8 << 20) + 4096).to_string(), "8196 KiB");
        assert_eq!(Size(4097).to_string(), "4097 B");
        assert_eq!(Size(0).to_string(), "0 B");
    }

    #[test]
    fn printed_sizes_parse_back() {
        for bytes in [
            0u64,
            1,
            4096,
            4097,
            1 << 20,
            (8 << 20) + 4096,
            1 << 40,
            u64::MAX,
        ] {
            assert_eq!(parse_size(&Size(bytes).to_string()), Ok(bytes));
        }
    }
}
