//! Command errors, and the one rule that turns an error into an exit code.
//!
//! - **2**: the request cannot be valid on this machine as given, and will
//!   not become valid by trying again: a wrong argument or `KVIKIO_*` value;
//!   a file or directory it names that does not exist, is of the wrong kind
//!   (a FIFO where a file is read, a file where a directory is needed), is a
//!   symbolic-link loop, cannot be opened with the caller's permissions or
//!   lies on a read-only filesystem; a cufile.json that cannot be read or
//!   that cuFile would refuse, used to plan (wherever it came from); what
//!   this machine cannot do (device memory without a GPU, compat mode OFF
//!   without cuFile); for a remote object, a URL that cannot be read, a
//!   server that says the object does not exist (404) or refuses us
//!   (401/403) or refuses the request as asked (another 4xx, a range past
//!   the object's end, no byte ranges, no size).
//! - **1**: it failed while running, or ran out of something that may be
//!   there next time: an I/O error, a full disk (found by the free-space
//!   check before writing or by the write itself), memory the system would
//!   not give, a file that changed under the command, a report that could
//!   not be written; for a remote object, the network (connection refused
//!   or reset, DNS, TLS), a timeout, a body cut short or too long, a
//!   server error (5xx) or a 408/429 after every attempt; and a verdict the command was asked for that came out
//!   negative (`config validate` of a file cuFile refuses).
//!
//! Errors stay typed (the kvik-policy error, the cufile-config error, the
//! `errno` of a system call) until [`CliError::code`] decides, so that the
//! rule lives here and nowhere else.

use std::fmt;
use std::path::{Path, PathBuf};

use kvik_policy::Error as PolicyError;

use crate::input::Why;
use crate::output::escaped;

/// Exit code: the request cannot be valid on this machine as given.
pub const INVALID: i32 = 2;
/// Exit code: it failed while running.
pub const FAILED: i32 = 1;

/// A failed command.
#[derive(Debug)]
#[non_exhaustive]
pub enum CliError {
    /// The request cannot be valid as given (exit 2), in words.
    Usage(String),
    /// It failed while running (exit 1), in words.
    Failed(String),
    /// A path the user named cannot be used for what it was named for.
    Path {
        /// What the path was given as: `FILE`, `--from`, `PATH`.
        what: String,
        path: PathBuf,
        problem: PathProblem,
    },
    /// kvik-policy failed; its kind decides the code.
    Policy(PolicyError),
    /// Reading a remote object failed (kvik-remote); its kind decides the
    /// code. (kvik-remote's `Policy` errors become [`CliError::Policy`].)
    Remote(kvik_remote::Error),
    /// A cufile.json could not be read (`context`: how it was chosen).
    Config {
        error: cufile_config::ConfigError,
        context: String,
    },
    /// The report could not be written to stdout (a full device, an I/O
    /// error; a reader that went away is not an error, see `output`).
    Output(std::io::Error),
    /// An error, with what it means for a file the command was writing
    /// (`DST is unchanged`).
    Noted { error: Box<CliError>, note: String },
}

/// Why a named path cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum PathProblem {
    /// A system call on it failed.
    Io(std::io::Error),
    /// It is not a regular file (a FIFO, a device, a socket, a directory).
    NotAFile(cufile_config::FileKind),
    /// Larger than anything the command reads of this kind.
    TooLarge { limit: u64 },
}

impl CliError {
    /// `e` for a path given as `what`.
    pub fn io(what: &str, path: &Path, e: std::io::Error) -> CliError {
        CliError::Path {
            what: what.to_owned(),
            path: path.to_path_buf(),
            problem: PathProblem::Io(e),
        }
    }

    /// This error, noting what it means for a file being written.
    pub fn with_note(self, note: String) -> CliError {
        match self {
            CliError::Usage(m) => CliError::Usage(format!("{m} ({note})")),
            CliError::Failed(m) => CliError::Failed(format!("{m} ({note})")),
            error => CliError::Noted {
                error: Box::new(error),
                note,
            },
        }
    }

