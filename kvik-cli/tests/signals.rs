//! Signals that end `kvik write`, `kvik copy` and `kvik demo` mid-way leave
//! the old destination and no temporary file, and the process still ends
//! by that signal. (Issue 11, item 6.)

mod common;

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{kvik, kvik_cmd, names, ok, p};

/// No core files from the signals whose default action dumps one.
fn no_core(cmd: &mut Command) -> &mut Command {
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let zero = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &zero);
            Ok(())
        })
    }
}

/// A child that is killed if the test fails before it ends (a 2 GiB
/// write must not outlive a failed assertion).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Wait until `child` has its output file open in `dir` (a descriptor
/// naming a file there: an `O_TMPFILE` file shows as `dir/#N (deleted)`),
/// and, for a named temporary, until it exists.
fn wait_for_output(child: &mut Child, dir: &Path, named: bool) {
    let start = Instant::now();
    let fds = format!("/proc/{}/fd", child.id());
    loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before the signal"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no output file seen"
        );
        let open_there = std::fs::read_dir(&fds)
            .map(|entries| {
                entries
                    .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                    .any(|target| {
                        target.starts_with(dir)
                            && target.file_name().is_some_and(|n| {
                                let n = n.to_string_lossy();
                                n.starts_with('#') || n.contains(".kvik-") || n.starts_with(".kvik")
                            })
                    })
            })
            .unwrap_or(false);
        let visible = !common::temporaries(dir).is_empty();
        if open_there && (visible || !named) {
            // Let it write a little.
            std::thread::sleep(Duration::from_millis(50));
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Signal numbers and names.
const SIGNALS: [(i32, &str); 7] = [
    (libc::SIGINT, "INT"),
    (libc::SIGTERM, "TERM"),
    (libc::SIGHUP, "HUP"),
    (libc::SIGQUIT, "QUIT"),
    (libc::SIGXFSZ, "XFSZ"),
    (libc::SIGALRM, "ALRM"),
    (libc::SIGUSR1, "USR1"),
];

#[test]
fn signals_leave_the_old_destination_and_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("dst.bin");
    ok(&kvik(&["write", p(&dst), "--size", "64KiB", "--seed", "1"]));
    let old = std::fs::read(&dst).unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&[
        "write",
        p(&src),
        "--size",
        "256MiB",
        "--seed",
        "2",
    ]));

    for named in [true, false] {
        for (i, (signal, name)) in SIGNALS.into_iter().enumerate() {
            // Small tasks on one thread: long enough to be caught mid-way.
            let slow = ["--threads", "1", "--task-size", "16KiB"];
            let mut args = if i % 2 == 0 {
                vec!["write", p(&dst), "--size", "2GiB", "--buffer", "64MiB"]
            } else {
                vec!["copy", p(&src), p(&dst), "--buffer", "4MiB"]
            };
            args.extend(slow);
            let mut cmd = kvik_cmd(&args);
            cmd.env("KVIK_NO_TMPFILE", if named { "1" } else { "0" })
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            let mut child = Running(no_core(&mut cmd).spawn().unwrap());
            wait_for_output(&mut child.0, dir.path(), named);
            // SAFETY: a signal to our own child.
            assert_eq!(unsafe { libc::kill(child.0.id() as i32, signal) }, 0);
            let status = child.0.wait().unwrap();
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            assert_eq!(
                status.signal(),
                Some(signal),
                "SIG{name} (named: {named}): {status:?} {stderr}"
            );
            assert!(
                std::fs::read(&dst).unwrap() == old,
                "SIG{name}: DST changed"
            );
            assert_eq!(
                names(dir.path()),
                ["dst.bin", "src.bin"],
                "SIG{name} (named: {named})"
            );
        }
    }
}

#[test]
fn a_signal_ends_the_demo_without_leaving_its_file() {
    for named in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = kvik_cmd(&["demo", "--dir", p(dir.path()), "--size", "2GiB", "--host"]);
        cmd.env("KVIK_NO_TMPFILE", if named { "1" } else { "0" })
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = Running(cmd.spawn().unwrap());
        wait_for_output(&mut child.0, dir.path(), named);
        // SAFETY: a signal to our own child.
        assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) }, 0);
        let status = child.0.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    }
}

#[test]
fn a_signal_ignored_by_the_parent_stays_ignored() {
    // `nohup` ignores SIGHUP for its child: the write goes on to the end.
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join("dst.bin");
    let mut cmd = kvik_cmd(&[
        "write",
        p(&dst),
        "--size",
        "256MiB",
        "--threads",
        "1",
        "--task-size",
        "16KiB",
    ]);
    cmd.env("KVIK_NO_TMPFILE", "1").stdout(Stdio::null());
    // SAFETY: signal is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = Running(cmd.spawn().unwrap());
    wait_for_output(&mut child.0, dir.path(), true);
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGHUP) };
    assert!(child.0.wait().unwrap().success());
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), 256 << 20);
    assert_eq!(names(dir.path()), ["dst.bin"]);
}
