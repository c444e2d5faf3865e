//! Remote files for kvik-rs: objects on S3 or any HTTP(S) server, read by
//! URL in parallel ranged GETs straight into memory — KvikIO's
//! `RemoteFile`, on Apache Arrow's `object_store`.
//!
//! * [`RemoteFile`] — open by URL (`s3://bucket/key`, `http(s)://…`, S3
//!   presigned URLs; KvikIO's constructors `open_http`, `open_s3`,
//!   `open_s3_url`, `open_s3_public`, `open_s3_presigned_url`, and `open`
//!   that picks), `nbytes`, `read` / `read_with_report` (blocking) and
//!   `pread` ([`PendingRead`]: wait, poll or `.await`; it owns the buffer and
//!   hands it back). [`RemoteOptions`] sets the size when known, the retry
//!   policy, the requests in flight, AWS settings.
//! * [`RemoteSettings`] — `KVIKIO_HTTP_MAX_ATTEMPTS`, `KVIKIO_HTTP_TIMEOUT`,
//!   `KVIKIO_HTTP_STATUS_CODES` with KvikIO's semantics.
//! * [`RemoteReport`] — for every read: each ranged GET, each attempt with
//!   its HTTP status, the retries and why, bytes and seconds.
//! * [`Source`] — a local file or a remote object, for programs that take
//!   either.
//! * [`Error`] — every failure, with the URL, the byte range, the HTTP
//!   status and the attempts.
//!
//! Requests run on one multi-threaded tokio runtime owned by this crate,
//! started on first use; callers never enter it, so a caller inside its own
//! tokio runtime neither panics nor blocks that runtime's I/O (see
//! `runtime`).

mod endpoint;
mod error;
mod exchange;
mod fetch;
mod file;
mod read;
pub mod report;
mod runtime;
pub mod settings;
mod sink;
mod source;

pub use endpoint::{S3Options, is_remote_url, redact};
pub use error::{Error, Result};
pub use file::{RemoteFile, RemoteOptions};
pub use read::{PendingRead, RemoteTransfer};
pub use report::{
    AttemptOutcome, AttemptReport, ByteRange, EndpointKind, RemoteReport, RequestReport, Retry,
    RetryReason,
};
pub use settings::RemoteSettings;
pub use source::{Source, SourceReport, SourceTransfer};
