//! `RemoteReport`: the path one remote read took — every ranged GET, each of
//! its attempts with the HTTP status, the retries and why, bytes and time.
//! The counterpart of kvik-policy's `PathReport` for the `remote` backend.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use kvik_policy::{MemoryKind, Operation, Size};

/// Bytes `start..end` of an object (end excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

impl fmt::Display for ByteRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

/// The backend that served a request. kvik-policy's backends serve local
/// files; this one serves objects over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Remote,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("remote")
    }
}

/// How an object is reached (KvikIO's `RemoteEndpointType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointKind {
    /// Plain HTTP(S) GETs.
    Http,
    /// S3, requests signed with AWS credentials.
    S3,
    /// S3 without credentials (public objects): unsigned requests.
    S3Public,
    /// An S3 presigned URL: plain GETs, the signature is in the URL.
    S3Presigned,
}

impl fmt::Display for EndpointKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndpointKind::Http => "HTTP",
            EndpointKind::S3 => "S3",
            EndpointKind::S3Public => "S3, unsigned",
            EndpointKind::S3Presigned => "S3 presigned URL",
        })
    }
}

/// The retry policy a request ran under.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub timeout_seconds: f64,
    pub retry_status_codes: Vec<u16>,
}

/// The path one read took.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RemoteReport {
    pub backend: Backend,
    pub operation: Operation,
    /// The object's URL, without its query string (a presigned URL's
    /// signature is a credential).
    pub url: String,
    pub endpoint: EndpointKind,
    pub file_offset: u64,
    /// Bytes asked for.
    pub requested_bytes: u64,
    /// Bytes read: all asked for (a read either completes or fails).
    pub bytes: u64,
    /// The object's size.
    pub object_size: u64,
    pub memory: MemoryKind,
    /// The size requests are cut into (`KVIKIO_TASK_SIZE`).
    pub task_size: u64,
    /// The most ranged GETs in flight at once.
    pub max_in_flight: usize,
    pub policy: RetryPolicy,
    /// Every ranged GET, in object order.
    pub requests: Vec<RequestReport>,
    /// From the call to the last byte.
    pub seconds: f64,
}

/// One ranged GET and its attempts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RequestReport {
    pub range: ByteRange,
    /// Bytes of this range read (its length: a range completes or fails).
    pub bytes: u64,
    /// From the first attempt to the last byte, backoff included.
    pub seconds: f64,
    pub attempts: Vec<AttemptReport>,
}

/// One HTTP exchange.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AttemptReport {
    /// The response status, when a response came.
    pub status: Option<u16>,
    pub outcome: AttemptOutcome,
    pub seconds: f64,
    /// Set when another attempt followed: why, and how long we waited.
    pub retry: Option<Retry>,
}

/// How one attempt ended.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Every byte of the range arrived.
    Complete,
    /// An error status (the status is the attempt's).
    ErrorStatus,
    /// `KVIKIO_HTTP_TIMEOUT` ran out.
    Timeout,
    /// The body ended early (`received` bytes of the range).
    Truncated { received: u64 },
    /// The body was longer than the range.
    Overlong,
    /// A 200 for a range request, or another range than asked.
    RangeNotHonoured,
    /// Below HTTP: connection refused or reset, DNS, TLS.
    Transport { problem: String },
}

/// Why an attempt was retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum RetryReason {
    /// A status listed in `KVIKIO_HTTP_STATUS_CODES`.
    Status { status: u16 },
    /// The attempt ran out of time.
    Timeout,
}

/// A retry: why, and the wait before the next attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Retry {
    #[serde(flatten)]
    pub reason: RetryReason,
    pub wait_ms: u64,
}

impl fmt::Display for RetryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryReason::Status { status } => write!(f, "HTTP {status}"),
            RetryReason::Timeout => f.write_str("timeout"),
        }
    }
}

