//! FIFOs, devices, sockets, directories and `/proc` files where a config
//! file, a results file or a path to check is expected: every command
//! answers at once with what the path is (exit 2), or reads it within its
//! bound; none waits for a FIFO's writer or reads `/dev/zero` forever.
//! Each command runs under a deadline (`common::run`): one that hangs
//! fails the test.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::{fails, kvik, kvik_cmd, mkfifo, p, run, text};

/// A directory with a FIFO (no writer), a FIFO with a live writer holding
/// unread data, a socket and a plain file.
struct Specials {
    dir: tempfile::TempDir,
    fifo: PathBuf,
    fed_fifo: PathBuf,
    socket: PathBuf,
    _writer: std::fs::File,
    _listener: std::os::unix::net::UnixListener,
}

impl Specials {
    fn new() -> Specials {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        mkfifo(&fifo);
        let fed_fifo = dir.path().join("fed.json");
        mkfifo(&fed_fifo);
        // Opening a FIFO read-write never waits (Linux): a writer that
        // stays, with data the reader could read.
        let mut writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fed_fifo)
            .unwrap();
        writer.write_all(b"{}").unwrap();
        let socket = dir.path().join("socket.json");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        Specials {
            dir,
            fifo,
            fed_fifo,
            socket,
            _writer: writer,
            _listener: listener,
        }
    }

    /// Each special path with what the error must call it.
    fn all(&self) -> Vec<(&Path, &'static str)> {
        vec![
            (&self.fifo, "is a FIFO (named pipe), not a regular file"),
            (&self.fed_fifo, "is a FIFO (named pipe), not a regular file"),
            (&self.socket, "is a socket, not a regular file"),
            (
                Path::new("/dev/zero"),
                "is a character device, not a regular file",
            ),
            (self.dir.path(), "is a directory, not a regular file"),
        ]
    }
}

#[test]
fn config_and_plan_refuse_what_is_not_a_file_at_once() {
    let specials = Specials::new();
    for (path, says) in specials.all() {
        for args in [
            vec!["config", "validate", p(path)],
            vec!["config", "show", p(path)],
            vec!["config", "show", p(path), "--json"],
            vec!["plan", "--size", "1MiB", "--config", p(path)],
        ] {
            let out = kvik(&args);
            fails(&out, 2, &[p(path), says]);
        }
    }
}

#[test]
fn cufile_env_path_json_naming_a_fifo_never_hangs_a_command() {
    let specials = Specials::new();
    let data = specials.dir.path().join("data");
    std::fs::write(&data, vec![7u8; 64 << 10]).unwrap();
    let copy = specials.dir.path().join("copy");
    for fifo in [&specials.fifo, &specials.fed_fifo] {
        // Commands that read the file cuFile reads say what it is.
        for args in [
            vec!["config", "validate"],
            vec!["config", "show"],
            vec!["plan", "--size", "1MiB"],
        ] {
            let out = run(kvik_cmd(&args)
                .env("CUFILE_ENV_PATH_JSON", fifo)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()));
            fails(&out, 2, &[p(fifo), "FIFO"]);
        }
        // Commands that only consult it finish, reporting it where they
        // report the configuration.
        let out = run(kvik_cmd(&["check"])
            .env("CUFILE_ENV_PATH_JSON", fifo)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("is a FIFO (named pipe), not a regular file"));
        for args in [
            vec!["settings"],
            vec!["read", p(&data), "--host"],
            vec!["write", p(&copy), "--size", "64KiB", "--host"],
            vec!["copy", p(&data), p(&copy), "--host"],
        ] {
            let out = run(kvik_cmd(&args)
                .env("CUFILE_ENV_PATH_JSON", fifo)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()));
            assert_eq!(
                out.status.code(),
                Some(0),
                "{args:?}: {}",
                text(&out.stderr)
            );
        }
    }
}

#[test]
fn check_answers_for_a_fifo_socket_or_device_without_opening_it() {
    let specials = Specials::new();
    for (path, kind) in [
        (specials.fifo.as_path(), "is a FIFO (named pipe)"),
        (specials.fed_fifo.as_path(), "is a FIFO (named pipe)"),
        (specials.socket.as_path(), "is a socket"),
        (Path::new("/dev/zero"), "is a character device"),
        (Path::new("/dev/null"), "is a character device"),
    ] {
        for args in [vec!["check", p(path)], vec!["check", p(path), "--json"]] {
            let out = kvik(&args);
            fails(
                &out,
                2,
                &[p(path), kind, "takes a directory, a regular file"],
            );
        }
    }
    // A directory and a regular file are checked as before.
    let out = kvik(&["check", p(specials.dir.path())]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn bench_reads_a_saved_run_only_from_a_regular_file_and_within_a_bound() {
    let specials = Specials::new();
    for (path, says) in specials.all() {
        for flag in ["--from", "--kvikio"] {
            let out = kvik(&["bench", flag, p(path), "--size", "4KiB", "--reps", "1"]);
            fails(&out, 2, &[flag, p(path), says]);
        }
    }
    // A /proc file says it is empty: read to its end, and it is not a run.
    let out = kvik(&["bench", "--from", "/proc/self/status"]);
    fails(&out, 2, &["not a kvik bench result"]);
    // A results file larger than any run is refused by its size.
    let big = specials.dir.path().join("big.json");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(64 << 20).unwrap();
    let out = kvik(&["bench", "--from", p(&big)]);
    fails(&out, 2, &[p(&big), "is larger than the 16 MiB"]);
}

#[test]
fn bench_writes_its_outputs_into_a_fifo_that_is_read_and_never_waits_for_one_that_is_not() {
    let specials = Specials::new();
    let saved = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/results/cpu-2core.json");
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    for flag in ["--save", "--plot"] {
        // No reader: refused at once.
        let out = kvik(&["bench", "--from", p(&saved), flag, p(&specials.fifo)]);
        fails(&out, 2, &[flag, p(&specials.fifo), "nothing reads it"]);
    }
    // A reader: the run is written into the FIFO, as `cmd > fifo` would.
    let fifo = specials.fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read(fifo).unwrap());
    // The reader's open is about to wait for a writer: retry until it is
    // there (the command refuses while it is not).
    let mut written = false;
    for _ in 0..200 {
        let out = kvik(&["bench", "--from", p(&saved), "--save", p(&specials.fifo)]);
        if out.status.code() == Some(0) {
            written = true;
            break;
        }
        fails(&out, 2, &["nothing reads it"]);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(written, "no reader appeared");
    let bytes = reader.join().unwrap();
    let read: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(read, expected, "the whole run came through the FIFO");
}

#[test]
fn kvik_cufile_library_naming_a_fifo_never_hangs_a_command() {
    // dlopen of a FIFO waits for a writer: the loader refuses it first, and
    // each command goes on as without libcufile.
    let specials = Specials::new();
    let data = specials.dir.path().join("data");
    std::fs::write(&data, b"data").unwrap();
    for args in [
        vec!["check"],
        vec!["read", p(&data), "--host"],
        vec!["plan", "--size", "1MiB"],
    ] {
        let out = run(kvik_cmd(&args)
            .env("KVIK_CUFILE_LIBRARY", &specials.fifo)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(all.contains("is not a regular file"), "{args:?}: {all}");
    }
}
