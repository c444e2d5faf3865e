//! Stream-ordered reads and writes on a real GPU: the request waits for the
//! work queued before it (a host function that sleeps, then a memset), and
//! work queued after it waits for the request (a copy that would otherwise
//! see the old bytes) — through the gated POSIX path (compat ON) and through
//! cuFile's stream API (compat OFF). Says "skipped" without a CUDA driver;
//! `KVIK_REQUIRE_GPU=1` makes that a failure.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaStream, sys};
use kvik_policy::plan::Execution;
use kvik_policy::{CompatMode, FileHandle, Settings};
use kvik_test_support::{TestFile, gpu_and_cufile_or_skip, gpu_or_skip, random_bytes};

const MIB: usize = 1 << 20;

fn settings(compat: CompatMode) -> Settings {
    let mut s = Settings::default();
    s.set_compat_mode(compat)
        .set_auto_direct_io_read(false)
        .set_auto_direct_io_write(false);
    s.set_num_threads(8).unwrap();
    s
}

extern "C" fn sleep_200ms(_: *mut c_void) {
    std::thread::sleep(Duration::from_millis(200));
}

/// Hold `stream` for 200 ms (a host function that sleeps), then fill `len`
/// bytes at `ptr` with `value`: work queued before a request.
fn slow_fill(stream: &CudaStream, ptr: u64, len: usize, value: u8) {
    // SAFETY: a host function that touches nothing; a memset inside an
    // allocation the caller owns.
    unsafe {
        assert_eq!(
            sys::cuLaunchHostFunc(stream.cu_stream(), Some(sleep_200ms), std::ptr::null_mut()),
            sys::CUresult::CUDA_SUCCESS
        );
        assert_eq!(
            sys::cuMemsetD8Async(ptr, value, len, stream.cu_stream()),
            sys::CUresult::CUDA_SUCCESS
        );
    }
}

fn ordered_reads_and_writes(compat: CompatMode) {
    let len = 256 * MIB + 4096;
    let data = random_bytes(len, 11);
    let file = TestFile::new(&format!("kvik-stream-{compat}"), &data);
    let path = file.path();
    let f = match FileHandle::open_with(path, "r+", &settings(compat)) {
        Ok(f) => f,
        Err(e) if compat == CompatMode::Off => {
            panic!("compat OFF needs cuFile here (write the udev entry first): {e}")
        }
        Err(e) => panic!("{e}"),
    };
    let ctx = kvik_policy::gpu::context(0).unwrap();
    let stream: Arc<CudaStream> = ctx.new_stream().unwrap();
    let buffer = stream.alloc_zeros::<u8>(len).unwrap();
    let mut copy = stream.alloc_zeros::<u8>(len).unwrap();
    stream.synchronize().unwrap();
    let base = {
        let (ptr, _record) = cudarc::driver::DevicePtr::device_ptr(&buffer, &stream);
        ptr
    };

    // Before: a slow memset queued first must land before the read does.
    slow_fill(&stream, base, len, 0xAA);
    let start = Instant::now();
    let io = f.read_async(buffer, 0, &stream);
    let returned_after = start.elapsed();
    // After: this copy waits for the read, or it would copy 0xAA bytes.
    let (buffer, done) = {
        // The read owns the buffer until it is waited for; queue the copy
        // from the flag-gated stream through the raw address.
        // SAFETY: both allocations are live; the copy is ordered on the stream.
        unsafe {
            let (dst, _record) = cudarc::driver::DevicePtrMut::device_ptr_mut(&mut copy, &stream);
            assert_eq!(
                sys::cuMemcpyDtoDAsync_v2(dst, base, len, stream.cu_stream()),
                sys::CUresult::CUDA_SUCCESS
            );
        }
        io.wait().unwrap()
    };
    stream.synchronize().unwrap();
    assert!(
        returned_after < Duration::from_millis(150),
        "read_async returned after {returned_after:?}: it must not wait for the stream"
    );
    assert_eq!(done.bytes, len);
    // cuFile's stream API serves files with a direct path (nvidia-fs);
    // without one, the gated path (and, under OFF, cuFile in the pool).
    let expected_execution = match compat {
        CompatMode::Off if gds_core::platform::nvidia_fs().loaded => Execution::CudaStream,
        _ => Execution::Pool { threads: 8 },
    };
    assert_eq!(
        done.report.kvik.execution, expected_execution,
        "{}",
        done.report
    );
    let back = stream.clone_dtoh(&copy).unwrap();
    assert!(
        back == data,
        "{compat}: the copy queued after the read saw other bytes"
    );
    let direct = stream.clone_dtoh(&buffer).unwrap();
    assert!(
        direct == data,
        "{compat}: the read landed before the memset"
    );
    eprintln!(
        "{compat}: read_async returned in {returned_after:?}; {}",
        done.report.kvik.route.reason
    );

    // Write: the slow memset before it must be what reaches the file.
    slow_fill(&stream, base, len, 0x5C);
    let (_buffer, written) = f.write_async(buffer, 0, &stream).wait().unwrap();
    assert_eq!(written.bytes, len);
    drop(f);
    let on_disk = std::fs::read(path).unwrap();
    assert!(
        on_disk.iter().all(|&b| b == 0x5C),
        "{compat}: the write did not wait for the memset queued before it"
    );
}

#[test]
fn stream_ordered_io_through_bounce_buffers() {
    if gpu_or_skip("stream_ordered_io_through_bounce_buffers").is_some() {
        ordered_reads_and_writes(CompatMode::On);
    }
}

#[test]
fn stream_ordered_io_through_cufile() {
    if gpu_and_cufile_or_skip("stream_ordered_io_through_cufile").is_some() {
        ordered_reads_and_writes(CompatMode::Off);
    }
}

#[test]
fn a_failed_stream_ordered_request_still_releases_the_stream() {
    if gpu_or_skip("a_failed_stream_ordered_request_still_releases_the_stream").is_none() {
        return;
    }
    let file = TestFile::random("kvik-stream-fail", MIB, 3);
    // Read-only: the write is refused, in the background.
    let f = FileHandle::open_with(file.path(), "r", &settings(CompatMode::On)).unwrap();
    let stream = kvik_policy::gpu::context(0).unwrap().new_stream().unwrap();
    let buffer = stream.alloc_zeros::<u8>(MIB).unwrap();
    let err = f.write_async(buffer, 0, &stream).wait().unwrap_err();
    assert!(
        matches!(err, kvik_policy::Error::ModeForbids { .. }),
        "{err}"
    );
    // The stream is not held at the request's gate.
    let (tx, rx) = std::sync::mpsc::channel();
    let s = stream.clone();
    std::thread::spawn(move || tx.send(s.synchronize()).unwrap());
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the stream still waits for a failed request")
        .unwrap();
}