impl fmt::Display for AttemptReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.outcome, self.status) {
            (AttemptOutcome::Complete, Some(s)) => write!(f, "{s}"),
            (AttemptOutcome::Complete, None) => f.write_str("complete"),
            (AttemptOutcome::ErrorStatus, Some(s)) => write!(f, "{s}"),
            (AttemptOutcome::ErrorStatus, None) => f.write_str("error status"),
            (AttemptOutcome::Timeout, _) => write!(f, "timed out after {:.2} s", self.seconds),
            (AttemptOutcome::Truncated { received }, _) => {
                write!(f, "body ended after {received} bytes")
            }
            (AttemptOutcome::Overlong, _) => f.write_str("body longer than the range"),
            (AttemptOutcome::RangeNotHonoured, Some(s)) => write!(f, "{s} without the range"),
            (AttemptOutcome::RangeNotHonoured, None) => f.write_str("range not honoured"),
            (AttemptOutcome::Transport { problem }, _) => f.write_str(problem),
        }
    }
}

impl RemoteReport {
    /// Fold a later read of the same object into this one (a read done in
    /// windows reports as one): bytes and seconds add up, requests append.
    pub fn absorb(&mut self, later: RemoteReport) {
        self.requested_bytes += later.requested_bytes;
        self.bytes += later.bytes;
        self.seconds += later.seconds;
        self.max_in_flight = self.max_in_flight.max(later.max_in_flight);
        self.requests.extend(later.requests);
    }

    /// Attempts over every request.
    pub fn attempts(&self) -> usize {
        self.requests.iter().map(|r| r.attempts.len()).sum()
    }

    /// Every retry, with the range it served.
    pub fn retries(&self) -> impl Iterator<Item = (ByteRange, Retry)> + '_ {
        self.requests.iter().flat_map(|r| {
            r.attempts
                .iter()
                .filter_map(|a| a.retry.map(|x| (r.range, x)))
        })
    }

    /// Responses by status: `206 × 256, 503 × 2`.
    pub fn status_summary(&self) -> String {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for attempt in self.requests.iter().flat_map(|r| &r.attempts) {
            let key = match attempt.status {
                Some(s) => s.to_string(),
                None => attempt.to_string(),
            };
            *counts.entry(key).or_default() += 1;
        }
        if counts.is_empty() {
            return "none".into();
        }
        counts
            .iter()
            .map(|(k, n)| format!("{k} × {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for RemoteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let mut row = |label: &str, text: &str| {
            let _ = writeln!(out, "  {label:<13} {text}");
        };
        let rate = if self.seconds > 0.0 {
            format!(" ({:.2} GB/s)", self.bytes as f64 / self.seconds / 1e9)
        } else {
            String::new()
        };
        row(
            "request",
            &format!(
                "{} {} at offset {} of {} ({}, {}): {} in {:.3} s{rate}",
                self.operation,
                Size(self.requested_bytes),
                self.file_offset,
                self.url,
                self.endpoint,
                Size(self.object_size),
                Size(self.bytes),
                self.seconds,
            ),
        );
        row(
            "memory",
            &match self.memory {
                MemoryKind::Host => "host".to_string(),
                MemoryKind::Device { ordinal } => format!("device (GPU {ordinal})"),
            },
        );
        let n = self.requests.len();
        row(
            "backend",
            &format!(
                "{}: {n} ranged GET{} (task size {}), at most {} in flight",
                self.backend,
                if n == 1 { "" } else { "s" },
                Size(self.task_size),
                self.max_in_flight
            ),
        );
        row(
            "attempts",
            &format!("{}; responses: {}", self.attempts(), self.status_summary()),
        );
        let retries: Vec<(ByteRange, Retry)> = self.retries().collect();
        if retries.is_empty() {
            row("retries", "none");
        } else {
            let shown: Vec<String> = retries
                .iter()
                .take(8)
                .map(|(range, r)| format!("bytes {range}: {} (waited {} ms)", r.reason, r.wait_ms))
                .collect();
            let more = retries.len().saturating_sub(shown.len());
            row(
                "retries",
                &format!(
                    "{}: {}{}",
                    retries.len(),
                    shown.join("; "),
                    if more > 0 {
                        format!("; {more} more")
                    } else {
                        String::new()
                    }
                ),
            );
        }
        row(
            "retry policy",
            &format!(
                "{} attempt{}, {} s each, retried on timeouts and HTTP {}",
                self.policy.max_attempts,
                if self.policy.max_attempts == 1 {
                    ""
                } else {
                    "s"
                },
                self.policy.timeout_seconds,
                self.policy
                    .retry_status_codes
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        f.write_str(&out)
    }
}
