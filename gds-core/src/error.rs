//! gds-core's error type: one enum, with the operation, the path, the offset
//! and the raw codes in its variants.

use std::path::PathBuf;

use cufile_sys::bindings::{CUfileError_t, CUfileOpError};
use cufile_sys::{LoadError, MissingSymbol};

use crate::cuda::CudaUnavailable;
use crate::log::LogExcerpt;

/// Everything that can go wrong in gds-core: libcufile missing or lacking
/// a function, no CUDA driver, a cuFile call that failed (with its status,
/// the path and cufile.log's lines about it), an I/O error with its offset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// libcufile could not be loaded.
    #[error(transparent)]
    Library(#[from] LoadError),

    /// The loaded libcufile lacks a function this operation needs.
    #[error(transparent)]
    MissingSymbol(#[from] MissingSymbol),

    /// No CUDA driver or no GPU: the cuFile driver is never opened then
    /// (libcufile would spin forever).
    #[error("cuFile cannot be opened: {0}")]
    NoCuda(#[from] CudaUnavailable),

    /// A cuFile control call returned an error status.
    #[error("{operation} failed: {status}{}", describe_context(.path, .log))]
    CuFile {
        operation: &'static str,
        status: CUfileError_t,
        /// The file concerned, for file-handle operations.
        path: Option<PathBuf>,
        /// What cufile.log said while the call ran (cuFile explains itself only there).
        log: Option<LogExcerpt>,
    },

    /// A cuFile read or write failed.
    #[error("{operation} {} at file offset {file_offset} ({size} bytes): {}", .path.display(), describe_io(*.code, *.errno))]
    Io {
        operation: &'static str,
        path: PathBuf,
        file_offset: u64,
        size: usize,
        /// The cuFile status, for negative returns in cuFile's range.
        code: Option<CUfileOpError>,
        /// The errno, for `-1` returns.
        errno: Option<i32>,
    },

    /// Opening the file (with O_DIRECT) failed before cuFile saw it.
    #[error("cannot open {} for cuFile: {source}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The device range overlaps one registered through this process.
    #[error(
        "device buffer {base:#x}+{size} overlaps the registered buffer {existing_base:#x}+{existing_size}"
    )]
    AlreadyRegistered {
        base: u64,
        size: usize,
        existing_base: u64,
        existing_size: usize,
    },

    /// The driver session this call went through was shut down
    /// ([`Driver::shutdown`](crate::Driver::shutdown)); open a new one.
    #[error("{operation}: the cuFile driver was shut down")]
    DriverClosed { operation: &'static str },
    /// The cufile.json cuFile would read is not a regular file (a FIFO, a
    /// device): libcufile would wait for a FIFO's writer, or read a device
    /// without end, inside `cuFileDriverOpen`, so the driver is not opened.
    #[error(
        "cuFile would read its configuration from {} ({found_by}), which is {kind}, not a \
         regular file: cuFileDriverOpen would wait on it, so it is not called",
        .path.display()
    )]
    ConfigNotAFile {
        path: PathBuf,
        found_by: cufile_config::LocationSource,
        kind: cufile_config::FileKind,
    },
    /// The cufile.json cuFile would read is a regular file larger than any
    /// cufile.json ([`cufile_config::MAX_FILE_BYTES`]): libcufile parses
    /// it inside `cuFileDriverOpen` without a bound (a 100 MB file kept it
    /// busy for minutes on an H200 machine), so the driver is not opened.
    #[error(
        "cuFile would read its configuration from {} ({found_by}), which is {size} bytes, \
         larger than the {limit} bytes of any cufile.json: cuFileDriverOpen would spend \
         minutes parsing it, so it is not called",
        .path.display()
    )]
    ConfigTooLarge {
        path: PathBuf,
        found_by: cufile_config::LocationSource,
        size: u64,
        limit: u64,
    },
    /// A batch call refused before cuFile saw it (see [`crate::batch`]).
    #[error("cuFile batch: {problem}")]
    Batch { problem: crate::batch::BatchProblem },

    /// Statistics cannot be read from this library.
    #[error("cuFile statistics unavailable: {reason}")]
    StatsUnavailable { reason: String },
}

/// `Result` with gds-core's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn describe_context(path: &Option<PathBuf>, log: &Option<LogExcerpt>) -> String {
    let mut out = String::new();
    if let Some(path) = path {
        out.push_str(&format!(" for {}", path.display()));
    }
    if let Some(log) = log {
        out.push_str(&format!("; {log}"));
    }
    out
}

fn describe_io(code: Option<CUfileOpError>, errno: Option<i32>) -> String {
    match (code, errno) {
        (Some(code), _) => code.to_string(),
        (None, Some(errno)) => std::io::Error::from_raw_os_error(errno).to_string(),
        (None, None) => "unknown error".into(),
    }
}
