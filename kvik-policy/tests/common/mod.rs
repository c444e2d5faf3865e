//! Shared helpers for kvik-policy's integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use kvik_policy::{CompatMode, Error, Operation, Settings};

/// Settings for tests: compat ON (no readiness check), the given split,
/// O_DIRECT off unless asked.
pub fn settings(threads: usize, task_size: u64) -> Settings {
    let mut s = Settings::default();
    s.set_compat_mode(CompatMode::On)
        .set_auto_direct_io_read(false)
        .set_auto_direct_io_write(false);
    s.set_num_threads(threads).unwrap();
    s.set_task_size(task_size).unwrap();
    s
}

// Not every test uses both.
#[allow(unused_imports)]
pub use kvik_test_support::{random_bytes, skip};

/// Whether O_DIRECT works in `dir` (it does not on tmpfs, for one).
pub fn direct_io_works(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join("odirect-probe");
    let ok = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = std::fs::remove_file(probe);
    ok
}

/// Run `f` on another thread; fail (instead of hanging) if it takes longer
/// than a minute.
pub fn within_a_minute<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}: no answer within a minute (deadlock?)"))
}

/// The parts of an `Error::Io` (panics on any other error): operation,
/// system call, path, offset, errno.
pub fn io_error_parts(err: &Error) -> (Operation, &'static str, &Path, u64, Option<i32>) {
    match err {
        Error::Io {
            operation,
            syscall,
            path,
            offset,
            errno,
            ..
        } => (*operation, syscall, path, *offset, *errno),
        other => panic!("expected Error::Io, got {other:?}"),
    }
}
