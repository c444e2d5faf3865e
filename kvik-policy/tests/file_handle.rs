//! FileHandle end to end on host memory: KvikIO's own test cases (round
//! trips over sizes × threads × task sizes, slices at odd offsets, chunks
//! written at shuffled offsets, direct-I/O matrices), end of file, errors
//! from tasks, nesting inside the pool, and the path report.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake};

use common::{direct_io_works, random_bytes, settings, skip, within_a_minute};
use kvik_policy::path_report::{DirectIoStatus, NotCalledReason};
use kvik_policy::plan::Execution;
use kvik_policy::routing::{FileDecision, RouteReason};
use kvik_policy::{
    AlignedBuffer, Backend, CompatMode, CuFileLayer, DeviceSliceMut, Error, FileHandle, MemoryKind,
    OpenMode, Operation, thread_pool,
};

#[test]
fn round_trips_over_sizes_threads_and_task_sizes() {
    let dir = tempfile::tempdir().unwrap();
    for size in [1usize, 10, 100, 1000, 1024, 4096, 40960] {
        for threads in [1usize, 3, 4, 16] {
            for task_size in [199u64, 1024] {
                let case = format!("size {size}, threads {threads}, task size {task_size}");
                let path = dir.path().join(format!("rt-{size}-{threads}-{task_size}"));
                let s = settings(threads, task_size);
                let data = random_bytes(size, size as u64 * 31 + threads as u64);
                let f = FileHandle::open_with(&path, "w+", &s).unwrap();
                let (_, written) = f.pwrite(data.clone(), 0).wait().expect(&case);
                assert_eq!(written.bytes, size, "{case}");
                let (back, read) = f.pread(vec![0u8; size], 0).wait().expect(&case);
                assert_eq!(read.bytes, size, "{case}");
                assert!(back == data, "{case}: bytes differ");
                // The blocking calls agree.
                let mut again = vec![0u8; size];
                assert_eq!(f.read(&mut again, 0).unwrap(), size);
                assert!(again == data, "{case}");
                assert_eq!(std::fs::read(&path).unwrap(), data, "{case}: on disk");
            }
        }
    }
}

#[test]
fn slices_at_odd_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slices");
    let data = random_bytes(40960, 7);
    std::fs::write(&path, &data).unwrap();
    let f = FileHandle::open_with(&path, "r", &settings(3, 1024)).unwrap();
    for (offset, size) in [
        (0usize, 1usize),
        (1, 10),
        (17, 4096),
        (4095, 2),
        (1000, 30000),
        (40959, 1),
        (333, 40960 - 333),
    ] {
        let mut buf = vec![0u8; size];
        f.read_exact(&mut buf, offset as u64).unwrap();
        assert!(buf[..] == data[offset..offset + size], "{offset}+{size}");
    }
}

#[test]
fn chunks_written_at_shuffled_offsets_in_flight_together() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shuffled");
    let chunk = 1000usize;
    let n = 64usize;
    let data = random_bytes(chunk * n, 99);
    let f = FileHandle::open_with(&path, "w+", &settings(4, 256)).unwrap();
    // A fixed permutation (multiplication by a unit mod 64).
    let order: Vec<usize> = (0..n).map(|i| (i * 37 + 11) % n).collect();
    let pending: Vec<_> = order
        .iter()
        .map(|&i| {
            f.pwrite(
                data[i * chunk..(i + 1) * chunk].to_vec(),
                (i * chunk) as u64,
            )
        })
        .collect();
    for p in pending {
        p.wait().unwrap();
    }
    let mut back = vec![0u8; data.len()];
    f.read_exact(&mut back, 0).unwrap();
    assert!(back == data);
}

/// Expected O_DIRECT bytes of one request: the whole pages inside each task.
fn whole_pages(tasks: &[(u64, u64)], page: u64) -> u64 {
    tasks
        .iter()
        .map(|&(start, size)| {
            let first = start.div_ceil(page) * page;
            let end = (start + size) / page * page;
            end.saturating_sub(first)
        })
        .sum()
}

