//! `kvik read URL`, `kvik copy URL DST` and `kvik bench --file URL` as a
//! user runs them: the real `kvik` binary against real servers on
//! localhost, started and stopped here — kvik-test-support's HTTP server
//! (byte ranges; misbehaves on cue) and, when installed, moto's S3 server
//! (`skipped: …` without it; `KVIK_REQUIRE_REMOTE=1` makes that a failure).
//! Every checksum is compared with zlib's CRC-32 of the object's bytes.

mod common;

use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{bytes, fails, json, kvik_cmd, names, ok, p, temporaries, text};
use kvik_test_support::http_server::{Reply, Request, Script, Server, refused_url, serve_all};
use kvik_test_support::moto::{self, ACCESS_KEY, REGION, SECRET_KEY};

/// `kvik ARGS` with a clean environment (no `KVIKIO_*`, `AWS_*`) and a
/// bounded retry policy, so a fault can never hang a test.
fn remote_cmd(args: &[&str]) -> Command {
    let mut cmd = kvik_cmd(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("KVIKIO_HTTP_TIMEOUT", "20");
    cmd
}

fn run(args: &[&str]) -> Output {
    remote_cmd(args).output().expect("run kvik")
}

/// zlib's CRC-32 of `data`, as `--checksum` prints it.
fn crc(data: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(data))
}

/// A server with one object at `/data.bin`, answering as `script` says.
fn serve(data: &[u8], script: Script) -> Server {
    Server::start(vec![("/data.bin", Arc::from(data))], script)
}

#[test]
fn a_url_reads_byte_exact_in_ranged_gets_with_kvik_remotes_report() {
    let data = bytes((3 << 20) + 5, 1);
    let server = serve(&data, serve_all());
    let url = server.url("/data.bin");
    // Windows of 1 MiB, 256 KiB tasks, 3 GETs in flight.
    let out = run(&[
        "read",
        &url,
        "--host",
        "--checksum",
        "--json",
        "--buffer",
        "1MiB",
        "--task-size",
        "256KiB",
        "--threads",
        "3",
    ]);
    let r = json(&out);
    assert_eq!(r["checksum_crc32"], crc(&data));
    assert_eq!(r["bytes"], data.len());
    assert_eq!(r["file"], url.as_str());
    assert_eq!(r["memory"]["kind"], "host");
    assert!(r["page_cache_resident_before"].is_null());
    // The report is kvik-remote's, folded over the four windows.
    let report = &r["report"];
    assert_eq!(report["backend"], "remote");
    assert_eq!(report["endpoint"], "http");
    assert_eq!(report["bytes"], data.len());
    assert_eq!(report["task_size"], 256 << 10);
    assert_eq!(report["max_in_flight"], 3);
    let requests = report["requests"].as_array().unwrap();
    // 4 MiB tasks per window: 4 + 4 + 4 of 256 KiB, then the 5-byte tail.
    assert_eq!(requests.len(), 13);
    let gets = server.gets();
    assert_eq!(gets.len(), requests.len());
    // Every GET asked for a range, and together they cover the object once.
    let mut covered: Vec<(u64, u64)> = gets.iter().map(|g| g.range.unwrap()).collect();
    covered.sort();
    assert_eq!(covered.first().unwrap().0, 0);
    assert_eq!(covered.last().unwrap().1, data.len() as u64 - 1);
    assert!(
        covered.windows(2).all(|w| w[0].1 + 1 == w[1].0),
        "{covered:?}"
    );

    // For people: the same read, kvik-remote's report as text.
    let out = ok(&run(&["read", &url, "--checksum"])).clone();
    let shown = text(&out.stdout);
    assert!(shown.contains(&crc(&data)), "{shown}");
    assert!(shown.contains("backend       remote"), "{shown}");
    assert!(!shown.contains("page cache"), "{shown}");
}

