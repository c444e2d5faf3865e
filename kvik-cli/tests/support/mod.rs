//! What the tests of streams, special files and exit codes share: running
//! the real `kvik` with a deadline (a command that hangs fails the test
//! instead of hanging it), FIFOs, and a pipe whose reader is gone.

#![allow(dead_code)]

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Longer than any command here takes on a loaded 2-core machine; a
/// command still running then is hung (a FIFO's open waits forever).
pub const DEADLINE: Duration = Duration::from_secs(120);

/// `kvik ARGS`, with no `KVIKIO_*` or `CUFILE_*` variable from the test's
/// environment.
pub fn kvik_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvik"));
    cmd.args(args);
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        if name_text.starts_with("KVIKIO_") || name_text.starts_with("CUFILE_") {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// Run `cmd` to its end, capturing what is not redirected already; a
/// command that runs past [`DEADLINE`] is killed and the test fails.
pub fn run(cmd: &mut Command) -> Output {
    let shown = format!("{cmd:?}");
    let child = cmd.spawn().expect("start kvik");
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

/// `kvik ARGS` with stdout and stderr captured, within the deadline.
pub fn kvik(args: &[&str]) -> Output {
    run(kvik_cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()))
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn p(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 test path")
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

/// Exit `code` with every needle on stderr, and no panic.
pub fn fails(out: &Output, code: i32, needles: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}