#[test]
fn direct_io_matrix_with_unaligned_offsets_and_buffers() {
    let dir = tempfile::tempdir().unwrap();
    if !direct_io_works(dir.path()) {
        skip(
            "direct_io_matrix_with_unaligned_offsets_and_buffers",
            "O_DIRECT is not supported in the temp directory",
        );
        return;
    }
    let page = kvik_policy::task::page_size();
    let p = page as usize;
    let mut cases = 0;
    for task_size in [page, 1 << 20] {
        let mut s = settings(3, task_size);
        s.set_auto_direct_io_read(true)
            .set_auto_direct_io_write(true);
        for offset in [0u64, 1, page - 1, page, page + 1, 2 * page + 13] {
            for size in [1usize, p - 1, p, p + 1, 3 * p, 3 * p + 5, (1 << 20) + 3] {
                for misalign in [0usize, 1, 7] {
                    cases += 1;
                    let case = format!(
                        "task {task_size}, offset {offset}, size {size}, buffer +{misalign}"
                    );
                    let path = dir.path().join("direct");
                    let f = FileHandle::open_with(&path, "w+", &s).unwrap();
                    let data = random_bytes(size, offset + size as u64);
                    let mut src = AlignedBuffer::new(size + misalign);
                    src[misalign..].copy_from_slice(&data);
                    let w = f.write_with_report(&src[misalign..], offset).expect(&case);
                    let mut dst = AlignedBuffer::new(size + misalign);
                    let r = f
                        .read_with_report(&mut dst[misalign..], offset)
                        .expect(&case);
                    assert_eq!(r.bytes, size, "{case}");
                    assert!(dst[misalign..] == data[..], "{case}: bytes differ");
                    let on_disk = std::fs::read(&path).unwrap();
                    assert_eq!(on_disk.len() as u64, offset + size as u64, "{case}");
                    assert!(on_disk[offset as usize..] == data[..], "{case}: on disk");
                    let tasks: Vec<(u64, u64)> = r
                        .report
                        .kvik
                        .tasks
                        .iter()
                        .flat_map(|run| {
                            (0..run.count).map(|i| (run.first_file_offset + i * run.size, run.size))
                        })
                        .collect();
                    let expected = whole_pages(&tasks, page);
                    assert_eq!(r.report.kvik.direct_io.bytes, expected, "{case}: read");
                    assert_eq!(w.report.kvik.direct_io.bytes, expected, "{case}: write");
                    assert!(f.fd_direct().is_some(), "{case}");
                }
            }
        }
    }
    assert_eq!(cases, 2 * 6 * 7 * 3);
}

#[test]
fn reads_stop_at_end_of_file_and_read_exact_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eof");
    let data = random_bytes(10_000, 3);
    std::fs::write(&path, &data).unwrap();
    for direct in [false, true] {
        let mut s = settings(2, 1024);
        s.set_auto_direct_io_read(direct);
        let f = FileHandle::open_with(&path, "r", &s).unwrap();
        let mut buf = vec![0u8; 8192];
        assert_eq!(f.read(&mut buf, 4096).unwrap(), 10_000 - 4096);
        assert!(buf[..10_000 - 4096] == data[4096..]);
        let mut whole = vec![0u8; 20_000];
        assert_eq!(f.read(&mut whole, 0).unwrap(), 10_000);
        assert_eq!(f.read(&mut buf, 20_000).unwrap(), 0, "past the end");
        match f.read_exact(&mut buf, 4096).unwrap_err() {
            Error::UnexpectedEof {
                offset,
                requested,
                reached,
                path: p,
            } => {
                assert_eq!((offset, requested, reached), (4096, 8192, 10_000));
                assert_eq!(p, path);
            }
            other => panic!("expected UnexpectedEof, got {other}"),
        }
        let err = f.pread(vec![0u8; 100], 9_950).wait_exact().unwrap_err();
        assert!(
            err.to_string().contains("end of file at offset 10000"),
            "{err}"
        );
    }
}