    /// The exit code: [`INVALID`] (2) or [`FAILED`] (1), by the rule at the
    /// top of this module.
    pub fn code(&self) -> i32 {
        match self {
            CliError::Usage(_) => INVALID,
            CliError::Failed(_) | CliError::Output(_) => FAILED,
            CliError::Path { problem, .. } => match problem {
                PathProblem::Io(e) => errno_code(e.raw_os_error()),
                PathProblem::NotAFile(_) | PathProblem::TooLarge { .. } => INVALID,
            },
            CliError::Policy(e) => policy_code(e),
            CliError::Remote(e) => remote_code(e),
            CliError::Config { error, .. } => match error {
                cufile_config::ConfigError::Read { source, .. } => {
                    errno_code(source.raw_os_error())
                }
                _ => INVALID,
            },
            CliError::Noted { error, .. } => error.code(),
        }
    }
}

/// The code for a system call that failed with `errno` on a path the user
/// named: 2 when the path cannot serve as given (missing, wrong kind, no
/// permission, read-only, a loop), 1 when the system failed (EIO, ENOSPC,
/// ENOMEM, …) or there is no errno.
pub fn errno_code(errno: Option<i32>) -> i32 {
    match errno {
        Some(
            libc::ENOENT
            | libc::ENOTDIR
            | libc::EISDIR
            | libc::ELOOP
            | libc::ENAMETOOLONG
            | libc::EACCES
            | libc::EPERM
            | libc::EROFS
            | libc::ETXTBSY
            | libc::ENXIO
            | libc::ENODEV
            | libc::EEXIST,
        ) => INVALID,
        _ => FAILED,
    }
}

/// The code for a kvik-policy error.
fn policy_code(e: &PolicyError) -> i32 {
    match e {
        PolicyError::Environment { .. }
        | PolicyError::InvalidSetting { .. }
        | PolicyError::OpenMode { .. }
        | PolicyError::InvalidRequest { .. }
        | PolicyError::ModeForbids { .. }
        | PolicyError::CuFileRequired { .. }
        | PolicyError::NoCuda(_) => INVALID,
        PolicyError::Open { source, .. } => errno_code(source.raw_os_error()),
        _ => FAILED,
    }
}

/// The code for a kvik-remote error: 2 when the request as given cannot
/// succeed (a bad URL, a missing object, no permission, another 4xx, a
/// range past the end, a server without byte ranges or sizes, device memory
/// where kvik-remote reads only host memory); 1 when the network or the
/// server failed while it ran (it may work next time).
fn remote_code(e: &kvik_remote::Error) -> i32 {
    use kvik_remote::Error as Remote;
    match e {
        Remote::InvalidUrl { .. }
        | Remote::Configure { .. }
        | Remote::NotFound { .. }
        | Remote::PermissionDenied { .. }
        | Remote::RangeNotHonoured { .. }
        | Remote::PastEnd { .. }
        | Remote::UnknownSize { .. }
        | Remote::DeviceMemoryUnsupported { .. } => INVALID,
        // 408 Request Timeout and 429 Too Many Requests say "later".
        Remote::Status { status, .. }
            if (400..500).contains(status) && ![408, 429].contains(status) =>
        {
            INVALID
        }
        Remote::Policy(e) => policy_code(e),
        _ => FAILED,
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Failed(m) => f.write_str(m),
            CliError::Path {
                what,
                path,
                problem,
            } => {
                let shown = escaped(path);
                match problem {
                    PathProblem::Io(e) => match crate::input::explain(path, e) {
                        Why::Missing => write!(f, "{what} {shown} does not exist"),
                        why => write!(f, "{what} {shown}: {why}"),
                    },
                    PathProblem::NotAFile(kind) => {
                        write!(f, "{what} {shown} is {kind}, not a regular file")
                    }
                    PathProblem::TooLarge { limit } => write!(
                        f,
                        "{what} {shown} is larger than the {} this command reads",
                        kvik_policy::Size(*limit)
                    ),
                }
            }
            CliError::Policy(e) => match e {
                PolicyError::Open {
                    path,
                    mode,
                    direct,
                    source,
                } => {
                    write!(
                        f,
                        "cannot open {} (mode {mode}{}): ",
                        escaped(path),
                        if *direct { ", O_DIRECT" } else { "" },
                    )?;
                    let creates = matches!(
                        mode,
                        kvik_policy::OpenMode::Write | kvik_policy::OpenMode::WriteRead
                    );
                    match crate::input::explain(path, source) {
                        // Its directory exists (else the reason names it),
                        // and refuses new files (/proc, /sys).
                        Why::Missing if creates => {
                            write!(f, "its directory does not take new files ({source})")
                        }
                        why => write!(f, "{why}"),
                    }
                }
                e => write!(f, "{e}"),
            },
            CliError::Config { error, context } => {
                match error {
                    cufile_config::ConfigError::Read { path, source } => write!(
                        f,
                        "cannot read {}: {}",
                        escaped(path),
                        crate::input::explain(path, source)
                    ),
                    error => write!(f, "{error}"),
                }?;
                match context.is_empty() {
                    true => Ok(()),
                    false => write!(f, " ({context})"),
                }
            }
            CliError::Remote(e) => write!(f, "{e}"),
            CliError::Output(e) => write!(f, "cannot write the report to stdout: {e}"),
            CliError::Noted { error, note } => write!(f, "{error} ({note})"),
        }
    }
}

