//! One request (a ranged GET, or the size of the object) with KvikIO's retry
//! rule: up to `http_max_attempts` attempts, each bounded by `http_timeout`
//! from sending the request to the body's last byte; an attempt that timed
//! out or answered a status in `http_status_codes` is retried after
//! KvikIO's backoff; every other failure ends the request at once (a 403 or
//! 404 costs one request). Every attempt is recorded.
//!
//! A range completes only when exactly its bytes arrived: a body that ends
//! early (truncated, a Content-Length larger than what was sent, a
//! connection closed or reset mid-body) or runs long is an error, never a
//! short read.

use std::future::Future;
use std::time::Instant;

use futures_util::StreamExt;
use object_store::client::{HttpError, HttpErrorKind};
use object_store::{GetOptions, GetRange};

use crate::endpoint::Endpoint;
use crate::error::{Error, Result};
use crate::exchange::ExchangeLog;
use crate::report::{AttemptOutcome, AttemptReport, ByteRange, RequestReport, Retry, RetryReason};
use crate::settings::{RemoteSettings, backoff};
use crate::sink::TaskDest;

/// Why one attempt failed, before the retry rule judges it.
enum Failure {
    /// object_store's error; the status, if a response came, is in the log.
    Store(object_store::Error),
    Timeout,
    Truncated {
        received: u64,
        cause: Option<String>,
    },
    Overlong,
}

/// GET `range` of the object into `dest`.
pub(crate) async fn get_range(
    endpoint: &Endpoint,
    settings: &RemoteSettings,
    range: ByteRange,
    dest: TaskDest<'_>,
) -> Result<RequestReport> {
    let started = Instant::now();
    let (bytes, attempts) = with_retries(endpoint, settings, Some(range), |log| {
        read_body(endpoint, range, log, &dest)
    })
    .await?;
    dest.finish()?;
    Ok(RequestReport {
        range,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
        attempts,
    })
}

async fn read_body(
    endpoint: &Endpoint,
    range: ByteRange,
    log: ExchangeLog,
    dest: &TaskDest<'_>,
) -> std::result::Result<u64, Failure> {
    let options = GetOptions {
        range: Some(GetRange::Bounded(range.start..range.end)),
        extensions: log.extensions(),
        ..GetOptions::default()
    };
    let result = endpoint
        .store
        .get_opts(&endpoint.path, options)
        .await
        .map_err(Failure::Store)?;
    let expected = range.len();
    let mut received = 0u64;
    let mut body = result.into_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| Failure::Truncated {
            received,
            cause: Some(transport_problem(&e)),
        })?;
        if chunk.len() as u64 > expected - received {
            return Err(Failure::Overlong);
        }
        dest.put(received, &chunk);
        received += chunk.len() as u64;
    }
    if received < expected {
        return Err(Failure::Truncated {
            received,
            cause: None,
        });
    }
    Ok(received)
}

/// The object's size: a HEAD, or for presigned URLs (S3 refuses a HEAD
/// signed for GET) a one-byte GET whose Content-Range gives the size.
pub(crate) async fn object_size(endpoint: &Endpoint, settings: &RemoteSettings) -> Result<u64> {
    let presigned = endpoint.kind == crate::report::EndpointKind::S3Presigned;
    let probe = |log: ExchangeLog| async move {
        let options = GetOptions {
            head: !presigned,
            range: presigned.then_some(GetRange::Bounded(0..1)),
            extensions: log.extensions(),
            ..GetOptions::default()
        };
        match endpoint.store.get_opts(&endpoint.path, options).await {
            Ok(result) => {
                let size = result.meta.size;
                // Drain the one byte so the connection can be reused.
                let _ = result.bytes().await;
                Ok(size)
            }
            // `bytes=0-0` is unsatisfiable only when the object is empty.
            Err(_) if presigned && log.status() == Some(416) => Ok(0),
            Err(e) => Err(Failure::Store(e)),
        }
    };
    let (size, _) = with_retries(endpoint, settings, None, probe).await?;
    Ok(size)
}

/// Run `attempt` under the retry rule; the result and every attempt made.
async fn with_retries<T, F, Fut>(
    endpoint: &Endpoint,
    settings: &RemoteSettings,
    range: Option<ByteRange>,
    mut attempt: F,
) -> Result<(T, Vec<AttemptReport>)>
where
    F: FnMut(ExchangeLog) -> Fut,
    Fut: Future<Output = std::result::Result<T, Failure>>,
{
    let mut attempts: Vec<AttemptReport> = Vec::new();
    loop {
        let log = ExchangeLog::default();
        let started = Instant::now();
        let result = match tokio::time::timeout(settings.http_timeout(), attempt(log.clone())).await
        {
            Ok(result) => result,
            Err(_) => Err(Failure::Timeout),
        };
        let seconds = started.elapsed().as_secs_f64();
        let status = log.status();
        let failure = match result {
            Ok(value) => {
                attempts.push(AttemptReport {
                    status,
                    outcome: AttemptOutcome::Complete,
                    seconds,
                    retry: None,
                });
                return Ok((value, attempts));
            }
            Err(failure) => failure,
        };
        let timed_out = match &failure {
            Failure::Timeout => true,
            Failure::Store(e) => is_timeout(e),
            _ => false,
        };
        let reason = match status {
            _ if timed_out => Some(RetryReason::Timeout),
            Some(s) if settings.http_status_codes().contains(s) => {
                Some(RetryReason::Status { status: s })
            }
            _ => None,
        };
        let next = attempts.len() as u32 + 2;
        let retry = reason
            .filter(|_| next <= settings.http_max_attempts())
            .map(|reason| Retry {
                reason,
                wait_ms: backoff(next).as_millis() as u64,
            });
        attempts.push(AttemptReport {
            status,
            outcome: outcome_of(&failure, status, timed_out),
            seconds,
            retry,
        });
        match retry {
            Some(retry) => {
                tokio::time::sleep(std::time::Duration::from_millis(retry.wait_ms)).await;
            }
            None => {
                return Err(error_of(
                    failure, endpoint, settings, range, status, attempts,
                ));
            }
        }
    }
}