#[test]
fn ranges_of_a_url_read_exactly_the_bytes_asked() {
    let data = bytes(300_000, 2);
    let server = serve(&data, serve_all());
    let url = server.url("/data.bin");
    for (offset, size) in [
        (4097usize, 100_000usize),
        (0, 1),
        (299_999, 1),
        (1, 299_999),
    ] {
        let out = run(&[
            "read",
            &url,
            "--offset",
            &offset.to_string(),
            "--size",
            &size.to_string(),
            "--task-size",
            "64KiB",
            "--checksum",
            "--json",
        ]);
        let r = json(&out);
        assert_eq!(r["checksum_crc32"], crc(&data[offset..offset + size]));
        assert_eq!(r["bytes"], size);
        assert_eq!(r["offset"], offset);
    }
    // Every GET lay inside the ranges asked for.
    for get in server.gets() {
        let (start, end) = get.range.expect("a ranged GET");
        assert!(end < data.len() as u64 && start <= end, "{get:?}");
    }
    // A range past the end is refused before any GET, naming the URL.
    let before = server.gets().len();
    let out = run(&["read", &url, "--offset", "299990", "--size", "11"]);
    fails(&out, 2, &["beyond the end", &url]);
    assert_eq!(server.gets().len(), before);
}

#[test]
fn copy_of_a_url_is_byte_exact_and_names_the_file_after_the_url() {
    let data = bytes((2 << 20) + 3, 3);
    let server = serve(&data, serve_all());
    let url = server.url("/data.bin");
    let dir = tempfile::tempdir().unwrap();
    // Into a directory: the file takes the URL's last segment.
    let out = run(&[
        "copy",
        &url,
        p(dir.path()),
        "--checksum",
        "--json",
        "--buffer",
        "1MiB",
        "--task-size",
        "512KiB",
    ]);
    let c = json(&out);
    let dst = dir.path().join("data.bin");
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    assert_eq!(c["checksum_crc32"], crc(&data));
    assert_eq!(c["source"], url.as_str());
    assert_eq!(c["source_kind"], "remote");
    assert_eq!(c["read"]["report"]["backend"], "remote");
    assert_eq!(c["read"]["report"]["requests"].as_array().unwrap().len(), 5);
    assert_eq!(c["committed"]["destination"], "new");
    // Over an existing file, by name.
    let named = dir.path().join("named.bin");
    std::fs::write(&named, b"old").unwrap();
    ok(&run(&["copy", &url, p(&named), "--size", "1000"]));
    assert_eq!(std::fs::read(&named).unwrap(), &data[..1000]);
    assert_eq!(names(dir.path()), vec!["data.bin", "named.bin"]);
    // A URL is never a destination: refused before any request.
    let requests = server.requests().len();
    fails(&run(&["copy", &url, &url]), 2, &["DST", "local files only"]);
    fails(
        &run(&["copy", p(&named), "s3://b/k"]),
        2,
        &["DST", "local files only"],
    );
    fails(
        &run(&["write", "https://h/k", "--size", "1"]),
        2,
        &["FILE", "local files only"],
    );
    assert_eq!(server.requests().len(), requests);
    // More than the object has is refused before DST is touched.
    let out = run(&["copy", &url, p(&named), "--size", "3MiB"]);
    fails(&out, 2, &["--size", "has only"]);
    assert_eq!(std::fs::read(&named).unwrap(), &data[..1000]);
}

#[test]
fn a_missing_object_is_exit_2_naming_the_url_after_one_request() {
    let data = bytes(1000, 4);
    let server = serve(&data, serve_all());
    let url = server.url("/missing.bin");
    let out = run(&["read", &url]);
    fails(&out, 2, &[&url, "not found", "404"]);
    assert_eq!(server.requests().len(), 1, "a 404 is not retried");
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["copy", &url, p(&dir.path().join("dst.bin"))]);
    fails(&out, 2, &[&url, "404"]);
    assert!(names(dir.path()).is_empty(), "DST was created");
}

#[test]
fn a_forbidden_object_is_exit_2_and_a_refused_connection_exit_1() {
    let data = bytes(1000, 5);
    let server = serve(&data, Arc::new(|_: &Request| Reply::Status(403)));
    let url = server.url("/data.bin");
    fails(&run(&["read", &url]), 2, &[&url, "access denied"]);
    assert_eq!(server.requests().len(), 1, "a 403 is not retried");
    // Nothing listens on this port any more: the network failed, exit 1.
    let url = refused_url("/data.bin");
    fails(&run(&["read", &url]), 1, &[&url]);
    // A URL that cannot be read at all is bad input.
    fails(&run(&["read", "http://"]), 2, &["http://"]);
}