#[test]
fn open_modes_as_kvikio() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("modes");
    let s = settings(2, 1024);
    // r of a missing file names it.
    let err = FileHandle::open_with(&path, "r", &s).unwrap_err();
    assert!(
        matches!(&err, Error::Open { source, .. } if source.raw_os_error() == Some(libc::ENOENT))
    );
    assert!(err.to_string().contains(path.to_str().unwrap()), "{err}");
    // w creates; w truncates.
    std::fs::write(&path, b"old contents").unwrap();
    let w = FileHandle::open_with(&path, "w", &s).unwrap();
    assert_eq!(w.nbytes().unwrap(), 0);
    assert_eq!(w.mode(), OpenMode::Write);
    w.write(b"hello", 0).unwrap();
    let err = w.read(&mut [0u8; 5], 0).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ModeForbids {
                operation: Operation::Read,
                ..
            }
        ),
        "{err}"
    );
    // r reads, refuses writes.
    let r = FileHandle::open_with(&path, "r", &s).unwrap();
    let mut five = [0u8; 5];
    r.read_exact(&mut five, 0).unwrap();
    assert_eq!(&five, b"hello");
    assert!(matches!(
        r.write(b"x", 0),
        Err(Error::ModeForbids {
            operation: Operation::Write,
            ..
        })
    ));
    // r+ does both, without truncating.
    let rw = FileHandle::open_with(&path, "r+", &s).unwrap();
    rw.write(b"J", 0).unwrap();
    rw.read_exact(&mut five, 0).unwrap();
    assert_eq!(&five, b"Jello");
    // w+ truncates and does both.
    let wr = FileHandle::open_with(&path, "w+", &s).unwrap();
    assert_eq!(wr.nbytes().unwrap(), 0);
    wr.write(b"abc", 0).unwrap();
    let mut three = [0u8; 3];
    wr.read_exact(&mut three, 0).unwrap();
    assert_eq!(&three, b"abc");
    // a, and anything KvikIO would silently accept, are errors.
    for mode in ["a", "a+", "rb", "x", "", "R"] {
        let err = FileHandle::open_with(&path, mode, &s).unwrap_err();
        assert!(
            matches!(&err, Error::OpenMode { mode: m } if m == mode),
            "{mode}: {err}"
        );
    }
    let append = FileHandle::open_with(&path, "a", &s)
        .unwrap_err()
        .to_string();
    assert!(append.contains("append is not supported"), "{append}");
    // A directory is refused at open.
    let err = FileHandle::open_with(dir.path(), "r", &s).unwrap_err();
    assert_eq!(err.errno(), Some(libc::EISDIR), "{err}");
}

#[test]
fn descriptors_are_close_on_exec_and_the_direct_one_is_o_direct() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cloexec");
    let mut s = settings(1, 1 << 20);
    s.set_auto_direct_io_write(true);
    let f = FileHandle::open_with(&path, "w+", &s).unwrap();
    assert_eq!(f.fd_direct(), None, "opened on first need only");
    f.write(&vec![1u8; 8192], 0).unwrap();
    let fds = [Some(f.fd()), f.fd_direct()];
    if fds[1].is_none() {
        skip(
            "descriptors_are_close_on_exec_and_the_direct_one_is_o_direct",
            "O_DIRECT is not supported in the temp directory",
        );
    }
    for fd in fds.into_iter().flatten() {
        // SAFETY: fcntl on a descriptor we own.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert!(flags & libc::FD_CLOEXEC != 0, "fd {fd} lacks FD_CLOEXEC");
    }
    if let Some(fd) = f.fd_direct() {
        // SAFETY: as above.
        let status = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        assert!(status & libc::O_DIRECT != 0);
        // SAFETY: as above.
        let plain = unsafe { libc::fcntl(f.fd(), libc::F_GETFL) };
        assert!(plain & libc::O_DIRECT == 0);
    }
}

#[test]
fn an_error_in_any_task_reaches_the_caller_and_no_task_outlives_it() {
    // /dev/full refuses every write with ENOSPC.
    let s = settings(4, 4096);
    let f = FileHandle::open_with("/dev/full", "w", &s).unwrap();
    let data = vec![7u8; 64 * 4096];
    let err = f.write(&data, 0).unwrap_err();
    match &err {
        Error::Io {
            operation: Operation::Write,
            syscall: "pwrite",
            errno: Some(libc::ENOSPC),
            offset,
            path,
            ..
        } => {
            assert_eq!(offset % 4096, 0, "a task boundary");
            assert_eq!(path.to_str(), Some("/dev/full"));
        }
        other => panic!("expected ENOSPC from pwrite, got {other:?}"),
    }
    assert_eq!(f.tasks_in_flight(), 0);
    let err = f.pwrite(data, 4096).wait().unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENOSPC));
    assert!(err.to_string().contains("/dev/full"), "{err}");
    assert_eq!(f.tasks_in_flight(), 0);
}

