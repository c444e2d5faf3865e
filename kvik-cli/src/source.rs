//! What `kvik copy` and `kvik read` read from, and how its size is known.
//!
//! | SRC | size | `copy` | `read` |
//! |---|---|---|---|
//! | a regular file | its length | through the stack; refused afterwards if it changed meanwhile | through the stack |
//! | a block device | its capacity (`lseek` to the end) | as a file | as a file |
//! | a file that reports no true size (proc, sysfs, …; or length 0 yet data) | unknown | read in order to its end | refused |
//! | a pipe, or a FIFO with a writer | unknown | read in order to its end | refused |
//! | a FIFO with no writer | — | refused (kvik does not wait for a writer) | refused |
//! | a character device (`/dev/zero`, a terminal) | unknown, maybe endless | only with `--size`: that many bytes, in order | refused |
//! | a directory or a socket | — | refused | refused |
//!
//! The path is opened once, with `O_NONBLOCK` so that a FIFO without a
//! writer cannot hang the open, and only that descriptor is used after.
//!
//! A URL (`s3://`, `http://`, `https://`) is a remote object, read through
//! kvik-remote in parallel ranged GETs: [`open_remote`].

use std::fs::File;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::CliError;

/// What kind of thing a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    File,
    BlockDevice,
    /// A regular file whose length is not its content (proc, sysfs, …).
    PseudoFile,
    /// An anonymous pipe (`/dev/stdin` of `producer | kvik copy`).
    Pipe,
    /// A named pipe.
    Fifo,
    CharacterDevice,
    /// An object on S3 or an HTTP(S) server (kvik-remote).
    Remote,
}

impl SourceKind {
    /// `a pipe`, for messages.
    pub fn described(self) -> &'static str {
        match self {
            SourceKind::File => "a file",
            SourceKind::BlockDevice => "a block device",
            SourceKind::PseudoFile => "a file that reports no true size (proc, sysfs, …)",
            SourceKind::Pipe => "a pipe",
            SourceKind::Fifo => "a FIFO",
            SourceKind::CharacterDevice => "a character device",
            SourceKind::Remote => "a remote object",
        }
    }
}

/// An open source.
#[derive(Debug)]
pub struct Source {
    pub path: PathBuf,
    pub kind: SourceKind,
    /// Bytes, where the source has a size.
    pub len: Option<u64>,
    file: File,
    /// Size and modification time at open, to tell a file that changed.
    at_open: (i64, i64, u64),
    identity: (u64, u64),
    /// Bytes a probe read ahead of the stream (a FIFO's first bytes).
    read_ahead: Vec<u8>,
}

/// Filesystems whose files' lengths say nothing of their content.
const PSEUDO_FILESYSTEMS: [(rustix::fs::FsWord, &str); 9] = [
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0x6265_6570, "configfs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0xcafe_4a11, "bpf"),
];

/// `pipefs`: anonymous pipes (a FIFO lives on the filesystem holding it).
const PIPEFS_MAGIC: rustix::fs::FsWord = 0x5049_5045;