#[test]
fn a_503_then_200_succeeds_and_the_report_shows_the_retry() {
    let data = bytes(100_000, 6);
    let failed_once = Arc::new(AtomicBool::new(false));
    let flag = failed_once.clone();
    let script: Script = Arc::new(move |r: &Request| {
        if r.method == "GET" && !flag.swap(true, Ordering::SeqCst) {
            Reply::Status(503)
        } else {
            Reply::Serve
        }
    });
    let server = serve(&data, script);
    let url = server.url("/data.bin");
    let r = json(&run(&["read", &url, "--checksum", "--json"]));
    assert_eq!(r["checksum_crc32"], crc(&data));
    let requests = r["report"]["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1);
    let attempts = requests[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0]["status"], 503);
    assert_eq!(attempts[0]["retry"]["reason"], "status");
    assert_eq!(attempts[1]["status"], 206);
    assert_eq!(server.gets().len(), 2);
    // For people, the retry is one line of the report.
    failed_once.store(false, Ordering::SeqCst);
    let out = ok(&run(&["read", &url])).clone();
    let shown = text(&out.stdout);
    assert!(
        shown.contains("retries       1: bytes 0..100000: HTTP 503"),
        "{shown}"
    );
}

#[test]
fn a_copy_whose_source_resets_mid_body_leaves_no_partial_destination() {
    let data = bytes(1 << 20, 7);
    let script: Script = Arc::new(|r: &Request| match r.method.as_str() {
        "GET" => Reply::Reset { after: 100_000 },
        _ => Reply::Serve,
    });
    let server = serve(&data, script);
    let url = server.url("/data.bin");
    let dir = tempfile::tempdir().unwrap();
    // An existing DST keeps its old content, whole.
    let dst = dir.path().join("dst.bin");
    std::fs::write(&dst, b"the old content").unwrap();
    let out = run(&["copy", &url, p(&dst)]);
    fails(&out, 1, &[&url, "unchanged"]);
    assert_eq!(std::fs::read(&dst).unwrap(), b"the old content");
    // A new DST is not created; no temporary is left behind.
    let new = dir.path().join("new.bin");
    let out = run(&["copy", &url, p(&new), "--buffer", "256KiB"]);
    fails(&out, 1, &[&url]);
    assert_eq!(names(dir.path()), vec!["dst.bin"]);
    assert!(temporaries(dir.path()).is_empty());
}

#[test]
fn device_memory_for_a_url_needs_a_gpu_and_compat_mode_is_refused() {
    let data = bytes(4096, 8);
    let server = serve(&data, serve_all());
    let url = server.url("/data.bin");
    let out = run(&["read", &url, "--device", "0", "--checksum", "--json"]);
    if gds_core::cuda::probe().is_ok() {
        // Into GPU memory, byte for byte.
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["report"]["memory"]["kind"], "device");
        assert_eq!(
            v["checksum_crc32"],
            format!("{:08x}", crc32fast::hash(&data)).as_str()
        );
    } else {
        // Without a GPU, --device 0 is refused as for a file.
        fails(&out, 2, &["--device"]);
    }
    let gets = server.gets().len();
    let out = run(&["read", &url, "--compat", "off"]);
    fails(&out, 2, &["--compat", &url]);
    assert_eq!(server.gets().len(), gets, "no GET for a refused request");
}

