//! What the CLI tests share: running the real `kvik` with a clean
//! environment and a deadline (a command that hangs fails its test instead
//! of hanging the suite), reading its results, FIFOs, a pipe whose reader
//! is gone, `/dev/full`.

#![allow(dead_code)] // each test file uses its own share of these

use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Longer than any command here takes on a loaded 2-core machine; a
/// command still running then is hung (a FIFO's open waits forever).
pub const DEADLINE: Duration = Duration::from_secs(120);

/// `kvik ARGS` with a clean environment (see [`clean_env`]).
pub fn kvik_cmd<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    let mut cmd = Command::new(KVIK);
    cmd.args(args);
    clean_env(&mut cmd);
    cmd
}

/// The binary under test.
pub const KVIK: &str = env!("CARGO_BIN_EXE_kvik");

/// Remove the test's `KVIKIO_*`, `CUFILE_*` and `KVIK_*` variables from
/// `cmd`'s environment: settings the test did not choose. Kept: where
/// libcufile is (`KVIK_CUFILE_LIBRARY*`, a fact of the machine: CI points
/// it at the real library so that every run loads it).
pub fn clean_env(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        let setting = ["KVIKIO_", "CUFILE_", "KVIK_"]
            .iter()
            .any(|prefix| name_text.starts_with(prefix));
        if setting && !name_text.starts_with("KVIK_CUFILE_LIBRARY") {
            cmd.env_remove(name);
        }
    }
}

/// Run `cmd` to its end, feeding `stdin` when given (its stdio as the
/// caller set it otherwise); one still running after [`DEADLINE`] is
/// killed and the test fails.
pub fn run_with_input(cmd: &mut Command, stdin: Option<Vec<u8>>) -> Output {
    let shown = format!("{cmd:?}");
    let mut child = cmd.spawn().expect("start kvik");
    if let Some(data) = stdin {
        let mut pipe = child.stdin.take().expect("a piped stdin");
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    let pid = rustix::process::Pid::from_child(&child);
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    match receiver.recv_timeout(DEADLINE) {
        Ok(output) => output.expect("wait for kvik"),
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            panic!("hung: {shown} still ran after {DEADLINE:?} and was killed");
        }
    }
}

/// [`run_with_input`] without input.
pub fn run(cmd: &mut Command) -> Output {
    run_with_input(cmd, None)
}

/// Run `cmd` with stdout and stderr captured and `stdin` fed (or
/// `/dev/null`), within the deadline.
pub fn output_within(cmd: &mut Command, stdin: Option<Vec<u8>>) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    run_with_input(cmd, stdin)
}

/// `kvik ARGS` with stdout and stderr captured, within the deadline.
pub fn kvik<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    output_within(&mut kvik_cmd(args), None)
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `out` succeeded (exit 0).
pub fn ok(out: &Output) -> &Output {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&ok(out).stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

/// Exit `code`, stderr naming every needle, no panic.
pub fn fails(out: &Output, code: i32, needles: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

pub fn skip(test: &str, reason: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {reason}");
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Names in `dir`, sorted (lossy: for comparing with expectations).
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether `dir` holds a name that looks like one of kvik's temporaries.
pub fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| {
            let bytes = n.as_bytes();
            bytes.windows(5).any(|w| w == b"kvik-") && bytes.starts_with(b".")
        })
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

/// Random-looking bytes from `seed` (not kvik's pattern: the tests compare
/// against bytes kvik did not make).
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Write `data` to a new file at `path`.
pub fn file_with(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap();
}

/// `mkfifo PATH`.
pub fn mkfifo(path: &Path) {
    use rustix::fs::{FileType, Mode};
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
}

/// The write end of a pipe whose read end is already closed: every write
/// to it fails with EPIPE (SIGPIPE is ignored by Rust programs).
pub fn closed_pipe() -> Stdio {
    let (reader, writer): (OwnedFd, OwnedFd) = rustix::pipe::pipe().expect("pipe");
    drop(reader);
    Stdio::from(writer)
}

/// `/dev/full` for writing: every write fails with ENOSPC.
pub fn dev_full() -> Stdio {
    Stdio::from(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full"),
    )
}

/// `cmd.output()` within the deadline: `kvik_cmd(..).env(..).output_within_deadline()`.
pub trait OutputWithinDeadline {
    fn output_within_deadline(&mut self) -> Output;
}

impl OutputWithinDeadline for Command {
    fn output_within_deadline(&mut self) -> Output {
        output_within(self, None)
    }
}
