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
    let write_args = |task_size: &'static str| {
        [
            "write",
            path,
            "--size",
            "2MiB",
            "--task-size",
            task_size,
            "--threads",
            "2",
            "--host",
        ]
    };
    let read_args = |task_size: &'static str| {
        [
            "read",
            path,
            "--task-size",
            task_size,
            "--threads",
            "2",
            "--host",
            "--json",
        ]
    };
    // The fixed cost first: the same requests as one task each. It is the
    // binary, its libraries and threads, and on a machine with a CUDA
    // driver whatever loading the driver and libcufile costs (about 100 MiB
    // on an H200 machine): nothing that depends on the task count.
    let baseline = peak_rss(&write_args("2MiB")).max(peak_rss(&read_args("2MiB")));
    // Then 2 Mi tasks of one byte each, through 2 threads, host memory.
    // Peaks are the largest of all children so far, so each figure below is
    // at least the baseline.
    let write = peak_rss(&write_args("1"));
    let read = peak_rss(&read_args("1"));
    assert_eq!(std::fs::metadata(&file).unwrap().len(), SIZE);
    // Per-task lists would need at least 64 bytes a task: 128 MiB here.
    let limit = baseline + (32 << 20);
    assert!(
        write < limit,
        "kvik write peaked at {write} bytes (one task: {baseline})"
    );
    assert!(
        read < limit,
        "kvik read peaked at {read} bytes (one task: {baseline})"
    );
    println!(
        "peak RSS: one task {baseline} bytes, 1-byte tasks {} bytes",
        write.max(read)
    );
}
