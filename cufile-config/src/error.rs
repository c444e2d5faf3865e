//! The crate's error type.

use std::path::PathBuf;

/// What can go wrong outside the file's content (content problems are
/// [`Diagnostic`](crate::Diagnostic)s, all collected, never an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than any cufile.json ([`MAX_FILE_BYTES`](crate::MAX_FILE_BYTES)).
    #[error(
        "{} is {}: larger than the {limit} bytes cufile-config reads (the stock cufile.json \
         is 13 KiB); is it the right file?",
        path.display(),
        match size { Some(n) => format!("{n} bytes"), None => format!("more than {limit} bytes") }
    )]
    TooLarge {
        path: PathBuf,
        /// The file's size, when it has one (not for devices and pipes).
        size: Option<u64>,
        limit: u64,
    },
    /// An API override names a key libcufile does not read.
    #[error("{path} is not a setting libcufile reads")]
    UnknownSetting { path: String },
    /// An API override names a key no `cuFileSetParameter*` call sets.
    #[error("{path} cannot be set through cuFileSetParameter*")]
    NotSettableThroughApi { path: String },
    /// An API override has a value cuFile would refuse.
    #[error("invalid value for {path}: {message}")]
    InvalidValue { path: String, message: String },
}
