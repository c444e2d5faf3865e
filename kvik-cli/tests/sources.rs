//! `kvik copy` and `kvik read` of sources whose size is not their length:
//! pipes, FIFOs, proc files, character devices; sources that change while
//! they are copied; sparse and empty files. (Issue 11, item 1, and its
//! neighbours.)

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{bytes, fails, file_with, json, kvik, kvik_cmd, names, ok, output_within, p, text};

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[test]
fn copy_reads_pipes_fifos_and_proc_files_to_their_real_end() {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("dst.bin");

    // A pipe on stdin, larger than a window, with checksums.
    let data = bytes(3 << 20, 1);
    let out = output_within(
        &mut kvik_cmd(&[
            "copy",
            "/dev/stdin",
            p(&dst),
            "--json",
            "--checksum",
            "--buffer",
            "1MiB",
        ]),
        Some(data.clone()),
    );
    let c = json(&out);
    assert_eq!(c["bytes"], 3 << 20);
    assert_eq!(c["source_kind"], "pipe");
    assert_eq!(
        c["checksum_crc32"],
        format!("{:08x}", crc32fast::hash(&data)).as_str()
    );
    assert!(
        c["read"].get("report").is_none(),
        "a pipe is not read through the stack"
    );
    assert!(std::fs::read(&dst).unwrap() == data);

    // An empty pipe is an empty copy (the writer had nothing to say).
    let out = output_within(
        &mut kvik_cmd(&["copy", "/dev/stdin", p(&dst), "--json"]),
        Some(vec![]),
    );
    assert_eq!(json(&out)["bytes"], 0);
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), 0);

    // A proc file: length 0, content not.
    let c = json(&kvik(&["copy", "/proc/self/status", p(&dst), "--json"]));
    assert_eq!(c["source_kind"], "pseudo_file");
    let copied = std::fs::read_to_string(&dst).unwrap();
    assert!(
        copied.starts_with("Name:") && copied.contains("Pid:"),
        "{copied}"
    );
    assert_eq!(c["bytes"], copied.len());

    // A FIFO with a writer: the test holds it open for writing (O_RDWR
    // never waits) before kvik starts, and writes more than a FIFO holds.
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let data = bytes(2 << 20, 2);
    let mut writer_end = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let writer = {
        let data = data.clone();
        std::thread::spawn(move || {
            writer_end.write_all(&data).unwrap();
        })
    };
    let out = output_within(&mut kvik_cmd(&["copy", p(&fifo), p(&dst), "--json"]), None);
    writer.join().unwrap();
    let c = json(&out);
    assert_eq!(c["source_kind"], "fifo");
    assert!(std::fs::read(&dst).unwrap() == data, "FIFO copy differs");
}

#[test]
fn sources_without_an_end_or_a_writer_are_refused_before_dst_changes() {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("dst.bin");
    file_with(&dst, b"old");

    fails(
        &kvik(&["copy", "/dev/zero", p(&dst)]),
        2,
        &["character device", "--size"],
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"old");

    // A FIFO nobody writes to: refused at once, never a wait.
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let out = output_within(&mut kvik_cmd(&["copy", p(&fifo), p(&dst)]), None);
    fails(&out, 1, &["FIFO with no writer", "is unchanged"]);
    assert_eq!(std::fs::read(&dst).unwrap(), b"old");

    // A stream that ends before --size: nothing is committed.
    let out = output_within(
        &mut kvik_cmd(&["copy", "/dev/stdin", p(&dst), "--size", "1MiB"]),
        Some(vec![7; 1000]),
    );
    fails(&out, 1, &["ended after 1000 bytes", "is unchanged"]);
    assert_eq!(std::fs::read(&dst).unwrap(), b"old");

    // More than a file has.
    let small = dir.path().join("small");
    file_with(&small, b"12345");
    fails(
        &kvik(&["copy", p(&small), p(&dst), "--size", "6"]),
        2,
        &["has only 5 bytes"],
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"old");

    // With --size, an endless device is a bounded copy.
    let c = json(&kvik(&[
        "copy",
        "/dev/zero",
        p(&dst),
        "--size",
        "1MiB",
        "--json",
    ]));
    assert_eq!(c["bytes"], 1 << 20);
    assert!(std::fs::read(&dst).unwrap().iter().all(|&b| b == 0));
    let c = json(&kvik(&[
        "copy",
        p(&small),
        p(&dst),
        "--size",
        "3",
        "--json",
    ]));
    assert_eq!(c["bytes"], 3);
    assert_eq!(std::fs::read(&dst).unwrap(), b"123");

    // A directory, a socket.
    fails(
        &kvik(&["copy", p(dir.path()), p(&dst)]),
        2,
        &["is a directory"],
    );
    let socket_path = dir.path().join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    fails(&kvik(&["copy", p(&socket_path), p(&dst)]), 2, &["socket"]);
    assert_eq!(std::fs::read(&dst).unwrap(), b"123");
    assert_eq!(names(dir.path()), ["dst.bin", "fifo", "small", "socket"]);
}

#[test]
fn read_refuses_sources_without_a_size_and_never_says_they_are_empty() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    for (args, stdin) in [
        (vec!["read", "/proc/self/status"], None),
        (vec!["read", "/dev/zero"], None),
        (vec!["read", "/dev/stdin"], Some(vec![1u8; 100])),
        (vec!["read", p(&fifo)], None),
    ] {
        let out = output_within(&mut kvik_cmd(&args), stdin);
        fails(&out, 2, &["no size to read at offsets"]);
        assert!(
            !text(&out.stderr).contains("0 bytes"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn a_source_that_changes_during_the_copy_fails_and_dst_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("growing.log");
    ok(&kvik(&["write", p(&src), "--size", "16MiB"]));
    let dst = dir.path().join("dst.bin");
    file_with(&dst, b"old");
    // Append while the copy runs (small tasks on one thread make it slow).
    let mut child = kvik_cmd(&[
        "copy",
        p(&src),
        p(&dst),
        "--threads",
        "1",
        "--task-size",
        "4KiB",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut log = std::fs::OpenOptions::new().append(true).open(&src).unwrap();
    while child.try_wait().unwrap().is_none() {
        log.write_all(b"another line\n").unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = child.wait_with_output().unwrap();
    fails(&out, 1, &["changed while it was read", "is unchanged"]);
    assert_eq!(std::fs::read(&dst).unwrap(), b"old");
}

#[test]
fn sparse_and_empty_sources_copy_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let sparse = dir.path().join("sparse");
    let f = std::fs::File::create(&sparse).unwrap();
    f.set_len(8 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"tail", (8 << 20) - 4).unwrap();
    let dst = dir.path().join("dst");
    ok(&kvik(&["copy", p(&sparse), p(&dst)]));
    assert!(std::fs::read(&dst).unwrap() == std::fs::read(&sparse).unwrap());

    let empty = dir.path().join("empty");
    file_with(&empty, b"");
    let c = json(&kvik(&["copy", p(&empty), p(&dst), "--json"]));
    assert_eq!(
        (c["bytes"].as_u64(), c["source_kind"].as_str()),
        (Some(0), Some("file"))
    );
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), 0);
}
