//! FileHandle with device memory on a real GPU: the bounce-buffer path
//! (compat ON), the cuFile path (compat OFF: cuFile's statistics must count
//! exactly the work units the scheduling model predicts), AUTO's choice and
//! its reason, writes from device memory, unaligned offsets and sizes, and
//! refusals before any I/O. Says "skipped" without a CUDA driver (fails
//! under `KVIK_REQUIRE_GPU=1`) and never touches cuFile then. `KVIK_TEST_DIR`
//! picks the directory; on a GPU host without udevd, cuFile registers files
//! only once the udev entry of the root block device exists
//! (`gpu/run-all.sh` writes it).

use std::io::Write as _;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use kvik_policy::path_report::CuFileVerdict;
use kvik_policy::routing::{FileDecision, RouteReason};
use kvik_policy::{
    Backend, CompatMode, CuFileLayer, DeviceSlice, DeviceSliceMut, Error, FileHandle, Settings,
};
use kvik_test_support::{TestFile, gpu_and_cufile_or_skip, gpu_or_skip, random_bytes};

const MIB: usize = 1 << 20;

fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn settings(compat: CompatMode, threads: usize, task_size: u64) -> Settings {
    let mut s = Settings::default();
    s.set_compat_mode(compat)
        .set_auto_direct_io_read(false)
        .set_auto_direct_io_write(false);
    s.set_num_threads(threads).unwrap();
    s.set_task_size(task_size).unwrap();
    s
}

fn alloc(len: usize) -> (std::sync::Arc<CudaStream>, CudaSlice<u8>) {
    let stream = kvik_policy::gpu::context(0).unwrap().default_stream();
    let slice = stream.alloc_zeros::<u8>(len).unwrap();
    (stream, slice)
}

/// Read `size` bytes at `file_offset` into the device allocation at byte
/// `at`, and return what landed there.
fn read_at(
    f: &FileHandle,
    stream: &std::sync::Arc<CudaStream>,
    slice: &mut CudaSlice<u8>,
    at: usize,
    size: usize,
    file_offset: u64,
) -> (kvik_policy::Transfer, Vec<u8>) {
    let (base, sync) = slice.device_ptr(stream);
    drop(sync);
    stream.synchronize().unwrap();
    // SAFETY: at + size <= slice.len(); the allocation outlives the call.
    let range = unsafe { DeviceSliceMut::from_raw(0, base + at as u64, size) };
    let done = f.read_with_report(range, file_offset).unwrap();
    let back = stream.clone_dtoh(&slice.slice(at..at + size)).unwrap();
    (done, back)
}

#[test]
fn bounce_buffer_reads_and_writes_are_exact() {
    if gpu_or_skip("bounce_buffer_reads_and_writes").is_none() {
        return;
    }
    let len = 64 * MIB + 4097;
    let data = random_bytes(len, 1);
    let path = TestFile::new("kvik-fh-staged", &data);
    let f =
        FileHandle::open_with(&path, "r+", &settings(CompatMode::On, 4, 4 * MIB as u64)).unwrap();
    let (stream, mut slice) = alloc(len + MIB);
    // (file offset, device offset, size): aligned, unaligned everywhere,
    // below gds_threshold (one task on the calling thread), past the end.
    for (file_offset, at, size) in [
        (0, 0, len),
        (4097, 513, 10 * MIB + 3),
        (12345, 7, 1000),
        (len - 10, 0, 10),
    ] {
        let (done, back) = read_at(&f, &stream, &mut slice, at, size, file_offset as u64);
        assert_eq!(done.bytes, size);
        assert!(
            back == data[file_offset..file_offset + size],
            "offset {file_offset} size {size}"
        );
        let r = &done.report;
        assert_eq!(r.kvik.route.backend, Backend::Posix);
        assert!(
            matches!(r.cufile, CuFileLayer::NotCalled { .. }),
            "{:?}",
            r.cufile
        );
        if size < 16 << 10 {
            assert_eq!(r.task_count(), 1, "below gds_threshold: one task");
            assert!(
                matches!(r.kvik.route.reason, RouteReason::BelowGdsThreshold { .. }),
                "{}",
                r.kvik.route.reason
            );
        }
    }
    // A read that meets the end of the file returns the short count.
    let (base, sync) = slice.device_ptr(&stream);
    drop(sync);
    // SAFETY: 4096 bytes inside the allocation.
    let short = f
        .read(
            unsafe { DeviceSliceMut::from_raw(0, base, 4096) },
            (len - 100) as u64,
        )
        .unwrap();
    assert_eq!(short, 100);

    // Device memory back to a file: write the whole allocation's first `len`
    // bytes (which hold `data` after the first read).
    let (done, _) = read_at(&f, &stream, &mut slice, 0, len, 0);
    assert_eq!(done.bytes, len);
    let out = TestFile::new("kvik-fh-staged-out", &[]);
    let w = FileHandle::open_with(&out, "w", &settings(CompatMode::On, 4, 4 * MIB as u64)).unwrap();
    // SAFETY: `len` bytes of the allocation, read-only.
    let written = w
        .write(unsafe { DeviceSlice::from_raw(0, base, len) }, 0)
        .unwrap();
    assert_eq!(written, len);
    drop(w);
    assert!(
        std::fs::read(&out).unwrap() == data,
        "file written from device memory differs"
    );
}

