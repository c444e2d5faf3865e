//! Batch reads into GPU memory (`read_batch_into` with a `DeviceSliceMut`:
//! pinned staging windows, then few host→device copies), against single
//! host reads of the same ranges, byte for byte: random aligned 4 KiB and
//! 64 KiB entries into their own slots (one copy per window), unaligned
//! entries with gaps, entries crossing and past the end of the file (the
//! device keeps its bytes past what was read), empty entries, and a batch
//! spanning several windows. Prints the report and the throughput.
//!
//! Says "skipped: …" without a CUDA driver and a GPU; `KVIK_REQUIRE_GPU=1`
//! makes that a failure. `KVIK_TEST_DIR` picks the directory of the file.

mod common;

use std::io::Write as _;
use std::time::Instant;

use common::settings;
use kvik_policy::{FileHandle, ReadRange};
use kvik_test_support::TestFile;

fn gpu(test: &str) -> bool {
    kvik_test_support::gpu_or_skip(test).is_some()
}

/// Run `ranges` into a device buffer of `len` bytes filled with 0xAA, and
/// into host memory through single reads; both must agree everywhere.
fn check(file: &TestFile, threads: usize, ranges: &[ReadRange], len: usize, what: &str) {
    let f = FileHandle::open_with(file.path(), "r", &settings(threads, 4 << 20)).unwrap();
    let stream = kvik_policy::gpu::context(0).unwrap().default_stream();
    let mut device = stream.alloc_zeros::<u8>(len).unwrap();
    stream.memcpy_htod(&vec![0xAAu8; len], &mut device).unwrap();
    stream.synchronize().unwrap();
    let start = Instant::now();
    let done = f.read_batch_into(&mut device, ranges).unwrap();
    let seconds = start.elapsed().as_secs_f64();
    let got = stream.clone_dtoh(&device).unwrap();

    let mut expected = vec![0xAAu8; len];
    for (r, result) in ranges.iter().zip(&done.entries) {
        let dest = &mut expected[r.buffer_offset as usize..(r.buffer_offset + r.len) as usize];
        let n = f.read(&mut *dest, r.file_offset).unwrap();
        assert_eq!(*result.as_ref().unwrap(), n, "{what}: {r:?}");
        // Past the bytes read, the device keeps what it had.
        dest[n..].fill(0xAA);
    }
    assert!(
        got == expected,
        "{what}: device bytes differ from single reads"
    );
    let _ = writeln!(
        std::io::stderr(),
        "{what}, {threads} threads: {:.2} GB/s, {:.0} kIOPS\n{}",
        done.report.bytes as f64 / seconds / 1e9,
        ranges.len() as f64 / seconds / 1e3,
        done.report
    );
    assert_eq!(done.report.failed_entries, 0);
    assert_eq!(f.tasks_in_flight(), 0);
}

#[test]
fn random_reads_land_in_gpu_memory_as_single_reads_do() {
    let test = "random_reads_land_in_gpu_memory";
    if !gpu(test) {
        return;
    }
    let size: u64 = 256 << 20;
    let file = TestFile::random("kvik-gpu-batch", size as usize, 77);
    for (io, n) in [(4096u64, 20_000u64), (65536, 4096)] {
        // Scattered, distinct aligned blocks (i × 7919: a prime, coprime
        // with the power-of-two block count), each into its own slot.
        let blocks = size / io;
        let ranges: Vec<ReadRange> = (0..n)
            .map(|i| ReadRange {
                file_offset: (i * 7_919 + 13) % blocks * io,
                buffer_offset: i * io,
                len: io,
            })
            .collect();
        for threads in [1, 8] {
            check(
                &file,
                threads,
                &ranges,
                (n * io) as usize,
                &format!("{n} × {io} B random"),
            );
        }
    }
}

#[test]
fn unaligned_short_and_empty_entries_keep_the_rest_of_the_device_buffer() {
    let test = "unaligned_short_and_empty_entries";
    if !gpu(test) {
        return;
    }
    let end: u64 = (3 << 20) + 123;
    let file = TestFile::random("kvik-gpu-batch-edges", end as usize, 77);
    let ranges = [
        ReadRange {
            file_offset: 17,
            buffer_offset: 5,
            len: 1000,
        },
        ReadRange {
            file_offset: 5000,
            buffer_offset: 1005,
            len: 3,
        },
        ReadRange {
            file_offset: end - 10,
            buffer_offset: 2000,
            len: 100,
        },
        ReadRange {
            file_offset: end + 4096,
            buffer_offset: 3000,
            len: 100,
        },
        ReadRange {
            file_offset: 0,
            buffer_offset: 4000,
            len: 0,
        },
        // Far apart in the buffer: several staging windows.
        ReadRange {
            file_offset: 1 << 20,
            buffer_offset: 40 << 20,
            len: 2 << 20,
        },
        ReadRange {
            file_offset: 12_345,
            buffer_offset: 20 << 20,
            len: 777,
        },
    ];
    check(&file, 4, &ranges, 43 << 20, "edge cases");
}
