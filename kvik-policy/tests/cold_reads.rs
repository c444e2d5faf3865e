//! Cold reads: a task whose range is not in the page cache reads with
//! O_DIRECT (`cold_reads_direct`, on by default); a cached one never does,
//! and the report says which and why. The page cache is emptied for the
//! test file only (`fsync` + `POSIX_FADV_DONTNEED`).

mod common;

use std::os::fd::AsRawFd;

use common::{random_bytes, settings, skip};
use kvik_policy::FileHandle;
use kvik_policy::path_report::DirectIoStatus;
use kvik_policy::residency::{self, ReadPath};

const MIB: usize = 1 << 20;

/// Drop `path`'s pages from the page cache; false where the kernel kept them.
fn evict(path: &std::path::Path) -> bool {
    let file = std::fs::File::open(path).unwrap();
    file.sync_all().unwrap();
    // SAFETY: advice on our own descriptor.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    residency::residency(&file, 0, file.metadata().unwrap().len())
        .is_ok_and(|r| r.cached_share() < 0.05)
}

#[test]
fn cold_tasks_read_with_o_direct_and_hot_ones_through_the_page_cache() {
    // Not in /tmp: tmpfs has no O_DIRECT and no cold pages.
    // The build's directory may not exist where the binary runs (GPU runs).
    std::fs::create_dir_all(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("cold.bin");
    let data = random_bytes(8 * MIB + 4097, 5);
    std::fs::write(&path, &data).unwrap();
    if !common::direct_io_works(dir.path()) {
        return skip("cold_reads", "this filesystem refuses O_DIRECT");
    }
    if !evict(&path) {
        return skip("cold_reads", "the kernel kept the file's pages cached");
    }
    let f = FileHandle::open_with(&path, "r", &settings(2, 4 * MIB as u64)).unwrap();
    let mut buf = vec![0u8; data.len()];
    let cold = f.read_with_report(&mut buf, 0).unwrap();
    assert_eq!(cold.bytes, data.len());
    assert!(buf == data, "cold read bytes");
    let DirectIoStatus::ColdReads {
        direct_tasks,
        first,
    } = &cold.report.kvik.direct_io.status
    else {
        panic!("expected cold reads: {}", cold.report);
    };
    assert_eq!(first.path, ReadPath::Direct, "{first}");
    assert_eq!(
        *direct_tasks, 2,
        "the two 4 MiB tasks; the 4 KiB tail is small"
    );
    assert!(cold.report.kvik.direct_io.bytes >= 8 * MIB as u64 - 8192);
    let json = serde_json::to_value(&cold.report).unwrap();
    assert_eq!(json["kvik"]["direct_io"]["status"]["kind"], "cold_reads");

    // Hot: read through the page cache once, then no task is judged cold.
    let _ = std::fs::read(&path).unwrap();
    let hot = f.read_with_report(&mut buf, 0).unwrap();
    assert!(buf == data, "hot read bytes");
    assert!(
        matches!(hot.report.kvik.direct_io.status, DirectIoStatus::Off { .. }),
        "{}",
        hot.report
    );
    assert_eq!(hot.report.kvik.direct_io.bytes, 0);

    // Off: cold tasks go through the page cache.
    evict(&path);
    let mut s = settings(2, 4 * MIB as u64);
    s.set_cold_reads_direct(false);
    let off = FileHandle::open_with(&path, "r", &s).unwrap();
    let done = off.read_with_report(&mut buf, 0).unwrap();
    assert!(buf == data);
    assert_eq!(done.report.kvik.direct_io.bytes, 0, "{}", done.report);
}
