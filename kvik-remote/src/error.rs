//! The crate's one error type: what failed, on which object (its URL, with
//! any signature left out), which byte range, the HTTP status and how many
//! attempts were made.

use crate::report::{AttemptReport, ByteRange};

/// Everything that can go wrong reading a remote object.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Settings (`KVIKIO_*` variables, `KVIKIO_HTTP_*` included, or values
    /// given through the API) that break their rules, or a local file behind
    /// a [`crate::Source`]: kvik-policy's error.
    #[error(transparent)]
    Policy(Box<kvik_policy::Error>),

    /// The text is not a URL we can read.
    #[error("cannot read {url:?}: {problem}")]
    InvalidUrl { url: String, problem: String },

    /// object_store could not be set up for this URL (region, credentials
    /// configuration, TLS).
    #[error("cannot open {url}: {source}")]
    Configure {
        url: String,
        #[source]
        source: Box<object_store::Error>,
    },

    /// The server says the object does not exist (404). Never retried.
    #[error("{url}: not found (HTTP {status}){}", range_text(range))]
    NotFound {
        url: String,
        status: u16,
        range: Option<ByteRange>,
    },

    /// The server refuses us (401 / 403): credentials, signature, expiry.
    /// Never retried.
    #[error(
        "{url}: access denied (HTTP {status}){}: check the credentials (AWS_*) or the URL's signature",
        range_text(range)
    )]
    PermissionDenied {
        url: String,
        status: u16,
        range: Option<ByteRange>,
    },

    /// Any other HTTP error status: one not in `KVIKIO_HTTP_STATUS_CODES`
    /// (not retried), or one that is, on every attempt.
    #[error(
        "{url}{}: HTTP {status} {}",
        range_text(range),
        attempts_text(attempts)
    )]
    Status {
        url: String,
        range: Option<ByteRange>,
        status: u16,
        attempts: Vec<AttemptReport>,
    },

    /// Every attempt ran out of time (`KVIKIO_HTTP_TIMEOUT` each).
    #[error(
        "{url}{}: timed out after {timeout_seconds} s {}",
        range_text(range),
        attempts_text(attempts)
    )]
    Timeout {
        url: String,
        range: Option<ByteRange>,
        timeout_seconds: f64,
        attempts: Vec<AttemptReport>,
    },

    /// The body ended before the range did: a truncated body, a
    /// Content-Length larger than what was sent, a connection closed or
    /// reset mid-body. The bytes that did come are not reported as read.
    #[error(
        "{url}{}: incomplete body: {received} of {expected} bytes arrived{} {}",
        range_text(&Some(*range)),
        cause.as_deref().map(|c| format!(" ({c})")).unwrap_or_default(),
        attempts_text(attempts)
    )]
    Truncated {
        url: String,
        range: ByteRange,
        expected: u64,
        received: u64,
        /// What the connection said, when it said something.
        cause: Option<String>,
        attempts: Vec<AttemptReport>,
    },

    /// The server sent more bytes than the range it answered.
    #[error("{url}{}: the server sent more than the {expected} bytes asked for", range_text(&Some(*range)))]
    Overlong {
        url: String,
        range: ByteRange,
        expected: u64,
    },

    /// The server answered a range request with the whole object (200
    /// instead of 206), or with another range than the one asked for.
    #[error("{url}{}: the server does not serve byte ranges as asked ({problem})", range_text(&Some(*range)))]
    RangeNotHonoured {
        url: String,
        range: ByteRange,
        problem: String,
    },

    /// The request failed below HTTP: connection refused or reset, DNS, TLS.
    #[error("{url}{}: {problem} {}", range_text(range), attempts_text(attempts))]
    Transport {
        url: String,
        range: Option<ByteRange>,
        /// The kind of failure and the innermost message
        /// (`connect: Connection refused (os error 111)`).
        problem: String,
        attempts: Vec<AttemptReport>,
        #[source]
        source: Box<object_store::Error>,
    },

    /// The request asks for bytes the object does not have.
    #[error("{url}: cannot read bytes {offset}..{end}: the object has {nbytes} bytes", end = *offset as u128 + *len as u128)]
    PastEnd {
        url: String,
        offset: u64,
        len: u64,
        nbytes: u64,
    },

    /// The server gave no size for the object (no Content-Length).
    #[error("{url}: the server gave no size for the object ({problem}); pass nbytes when opening")]
    UnknownSize { url: String, problem: String },

    /// Reading a remote object straight into device memory is the next step:
    /// kvik-policy's host→device staging entry point does not exist yet.
    #[error(
        "{url}: reading a remote object into device memory is not supported yet: read into host \
         memory (or a pinned buffer), then copy"
    )]
    DeviceMemoryUnsupported { url: String },

    /// The runtime that runs remote requests could not start.
    #[error("cannot start the remote I/O runtime: {0}")]
    Runtime(String),
}

impl From<kvik_policy::Error> for Error {
    fn from(error: kvik_policy::Error) -> Self {
        Error::Policy(Box::new(error))
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status behind this error, if the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::NotFound { status, .. }
            | Error::PermissionDenied { status, .. }
            | Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The attempts made for the failing request (empty when the failure
    /// was not an HTTP exchange, or was never retried).
    pub fn attempts(&self) -> &[AttemptReport] {
        match self {
            Error::Status { attempts, .. }
            | Error::Timeout { attempts, .. }
            | Error::Truncated { attempts, .. }
            | Error::Transport { attempts, .. } => attempts,
            _ => &[],
        }
    }
}

fn range_text(range: &Option<ByteRange>) -> String {
    range.map(|r| format!(" bytes {r}")).unwrap_or_default()
}

fn attempts_text(attempts: &[AttemptReport]) -> String {
    let outcomes: Vec<String> = attempts.iter().map(ToString::to_string).collect();
    match attempts.len() {
        0 => String::new(),
        1 => "(1 attempt)".to_string(),
        n => format!("({n} attempts: {})", outcomes.join(", ")),
    }
}
