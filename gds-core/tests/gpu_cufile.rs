//! cuFile on a real GPU: driver, properties, file registration, reads into
//! device memory with and without buffer registration, and the statistics
//! delta of every read.
//!
//! Needs a CUDA driver with a GPU and libcufile (`KVIK_CUFILE_LIBRARY` or the
//! default search); says "skipped" otherwise (fails under
//! `KVIK_REQUIRE_GPU=1`) and never touches cuFile then. On a host without
//! udevd, registration fails (5027) until the udev entry of the root block
//! device exists (`gpu/run-all.sh` writes it). `KVIK_TEST_DIR` picks the
//! directory of the test file (default: the system temp directory).

use std::io::Write as _;
use std::sync::Arc;

use cudarc::driver::{CudaContext, DevicePtr};
use gds_core::parameters::{BoolParameter, SizeParameter};
use gds_core::schedule::{self, Registration, Request};
use gds_core::{BufferRegistration, CuFileHandle, Driver, OpenFlags, StatsSnapshot, io};
use kvik_test_support::{TestFile, gpu_and_cufile_or_skip};

const MIB: usize = 1 << 20;

fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The driver, or `None` after saying why this machine cannot run the test.
fn driver_or_skip(test: &str) -> Option<Driver> {
    gpu_and_cufile_or_skip(test)?;
    // From here on this is a GPU machine with libcufile: failures are failures.
    Some(Driver::open().unwrap_or_else(|e| panic!("{test}: cuFileDriverOpen: {e}")))
}

#[test]
fn driver_properties_and_parameters_are_readable() {
    let Some(driver) = driver_or_skip("driver_properties") else {
        return;
    };
    let lib = driver.library();
    say(&format!(
        "libcufile {} at {}",
        lib.version().unwrap(),
        lib.display_name()
    ));
    say(&format!("cufile.log: {:?}", driver.log()));
    say(&format!("stats level: {}", driver.stats_level()));
    let props = driver.properties().expect("cuFileDriverGetProperties");
    say(&format!("properties: {props:#?}"));
    say(&format!("direct path: {:?}", props.direct_path()));
    let nvfs_loaded = gds_core::platform::nvidia_fs().loaded;
    assert_eq!(
        props.nvfs_version.is_some(),
        nvfs_loaded,
        "driver and /proc disagree on nvidia-fs"
    );
    let params = driver.parameters();
    for (name, p) in [
        (
            "max_io_threads",
            SizeParameter::CUFILE_PARAM_EXECUTION_MAX_IO_THREADS,
        ),
        (
            "max_request_parallelism",
            SizeParameter::CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM,
        ),
        (
            "min_io_threshold_size_kb",
            SizeParameter::CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB,
        ),
        (
            "per_buffer_cache_size_kb",
            SizeParameter::CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB,
        ),
    ] {
        let value = params.size_t(p).expect(name);
        let (min, max) = params.size_t_range(p).expect(name);
        say(&format!("{name} = {value} (range {min}..={max})"));
        assert!(
            value >= min && value <= max,
            "{name} = {value} outside {min}..={max}"
        );
    }
    let parallel = params
        .bool(BoolParameter::CUFILE_PARAM_EXECUTION_PARALLEL_IO)
        .unwrap();
    say(&format!("parallel_io = {parallel}"));
}

#[test]
fn reads_into_device_memory_are_counted_per_gpu() {
    let Some(driver) = driver_or_skip("reads_into_device_memory") else {
        return;
    };
    let total = 1 << 30;
    let file = TestFile::random("gds-core-read", total, 11);
    let path = file.path();
    let handle = CuFileHandle::open(&driver, path, OpenFlags::READ)
        .unwrap_or_else(|e| panic!("registering {}: {e}", path.display()));
    let expected = std::fs::read(path).unwrap();

    let ctx: Arc<CudaContext> = CudaContext::new(0).expect("CUDA context");
    let stream = ctx.default_stream();
    let buffer = stream
        .alloc_zeros::<u8>(total)
        .expect("1 GiB of device memory");
    let nvfs_loaded = gds_core::platform::nvidia_fs().loaded;
    let execution = driver
        .parameters()
        .execution()
        .expect("execution parameters");
    say(&format!("execution: {execution:?}"));

    say(
        "file_offset  buffer_offset  size        registered  n  predicted  nvfs  posix  unaligned  bytes",
    );
    // (file offset, buffer offset, size, registered): NVIDIA's examples, the
    // registered/unregistered boundary at 8 MiB + 4 KiB, and an unaligned
    // request whose size is not a multiple of 4 KiB.
    let cases = [
        (0, 0, 16 * MIB, false),
        (0, 0, 16 * MIB, true),
        (0, 0, 8 * MIB + 4096, false),
        (0, 0, 8 * MIB + 4096, true),
        (4097, 512, 16 * MIB + 123, false),
        (0, 0, total, false),
        (0, 0, total, true),
    ];
    for (file_offset, buffer_offset, size, registered) in cases {
        let (ptr, sync) = buffer.device_ptr(&stream);
        stream.synchronize().unwrap();
        let registration =
            // SAFETY: `buffer` is a live device allocation of `total` bytes
            // that outlives the registration (dropped at the end of the loop body).
            registered.then(|| unsafe { BufferRegistration::register(&driver, ptr, total, 0) }.expect("cuFileBufRegister"));
        let before = StatsSnapshot::read(&driver).expect("stats before");
        // SAFETY: buffer_offset + size <= total bytes of the allocation.
        let n = unsafe { io::read(&handle, ptr, size, file_offset as u64, buffer_offset as u64) }
            .expect("cuFileRead");
        let after = StatsSnapshot::read(&driver).expect("stats after");
        drop(registration);
        drop(sync);
        let delta = after.delta_since(&before);
        let reads = delta.reads();
        let request = Request {
            file_offset: file_offset as u64,
            buffer_offset: buffer_offset as u64,
            size: size as u64,
        };
        let predicted =
            schedule::plan(request, &execution, Registration::from(registered)).len() as u64;
        say(&format!(
            "{file_offset:>11}  {buffer_offset:>13}  {size:>10}  {registered:<10}  {}  {predicted}  {}  {}  {}  {}",
            reads.n, reads.nvfs, reads.posix, reads.unaligned, reads.bytes
        ));
        assert_eq!(n, size, "short read");
        assert_eq!(
            reads.bytes, size as u64,
            "per-GPU read bytes (a wrong stats layout shows here)"
        );
        // Level-1 read_ops is not the unit count (libcufile 1.15 counted 2
        // for an 8 MiB + 4 KiB read that made 1 unit), but it moves.
        assert!(delta.ops.read_ok >= 1, "level-1 read_ops counted the read");
        assert_eq!(
            reads.n, predicted,
            "cuFile's work units vs the scheduling model"
        );
        assert_eq!(
            reads.nvfs + reads.posix + reads.p2p,
            reads.n,
            "every unit took some path"
        );
        if !nvfs_loaded {
            assert_eq!(reads.nvfs, 0, "no nvidia-fs, no direct path");
        }
        let got = stream
            .clone_dtoh(&buffer.slice(buffer_offset..buffer_offset + size))
            .unwrap();
        assert!(
            got == expected[file_offset..file_offset + size],
            "device bytes differ from the file"
        );
    }
    drop(handle);
}
