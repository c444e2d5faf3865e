//! A request's memory does not grow with size ÷ task size: `kvik read` and
//! `kvik write` with 1-byte tasks peak at the buffer plus a fixed overhead
//! (a list of tasks, or one report line per task, would take gigabytes).

mod common;

use common::kvik_cmd;

/// The peak resident set of `kvik ARGS` (a child of this process), in bytes.
fn peak_rss(args: &[&str]) -> u64 {
    let status = kvik_cmd(args).status().expect("run kvik");
    assert!(status.success(), "kvik {args:?}: {status}");
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid rusage to fill, for this process's waited-for children.
    let filled = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(filled, 0);
    // ru_maxrss is in KiB on Linux; the largest of all children so far.
    usage.ru_maxrss as u64 * 1024
}

#[test]
fn one_byte_tasks_cost_no_memory_per_task() {
    // The build's directory may not exist where the binary runs (GPU runs).
    std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = dir.path().join("two-mib.bin");
    let path = file.to_str().unwrap();
    const SIZE: u64 = 2 << 20;
    // 2 Mi tasks of one byte each, through 2 threads, host memory.
    let write = peak_rss(&[
        "write",
        path,
        "--size",
        "2MiB",
        "--task-size",
        "1",
        "--threads",
        "2",
        "--host",
    ]);
    let read = peak_rss(&[
        "read",
        path,
        "--task-size",
        "1",
        "--threads",
        "2",
        "--host",
        "--json",
    ]);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), SIZE);
    // The buffer (2 MiB), the binary, its libraries and threads: tens of
    // MiB. Per-task lists would need hundreds (at least 64 bytes a task).
    let limit = SIZE + (48 << 20);
    assert!(write < limit, "kvik write peaked at {write} bytes");
    assert!(read < limit, "kvik read peaked at {read} bytes");
}
