//! Batch reads (`FileHandle::read_batch`, `read_batch_into`) against a
//! sequence of single reads of the same ranges, byte for byte: aligned and
//! unaligned entries, entries crossing or starting past the end of the file,
//! empty entries, neighbours that get coalesced and entries large enough to be
//! split; overlapping destinations refused before any I/O; the report.

mod common;

use common::{random_bytes, settings};
use kvik_policy::batch::BatchProblem;
use kvik_policy::{DeviceSliceMut, Error, FileHandle, ReadInto, ReadRange};
use proptest::prelude::*;

const FILE_SIZE: usize = 200 * 1024 + 123;

fn fixture() -> &'static (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    static FIXTURE: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf, Vec<u8>)> =
        std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("batch");
        let data = random_bytes(FILE_SIZE, 13);
        std::fs::write(&path, &data).unwrap();
        (dir, path, data)
    })
}

/// Entries as (file offset, length, gap before its destination): every kind
/// the issue names, in any order.
fn entries() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
    let aligned = (
        0u64..60,
        prop_oneof![Just(4096u64), Just(8192), Just(65536)],
    )
        .prop_map(|(block, len)| (block * 4096, len, 0));
    let unaligned = (0u64..FILE_SIZE as u64, 1u64..20_000, 0u64..3)
        .prop_map(|(offset, len, gap)| (offset, len, gap * 7));
    let past_end = (0u64..5000, 1u64..5000)
        .prop_map(|(beyond, len)| (FILE_SIZE as u64 - 2000 + beyond, len, 0));
    let empty = (0u64..FILE_SIZE as u64 + 100).prop_map(|offset| (offset, 0, 0));
    // A run of neighbours, adjacent in the file (and packed adjacently).
    let run = (0u64..FILE_SIZE as u64, 1u64..3000).prop_map(|(offset, len)| (offset, len, 0));
    let one = prop_oneof![4 => aligned, 4 => unaligned, 2 => past_end, 1 => empty, 3 => run];
    prop::collection::vec(one, 0..40)
}

/// Destinations for `entries` packed into one buffer in the order given
/// (with the gaps), so the ranges never overlap; the buffer's length.
fn ranges(entries: &[(u64, u64, u64)]) -> (Vec<ReadRange>, usize) {
    let mut at = 0u64;
    let ranges = entries
        .iter()
        .map(|&(file_offset, len, gap)| {
            at += gap;
            let r = ReadRange {
                file_offset,
                buffer_offset: at,
                len,
            };
            at += len;
            r
        })
        .collect();
    (ranges, at as usize)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// One buffer: the batch equals, entry by entry, single reads of the
    /// same ranges into a copy of the buffer.
    #[test]
    fn batches_into_one_buffer_equal_single_reads(
        mut entries in entries(),
        neighbours in any::<bool>(),
        threads in 1usize..5,
        task_size in prop_oneof![Just(4096u64), Just(10_000), Just(1 << 20)],
    ) {
        if neighbours {
            // Make every entry continue the previous one in the file, so
            // that neighbours share reads (up to the task size).
            for i in 1..entries.len() {
                entries[i].0 = entries[i - 1].0 + entries[i - 1].1;
                entries[i].2 = 0;
            }
        }
        let (_, path, _) = fixture();
        let f = FileHandle::open_with(path, "r", &settings(threads, task_size)).unwrap();
        let (ranges, len) = ranges(&entries);
        let mut batch = vec![0xAAu8; len];
        let done = f.read_batch_into(&mut batch, &ranges).unwrap();
        let mut single = vec![0xAAu8; len];
        for (r, result) in ranges.iter().zip(&done.entries) {
            let dest = &mut single[r.buffer_offset as usize..(r.buffer_offset + r.len) as usize];
            let n = f.read(dest, r.file_offset).unwrap();
            prop_assert_eq!(*result.as_ref().unwrap(), n, "{:?}", r);
        }
        prop_assert!(batch == single, "bytes differ from single reads");
        let report = &done.report;
        prop_assert_eq!(report.entries, ranges.len());
        prop_assert_eq!(report.failed_entries, 0);
        let total: usize = done.entries.iter().map(|r| *r.as_ref().unwrap()).sum();
        prop_assert_eq!(report.bytes, total as u64);
        prop_assert_eq!(report.requested_bytes, ranges.iter().map(|r| r.len).sum::<u64>());
        prop_assert_eq!(f.tasks_in_flight(), 0);
    }

    /// Separate slices: the same, entry by entry.
    #[test]
    fn batches_into_separate_slices_equal_single_reads(
        entries in entries(),
        threads in 1usize..5,
        task_size in prop_oneof![Just(4096u64), Just(1 << 20)],
    ) {
        let (_, path, _) = fixture();
        let f = FileHandle::open_with(path, "r", &settings(threads, task_size)).unwrap();
        let mut buffers: Vec<Vec<u8>> = entries.iter().map(|e| vec![0xAAu8; e.1 as usize]).collect();
        let done = f
            .read_batch(entries.iter().zip(buffers.iter_mut()).map(|(e, b)| ReadInto::new(e.0, b)))
            .unwrap();
        prop_assert_eq!(done.report.grouping.coalesced_entries, 0);
        for ((e, buf), result) in entries.iter().zip(&buffers).zip(&done.entries) {
            let mut single = vec![0xAAu8; e.1 as usize];
            let n = f.read(&mut single, e.0).unwrap();
            prop_assert_eq!(*result.as_ref().unwrap(), n);
            prop_assert!(*buf == single, "entry at {} differs", e.0);
        }
    }
}