#[test]
fn cufile_reads_report_the_units_the_model_predicts() {
    if gpu_and_cufile_or_skip("cufile_reads_report_the_units").is_none() {
        return;
    }
    let len = 256 * MIB + 8192;
    let data = random_bytes(len, 2);
    let path = TestFile::new("kvik-fh-cufile", &data);
    let (stream, mut slice) = alloc(len);
    say("task size  registered  tasks  predicted  n  nvfs  posix  verdict");
    for (task_size, registered) in [
        (4 * MIB, false),
        (16 * MIB, false),
        (256 * MIB, false),
        (16 * MIB, true),
    ] {
        let f = FileHandle::open_with(&path, "r", &settings(CompatMode::Off, 8, task_size as u64))
            .unwrap_or_else(|e| panic!("compat OFF open: {e}"));
        assert_eq!(f.routing().device_backend, Backend::Cufile);
        let registration = registered.then(|| {
            let driver = gds_core::Driver::open().unwrap();
            let (base, sync) = slice.device_ptr(&stream);
            drop(sync);
            // SAFETY: the allocation outlives the registration (dropped below).
            unsafe { gds_core::BufferRegistration::register(&driver, base, len, 0) }.unwrap()
        });
        let (done, back) = read_at(&f, &stream, &mut slice, 0, len, 0);
        drop(registration);
        assert_eq!(done.bytes, len);
        assert!(back == data, "device bytes differ (task size {task_size})");
        let CuFileLayer::Called {
            predicted_units,
            stats,
            verdict,
            registered_buffer,
            ..
        } = &done.report.cufile
        else {
            panic!("cuFile not called: {:?}", done.report.cufile);
        };
        assert_eq!(*registered_buffer, registered);
        let reads = stats.as_ref().expect("stats delta").reads();
        say(&format!(
            "{:>6} MiB  {registered:<10}  {:>5}  {:>9}  {}  {}  {}  {verdict}",
            task_size / MIB,
            done.report.task_count(),
            predicted_units.unwrap(),
            reads.n,
            reads.nvfs,
            reads.posix
        ));
        assert_eq!(
            Some(reads.n),
            *predicted_units,
            "cuFile's units vs the model"
        );
        assert_eq!(reads.bytes, len as u64);
        if !gds_core::platform::nvidia_fs().loaded {
            assert_eq!((reads.nvfs, reads.posix), (0, reads.n));
            assert!(
                matches!(verdict, CuFileVerdict::CompatibilityMode { .. }),
                "{verdict}"
            );
        }
    }
}

#[test]
fn auto_without_a_direct_path_takes_posix_and_says_why() {
    if gpu_or_skip("auto_without_a_direct_path").is_none() {
        return;
    }
    let data = random_bytes(8 * MIB, 3);
    let path = TestFile::new("kvik-fh-auto", &data);
    let f =
        FileHandle::open_with(&path, "r", &settings(CompatMode::Auto, 4, 4 * MIB as u64)).unwrap();
    let routing = f.routing();
    say(&format!("AUTO routing: {:?}", routing.reasons()));
    if gds_core::platform::nvidia_fs().loaded {
        say("note: nvidia-fs is loaded here, AUTO may choose cuFile");
    } else {
        assert_eq!(routing.device_backend, Backend::Posix);
        assert_eq!(
            routing.decision,
            FileDecision::AutoNoDirectPath,
            "{routing:?}"
        );
    }
    let (stream, mut slice) = alloc(8 * MIB);
    let (done, back) = read_at(&f, &stream, &mut slice, 0, 8 * MIB, 0);
    assert!(back == data);
    say(&format!("{}", done.report));
}

#[test]
fn device_ranges_that_do_not_fit_are_refused_before_any_io() {
    if gpu_or_skip("device_ranges_that_do_not_fit").is_none() {
        return;
    }
    let data = random_bytes(4 * MIB, 4);
    let path = TestFile::new("kvik-fh-small", &data);
    let f = FileHandle::open_with(&path, "r", &settings(CompatMode::On, 2, MIB as u64)).unwrap();
    let (stream, slice) = alloc(MIB);
    let (base, sync) = slice.device_ptr(&stream);
    drop(sync);
    // SAFETY: never dereferenced: refused because it exceeds the allocation.
    let too_big = unsafe { DeviceSliceMut::from_raw(0, base, 4 * MIB) };
    match f.read(too_big, 0) {
        Err(Error::DeviceBuffer { problem, .. }) => {
            assert!(problem.contains("fewer than"), "{problem}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Host memory passed off as device memory.
    let host = vec![0u8; 4096];
    // SAFETY: never dereferenced: CUDA does not know this address.
    let fake = unsafe { DeviceSliceMut::from_raw(0, host.as_ptr() as u64, 4096) };
    assert!(matches!(f.read(fake, 0), Err(Error::DeviceBuffer { .. })));
    assert_eq!(f.tasks_in_flight(), 0);
}
