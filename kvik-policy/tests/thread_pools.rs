//! Thread pools are released when no one uses them: the threads of this
//! process named `kvik-io-*` (read from /proc/self/task) are those of the
//! pools someone holds, plus the pool asked for last.
//!
//! One test function: it counts every I/O thread of the process.

use std::time::{Duration, Instant};

use kvik_policy::{FileHandle, Settings, thread_pool};

/// The live threads of this process named `kvik-io-*`.
fn io_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("kvik-io-"))
        .count()
}

/// Wait until the I/O threads number `expected` (a dropped rayon pool ends
/// its threads asynchronously), and say how many there were at the end.
fn settle_at(expected: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = io_threads();
        if now == expected || Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn pools_no_one_uses_are_released() {
    assert_eq!(io_threads(), 0, "no pool before the first request");

    // A program trying thread counts in turn: 1 + 2 + … + 24 = 300 threads
    // made; only the last pool stays.
    for threads in 1..=24 {
        let pool = thread_pool::get(threads).unwrap();
        assert_eq!(pool.current_num_threads(), threads);
        pool.install(|| ()); // the pool runs
    }
    assert_eq!(settle_at(24), 24, "only the pool asked for last is kept");
    assert_eq!(thread_pool::sizes(), vec![24]);

    // A pool someone holds stays, and is the one handed out again.
    let held = thread_pool::get(3).unwrap();
    let _last = thread_pool::get(5).unwrap();
    assert_eq!(settle_at(3 + 5), 8, "the held pool and the last one");
    assert!(std::sync::Arc::ptr_eq(&held, &thread_pool::get(3).unwrap()));
    drop(_last);
    drop(held);
    // get(3) was asked for last: the pool of 5 is gone, the pool of 3 stays.
    assert_eq!(settle_at(3), 3);
    assert_eq!(thread_pool::sizes(), vec![3]);

    // Requests hold their pool: handles with their own thread counts, read
    // from and dropped, leave only the last pool.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, vec![7u8; 256 << 10]).unwrap();
    for threads in [2, 6, 4] {
        let mut settings = Settings::default();
        settings
            .set_num_threads(threads)
            .unwrap()
            .set_task_size(16 << 10)
            .unwrap();
        let f = FileHandle::open_with(&path, "r", &settings).unwrap();
        let pending = f.pread(vec![0u8; 256 << 10], 0);
        let (buf, transfer) = pending.wait().unwrap();
        assert_eq!((buf.len(), transfer.bytes), (256 << 10, 256 << 10));
        assert_eq!(transfer.report.kvik.execution.threads(), threads);
    }
    assert_eq!(settle_at(4), 4, "only the last request's pool stays");
}