#[test]
fn overlapping_destinations_are_refused_before_any_io() {
    let (_, path, _) = fixture();
    let f = FileHandle::open_with(path, "r", &settings(2, 4096)).unwrap();
    let ranges = [
        ReadRange {
            file_offset: 0,
            buffer_offset: 0,
            len: 100,
        },
        ReadRange {
            file_offset: 5000,
            buffer_offset: 200,
            len: 100,
        },
        ReadRange {
            file_offset: 9000,
            buffer_offset: 250,
            len: 10,
        },
    ];
    let mut buf = vec![0xAAu8; 400];
    let err = f.read_batch_into(&mut buf, &ranges).unwrap_err();
    match &err {
        Error::InvalidBatch { entry, problem, .. } => {
            assert_eq!(*entry, 2);
            assert_eq!(
                *problem,
                BatchProblem::OverlappingDestinations {
                    buffer_offset: 250,
                    len: 10,
                    other: 1,
                    other_offset: 200,
                    other_end: 300,
                }
            );
        }
        other => panic!("expected InvalidBatch, got {other:?}"),
    }
    assert!(err.to_string().contains("entry 2"), "{err}");
    assert!(
        buf.iter().all(|&b| b == 0xAA),
        "nothing was read into the buffer"
    );
    // Outside the buffer: refused the same way.
    let outside = [ReadRange {
        file_offset: 0,
        buffer_offset: 390,
        len: 20,
    }];
    assert!(matches!(
        f.read_batch_into(&mut buf, &outside),
        Err(Error::InvalidBatch {
            entry: 0,
            problem: BatchProblem::OutsideBuffer { .. },
            ..
        })
    ));
    assert!(buf.iter().all(|&b| b == 0xAA));
}

#[test]
fn entries_past_the_end_read_short_and_the_report_says_so() {
    let (_, path, data) = fixture();
    let f = FileHandle::open_with(path, "r", &settings(2, 1 << 20)).unwrap();
    let end = FILE_SIZE as u64;
    let ranges = [
        ReadRange {
            file_offset: end - 10,
            buffer_offset: 0,
            len: 100,
        },
        ReadRange {
            file_offset: end + 4096,
            buffer_offset: 100,
            len: 100,
        },
        ReadRange {
            file_offset: 0,
            buffer_offset: 200,
            len: 0,
        },
        // Neighbours: one read.
        ReadRange {
            file_offset: 4096,
            buffer_offset: 300,
            len: 4096,
        },
        ReadRange {
            file_offset: 8192,
            buffer_offset: 4396,
            len: 4096,
        },
    ];
    let mut buf = vec![0u8; 8492];
    let done = f.read_batch_into(&mut buf, &ranges).unwrap();
    let bytes: Vec<usize> = done.entries.iter().map(|r| *r.as_ref().unwrap()).collect();
    assert_eq!(bytes, vec![10, 0, 0, 4096, 4096]);
    assert!(buf[..10] == data[FILE_SIZE - 10..]);
    assert!(buf[300..8492] == data[4096..12288]);
    let r = &done.report;
    assert_eq!(
        (
            r.entries,
            r.short_entries,
            r.empty_entries,
            r.failed_entries
        ),
        (5, 2, 1, 0)
    );
    assert_eq!((r.requested_bytes, r.bytes), (8392, 8202));
    assert_eq!(r.grouping.reads, 3, "the neighbours shared a read");
    assert_eq!(r.grouping.coalesced_entries, 2);
    let text = r.to_string();
    assert!(text.contains("read of 5 entries"), "{text}");
    assert!(
        text.contains("2 short (end of file), 0 failed, 1 empty"),
        "{text}"
    );
    assert!(text.contains("2 entries coalesced"), "{text}");
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["destinations"], "one_buffer");
    assert_eq!(json["grouping"]["reads"], 3);
    assert_eq!(json["memory"]["kind"], "host");
}

#[test]
fn batches_respect_the_open_mode_and_refuse_unknown_device_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w");
    let f = FileHandle::open_with(&path, "w", &settings(1, 4096)).unwrap();
    let mut buf = [0u8; 8];
    assert!(matches!(
        f.read_batch([ReadInto::new(0, &mut buf)]),
        Err(Error::ModeForbids { .. })
    ));
    let (_, fixture_path, _) = fixture();
    let f = FileHandle::open_with(fixture_path, "r", &settings(1, 4096)).unwrap();
    // SAFETY: never dereferenced: the batch is refused first.
    let device = unsafe { DeviceSliceMut::from_raw(0, 0x1000, 64) };
    let ranges = [ReadRange {
        file_offset: 0,
        buffer_offset: 0,
        len: 64,
    }];
    // Not device memory CUDA knows (no GPU here, or a made-up address):
    // refused before any read.
    assert!(matches!(
        f.read_batch_into(device, &ranges),
        Err(Error::DeviceBuffer { .. })
    ));
    // An empty batch is fine and reads nothing.
    let done = f.read_batch_into(&mut buf, &[]).unwrap();
    assert!(done.entries.is_empty());
    assert_eq!(done.report.grouping.reads, 0);
}
