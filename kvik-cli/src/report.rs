//! A command's report on stdout, and notes on stderr, written with error
//! handling (`println!` panics when stdout is closed or full); and the
//! pieces of readable reports: rates, sizes, shares, the CRC-32 and memory
//! lines.
//!
//! A report is rendered whole, then written once. A reader that went away
//! (EPIPE) ends the output quietly, as Unix tools do. After `write` /
//! `copy` has put DST in place, nothing can turn that success into a
//! failure: a report that cannot be written (`> /dev/full`) is a note on
//! stderr and the exit status stays 0.

use std::path::Path;

use crate::CliError;
use crate::args::{MemoryChoice, memory_name};

/// `value` as pretty JSON, with a final newline.
pub fn json(value: &impl serde::Serialize) -> Result<String, CliError> {
    serde_json::to_string_pretty(value)
        .map(|mut text| {
            text.push('\n');
            text
        })
        .map_err(|e| CliError::Failed(format!("cannot encode the report as JSON: {e}")))
}

/// Write `text` to stdout (see `output`: a closed pipe is not an error).
pub fn print(text: &str) -> Result<(), CliError> {
    crate::output::print(text)
}

/// Write the report of a command that has already changed `destination`:
/// any failure is a note on stderr, never an error.
pub fn print_after_commit(text: Result<String, CliError>, destination: &Path) {
    let done = format!("{} was written", crate::output::escaped(destination));
    let printed = text.and_then(|text| print(&text));
    if let Err(e) = crate::output::after_commit(printed, &done) {
        note(&format!("{done}, but its report could not be: {e}"));
    }
}

/// `kvik: note: …` on stderr (a stderr that cannot be written is ignored:
/// there is nowhere left to say it).
pub fn note(text: &str) {
    crate::output::eprint_line(&format!("kvik: note: {text}"));
}

/// The readable report's CRC-32 line (when there is one) and memory line.
pub fn checksum_and_memory(text: &mut String, crc: Option<&String>, memory: &MemoryChoice) {
    use std::fmt::Write as _;
    if let Some(crc) = crc {
        let _ = writeln!(text, "  CRC-32       {crc}");
    }
    let _ = writeln!(
        text,
        "  memory       {}: {}",
        memory_name(memory.kind),
        memory.reason
    );
}

/// `8.73 GB/s`: decimal units, as dd and storage vendors write them.
pub fn rate(bytes: u64, seconds: f64) -> String {
    if seconds <= 0.0 {
        return "∞".into();
    }
    let per_second = bytes as f64 / seconds;
    if per_second >= 1e9 {
        format!("{:.2} GB/s", per_second / 1e9)
    } else {
        format!("{:.1} MB/s", per_second / 1e6)
    }
}

/// `221.9 GiB`: a size for a message, rounded.
pub fn approximate(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A share as `100%`, `0.4%`, or `unknown`.
pub fn percent(share: Option<f64>) -> String {
    match share {
        Some(s) if s > 0.0 && s < 0.01 => format!("{:.1}%", s * 100.0),
        Some(s) => format!("{:.0}%", s * 100.0),
        None => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_decimal() {
        assert_eq!(rate(8_730_000_000, 1.0), "8.73 GB/s");
        assert_eq!(rate(2_500_000, 1.0), "2.5 MB/s");
    }
}
