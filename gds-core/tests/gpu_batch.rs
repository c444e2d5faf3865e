//! cuFile's batch API on a real GPU: a file read into device memory with one
//! submission of many entries (aligned, unaligned, past the end of the file),
//! every completed entry's bytes checked against the file, and what cuFile
//! did recorded on stderr: each entry's status, the batch counters
//! (`batch_*`, including how many went through cuFile's POSIX path) and the
//! per-GPU read counters (`n`, `nvfs`, `posix`).
//!
//! What libcufile does with batch I/O where it has no direct path (no
//! nvidia-fs: its compatibility mode) is an observation, not an assumption:
//! the tests print `RESULT:` lines saying whether setup, submission and the
//! entries worked, and check whatever did work byte for byte.
//!
//! Needs a CUDA driver with a GPU and libcufile; says "skipped: …" otherwise
//! and never touches cuFile then (`KVIK_REQUIRE_GPU=1` makes that a failure).
//! On hosts without udev, write the udev entry first (see gds-core's GPU
//! notes) or registration fails (5027). `KVIK_TEST_DIR` picks the directory of
//! the test file (default: the system temp directory).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, DevicePtr};
use gds_core::batch::{Batch, BatchCounters, BatchEntry, BatchProblem, EntryResult};
use gds_core::{BufferRegistration, CuFileHandle, Driver, Error, OpenFlags, StatsSnapshot};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The driver, or `None` after saying why this machine cannot run the test
/// (a failure instead under `KVIK_REQUIRE_GPU=1`).
fn gpu_driver(test: &str) -> Option<Driver> {
    kvik_test_support::gpu_and_cufile_or_skip(test)?;
    // A GPU machine with libcufile: failures are failures from here.
    Some(Driver::open().unwrap_or_else(|e| panic!("{test}: cuFileDriverOpen: {e}")))
}

