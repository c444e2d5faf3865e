//! The report on stdout and the messages on stderr, through one layer that
//! never panics (`println!` panics when stdout is a closed pipe or full).
//!
//! - A reader that went away (`kvik settings | head -1`: EPIPE) ends the
//!   output quietly, as Unix tools do: what follows is dropped, and the
//!   command's own result decides the exit code.
//! - Any other failure to write the report (`> /dev/full`: ENOSPC, EIO) is
//!   [`CliError::Output`]: exit 1, with a message on stderr.
//! - Writing to stderr never fails a command: when stderr itself is closed
//!   or full there is nowhere left to say anything.
//! - Text for people passes through [`sanitize`]: control characters from
//!   file names or file content (`ESC[2J`) are written as visible escapes,
//!   never sent to the terminal. [`escaped`] does the same, and more, for
//!   one path or value in a message.
//!
//! Every write is flushed at once, so that a failure is seen by the call
//! that caused it, not lost in a buffer at exit.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fmt;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::CliError;

/// The reader of stdout went away: nothing more is written there.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// Print `text` (a report for people) on stdout, control characters
/// escaped.
pub fn print(text: &str) -> Result<(), CliError> {
    write_stdout(sanitize(text).as_bytes())
}

/// `println!` that returns an error instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::output::print(&format!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use outln;

/// Print a value as pretty JSON on stdout (JSON escapes control
/// characters itself).
pub fn json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::Failed(format!("cannot encode JSON: {e}")))?;
    text.push('\n');
    write_stdout(text.as_bytes())
}

/// The result of printing a report after the command's change was
/// committed (`write`, `copy`: DST already replaced). A report that could
/// not be written is then a warning on stderr naming what was done, not a
/// failure: exit 1 would say the change failed when it was made. Other
/// errors pass through.
pub fn after_commit(report: Result<(), CliError>, done: &str) -> Result<(), CliError> {
    match report {
        Err(CliError::Output(e)) => {
            eprint_line(&format!(
                "kvik: warning: {done}, but the report could not be written to stdout: {e}"
            ));
            Ok(())
        }
        other => other,
    }
}

/// Write `bytes` to a file the user named for an output (`--save`,
/// `--plot`), created or truncated as the shell's `>` does. A FIFO is
/// written into when a process reads it and refused at once when none does
/// (it is opened with `O_NONBLOCK`, so the open never waits for a reader);
/// the writes themselves then block, at the reader's pace.
pub fn write_file(what: &str, path: &std::path::Path, bytes: &[u8]) -> Result<(), CliError> {
    use rustix::fs::{Mode, OFlags};
    let failed = |e: std::io::Error| CliError::io(what, path, e);
    let flags = OFlags::WRONLY
        | OFlags::CREATE
        | OFlags::TRUNC
        | OFlags::NONBLOCK
        | OFlags::NOCTTY
        | OFlags::CLOEXEC;
    let fd =
        rustix::fs::open(path, flags, Mode::from_raw_mode(0o666)).map_err(|e| failed(e.into()))?;
    let blocking = rustix::fs::fcntl_getfl(&fd).map_err(|e| failed(e.into()))? - OFlags::NONBLOCK;
    rustix::fs::fcntl_setfl(&fd, blocking).map_err(|e| failed(e.into()))?;
    std::fs::File::from(fd).write_all(bytes).map_err(failed)
}

/// Write bytes to stdout by the rules at the top of this module.
fn write_stdout(bytes: &[u8]) -> Result<(), CliError> {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_GONE.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(CliError::Output(e)),
    }
}

/// Write a line to stderr (`kvik: error: …`), control characters escaped;
/// a failure to write it is ignored, as there is nowhere to report it.
pub fn eprint_line(text: &str) {
    let mut line = sanitize(text).into_owned();
    line.push('\n');
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(line.as_bytes()).and_then(|()| err.flush());
}

/// `text` with every character that would act on a terminal instead of
/// being shown written as an escape: C0 controls except newline and tab,
/// DEL, C1 controls (`\u{9b}` is a CSI on some terminals) and the Unicode
/// bidirectional overrides that reorder what is shown.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c != '\n' && c != '\t' && acts_on_terminal(c))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c != '\n' && c != '\t' && acts_on_terminal(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_escape(out: &mut String, c: char) {
    use std::fmt::Write as _;
    let _ = match c {
        '\n' => write!(out, "\\n"),
        '\t' => write!(out, "\\t"),
        '\r' => write!(out, "\\r"),
        c if (c as u32) < 0x100 => write!(out, "\\x{:02x}", c as u32),
        c => write!(out, "\\u{{{:x}}}", c as u32),
    };
}

/// A path or value for a message: every control character escaped,
/// newlines and tabs included (a file name with a newline stays on one
/// line), and bytes that are not UTF-8 as `\xNN` (lossless, where
/// `Path::display` would show U+FFFD). Use it for every path or value
/// echoed to people.
pub fn escaped(value: &(impl AsRef<OsStr> + ?Sized)) -> Escaped<'_> {
    Escaped(value.as_ref())
}

/// See [`escaped`].
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(&'a OsStr);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        for chunk in self.0.as_bytes().utf8_chunks() {
            for c in chunk.valid().chars() {
                if acts_on_terminal(c) {
                    push_escape(&mut out, c);
                } else {
                    out.push(c);
                }
            }
            for byte in chunk.invalid() {
                out.push_str(&format!("\\x{byte:02x}"));
            }
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_that_fails_after_the_commit_is_not_a_failure() {
        let full = || {
            Err(CliError::Output(std::io::Error::from_raw_os_error(
                libc::ENOSPC,
            )))
        };
        assert!(after_commit(full(), "wrote /x").is_ok());
        assert!(after_commit(Ok(()), "wrote /x").is_ok());
        let other = after_commit(Err(CliError::Failed("sync failed".into())), "wrote /x");
        assert_eq!(other.unwrap_err().code(), crate::error::FAILED);
    }

    #[test]
    fn control_characters_are_shown_not_sent() {
        assert_eq!(sanitize("plain\n\ttext"), "plain\n\ttext");
        assert_eq!(sanitize("a\x1b[2Jb\r\x07"), "a\\x1b[2Jb\\r\\x07");
        assert_eq!(sanitize("\u{9b}31m \u{202e}evil"), "\\x9b31m \\u{202e}evil");
        let name = OsStr::from_bytes(b"new\nline\x1b]0;title\x07\xff.bin");
        assert_eq!(
            escaped(name).to_string(),
            "new\\nline\\x1b]0;title\\x07\\xff.bin"
        );
        assert_eq!(escaped("/data/model.bin").to_string(), "/data/model.bin");
    }
}
