//! A command's report on stdout, and notes on stderr, written with error
//! handling (`println!` panics when stdout is closed or full).
//!
//! A report is rendered whole, then written once. A reader that went away
//! (EPIPE) ends the output quietly, as Unix tools do. After `write` /
//! `copy` has put DST in place, nothing can turn that success into a
//! failure: a report that cannot be written (`> /dev/full`) is a note on
//! stderr and the exit status stays 0.

use std::path::Path;

use crate::CliError;

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