fn outcome_of(failure: &Failure, status: Option<u16>, timed_out: bool) -> AttemptOutcome {
    match failure {
        _ if timed_out => AttemptOutcome::Timeout,
        Failure::Truncated { received, .. } => AttemptOutcome::Truncated {
            received: *received,
        },
        Failure::Overlong => AttemptOutcome::Overlong,
        Failure::Store(_) if range_refused(status) => AttemptOutcome::RangeNotHonoured,
        Failure::Store(_) if status.is_some_and(|s| s >= 300) => AttemptOutcome::ErrorStatus,
        Failure::Store(e) => AttemptOutcome::Transport {
            problem: transport_problem(e),
        },
        Failure::Timeout => AttemptOutcome::Timeout,
    }
}

/// A success status with a failed request: object_store refused the answer
/// to a range request (a 200 with the whole object, or another range).
fn range_refused(status: Option<u16>) -> bool {
    status.is_some_and(|s| (200..300).contains(&s))
}

fn error_of(
    failure: Failure,
    endpoint: &Endpoint,
    settings: &RemoteSettings,
    range: Option<ByteRange>,
    status: Option<u16>,
    attempts: Vec<AttemptReport>,
) -> Error {
    let url = endpoint.url.clone();
    let timed_out = matches!(failure, Failure::Timeout)
        || matches!(&failure, Failure::Store(e) if is_timeout(e));
    if timed_out {
        return Error::Timeout {
            url,
            range,
            timeout_seconds: settings.http_timeout().as_secs_f64(),
            attempts,
        };
    }
    match failure {
        Failure::Truncated { received, cause } => {
            let range = range.expect("only range requests stream a body");
            Error::Truncated {
                url,
                range,
                expected: range.len(),
                received,
                cause,
                attempts,
            }
        }
        Failure::Overlong => {
            let range = range.expect("only range requests stream a body");
            Error::Overlong {
                url,
                range,
                expected: range.len(),
            }
        }
        Failure::Store(source) => match (status, range) {
            (Some(404), _) => Error::NotFound {
                url,
                status: 404,
                range,
            },
            (Some(s @ (401 | 403)), _) => Error::PermissionDenied {
                url,
                status: s,
                range,
            },
            (Some(s), Some(range)) if range_refused(Some(s)) => Error::RangeNotHonoured {
                url,
                range,
                problem: if s == 200 {
                    "HTTP 200 with the whole object, not 206 with the range".to_string()
                } else {
                    format!("HTTP {s}: {}", innermost(&source))
                },
            },
            (Some(s), _) if s >= 300 => Error::Status {
                url,
                range,
                status: s,
                attempts,
            },
            // A size request answered, but without a usable size.
            (Some(s), None) if range_refused(Some(s)) => Error::UnknownSize {
                url,
                problem: innermost(&source),
            },
            _ => Error::Transport {
                url,
                range,
                problem: transport_problem(&source),
                attempts,
                source: Box::new(source),
            },
        },
        Failure::Timeout => unreachable!("handled above"),
    }
}

/// object_store's HTTP errors in the error's source chain.
fn http_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a HttpError> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(http) = e.downcast_ref::<HttpError>() {
            return Some(http);
        }
        current = e.source();
    }
    None
}

fn is_timeout(error: &object_store::Error) -> bool {
    http_error(error).is_some_and(|e| e.kind() == HttpErrorKind::Timeout)
}

/// The deepest message in an error chain: what actually happened
/// (`connection reset by peer`), without the layers' prefixes.
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// What went wrong below HTTP, for a report: the kind object_store gave
/// (connect, request, interrupted, …) and the innermost message.
fn transport_problem(error: &object_store::Error) -> String {
    let kind = match http_error(error).map(HttpError::kind) {
        Some(HttpErrorKind::Connect) => "connect",
        Some(HttpErrorKind::Request) => "request",
        Some(HttpErrorKind::Timeout) => "timeout",
        Some(HttpErrorKind::Interrupted) => "interrupted",
        Some(HttpErrorKind::Decode) => "decode",
        Some(_) => "HTTP",
        None => return innermost(error),
    };
    format!("{kind}: {}", innermost(error))
}