#[test]
fn s3_objects_read_and_copy_through_moto() {
    let Some(moto) = moto::moto() else { return };
    moto.create_bucket("cli");
    let data = bytes(700_000, 9);
    moto.put("cli", "dir/data.bin", &data);
    let s3 = |args: &[&str]| {
        remote_cmd(args)
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("AWS_DEFAULT_REGION", REGION)
            .env("AWS_ENDPOINT_URL", &moto.endpoint)
            .output()
            .unwrap()
    };
    let r = json(&s3(&[
        "read",
        "s3://cli/dir/data.bin",
        "--checksum",
        "--json",
        "--task-size",
        "256KiB",
    ]));
    assert_eq!(r["checksum_crc32"], crc(&data));
    assert_eq!(r["report"]["endpoint"], "s3");
    assert_eq!(r["report"]["requests"].as_array().unwrap().len(), 3);
    // A range.
    let r = json(&s3(&[
        "read",
        "s3://cli/dir/data.bin",
        "--offset",
        "1000",
        "--size",
        "5000",
        "--checksum",
        "--json",
    ]));
    assert_eq!(r["checksum_crc32"], crc(&data[1000..6000]));
    // A copy, named after the key.
    let dir = tempfile::tempdir().unwrap();
    ok(&s3(&["copy", "s3://cli/dir/data.bin", p(dir.path())]));
    assert_eq!(std::fs::read(dir.path().join("data.bin")).unwrap(), data);
    // A missing key: exit 2, naming the object.
    fails(&s3(&["read", "s3://cli/nothing.bin"]), 2, &["nothing.bin"]);

    // A presigned URL (no credentials needed); its signature is never shown.
    let presigned = moto.presigned_url("cli", "dir/data.bin");
    let out = run(&["read", &presigned, "--checksum", "--json"]);
    let r = json(&out);
    assert_eq!(r["checksum_crc32"], crc(&data));
    assert_eq!(r["report"]["endpoint"], "s3_presigned");
    let printed = text(&out.stdout);
    assert!(!printed.contains("Signature="), "{printed}");
}

#[test]
fn bench_of_a_url_measures_whole_object_reads_and_says_what_it_leaves_out() {
    let data = bytes((1 << 20) + 1, 10);
    let server = serve(&data, serve_all());
    let url = server.url("/data.bin");
    let r = json(&run(&[
        "bench",
        "--file",
        &url,
        "--threads",
        "1,2",
        "--task-size",
        "256KiB",
        "--reps",
        "2",
        "--json",
    ]));
    assert_eq!(r["schema"], "kvik-bench/1");
    assert!(r["cases"].as_array().unwrap().is_empty());
    assert!(r["references"].as_array().unwrap().is_empty());
    assert!(r["cold_cache"].is_null());
    assert_eq!(r["file"]["path"], url.as_str());
    let remote = &r["remote"];
    assert_eq!(remote["url"], url.as_str());
    assert_eq!(remote["object_size"], data.len());
    let cases = remote["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for (case, in_flight) in cases.iter().zip([1, 2]) {
        assert!(case["error"].is_null(), "{case}");
        assert_eq!(case["memory"], "host");
        assert_eq!(case["in_flight"], in_flight);
        assert_eq!(case["task_size"], 256 << 10);
        // The whole object (smaller than the default --size), in 5 GETs.
        assert_eq!(case["bytes"], data.len());
        assert_eq!(case["requests"], 5);
        assert_eq!(case["retries"], 0);
        assert_eq!(case["throughput"]["samples"].as_array().unwrap().len(), 2);
    }
    // One HEAD, then per case a warm-up and 2 timed reads of 5 GETs each.
    assert_eq!(server.requests().len(), 1 + 2 * 3 * 5);
    let notes = remote["notes"].to_string();
    assert!(notes.contains("no dd, fio or memcpy reference"), "{notes}");
    assert!(notes.contains("no cold-cache runs"), "{notes}");

    // For people: the same run as a table, saying what it leaves out.
    let out = ok(&run(&[
        "bench",
        "--file",
        &url,
        "--threads",
        "2",
        "--task-size",
        "1MiB",
        "--reps",
        "1",
    ]))
    .clone();
    let shown = text(&out.stdout);
    assert!(shown.contains("remote reads of"), "{shown}");
    assert!(shown.contains("no dd, fio or memcpy reference"), "{shown}");
    assert!(!shown.contains("fio psync"), "{shown}");
    // What only a local file can do is refused (exit 2), as is a 404.
    fails(
        &run(&["bench", "--file", &url, "--ops", "write"]),
        2,
        &["--ops read"],
    );
    fails(
        &run(&["bench", "--file", &url, "--pattern", "random"]),
        2,
        &["--pattern random"],
    );
    let missing = server.url("/missing.bin");
    fails(&run(&["bench", "--file", &missing]), 2, &[&missing, "404"]);
}
