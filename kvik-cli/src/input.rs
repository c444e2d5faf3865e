//! Paths the user names, opened safely and explained when they cannot be
//! used.
//!
//! A file the CLI reads for its content (a saved `kvik bench` run, KvikIO's
//! results, cufile.json) is read by `cufile_config::read_regular_file`:
//! opened with `O_NONBLOCK` (opening a FIFO to read otherwise waits for a
//! writer), the opened descriptor checked to be a regular file (not the
//! path: it may change in between), and at most a limit read (`/dev/zero`
//! and `/proc` files do not say how much they hold).

use std::fmt;
use std::path::{Path, PathBuf};

use cufile_config::FileKind;

use crate::CliError;
use crate::error::PathProblem;
use crate::output::escaped;

/// The largest results file `kvik bench --from` / `--kvikio` reads: 16 MiB
/// (the committed sweeps are under 100 KiB).
pub const MAX_RESULTS_BYTES: u64 = 16 << 20;

/// The text of the regular file at `path` (given as `what`), at most
/// `limit` bytes.
pub fn read_text(what: &str, path: &Path, limit: u64) -> Result<String, CliError> {
    let bytes = read_regular_file(what, path, limit)?;
    String::from_utf8(bytes).map_err(|e| {
        CliError::Usage(format!(
            "{what} {}: not UTF-8 text (invalid byte at offset {})",
            escaped(path),
            e.utf8_error().valid_up_to()
        ))
    })
}

fn read_regular_file(what: &str, path: &Path, limit: u64) -> Result<Vec<u8>, CliError> {
    use cufile_config::ConfigError;
    cufile_config::read_regular_file(path, limit).map_err(|e| {
        let problem = match e {
            ConfigError::NotAFile { kind, .. } => PathProblem::NotAFile(kind),
            ConfigError::TooLarge { .. } => PathProblem::TooLarge { limit },
            ConfigError::Read { source, .. } => PathProblem::Io(source),
            other => PathProblem::Io(std::io::Error::other(other)),
        };
        CliError::Path {
            what: what.to_owned(),
            path: path.to_path_buf(),
            problem,
        }
    })
}

/// What kind of thing `path` names (following symbolic links), without
/// opening it: `None` for a regular file.
pub fn kind(what: &str, path: &Path) -> Result<Option<FileKind>, CliError> {
    let meta = std::fs::metadata(path).map_err(|e| CliError::io(what, path, e))?;
    Ok(FileKind::of(&meta.file_type()))
}

/// A directory a file is to be created in, checked: when it cannot be used,
/// the error says what is really wrong (a missing ancestor, an ancestor that
/// is a file, a symlink loop), and for which `destination`.
pub fn directory_for(dir: &Path, destination: &Path) -> Result<(), CliError> {
    let error = match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(meta) => CliError::Usage(format!(
            "directory {} is {}, not a directory",
            escaped(dir),
            FileKind::of(&meta.file_type()).map_or("a regular file", FileKind::describe)
        )),
        Err(e) => CliError::io("directory", dir, e),
    };
    Err(error.with_note(format!("for {}", escaped(destination))))
}

/// Why a system call on `path` failed with `error`, in the terms of the
/// path: which ancestor is missing or is not a directory, a loop.
pub fn explain(path: &Path, error: &std::io::Error) -> Why {
    match error.raw_os_error() {
        Some(libc::ENOENT) => match first_missing(path) {
            Some(missing) if missing != path => Why::MissingAncestor(missing),
            _ => Why::Missing,
        },
        Some(libc::ENOTDIR) => match first_not_a_directory(path) {
            Some((ancestor, kind)) => Why::NotADirectory(ancestor, kind),
            None => Why::Other(error.to_string()),
        },
        Some(libc::ELOOP) => Why::Loop,
        Some(libc::EACCES | libc::EPERM) => Why::Denied,
        Some(libc::EROFS) => Why::ReadOnly,
        Some(libc::ENAMETOOLONG) => Why::NameTooLong,
        Some(libc::ENXIO) => Why::NoReader,
        _ => Why::Other(error.to_string()),
    }
}

/// See [`explain`]. Its `Display` is a clause that follows `PATH: `;
/// [`Why::Missing`] reads "does not exist" after the path itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Why {
    Missing,
    /// An ancestor directory does not exist (the first one that does not).
    MissingAncestor(PathBuf),
    /// An ancestor is not a directory: a regular file, a device, …
    NotADirectory(PathBuf, &'static str),
    Loop,
    Denied,
    ReadOnly,
    NameTooLong,
    /// Opened to write without waiting: a FIFO no process reads, a socket.
    NoReader,
    Other(String),
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Missing => f.write_str("it does not exist"),
            Why::MissingAncestor(dir) => write!(f, "directory {} does not exist", escaped(dir)),
            Why::NotADirectory(ancestor, kind) => {
                write!(f, "{} is {kind}, not a directory", escaped(ancestor))
            }
            Why::Loop => f.write_str(
                "too many levels of symbolic links (a symbolic link that leads back to itself?)",
            ),
            Why::Denied => f.write_str("permission denied"),
            Why::ReadOnly => f.write_str("the filesystem is read-only"),
            Why::NameTooLong => f.write_str("the name is too long for the filesystem"),
            Why::NoReader => f.write_str(
                "nothing reads it (a FIFO with no reader, or a socket, which cannot be opened)",
            ),
            Why::Other(text) => f.write_str(text),
        }
    }
}

/// The shortest prefix of `path` that does not exist (following links).
fn first_missing(path: &Path) -> Option<PathBuf> {
    prefixes(path).find(|p| {
        std::fs::metadata(p)
            .err()
            .is_some_and(|e| e.raw_os_error() == Some(libc::ENOENT))
    })
}

/// The shortest proper prefix of `path` that exists and is not a
/// directory, with what it is.
fn first_not_a_directory(path: &Path) -> Option<(PathBuf, &'static str)> {
    let mut prefixes: Vec<PathBuf> = prefixes(path).collect();
    prefixes.pop();
    prefixes.into_iter().find_map(|p| {
        let meta = std::fs::metadata(&p).ok()?;
        (!meta.is_dir()).then(|| {
            let kind = FileKind::of(&meta.file_type()).map_or("a regular file", FileKind::describe);
            (p, kind)
        })
    })
}

/// `a`, `a/b`, `a/b/c` for `a/b/c` (`/`, `/a`, … for an absolute path).
fn prefixes(path: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    let mut prefix = PathBuf::new();
    path.components().map(move |c| {
        prefix.push(c);
        prefix.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_reason_a_path_cannot_be_used_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let why = |path: &Path| {
            let e = std::fs::metadata(path).unwrap_err();
            explain(path, &e)
        };
        assert_eq!(why(&dir.path().join("missing")), Why::Missing);
        assert_eq!(
            why(&dir.path().join("no/such/x")),
            Why::MissingAncestor(dir.path().join("no"))
        );
        assert_eq!(
            why(&file.join("x/y")),
            Why::NotADirectory(file.clone(), "a regular file")
        );
        assert_eq!(why(&a), Why::Loop);
        assert_eq!(why(&a.join("x")), Why::Loop);
        assert_eq!(
            why(Path::new("/dev/null/x")),
            Why::NotADirectory("/dev/null".into(), "a character device")
        );
    }
}
