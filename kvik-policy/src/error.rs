//! The crate's one error type: what failed, where (path, offset), and the
//! raw OS error number when there is one.

use std::path::PathBuf;

use crate::path_report::Operation;
use crate::routing::CuFileRequired;
use crate::settings::EnvProblem;

/// Everything that can go wrong in kvik-policy.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// One or more `KVIKIO_*` variables hold values we cannot use. Every bad
    /// variable is listed, each with its value.
    #[error("{}", EnvProblem::describe_all(problems))]
    Environment { problems: Vec<EnvProblem> },

    /// A setting given through the API breaks its rule (`num_threads` of 0, …).
    #[error("{setting} = {value} is invalid: {rule}")]
    InvalidSetting {
        setting: &'static str,
        value: String,
        rule: &'static str,
    },

    /// An open mode other than r, r+, w, w+.
    #[error(
        "open mode {mode:?} is not supported: use \"r\", \"r+\", \"w\" or \"w+\"{}",
        if mode.starts_with('a') { " (append is not supported, as in KvikIO)" } else { "" }
    )]
    OpenMode { mode: String },

    /// `open(2)` failed.
    #[error("cannot open {} (mode {mode}{}): {source}", path.display(),
        if *direct { ", O_DIRECT" } else { "" })]
    Open {
        path: PathBuf,
        mode: crate::OpenMode,
        /// Whether this was the O_DIRECT descriptor.
        direct: bool,
        #[source]
        source: std::io::Error,
    },

    /// A system call on an open file failed.
    #[error("{operation} of {} at offset {offset} failed ({syscall}): {source}", path.display())]
    Io {
        operation: Operation,
        /// The system call: `pread`, `pwrite`, `fstat`, `fsync`.
        syscall: &'static str,
        path: PathBuf,
        offset: u64,
        /// The raw `errno`, when the OS gave one (also inside `source`).
        errno: Option<i32>,
        #[source]
        source: std::io::Error,
    },

    /// `read_exact`-style calls: the file ended before the request did.
    #[error(
        "{}: end of file at offset {reached}, but the read asked for bytes {offset}..{end} \
         ({got} of {requested} bytes read)",
        path.display(), end = offset + requested, got = reached - offset
    )]
    UnexpectedEof {
        path: PathBuf,
        /// Where the request started.
        offset: u64,
        requested: u64,
        /// Where reading stopped: the end of the file.
        reached: u64,
    },

    /// The request itself is impossible (offsets past what `off_t` holds).
    #[error("{operation} of {size} bytes at offset {offset} in {}: {problem}", path.display())]
    InvalidRequest {
        operation: Operation,
        path: PathBuf,
        offset: u64,
        size: u64,
        problem: &'static str,
    },

    /// A batch entry is impossible (see [`crate::batch`]): the whole batch is
    /// refused before any I/O.
    #[error("batch read of {}: entry {entry}: {problem}", path.display())]
    InvalidBatch {
        path: PathBuf,
        /// The entry's index in the batch.
        entry: usize,
        problem: crate::batch::BatchProblem,
    },

    /// Reading a file opened write-only, or writing one opened read-only.
    #[error("cannot {operation} {}: it was opened with mode {mode}", path.display())]
    ModeForbids {
        operation: Operation,
        path: PathBuf,
        mode: crate::OpenMode,
    },

    /// Compat mode OFF demands cuFile, and cuFile cannot be used for this file.
    #[error("{}: {source}", path.display())]
    CuFileRequired {
        path: PathBuf,
        #[source]
        source: CuFileRequired,
    },

    /// Device memory needs a CUDA driver with a GPU, and there is none.
    #[error("device memory needs a CUDA driver with a GPU: {0}")]
    NoCuda(#[from] gds_core::cuda::CudaUnavailable),

    /// A CUDA driver call failed.
    #[error("{call} failed: CUDA error {code}{}", context(path, *offset))]
    Cuda {
        call: &'static str,
        code: gds_core::cuda::CudaResult,
        /// The file of the request, when the call served one.
        path: Option<PathBuf>,
        offset: Option<u64>,
    },

    /// The device range of a request is not device memory of that GPU, or
    /// does not fit in its allocation: refused before any I/O.
    #[error(
        "{operation} of {len} bytes at offset {offset} of {}: device buffer {ptr:#x} on GPU {ordinal}: {problem}",
        path.display()
    )]
    DeviceBuffer {
        operation: Operation,
        path: PathBuf,
        offset: u64,
        ordinal: u32,
        ptr: u64,
        len: usize,
        problem: String,
    },

    /// cuFile failed (driver, registration, read or write), with cuFile's
    /// own codes and, where it explained itself, cufile.log's words.
    #[error("{}: {source}", path.display())]
    CuFile {
        path: PathBuf,
        #[source]
        source: Box<gds_core::Error>,
    },

    /// A background request's result was asked for again after it had been
    /// taken (by `try_wait`, `wait` or `.await`): it is handed out once.
    #[error("the result of this request was already taken (by try_wait, wait or .await)")]
    ResultTaken,

    /// The I/O thread pool could not start.
    #[error("cannot start the I/O thread pool with {threads} threads: {source}")]
    ThreadPool {
        threads: usize,
        #[source]
        source: rayon::ThreadPoolBuildError,
    },
}

impl Error {
    /// The raw OS error number behind this error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Io { errno, .. } => *errno,
            Error::Open { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

fn context(path: &Option<PathBuf>, offset: Option<u64>) -> String {
    match (path, offset) {
        (Some(p), Some(o)) => format!(" ({} at offset {o})", p.display()),
        (Some(p), None) => format!(" ({})", p.display()),
        _ => String::new(),
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A value the user gave, quoted for an error message: whole when short;
/// when long (a variable holding a file's worth of junk, or control
/// characters that quote as `\u{7f}` each), its start and its length, so
/// that the message stays readable: at most about 80 characters.
pub(crate) fn quote_value(value: &str) -> String {
    const MAX: usize = 80;
    let quoted = format!("{value:?}");
    if quoted.chars().count() <= MAX {
        return quoted;
    }
    let mut start = String::from("\"");
    for c in value.chars() {
        let escaped: String = match c {
            '\'' => "'".into(),
            c => c.escape_debug().collect(),
        };
        if start.chars().count() + escaped.chars().count() > MAX - 20 {
            break;
        }
        start.push_str(&escaped);
    }
    format!("{start}\"… ({} bytes)", value.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_quoted_by_their_start_and_length() {
        assert_eq!(quote_value("4x"), "\"4x\"");
        let long = "7".repeat(1 << 20);
        assert_eq!(
            quote_value(&long),
            format!("\"{}\"… (1048576 bytes)", "7".repeat(59))
        );
        // Escapes count: 66 control characters quote as 396 characters.
        let controls = format!("11{}.1", "\u{7f}".repeat(66));
        let quoted = quote_value(&controls);
        assert!(quoted.starts_with("\"11\\u{7f}"), "{quoted}");
        assert!(quoted.ends_with("… (70 bytes)"), "{quoted}");
        assert!(quoted.chars().count() <= 80, "{quoted}");
        // Short values keep std's quoting exactly, quotes and all.
        assert_eq!(quote_value("it's \"x\""), "\"it's \\\"x\\\"\"");
    }
}