/// A file of `len` pseudo-random bytes, removed on drop.
struct TestFile {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl TestFile {
    fn new(name: &str, len: usize) -> TestFile {
        let dir = std::env::var_os("KVIK_TEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let path = dir.join(format!("{name}-{}", std::process::id()));
        // xorshift64, eight bytes a step; no byte is zero, so a late write
        // into zeroed device memory shows.
        let mut state = 0x2545_f491_4f6c_dd1d_u64 ^ len as u64;
        let mut bytes = Vec::with_capacity(len + 8);
        while bytes.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bytes.extend_from_slice(&(state | 0x0101_0101_0101_0101).to_le_bytes());
        }
        bytes.truncate(len);
        std::fs::write(&path, &bytes).unwrap();
        TestFile { path, bytes }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// (file offset, size): aligned small and medium reads, unaligned ones, one
/// crossing the end of the file and one starting past it.
fn plan(file_len: usize) -> Vec<(u64, usize)> {
    let mut entries = vec![
        (0, 4 * KIB),
        (64 * KIB as u64, 64 * KIB),
        (4097, 1000),
        (3 * MIB as u64 + 17, 123_457),
        (8 * MIB as u64, MIB),
        ((file_len - 2000) as u64, 4 * KIB),
        ((file_len + 4096) as u64, 4 * KIB),
    ];
    // Scattered 4 KiB reads at 4 KiB-aligned offsets.
    for i in 0..25u64 {
        entries.push(((i * 7919 % 2000) * 4096, 4 * KIB));
    }
    entries
}

/// What a read of `size` at `offset` returns from a file of `len` bytes.
fn expected_len(len: usize, offset: u64, size: usize) -> usize {
    len.saturating_sub(offset as usize).min(size)
}

/// Wait for every entry, at most 20 s.
fn batch_test(batch: &mut Batch<'_>) -> gds_core::Result<Vec<EntryResult>> {
    batch.wait_all(Duration::from_secs(20))
}

/// The results, or `None` after recording that cuFile did not report the
/// entries (the caller then leaks the batch and what it may still write:
/// dropping it would wait for cuFile forever). Without nvidia-fs that is
/// what libcufile's compatibility mode may do; with it, a failure.
fn settle(
    results: gds_core::Result<Vec<EntryResult>>,
    registered: bool,
) -> Option<Vec<EntryResult>> {
    match results {
        Ok(results) => Some(results),
        Err(Error::Batch {
            problem:
                BatchProblem::Timeout {
                    in_flight,
                    waited_ms,
                },
        }) => {
            say(&format!(
                "RESULT: registered={registered}: {in_flight} entries still in flight after \
                 {waited_ms} ms: libcufile did not complete them (nvidia-fs loaded: {})",
                gds_core::platform::nvidia_fs().loaded
            ));
            assert!(
                !gds_core::platform::nvidia_fs().loaded,
                "with nvidia-fs, batch entries must complete"
            );
            None
        }
        Err(e) => panic!("waiting for the batch: {e}"),
    }
}

#[test]
#[ignore = "run in a process of its own by a_batch_reads_scattered_ranges_into_device_memory"]
fn a_batch_reads_scattered_ranges_child() {
    backtrace_on_crash();
    let test = "a_batch_reads_scattered_ranges";
    let Some(driver) = gpu_driver(test) else {
        return;
    };
    let lib = driver.library();
    let props = driver.properties().expect("cuFileDriverGetProperties");
    say(&format!(
        "libcufile {} ({}), nvidia-fs {:?}, features {:?}, max_batch_io_size {}, \
         max_batch_io_timeout_msecs {}",
        lib.version().map(|v| v.to_string()).unwrap_or_default(),
        lib.display_name(),
        props.nvfs_version,
        props.features,
        props.max_batch_io_size,
        props.max_batch_io_timeout_msecs
    ));
    let file = TestFile::new("gds-core-batch", 16 * MIB);
    let len = file.bytes.len();
    // Leaked: when cuFile never reports entries, the batch must be leaked
    // with everything it may still write to (see `settle`).
    let handle: &'static CuFileHandle = Box::leak(Box::new(
        CuFileHandle::open(&driver, file.path(), OpenFlags::READ)
            .unwrap_or_else(|e| panic!("registering {}: {e}", file.path().display())),
    ));
    let entries = plan(len);
    let slot = 2 * MIB; // every entry lands in its own 2 MiB of device memory
    let total = entries.len() * slot;
    let ctx = CudaContext::new(0).expect("CUDA context");
    let stream = ctx.default_stream();
    let buffer: &'static _ = Box::leak(Box::new(
        stream.alloc_zeros::<u8>(total).expect("device memory"),
    ));

    for registered in [false, true] {
        let (base, sync) = buffer.device_ptr(&stream);
        stream.synchronize().unwrap();
        let registration = registered.then(|| {
            // SAFETY: `buffer` is a live allocation of `total` bytes that
            // outlives the registration (dropped at the end of this iteration).
            unsafe { BufferRegistration::register(&driver, base, total, 0) }
                .expect("cuFileBufRegister")
        });
        let mut batch = match Batch::new(&driver, entries.len() as u32) {
            Ok(b) => b,
            Err(e) => {
                say(&format!(
                    "RESULT: registered={registered}: cuFileBatchIOSetUp refused: {e}"
                ));
                assert!(
                    matches!(e, Error::CuFile { .. } | Error::MissingSymbol(_)),
                    "a typed cuFile error: {e:?}"
                );
                return;
            }
        };
        let batch_entries: Vec<BatchEntry<'_>> = entries
            .iter()
            .enumerate()
            .map(|(i, &(offset, size))| {
                BatchEntry::read(handle, base, (i * slot) as u64, offset, size)
            })
            .collect();
        let stats_before = StatsSnapshot::read(&driver).ok();
        let counters_before = BatchCounters::read(&driver).ok();
        let start = Instant::now();
        // SAFETY: every entry's range lies inside `buffer` (entry i at
        // i * slot, at most 1 MiB < slot), which outlives the batch; the
        // stream does nothing with it meanwhile.
        if let Err(e) = unsafe { batch.submit(&batch_entries) } {
            say(&format!(
                "RESULT: registered={registered}: cuFileBatchIOSubmit refused: {e}"
            ));
            assert!(
                matches!(e, Error::CuFile { .. }),
                "a typed cuFile error: {e:?}"
            );
            return;
        }
        // A second submission while the first is in flight is refused by us.
        if batch.in_flight() > 0 {
            // SAFETY: refused before cuFile sees it (the batch is busy).
            let busy = unsafe { batch.submit(&batch_entries[..1]) }.unwrap_err();
            assert!(
                matches!(
                    busy,
                    Error::Batch {
                        problem: BatchProblem::Busy { .. }
                    }
                ),
                "{busy:?}"
            );
        }
        let Some(results) = settle(batch_test(&mut batch), registered) else {
            std::mem::forget(batch);
            return;
        };
        let elapsed = start.elapsed();
        let counters = match (counters_before, BatchCounters::read(&driver).ok()) {
            (Some(b), Some(a)) => format!("{:?}", a.delta_since(&b)),
            _ => "unavailable".into(),
        };
        let per_gpu = match (stats_before, StatsSnapshot::read(&driver).ok()) {
            (Some(b), Some(a)) => format!("{:?}", a.delta_since(&b).reads()),
            _ => "unavailable".into(),
        };
        drop(batch);
        drop(registration);
        drop(sync);

        let complete = results.iter().filter(|r| r.bytes().is_some()).count();
        say(&format!(
            "RESULT: registered={registered}: {complete} of {} entries complete in {elapsed:?}",
            results.len()
        ));
        say(&format!("  batch counters: {counters}"));
        say(&format!("  per-GPU reads: {per_gpu}"));
        for (&(offset, size), result) in entries.iter().zip(&results) {
            say(&format!("  {size:>7} bytes at {offset:>9}: {result}"));
        }
        for (i, (&(offset, size), result)) in entries.iter().zip(&results).enumerate() {
            let EntryResult::Complete { bytes } = *result else {
                continue;
            };
            let want = expected_len(len, offset, size);
            assert_eq!(bytes, want, "entry {i}: {size} bytes at {offset}");
            if bytes == 0 {
                continue; // past the end of the file: nothing to compare
            }
            let got = stream
                .clone_dtoh(&buffer.slice(i * slot..i * slot + bytes))
                .unwrap();
            assert!(
                got[..] == file.bytes[offset as usize..offset as usize + bytes],
                "entry {i}: device bytes differ from the file"
            );
        }
    }
}

