//! Remote reads over plain HTTP against a real server on localhost (the
//! tests' own, `common::server`): exact bytes for whole objects, unaligned
//! ranges and empty objects; and every fault the wire can show — error
//! statuses, stalls, silence, truncated and overlong bodies, lying
//! Content-Length, resets, ignored ranges — each retried and reported, or a
//! clear error, bounded by the timeout, and never a partial result reported
//! as success.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::server::{Reply, Request, Script, Server, serve_all};
use common::{object, options, quick, ranges};
use kvik_remote::{
    AttemptOutcome, EndpointKind, Error, RemoteFile, RemoteOptions, RetryReason, Source,
};

const TASK: u64 = 64 << 10;

fn server(bytes: &Arc<[u8]>, script: Script) -> Server {
    Server::start(vec![("/data.bin", bytes.clone())], script)
}

/// Only GETs follow the script; the HEAD at open is served.
fn on_gets(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Script {
    Arc::new(move |r: &Request| {
        if r.method == "GET" {
            script(r)
        } else {
            Reply::Serve
        }
    })
}

fn open(server: &Server, attempts: u32, timeout_ms: u64) -> RemoteFile {
    options(quick(attempts, timeout_ms), TASK)
        .open_http(&server.url("/data.bin"))
        .unwrap()
}

#[test]
fn whole_objects_and_unaligned_ranges_read_exactly() {
    for len in [0usize, 1, 4097, 3 * TASK as usize + 123] {
        let bytes = object(len, len as u64);
        let server = server(&bytes, serve_all());
        let file = open(&server, 3, 5000);
        assert_eq!(file.nbytes(), len as u64);
        assert_eq!(file.endpoint_kind(), EndpointKind::Http);
        for (offset, size) in ranges(len as u64, TASK) {
            let mut buf = vec![0u8; size as usize];
            let done = file.read_with_report(&mut buf, offset).unwrap();
            assert_eq!(done.bytes as u64, size);
            let want = &bytes[offset as usize..(offset + size) as usize];
            assert!(buf == want, "len {len}: bytes {offset}+{size} differ");
            // The GETs tile the range exactly, each a 206.
            let report = &done.report;
            let mut next = offset;
            for request in &report.requests {
                assert_eq!(request.range.start, next);
                assert!(request.range.len() <= TASK);
                assert_eq!(request.bytes, request.range.len());
                assert_eq!(request.attempts.len(), 1);
                assert_eq!(request.attempts[0].status, Some(206));
                next = request.range.end;
            }
            assert_eq!(next, offset + size);
            assert_eq!((report.requested_bytes, report.bytes), (size, size));
        }
    }
}

#[test]
fn an_empty_object_reads_as_nothing_without_a_get() {
    let bytes = object(0, 1);
    let server = server(&bytes, serve_all());
    let file = open(&server, 3, 5000);
    assert_eq!(file.nbytes(), 0);
    let done = file.read_with_report(&mut [0u8; 0], 0).unwrap();
    assert_eq!(done.bytes, 0);
    assert!(done.report.requests.is_empty());
    assert!(server.gets().is_empty());
    let err = file.read(&mut [0u8; 1], 0).unwrap_err();
    assert!(matches!(err, Error::PastEnd { nbytes: 0, .. }), "{err}");
}

#[test]
fn ranges_past_the_end_are_clear_errors_before_any_request() {
    let bytes = object(10_000, 2);
    let server = server(&bytes, serve_all());
    let file = open(&server, 3, 5000);
    let url = server.url("/data.bin");
    for (offset, len) in [(9_999, 2), (10_000, 1), (20_000, 5), (u64::MAX, 2)] {
        let mut buf = vec![0u8; len];
        let err = file.read(&mut buf, offset).unwrap_err();
        match &err {
            Error::PastEnd { nbytes, .. } => assert_eq!(*nbytes, 10_000),
            other => panic!("expected PastEnd, got {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains(&url), "{text}");
        assert!(text.contains("the object has 10000 bytes"), "{text}");
    }
    // Zero bytes at the end is a read of nothing.
    assert_eq!(file.read(&mut [0u8; 0], 10_000).unwrap(), 0);
    assert!(server.gets().is_empty(), "{:?}", server.gets());
}

#[test]
fn a_503_then_success_is_retried_and_reported() {
    let bytes = object(100_000, 3);
    let server = server(
        &bytes,
        on_gets(|r| match r.index {
            1 => Reply::Status(503),
            _ => Reply::Serve,
        }),
    );
    let file = open(&server, 3, 5000);
    let mut buf = vec![0u8; 100_000];
    let done = file.read_with_report(&mut buf, 0).unwrap();
    assert!(buf[..] == bytes[..]);
    let retried: Vec<_> = done.report.retries().collect();
    assert_eq!(retried.len(), 1, "{}", done.report);
    let (range, retry) = retried[0];
    assert_eq!(retry.reason, RetryReason::Status { status: 503 });
    assert_eq!(retry.wait_ms, 500);
    let request = done
        .report
        .requests
        .iter()
        .find(|r| r.range == range)
        .unwrap();
    let statuses: Vec<_> = request.attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, vec![Some(503), Some(206)]);
    assert_eq!(request.attempts[1].outcome, AttemptOutcome::Complete);
    // The server saw the retry: one more GET than ranges.
    assert_eq!(server.gets().len(), done.report.requests.len() + 1);
    let text = done.report.to_string();
    assert!(text.contains("503 × 1"), "{text}");
    assert!(text.contains("HTTP 503 (waited 500 ms)"), "{text}");
}

#[test]
fn retries_stop_at_the_attempt_limit_with_every_attempt_reported() {
    let bytes = object(1000, 4);
    let server = server(&bytes, on_gets(|_| Reply::Status(503)));
    let file = open(&server, 2, 5000);
    let err = file.read(&mut [0u8; 1000], 0).unwrap_err();
    match &err {
        Error::Status {
            status, attempts, ..
        } => {
            assert_eq!(*status, 503);
            assert_eq!(attempts.len(), 2);
            assert!(attempts[0].retry.is_some() && attempts[1].retry.is_none());
        }
        other => panic!("expected Status, got {other:?}"),
    }
    assert!(err.to_string().contains("(2 attempts: 503, 503)"), "{err}");
    assert_eq!(server.gets().len(), 2);
}

#[test]
fn statuses_not_listed_are_not_retried() {
    let bytes = object(1000, 5);
    let server = server(&bytes, on_gets(|_| Reply::Status(500)));
    // `quick` retries 429 and 503 only.
    let file = open(&server, 5, 5000);
    let err = file.read(&mut [0u8; 1000], 0).unwrap_err();
    assert!(matches!(err, Error::Status { status: 500, .. }), "{err:?}");
    assert_eq!(err.attempts().len(), 1);
    assert_eq!(server.gets().len(), 1);
}

#[test]
fn not_found_and_forbidden_are_immediate_and_name_the_url() {
    let bytes = object(1000, 6);
    // 404 at open (the HEAD), with attempts to spare.
    let server404 = server(&bytes, serve_all());
    let missing = server404.url("/missing.bin");
    let err = options(quick(5, 5000), TASK)
        .open_http(&missing)
        .unwrap_err();
    assert!(
        matches!(err, Error::NotFound { status: 404, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(&missing), "{err}");
    assert_eq!(server404.requests().len(), 1);

    // 403 on a read: one GET, no retry.
    let server403 = server(&bytes, on_gets(|_| Reply::Status(403)));
    let file = open(&server403, 5, 5000);
    let err = file.read(&mut [0u8; 10], 0).unwrap_err();
    assert!(
        matches!(err, Error::PermissionDenied { status: 403, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains(&server403.url("/data.bin")), "{text}");
    assert!(text.contains("bytes 0..10"), "{text}");
    assert_eq!(server403.gets().len(), 1);
}

#[test]
fn a_stalled_body_times_out_is_retried_and_then_fails() {
    let bytes = object(50_000, 7);
    // Every GET stalls after 100 bytes.
    let server = server(&bytes, on_gets(|_| Reply::Stall { after: 100 }));
    let file = open(&server, 2, 300);
    let started = Instant::now();
    let err = file.read(&mut vec![0u8; 50_000], 0).unwrap_err();
    let took = started.elapsed();
    match &err {
        Error::Timeout { attempts, .. } => {
            assert_eq!(attempts.len(), 2);
            assert_eq!(
                attempts[0].retry.map(|r| r.reason),
                Some(RetryReason::Timeout)
            );
            assert!(
                attempts
                    .iter()
                    .all(|a| a.outcome == AttemptOutcome::Timeout)
            );
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    // Two attempts of 0.3 s and a 0.5 s backoff; far less than a minute.
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(server.gets().len(), 2);
}

#[test]
fn a_stall_then_success_is_retried_and_reported() {
    let bytes = object(50_000, 8);
    let server = server(
        &bytes,
        on_gets(|r| match r.index {
            1 => Reply::Stall { after: 10 },
            _ => Reply::Serve,
        }),
    );
    let file = open(&server, 3, 300);
    let mut buf = vec![0u8; 50_000];
    let done = file.read_with_report(&mut buf, 0).unwrap();
    assert!(buf[..] == bytes[..]);
    let reasons: Vec<_> = done.report.retries().map(|(_, r)| r.reason).collect();
    assert_eq!(reasons, vec![RetryReason::Timeout]);
}

#[test]
fn a_server_that_never_answers_is_bounded_by_the_timeout() {
    let bytes = object(1000, 9);
    let server = server(&bytes, Arc::new(|_| Reply::NoAnswer));
    let started = Instant::now();
    // At open: the HEAD never answered.
    let err = options(quick(2, 250), TASK)
        .open_http(&server.url("/data.bin"))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(err.attempts().len(), 2);
    // On a read (size given, so no HEAD).
    let file = options(quick(1, 250), TASK)
        .nbytes(1000)
        .open_http(&server.url("/data.bin"))
        .unwrap();
    let err = file.read(&mut [0u8; 1000], 0).unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("timed out after 0.25 s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A read that must fail: the error, checked to come with no success.
fn read_fails(file: &RemoteFile, len: usize) -> Error {
    let mut buf = vec![0u8; len];
    match file.read_with_report(&mut buf, 0) {
        Ok(done) => panic!("a faulty body was reported as read: {}", done.report),
        Err(err) => err,
    }
}

#[test]
fn a_truncated_body_is_an_error_not_a_short_read() {
    let bytes = object(200_000, 10);
    // The second range's body stops after 1000 bytes.
    let server = server(
        &bytes,
        on_gets(|r| match r.range {
            Some((start, _)) if start == TASK => Reply::Truncate { after: 1000 },
            _ => Reply::Serve,
        }),
    );
    let file = open(&server, 3, 5000);
    match read_fails(&file, 200_000) {
        Error::Truncated {
            expected, received, ..
        } => {
            assert_eq!(expected, TASK);
            assert_eq!(received, 1000);
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    // Not retried: one GET for the truncated range.
    let truncated = server
        .gets()
        .into_iter()
        .filter(|r| r.range.is_some_and(|(start, _)| start == TASK))
        .count();
    assert_eq!(truncated, 1);
}

#[test]
fn a_content_length_that_lies_is_an_error() {
    let bytes = object(100_000, 11);
    for delta in [100i64, -100] {
        let server = server(&bytes, on_gets(move |_| Reply::WrongLength { delta }));
        let file = open(&server, 3, 5000);
        match read_fails(&file, 100_000) {
            Error::Truncated {
                expected,
                received,
                cause,
                ..
            } => {
                // Either range (64 KiB, or the 34464-byte tail) may fail first.
                assert!(
                    [TASK, 100_000 - TASK].contains(&expected),
                    "delta {delta}: {expected}"
                );
                if delta < 0 {
                    // The body ends, cleanly, 100 bytes short.
                    assert_eq!(received, expected - 100);
                } else {
                    // Every byte of the range, then the connection closes
                    // before the 100 promised more: the answer is not trusted.
                    assert!(received <= expected, "{received}");
                    assert!(cause.is_some(), "the early close is named");
                }
            }
            other => panic!("delta {delta}: expected Truncated, got {other:?}"),
        }
    }
}

#[test]
fn a_connection_reset_mid_body_is_an_error() {
    let bytes = object(100_000, 12);
    let server = server(&bytes, on_gets(|_| Reply::Reset { after: 5000 }));
    let file = open(&server, 3, 5000);
    let err = read_fails(&file, 100_000);
    match &err {
        Error::Truncated {
            received, cause, ..
        } => {
            assert!(*received <= 5000, "{received}");
            assert!(cause.is_some(), "a reset says why: {err}");
        }
        // The reset may also arrive before the response is read.
        Error::Transport { .. } => {}
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[test]
fn a_server_that_ignores_ranges_is_refused() {
    let bytes = object(100_000, 13);
    let server = server(&bytes, on_gets(|_| Reply::WholeObject));
    let file = open(&server, 3, 5000);
    let err = read_fails(&file, 1000);
    assert!(matches!(err, Error::RangeNotHonoured { .. }), "{err:?}");
    assert!(err.to_string().contains("HTTP 200"), "{err}");
}

#[test]
fn one_failing_range_fails_the_whole_read_and_stops_the_rest() {
    let bytes = object(40 * TASK as usize, 14);
    let server = server(
        &bytes,
        on_gets(|r| match r.index {
            3 => Reply::Status(404),
            _ => Reply::Serve,
        }),
    );
    let file = options(quick(3, 5000), TASK)
        .max_in_flight(2)
        .open_http(&server.url("/data.bin"))
        .unwrap();
    let err = read_fails(&file, bytes.len());
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    // Workers stop taking ranges after the failure: far fewer GETs than 40.
    assert!(server.gets().len() < 10, "{}", server.gets().len());
}

#[test]
fn background_reads_hand_the_buffer_back() {
    let bytes = object(5 * TASK as usize + 1, 15);
    let server = server(&bytes, serve_all());
    let file = open(&server, 3, 5000);
    let pending = file.pread(vec![0u8; 1000], 7);
    let (buf, done) = pending.wait().unwrap();
    assert!(buf[..] == bytes[7..1007]);
    assert_eq!(done.bytes, 1000);

    // A dropped PendingRead finishes on its own; its buffer is freed then.
    drop(file.pread(vec![0u8; bytes.len()], 0));

    // Errors come back through the PendingRead.
    let err = file.pread(vec![0u8; 10], bytes.len() as u64).wait();
    assert!(matches!(err, Err(Error::PastEnd { .. })));

    // try_wait polls.
    let mut pending = file.pread(vec![0u8; bytes.len()], 0);
    let (buf, _) = loop {
        if let Some(result) = pending.try_wait() {
            break result.unwrap();
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(buf[..] == bytes[..]);
}

#[test]
fn callers_inside_a_tokio_runtime_neither_panic_nor_deadlock() {
    let bytes = object(3 * TASK as usize, 16);
    let server = server(&bytes, serve_all());
    let url = server.url("/data.bin");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Blocking calls from inside a runtime: open and read.
        let file = options(quick(3, 5000), TASK).open_http(&url).unwrap();
        let mut buf = vec![0u8; bytes.len()];
        file.read(&mut buf, 0).unwrap();
        assert!(buf[..] == bytes[..]);
        // And `.await`, on this single-threaded runtime.
        let (buf, done) = file.pread(vec![0u8; 100], 5).await.unwrap();
        assert!(buf[..] == bytes[5..105]);
        assert_eq!(done.bytes, 100);
    });
}

#[test]
fn the_environment_shapes_the_retry_policy() {
    let bytes = object(1000, 17);
    let server = server(&bytes, on_gets(|_| Reply::Status(502)));
    let vars = [
        ("KVIKIO_HTTP_MAX_ATTEMPTS", "2"),
        ("KVIKIO_HTTP_TIMEOUT", "2"),
        ("KVIKIO_HTTP_STATUS_CODES", "502"),
    ];
    let settings = kvik_remote::RemoteSettings::from_vars(|name| {
        vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.into())
    })
    .unwrap();
    let file = RemoteOptions::new()
        .settings(settings)
        .open_http(&server.url("/data.bin"))
        .unwrap();
    let err = file.read(&mut [0u8; 1000], 0).unwrap_err();
    assert!(matches!(err, Error::Status { status: 502, .. }), "{err:?}");
    assert_eq!(err.attempts().len(), 2);
}

#[test]
fn reports_print_and_serialise_every_request() {
    let bytes = object(3 * TASK as usize, 18);
    let server = server(
        &bytes,
        on_gets(|r| match r.index {
            2 => Reply::Status(429),
            _ => Reply::Serve,
        }),
    );
    let file = open(&server, 3, 5000);
    let done = file
        .read_with_report(&mut vec![0u8; bytes.len()], 0)
        .unwrap();
    let text = done.report.to_string();
    for needle in [
        "remote: 3 ranged GETs (task size 64 KiB), at most 3 in flight",
        &server.url("/data.bin"),
        "206 × 3, 429 × 1",
        "retries       1: bytes",
        "HTTP 429",
        "3 attempts, 5 s each, retried on timeouts and HTTP 429, 503",
    ] {
        assert!(text.contains(needle), "{needle:?} not in\n{text}");
    }
    let json = serde_json::to_value(&done.report).unwrap();
    assert_eq!(json["backend"], "remote");
    assert_eq!(json["endpoint"], "http");
    assert_eq!(json["requests"].as_array().unwrap().len(), 3);
    let attempts: Vec<&serde_json::Value> = json["requests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["attempts"].as_array().unwrap())
        .collect();
    assert_eq!(attempts.len(), 4);
    let retried = attempts.iter().find(|a| a["status"] == 429).unwrap();
    assert_eq!(retried["outcome"]["kind"], "error_status");
    assert_eq!(retried["retry"]["reason"], "status");
    assert_eq!(retried["retry"]["wait_ms"], 500);
}

#[test]
fn a_source_reads_local_files_and_urls_alike() {
    let bytes = object(10_000, 19);
    let server = server(&bytes, serve_all());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("local.bin");
    std::fs::write(&path, &bytes[..]).unwrap();
    for target in [server.url("/data.bin"), path.display().to_string()] {
        let source = Source::open(&target).unwrap();
        assert_eq!(source.nbytes().unwrap(), 10_000);
        assert_eq!(Source::is_remote(&target), target.starts_with("http"));
        let mut buf = vec![0u8; 3000];
        let done = source.read_with_report(&mut buf, 5000).unwrap();
        assert_eq!(done.bytes, 3000);
        assert!(buf[..] == bytes[5000..8000], "{target}");
        assert!(!done.report.to_string().is_empty());
        // Past the end: an error for both.
        assert!(source.read_with_report(&mut buf, 9000).is_err(), "{target}");
        // Windows fold into one report.
        let mut report = done.report;
        let next = source.read_with_report(&mut buf, 0).unwrap();
        report.absorb(next.report);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["requested_bytes"], 6000, "{target}");
    }
}