impl From<PolicyError> for CliError {
    fn from(e: PolicyError) -> CliError {
        CliError::Policy(e)
    }
}

impl From<kvik_remote::Error> for CliError {
    fn from(e: kvik_remote::Error) -> CliError {
        match e {
            // A local file behind a `Source`, or settings: kvik-policy's own.
            kvik_remote::Error::Policy(e) => CliError::Policy(*e),
            e => CliError::Remote(e),
        }
    }
}

/// Print a value as pretty JSON on stdout (kept under this name for the
/// commands that call it; see [`crate::output::json`]).
pub fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    crate::output::json(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule, row by row: an errno on a named path, and the code it gives.
    #[test]
    fn errno_rows_follow_the_rule() {
        for (errno, code) in [
            (libc::ENOENT, INVALID),
            (libc::ENOTDIR, INVALID),
            (libc::EISDIR, INVALID),
            (libc::ELOOP, INVALID),
            (libc::ENAMETOOLONG, INVALID),
            (libc::EACCES, INVALID),
            (libc::EPERM, INVALID),
            (libc::EROFS, INVALID),
            (libc::ETXTBSY, INVALID),
            (libc::ENXIO, INVALID),
            (libc::EIO, FAILED),
            (libc::ENOSPC, FAILED),
            (libc::EDQUOT, FAILED),
            (libc::ENOMEM, FAILED),
            (libc::EFBIG, FAILED),
            (libc::EINTR, FAILED),
            (libc::ESTALE, FAILED),
        ] {
            let e = std::io::Error::from_raw_os_error(errno);
            let shown = e.to_string();
            let path = Path::new("/x");
            assert_eq!(errno_code(Some(errno)), code, "{shown}");
            assert_eq!(CliError::io("FILE", path, e).code(), code, "{shown}");
            // The same errno through kvik-policy's open and cufile-config's
            // read gives the same code: one rule, wherever the error arose.
            let open = PolicyError::Open {
                path: path.into(),
                mode: kvik_policy::OpenMode::Read,
                direct: false,
                source: std::io::Error::from_raw_os_error(errno),
            };
            assert_eq!(CliError::Policy(open).code(), code, "{shown}");
            let read = cufile_config::ConfigError::Read {
                path: path.into(),
                source: std::io::Error::from_raw_os_error(errno),
            };
            let config = CliError::Config {
                error: read,
                context: String::new(),
            };
            assert_eq!(config.code(), code, "{shown}");
        }
        assert_eq!(errno_code(None), FAILED);
    }

    /// The rule for remote objects, row by row: each kvik-remote error and
    /// the code it gives.
    #[test]
    fn remote_rows_follow_the_rule() {
        use kvik_remote::{ByteRange, Error as Remote};
        let url = || "http://127.0.0.1:9/data.bin".to_string();
        let bytes = ByteRange { start: 0, end: 100 };
        let range = Some(bytes);
        let below_http = || {
            Box::new(object_store::Error::Generic {
                store: "HTTP",
                source: "connect: Connection refused (os error 111)".into(),
            })
        };
        let status = |status| Remote::Status {
            url: url(),
            range,
            status,
            attempts: vec![],
        };
        let rows = [
            // The request as given cannot succeed: 2.
            (
                Remote::InvalidUrl {
                    url: "s3://".into(),
                    problem: "no bucket".into(),
                },
                INVALID,
            ),
            (
                Remote::Configure {
                    url: url(),
                    source: below_http(),
                },
                INVALID,
            ),
            (
                Remote::NotFound {
                    url: url(),
                    status: 404,
                    range: None,
                },
                INVALID,
            ),
            (
                Remote::PermissionDenied {
                    url: url(),
                    status: 403,
                    range: None,
                },
                INVALID,
            ),
            (
                Remote::PermissionDenied {
                    url: url(),
                    status: 401,
                    range,
                },
                INVALID,
            ),
            (status(400), INVALID),
            (status(410), INVALID),
            (status(416), INVALID),
            (
                Remote::RangeNotHonoured {
                    url: url(),
                    range: bytes,
                    problem: "200 for a range".into(),
                },
                INVALID,
            ),
            (
                Remote::PastEnd {
                    url: url(),
                    offset: 90,
                    len: 20,
                    nbytes: 100,
                },
                INVALID,
            ),
            (
                Remote::UnknownSize {
                    url: url(),
                    problem: "no Content-Length".into(),
                },
                INVALID,
            ),
            (Remote::DeviceMemoryUnsupported { url: url() }, INVALID),
            (
                Remote::from(PolicyError::InvalidSetting {
                    setting: "http_timeout",
                    value: "0".into(),
                    rule: "must be > 0",
                }),
                INVALID,
            ),
            // The network or the server failed while it ran: 1.
            (status(408), FAILED),
            (status(429), FAILED),
            (status(500), FAILED),
            (status(503), FAILED),
            (
                Remote::Timeout {
                    url: url(),
                    range,
                    timeout_seconds: 5.0,
                    attempts: vec![],
                },
                FAILED,
            ),
            (
                Remote::Truncated {
                    url: url(),
                    range: bytes,
                    expected: 100,
                    received: 40,
                    cause: Some("connection reset".into()),
                    attempts: vec![],
                },
                FAILED,
            ),
            (
                Remote::Overlong {
                    url: url(),
                    range: bytes,
                    expected: 100,
                },
                FAILED,
            ),
            (
                Remote::Transport {
                    url: url(),
                    range,
                    problem: "connect: Connection refused".into(),
                    attempts: vec![],
                    source: below_http(),
                },
                FAILED,
            ),
            (Remote::Runtime("no threads".into()), FAILED),
        ];
        for (error, code) in rows {
            let shown = error.to_string();
            let cli = CliError::from(error);
            assert_eq!(cli.code(), code, "{shown}");
            // The message is kvik-remote's, naming the object.
            assert_eq!(cli.to_string(), shown);
        }
        // A local file behind a Source keeps kvik-policy's rule (and its
        // message): a missing file is 2 as for every other command.
        let open = Remote::from(PolicyError::Open {
            path: "/x".into(),
            mode: kvik_policy::OpenMode::Read,
            direct: false,
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        });
        let cli = CliError::from(open);
        assert!(matches!(cli, CliError::Policy(_)), "{cli:?}");
        assert_eq!(cli.code(), INVALID);
    }

    #[test]
    fn a_note_keeps_the_code() {
        let e = CliError::io(
            "DST",
            Path::new("/x"),
            std::io::Error::from_raw_os_error(libc::EROFS),
        );
        let noted = e.with_note("/x is unchanged".into());
        assert_eq!(noted.code(), INVALID);
        assert!(noted.to_string().ends_with("(/x is unchanged)"), "{noted}");
        let output = CliError::Output(std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(output.with_note("n".into()).code(), FAILED);
    }
}