/// Run the ignored test `child` of this binary in a process of its own and
/// check that it passed. Both tests run so: libcufile 1.15 (compatibility
/// mode, H200 machine) crashed at process exit (SIGSEGV) after every test of
/// this binary had passed, also when every batch had completed and been
/// destroyed, and again where a batch had to be abandoned because libcufile
/// never completes cancelled entries. In a child, that crash is reported for
/// what it is (a `RESULT:` line, with the backtrace the child prints: on the
/// H200 every frame past the handler was without symbols) instead
/// of hiding the test results; a failure of the test itself, or a crash
/// before it passed, still fails.
fn in_child(test: &str, child: &str) {
    if kvik_test_support::gpu_and_cufile_or_skip(test).is_none() {
        return;
    }
    let exe = std::env::current_exe().expect("this test binary");
    let out = std::process::Command::new(exe)
        .args([
            child,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KVIK_BATCH_TEST_CHILD", "1")
        .output()
        .expect("run the child test");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    say(&text);
    let passed = text.contains(&format!("test {child} ... ok"));
    assert!(passed, "the child test {child} failed ({})", out.status);
    if !out.status.success() {
        say(&format!(
            "RESULT: {child} passed, and then its process ended with {} at exit, in code \
             without symbols (this binary keeps its own): see the backtrace above",
            out.status
        ));
    }
}

/// In a child: print a backtrace on SIGSEGV, then die of it as before.
fn backtrace_on_crash() {
    extern "C" fn on_segv(signal: libc::c_int) {
        // Not async-signal-safe; a diagnostic on the way down.
        let trace = std::backtrace::Backtrace::force_capture();
        eprintln!("KVIK CRASH: signal {signal} at\n{trace}");
        // SAFETY: restore the default action and re-raise the signal.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    if std::env::var_os("KVIK_BATCH_TEST_CHILD").is_some() {
        // SAFETY: installs a handler for SIGSEGV.
        unsafe { libc::signal(libc::SIGSEGV, on_segv as *const () as libc::sighandler_t) };
    }
}

#[test]
fn a_batch_reads_scattered_ranges_into_device_memory() {
    in_child(
        "a_batch_reads_scattered_ranges",
        "a_batch_reads_scattered_ranges_child",
    );
}

#[test]
fn dropping_a_batch_in_flight_cancels_and_waits() {
    in_child(
        "dropping_a_batch_in_flight",
        "dropping_a_batch_in_flight_child",
    );
}

#[test]
#[ignore = "run in a process of its own by dropping_a_batch_in_flight_cancels_and_waits"]
fn dropping_a_batch_in_flight_child() {
    backtrace_on_crash();
    let test = "dropping_a_batch_in_flight";
    let Some(driver) = gpu_driver(test) else {
        return;
    };
    let file = TestFile::new("gds-core-batch-drop", 256 * MIB);
    let handle: &'static CuFileHandle = Box::leak(Box::new(
        CuFileHandle::open(&driver, file.path(), OpenFlags::READ)
            .unwrap_or_else(|e| panic!("registering {}: {e}", file.path().display())),
    ));
    let n = 32usize;
    let size = 8 * MIB;
    let ctx = CudaContext::new(0).expect("CUDA context");
    let stream = ctx.default_stream();
    let buffer: &'static mut _ = Box::leak(Box::new(
        stream.alloc_zeros::<u8>(n * size).expect("device memory"),
    ));
    let (base, sync) = buffer.device_ptr(&stream);
    stream.synchronize().unwrap();
    let entries: Vec<BatchEntry<'_>> = (0..n)
        .map(|i| BatchEntry::read(handle, base, (i * size) as u64, (i * size) as u64, size))
        .collect();

    // Cancel, then every entry is still reported (complete or cancelled).
    let mut batch = match Batch::new(&driver, n as u32) {
        Ok(b) => b,
        Err(e) => {
            say(&format!("RESULT: cuFileBatchIOSetUp refused: {e}"));
            return;
        }
    };
    // SAFETY: the ranges tile `buffer`, which outlives the batch.
    if let Err(e) = unsafe { batch.submit(&entries) } {
        say(&format!("RESULT: cuFileBatchIOSubmit refused: {e}"));
        return;
    }
    let cancel = batch.cancel();
    let Some(results) = settle(batch_test(&mut batch), false) else {
        std::mem::forget(batch);
        std::mem::forget(sync);
        return;
    };
    let cancelled = results
        .iter()
        .filter(|r| matches!(r, EntryResult::Ended { .. }))
        .count();
    say(&format!(
        "RESULT: cancel {cancel:?}: {} complete, {cancelled} ended otherwise",
        results.len() - cancelled
    ));
    assert_eq!(results.len(), n);

    // Drop with everything in flight: returns only when cuFile is done.
    // SAFETY: as above; the batch is idle again.
    unsafe { batch.submit(&entries) }.expect("a second submission once the first is done");
    assert_eq!(batch.in_flight(), n);
    let start = Instant::now();
    drop(batch);
    say(&format!(
        "RESULT: drop with {n} entries in flight took {:?}",
        start.elapsed()
    ));
    drop(sync);
    // The memory is ours again: nothing may write into it any more. Zero
    // it, give a late writer time, and look.
    stream.memset_zeros(buffer).unwrap();
    stream.synchronize().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let after = stream.clone_dtoh(&*buffer).unwrap();
    assert!(
        after.iter().all(|&b| b == 0),
        "device memory was written after the batch was dropped"
    );
}