impl Source {
    /// Open `path` (`what`: `SRC` or `FILE`, for messages) and find out what
    /// it is.
    pub fn open(path: &Path, what: &str) -> Result<Source, CliError> {
        use rustix::io::Errno;
        let shown = crate::output::escaped(&path);
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| {
            let message = match e {
                Errno::NOENT => format!("{what} {shown} does not exist"),
                Errno::NXIO => format!("{what} {shown} is a socket (kvik reads files)"),
                Errno::LOOP => format!("{what} {shown}: a symlink loop"),
                _ => format!("{what} {shown}: {}", io::Error::from(e)),
            };
            match e {
                Errno::NOENT
                | Errno::NXIO
                | Errno::LOOP
                | Errno::NOTDIR
                | Errno::ACCESS
                | Errno::PERM
                | Errno::NAMETOOLONG => CliError::Usage(message),
                _ => CliError::Failed(message),
            }
        })?;
        let failed = |call: &str, e: Errno| {
            CliError::Failed(format!("{what} {shown}: {call}: {}", io::Error::from(e)))
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| failed("fstat", e))?;
        let filesystem = rustix::fs::fstatfs(&fd).map(|s| s.f_type).ok();
        let file = File::from(fd);
        let (kind, len) = match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                return Err(CliError::Usage(format!(
                    "{what} {shown} is a directory, not a file"
                )));
            }
            FileType::RegularFile
                if filesystem.is_some_and(|f| PSEUDO_FILESYSTEMS.iter().any(|(m, _)| *m == f)) =>
            {
                (SourceKind::PseudoFile, None)
            }
            FileType::RegularFile if st.st_size == 0 && has_data(&file) => {
                (SourceKind::PseudoFile, None)
            }
            FileType::RegularFile => (SourceKind::File, Some(st.st_size as u64)),
            FileType::BlockDevice => {
                let end = rustix::fs::seek(&file, rustix::fs::SeekFrom::End(0))
                    .map_err(|e| failed("lseek to the end", e))?;
                (SourceKind::BlockDevice, Some(end))
            }
            FileType::Fifo if filesystem == Some(PIPEFS_MAGIC) => (SourceKind::Pipe, None),
            FileType::Fifo => (SourceKind::Fifo, None),
            FileType::CharacterDevice => (SourceKind::CharacterDevice, None),
            _ => {
                return Err(CliError::Usage(format!(
                    "{what} {shown} is not a file (a socket?)"
                )));
            }
        };
        // Only a FIFO's first read must not wait (`start_stream`); every
        // other kind reads as usual from here on.
        if kind != SourceKind::Fifo {
            rustix::fs::fcntl_setfl(&file, OFlags::empty()).map_err(|e| failed("fcntl", e))?;
        }
        Ok(Source {
            path: path.to_path_buf(),
            kind,
            len,
            file,
            at_open: (
                st.st_size as i64,
                st.st_mtime as i64,
                st.st_mtime_nsec as u64,
            ),
            identity: (st.st_dev as u64, st.st_ino as u64),
            read_ahead: vec![],
        })
    }

    /// (device, inode): DST must not be this file.
    pub fn identity(&self) -> (u64, u64) {
        self.identity
    }

    /// Whether the source is read through the stack (at offsets).
    pub fn positional(&self) -> bool {
        matches!(self.kind, SourceKind::File | SourceKind::BlockDevice)
    }

    /// The open file (a duplicate descriptor), for a `FileHandle`.
    pub fn file(&self) -> Result<File, CliError> {
        self.file.try_clone().map_err(|e| {
            CliError::Failed(format!("{}: dup: {e}", crate::output::escaped(&self.path)))
        })
    }

    /// For a regular file read through the stack: fail if its size or
    /// modification time moved since the open (the bytes read may mix old
    /// and new content, or miss some).
    pub fn unchanged(&self) -> Result<(), CliError> {
        if self.kind != SourceKind::File {
            return Ok(());
        }
        let st = rustix::fs::fstat(&self.file).map_err(|e| {
            CliError::Failed(format!(
                "{}: fstat: {}",
                crate::output::escaped(&self.path),
                io::Error::from(e)
            ))
        })?;
        let now = (
            st.st_size as i64,
            st.st_mtime as i64,
            st.st_mtime_nsec as u64,
        );
        if now != self.at_open {
            return Err(CliError::Failed(format!(
                "{} changed while it was read ({} bytes at the start, {} now): the copy may not \
                 match any one version of it",
                crate::output::escaped(&self.path),
                self.at_open.0,
                now.0
            )));
        }
        Ok(())
    }

    /// Get ready to read a stream in order: a FIFO's first bytes are read
    /// without waiting, to tell "no writer" (end of file at once) from "a
    /// writer, no data yet"; then reads wait as usual.
    pub fn start_stream(&mut self) -> Result<(), CliError> {
        let shown = crate::output::escaped(&self.path);
        if self.kind == SourceKind::Fifo {
            let mut first = vec![0u8; 64 << 10];
            match read_retrying(&mut self.file, &mut first) {
                Ok(0) => {
                    return Err(CliError::Failed(format!(
                        "{shown} is a FIFO with no writer: nothing to read (kvik does not wait \
                         for one)"
                    )));
                }
                Ok(n) => {
                    first.truncate(n);
                    self.read_ahead = first;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(CliError::Failed(format!("{shown}: read: {e}"))),
            }
        }
        rustix::fs::fcntl_setfl(&self.file, OFlags::empty())
            .map_err(|e| CliError::Failed(format!("{shown}: fcntl: {}", io::Error::from(e))))
    }

    /// Read the next bytes of a stream into `buf`, filling it unless the
    /// stream ends first; returns how many (0 at the end).
    pub fn read_stream(&mut self, buf: &mut [u8]) -> Result<usize, CliError> {
        let mut done = 0;
        if !self.read_ahead.is_empty() {
            let n = self.read_ahead.len().min(buf.len());
            buf[..n].copy_from_slice(&self.read_ahead[..n]);
            self.read_ahead.drain(..n);
            done = n;
        }
        while done < buf.len() {
            match read_retrying(&mut self.file, &mut buf[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) => {
                    return Err(CliError::Failed(format!(
                        "{}: read after {done} bytes of this window: {e}",
                        crate::output::escaped(&self.path)
                    )));
                }
            }
        }
        Ok(done)
    }
}

/// Open the remote object at `url` for reading with the command's
/// settings: `--threads` (`num_threads`) is how many ranged GETs are in
/// flight at once, `--task-size` (`task_size`) how large each is, as
/// KvikIO runs one GET per pool thread and task. The retry policy is
/// kvik-remote's (`KVIKIO_HTTP_*`), credentials the usual `AWS_*`.
pub fn open_remote(
    url: &str,
    settings: &kvik_policy::Settings,
) -> Result<kvik_remote::Source, CliError> {
    let file = kvik_remote::RemoteOptions::new()
        .max_in_flight(settings.num_threads())
        .task_size(settings.task_size())
        .open(url)?;
    Ok(kvik_remote::Source::Remote(file))
}

/// `read`, retried on EINTR.
fn read_retrying(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Whether a regular file of length 0 still gives bytes (a pseudo-file the
/// pseudo-filesystem list does not know).
fn has_data(file: &File) -> bool {
    use std::os::unix::fs::FileExt as _;
    let mut byte = [0u8; 1];
    matches!(file.read_at(&mut byte, 0), Ok(1))
}