#[test]
fn requests_from_inside_a_pool_task_do_not_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested");
    let data = random_bytes(64 * 1024, 5);
    std::fs::write(&path, &data).unwrap();
    // One thread and sixteen tasks: the worst case for nesting.
    let s = settings(1, 4096);
    let f = FileHandle::open_with(&path, "r", &s).unwrap();
    let pool = thread_pool::get(1).unwrap();
    let expected = data.clone();
    let (blocking, background, nested) = within_a_minute("nested requests", move || {
        let blocking = pool.install(|| {
            let mut buf = vec![0u8; 64 * 1024];
            f.read(&mut buf, 0).map(|n| (n, buf))
        });
        let background = pool.install(|| f.pread(vec![0u8; 64 * 1024], 0).wait());
        // A background request waited on from a task spawned into the pool.
        let (tx, rx) = std::sync::mpsc::channel();
        let g = f.clone();
        pool.spawn(move || {
            let _ = tx.send(g.pread(vec![0u8; 64 * 1024], 0).wait());
        });
        (blocking, background, rx.recv().unwrap())
    });
    let (n, buf) = blocking.unwrap();
    assert_eq!(n, expected.len());
    assert!(buf == expected);
    assert!(background.unwrap().0 == expected);
    assert!(nested.unwrap().0 == expected);
}

/// Poll a future on this thread until it is ready.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(out) => return out,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[test]
fn pending_requests_can_be_polled_and_awaited() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("poll");
    let data = random_bytes(1 << 20, 11);
    std::fs::write(&path, &data).unwrap();
    let f = FileHandle::open_with(&path, "r", &settings(2, 64 << 10)).unwrap();
    let (buf, done) = block_on(f.pread(vec![0u8; 1 << 20], 0)).unwrap();
    assert_eq!(done.bytes, 1 << 20);
    assert!(buf == data);
    let mut pending = f.pread(vec![0u8; 1 << 20], 0);
    let result = loop {
        if let Some(result) = pending.try_wait() {
            break result;
        }
        std::thread::yield_now();
    };
    assert!(pending.is_finished());
    assert!(result.unwrap().0 == data);
}

#[test]
fn the_path_report_says_what_happened_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report");
    let size = 10 * (1 << 20) + 5;
    std::fs::write(&path, random_bytes(size, 1)).unwrap();
    let f = FileHandle::open_with(&path, "r", &settings(2, 4 << 20)).unwrap();
    let mut buf = vec![0u8; size];
    let done = f.read_with_report(&mut buf, 0).unwrap();
    let r = &done.report;
    assert_eq!(
        (r.operation, r.bytes, r.requested_bytes),
        (Operation::Read, size as u64, size as u64)
    );
    assert_eq!(r.memory, MemoryKind::Host);
    assert_eq!(r.kvik.route.backend, Backend::Posix);
    assert_eq!(r.kvik.route.reason, RouteReason::HostMemory);
    assert_eq!(r.kvik.file.requested, CompatMode::On);
    assert_eq!(r.kvik.file.effective, CompatMode::On);
    assert_eq!(r.kvik.file.decision, FileDecision::CompatOn);
    assert!(r.kvik.file.evidence.is_empty());
    let runs: Vec<(u64, u64)> = r.kvik.tasks.iter().map(|t| (t.count, t.size)).collect();
    assert_eq!(runs, vec![(2, 4 << 20), (1, (2 << 20) + 5)]);
    assert_eq!(r.task_summary(), "3 tasks: 2 × 4 MiB + 1 × 2097157 B");
    assert_eq!(r.kvik.execution, Execution::Pool { threads: 2 });
    assert!(matches!(
        r.kvik.direct_io.status,
        DirectIoStatus::Off { .. }
    ));
    assert_eq!(
        r.cufile,
        CuFileLayer::NotCalled {
            reason: NotCalledReason::HostMemory
        }
    );
    let text = r.to_string();
    for needle in [
        "compat mode",
        "ON requested, ON in effect",
        "posix: host memory",
        "cuFile",
        "not called",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["kvik"]["route"]["backend"], "posix");
    assert_eq!(json["kvik"]["route"]["reason"]["kind"], "host_memory");
    assert_eq!(json["kvik"]["tasks"][1]["size"], (2 << 20) + 5);
    assert_eq!(json["cufile"]["status"], "not_called");
}

