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
    /// The path names something other than a regular file: a FIFO (whose
    /// reader waits for a writer forever), a device, a socket, a directory.
    /// Found from the opened descriptor, before a byte is read.
    #[error("{} is {kind}, not a regular file", path.display())]
    NotAFile { path: PathBuf, kind: FileKind },
    /// The file is larger than any cufile.json ([`MAX_FILE_BYTES`](crate::MAX_FILE_BYTES)).
    #[error(
        "{} is {}: larger than the {limit} bytes cufile-config reads (the stock cufile.json \
         is 13 KiB); is it the right file?",
        path.display(),
        match size { Some(n) => format!("{n} bytes"), None => format!("more than {limit} bytes") }
    )]
    TooLarge {
        path: PathBuf,
        /// The file's size, when it said it (`None`: it said less than it
        /// held, as `/proc` files do, or grew while read).
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

/// What a path names when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FileKind {
    Directory,
    /// A named pipe: opening it to read waits for a writer, reading it waits
    /// for data.
    Fifo,
    CharacterDevice,
    BlockDevice,
    Socket,
    /// A symbolic link (seen only where links are not followed).
    Symlink,
}

impl FileKind {
    /// The kind of a file type; `None` for a regular file.
    pub fn of(file_type: &std::fs::FileType) -> Option<FileKind> {
        use std::os::unix::fs::FileTypeExt as _;
        Some(if file_type.is_file() {
            return None;
        } else if file_type.is_dir() {
            FileKind::Directory
        } else if file_type.is_fifo() {
            FileKind::Fifo
        } else if file_type.is_char_device() {
            FileKind::CharacterDevice
        } else if file_type.is_block_device() {
            FileKind::BlockDevice
        } else if file_type.is_socket() {
            FileKind::Socket
        } else {
            FileKind::Symlink
        })
    }

    /// `a FIFO (named pipe)`, `a directory`, …
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::CharacterDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Symlink => "a symbolic link",
        }
    }
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}