#[test]
fn routing_is_decided_at_open_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routing");
    std::fs::write(&path, b"x").unwrap();
    let mut s = settings(1, 4096);
    // ON: never looks at cuFile.
    let on = FileHandle::open_with(&path, "r", &s).unwrap();
    assert_eq!(on.routing().effective, CompatMode::On);
    assert_eq!(on.routing().device_backend, Backend::Posix);
    // AUTO: POSIX here, with the evidence.
    s.set_compat_mode(CompatMode::Auto);
    let auto = FileHandle::open_with(&path, "r", &s).unwrap();
    let routing = auto.routing();
    assert_eq!(routing.requested, CompatMode::Auto);
    assert_eq!(routing.device_backend, Backend::Posix, "{routing:?}");
    assert!(!routing.evidence.is_empty(), "{routing:?}");
    assert!(
        matches!(
            routing.decision,
            FileDecision::AutoUnavailable | FileDecision::AutoNoDirectPath
        ),
        "{routing:?}"
    );
    let mut buf = [0u8; 1];
    let done = auto.read_with_report(&mut buf[..], 0).unwrap();
    assert_eq!(&done.report.kvik.file, routing);
    // OFF: cuFile or nothing; never a silent fallback.
    s.set_compat_mode(CompatMode::Off);
    match FileHandle::open_with(&path, "r", &s) {
        // A GPU machine where cuFile takes the file: routed to cuFile.
        Ok(off) => {
            assert!(gds_core::cuda::probe().is_ok());
            assert_eq!(off.routing().device_backend, Backend::Cufile);
            assert!(matches!(
                off.routing().decision,
                FileDecision::CompatOff { .. }
            ));
        }
        Err(err) => {
            assert!(matches!(err, Error::CuFileRequired { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(path.to_str().unwrap()) && text.contains("compat mode is OFF"),
                "{text}"
            );
            if gds_core::cuda::probe().is_err() {
                assert!(text.contains("no CUDA driver"), "{text}");
            }
        }
    }
}

#[test]
fn device_ranges_cuda_does_not_know_are_refused_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("device");
    std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
    let f = FileHandle::open_with(&path, "r+", &settings(2, 4096)).unwrap();
    // SAFETY: never dereferenced: the request is refused before any I/O
    // (no CUDA driver here, or, with one, CUDA does not know this address).
    let device = unsafe { DeviceSliceMut::from_raw(0, 0x7000_0000, 1 << 20) };
    match f.read(device, 0).unwrap_err() {
        Error::NoCuda(reason) => {
            assert!(gds_core::cuda::probe().is_err());
            assert!(reason.to_string().contains("CUDA"), "{reason}");
        }
        Error::DeviceBuffer {
            operation,
            ordinal,
            ptr,
            problem,
            ..
        } => {
            assert!(gds_core::cuda::probe().is_ok());
            assert_eq!((operation, ordinal, ptr), (Operation::Read, 0, 0x7000_0000));
            assert!(problem.contains("device memory"), "{problem}");
        }
        other => panic!("expected a refusal before I/O, got {other}"),
    }
    // SAFETY: as above.
    let source = unsafe { kvik_policy::DeviceSlice::from_raw(1, 0x7000_0000, 4096) };
    let err = f.write(source, 0).unwrap_err();
    assert!(
        matches!(err, Error::NoCuda(_) | Error::DeviceBuffer { .. }),
        "{err}"
    );
    assert_eq!(f.tasks_in_flight(), 0);
    // Nothing was written.
    assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 1 << 20]);
}

#[test]
fn offsets_past_what_off_t_holds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge-offset");
    std::fs::write(&path, b"x").unwrap();
    let f = FileHandle::open_with(&path, "r", &settings(1, 4096)).unwrap();
    let err = f.read(&mut [0u8; 2][..], i64::MAX as u64).unwrap_err();
    assert!(matches!(err, Error::InvalidRequest { .. }), "{err}");
}
