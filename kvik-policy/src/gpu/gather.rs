//! Batch reads into device memory (a prototype): many small reads gathered
//! through pinned host memory, then few host→device copies.
//!
//! Per-read bounce buffers (KvikIO: a synchronised copy per read) cost more
//! than the read itself when reads are small. Here the entries, taken in
//! device-buffer order, are cut into windows of at most [`window_for`] bytes of
//! the device buffer. Each window is read exactly like a host batch (the
//! same plan: neighbours coalesced, parallel `pread` on the file's pool) into
//! a pinned staging buffer laid out like that part of the device buffer;
//! then every run of entries adjacent in the device buffer goes over in one
//! `cuMemcpyHtoDAsync`. Reads into one buffer's own slots, back to back, make
//! one copy per window. Two staging buffers alternate, so a window's copies
//! run while the next window is read. Bytes past the end of the file are not
//! copied (the device keeps what it had there), as in host memory.
//!
//! The staging buffers (pinned, allocated once per GPU and reused) and the
//! stream live in a process-wide cache; one batch uses them at a time.
//!
//! Alternatives the issue names, not taken in this prototype: CUDA 12.8's
//! `cuMemcpyBatchAsync` (one call for scattered destinations; the copies
//! here are already few when destinations are adjacent), a scatter kernel.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, PinnedHostSlice, sys};

use crate::batch::{BatchRead, Destinations, DeviceStaging, Span};
use crate::buffer::DeviceRange;
use crate::error::{Error, Result};
use crate::path_report::Operation;
use crate::routing::MemoryKind;
use crate::{FileHandle, ReadRange};

/// The least of the device buffer one staging window covers.
pub const WINDOW: u64 = 16 << 20;
/// The most: two pinned staging buffers of this size per GPU.
pub const MAX_WINDOW: u64 = 64 << 20;
/// Entries each pool thread gets in a window, at least, where
/// [`MAX_WINDOW`] allows.
const ENTRIES_PER_THREAD: u64 = 4;

/// The window for a batch: [`WINDOW`], or larger (up to [`MAX_WINDOW`]) so
/// that each of `threads` threads reads [`ENTRIES_PER_THREAD`] entries of
/// the largest size in each window. A window ends with every read of it
/// done (the copies of one window overlap the reads of the next, not the
/// reads of the same one), so a window of one entry a thread pays that
/// wait, and the slowest thread's lag, once per entry: 1 MiB reads on 16
/// threads in 16 MiB windows moved 27.4 GB/s into an H200 where the same
/// reads into host memory moved 39; in 64 MiB windows, 28.6–29.6 in three
/// later runs (a small gain: the wait per window remains).
fn window_for(ranges: &[ReadRange], threads: usize) -> u64 {
    let largest = ranges.iter().map(|r| r.len).max().unwrap_or(0);
    largest
        .saturating_mul(threads as u64)
        .saturating_mul(ENTRIES_PER_THREAD)
        .clamp(WINDOW, MAX_WINDOW)
}

/// Pinned staging for one GPU: two buffers, their last copies, a stream.
struct Staging {
    ordinal: u32,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    buffers: [PinnedHostSlice<u8>; 2],
    /// The copies last enqueued from each buffer.
    copied: [Option<CudaEvent>; 2],
}

// One batch at a time per GPU uses a staging set; the others wait.
static STAGING: Mutex<Vec<Staging>> = Mutex::new(Vec::new());

fn cuda(call: &'static str, e: cudarc::driver::DriverError) -> Error {
    super::driver_error(call, e)
}

impl Staging {
    fn new(ordinal: u32, len: usize) -> Result<Staging> {
        let ctx = super::context(ordinal)?;
        let stream = ctx.new_stream().map_err(|e| cuda("cuStreamCreate", e))?;
        let pinned = || {
            // SAFETY: page-locked host memory for bytes (any bit pattern is
            // a valid u8); portable, not write-combined (the CPU writes it
            // through pread, and write-combined memory is slow for that).
            unsafe { ctx.alloc_pinned_with_flags::<u8>(len, sys::CU_MEMHOSTALLOC_PORTABLE) }
                .map_err(|e| cuda("cuMemHostAlloc", e))
        };
        Ok(Staging {
            ordinal,
            buffers: [pinned()?, pinned()?],
            ctx,
            stream,
            copied: [None, None],
        })
    }

    fn len(&self) -> usize {
        self.buffers[0].len()
    }
}

/// One copy to issue: `len` bytes at `offset` of the window (staging and
/// device alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Copy {
    offset: u64,
    len: u64,
}

/// The copies of one window: runs of entries adjacent in the device buffer
/// that were read whole; a short entry ends its run after its bytes, a
/// failed one copies nothing. `entries` are (window offset, length, result),
/// sorted by offset.
fn copies(entries: &[(u64, u64, std::result::Result<usize, ()>)]) -> Vec<Copy> {
    let mut out: Vec<Copy> = Vec::new();
    let mut open = false;
    for &(offset, len, result) in entries {
        let got = match result {
            Ok(n) => n as u64,
            Err(()) => {
                open = false;
                continue;
            }
        };
        if got > 0 {
            match out.last_mut() {
                Some(c) if open && c.offset + c.len == offset => c.len += got,
                _ => out.push(Copy { offset, len: got }),
            }
        }
        open = got == len;
    }
    out
}

/// The entries (indices into `ranges`, non-empty, sorted by buffer offset)
/// in windows of at most `window` bytes of the device buffer (an entry
/// larger than that is a window alone).
fn windows(ranges: &[ReadRange], window: u64) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].len > 0).collect();
    order.sort_by_key(|&i| ranges[i].buffer_offset);
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut start = 0u64;
    for i in order {
        let r = ranges[i];
        match out.last_mut() {
            Some(w) if r.buffer_offset + r.len - start <= window => w.push(i),
            _ => {
                start = r.buffer_offset;
                out.push(vec![i]);
            }
        }
    }
    out
}

/// Refuse a device range CUDA does not know as memory of that GPU, or
/// whose allocation is shorter than the range.
fn check_device(file: &FileHandle, dst: DeviceRange) -> Result<()> {
    let info = super::pointer_info(dst.ptr)?;
    let problem = match info.memory {
        MemoryKind::Host => Some("CUDA does not know this address as device memory".to_string()),
        MemoryKind::Device { ordinal } if ordinal != dst.ordinal && !info.managed => {
            Some(format!("the memory belongs to GPU {ordinal}"))
        }
        _ if info.allocation_size > 0
            && info.allocation_size.saturating_sub(info.offset) < dst.len as u64 =>
        {
            Some("the allocation is shorter than the range".to_string())
        }
        _ => None,
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(Error::DeviceBuffer {
            operation: Operation::Read,
            path: file.path().to_path_buf(),
            offset: 0,
            ordinal: dst.ordinal,
            ptr: dst.ptr,
            len: dst.len,
            problem,
        }),
    }
}

/// Read `ranges` of `file` into the device memory `dst` (already checked
/// against the ranges: inside it, not overlapping). See the module.
pub(crate) fn read_batch(
    file: &FileHandle,
    dst: DeviceRange,
    ranges: &[ReadRange],
) -> Result<BatchRead> {
    let spans = Span::of(ranges);
    let setup = file.batch_setup(&spans)?;
    let window = window_for(ranges, setup.settings.num_threads());
    let windows = windows(ranges, window);
    let mut entries: Vec<Result<usize>> = ranges.iter().map(|_| Ok(0)).collect();
    let mut grouping: Option<crate::batch::Grouping> = None;
    let mut direct_io_bytes = 0;
    let mut staging_report = DeviceStaging {
        windows: windows.len(),
        window_bytes: window,
        copies: 0,
        copied_bytes: 0,
    };
    if !windows.is_empty() {
        check_device(file, dst)?;
        let largest = windows
            .iter()
            .map(|w| span_of(ranges, w).1)
            .max()
            .unwrap_or(0)
            .max(window) as usize;
        let mut cache = STAGING.lock().unwrap_or_else(|e| e.into_inner());
        let at = match cache
            .iter()
            .position(|s| s.ordinal == dst.ordinal && s.len() >= largest)
        {
            Some(i) => i,
            None => {
                cache.retain(|s| s.ordinal != dst.ordinal);
                cache.push(Staging::new(dst.ordinal, largest)?);
                cache.len() - 1
            }
        };
        let staging = &mut cache[at];
        staging
            .ctx
            .bind_to_thread()
            .map_err(|e| cuda("cuCtxSetCurrent", e))?;
        // Whatever happens to a window, no copy into the caller's memory
        // may still run when this returns: the stream is drained first.
        let mut run_windows = || -> Result<()> {
            for (k, window) in windows.iter().enumerate() {
                let b = k % 2;
                if let Some(event) = staging.copied[b].take() {
                    event
                        .synchronize()
                        .map_err(|e| cuda("cuEventSynchronize", e))?;
                }
                let (start, len) = span_of(ranges, window);
                let window_spans: Vec<Span> = window
                    .iter()
                    .map(|&i| Span {
                        dest_offset: ranges[i].buffer_offset - start,
                        ..spans[i]
                    })
                    .collect();
                let host = staging.buffers[b]
                    .as_mut_slice()
                    .map_err(|e| cuda("cuEventSynchronize", e))?;
                let host_ptr = host.as_ptr() as u64;
                let reads =
                    file.read_spans(&setup, &window_spans, vec![&mut host[..len as usize]], true)?;
                direct_io_bytes += reads.direct_io_bytes;
                grouping = Some(match grouping {
                    None => reads.grouping,
                    Some(g) => g.absorb(reads.grouping),
                });
                let mut placed: Vec<(u64, u64, std::result::Result<usize, ()>)> = window_spans
                    .iter()
                    .zip(&reads.entries)
                    .map(|(s, r)| (s.dest_offset, s.len, r.as_ref().map(|n| *n).map_err(|_| ())))
                    .collect();
                placed.sort_by_key(|p| p.0);
                for c in copies(&placed) {
                    // SAFETY: the source lies in the pinned staging buffer (the
                    // window is at most its length), which is not touched again
                    // until the event recorded below completes; the destination
                    // lies in `dst` (the ranges were checked against it), device
                    // memory of this GPU that the caller lends us for the call.
                    let status = unsafe {
                        sys::cuMemcpyHtoDAsync_v2(
                            dst.ptr + start + c.offset,
                            (host_ptr + c.offset) as *const std::ffi::c_void,
                            c.len as usize,
                            staging.stream.cu_stream(),
                        )
                    };
                    if status != sys::CUresult::CUDA_SUCCESS {
                        return Err(super::cuda_error("cuMemcpyHtoDAsync", status as u32));
                    }
                    staging_report.copies += 1;
                    staging_report.copied_bytes += c.len;
                }
                staging.copied[b] = Some(
                    staging
                        .stream
                        .record_event(Some(sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC))
                        .map_err(|e| cuda("cuEventRecord", e))?,
                );
                for (&i, r) in window.iter().zip(reads.entries) {
                    entries[i] = r;
                }
            }
            Ok(())
        };
        let outcome = run_windows();
        let drained = staging.stream.synchronize();
        staging.copied = [None, None];
        outcome?;
        drained.map_err(|e| cuda("cuStreamSynchronize", e))?;
    }
    let reads = crate::batch::SpanReads {
        entries,
        direct_io_bytes,
        grouping: grouping.unwrap_or(crate::batch::Grouping {
            reads: 0,
            read_limit: setup.settings.task_size(),
            coalesced_entries: 0,
            split_entries: 0,
            jobs: 0,
            threads: setup.settings.num_threads(),
        }),
    };
    let memory = MemoryKind::Device {
        ordinal: dst.ordinal,
    };
    let report = file.batch_report(
        &spans,
        &reads,
        memory,
        Destinations::OneBuffer,
        Some(staging_report),
    );
    Ok(BatchRead {
        entries: reads.entries,
        report,
    })
}

/// Where a window starts in the device buffer, and how many bytes it spans.
fn span_of(ranges: &[ReadRange], window: &[usize]) -> (u64, u64) {
    let start = window
        .iter()
        .map(|&i| ranges[i].buffer_offset)
        .min()
        .unwrap_or(0);
    let end = window
        .iter()
        .map(|&i| ranges[i].buffer_offset + ranges[i].len)
        .max()
        .unwrap_or(start);
    (start, end - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(buffer_offset: u64, len: u64) -> ReadRange {
        ReadRange {
            file_offset: 0,
            buffer_offset,
            len,
        }
    }

    #[test]
    fn windows_cover_the_buffer_in_order() {
        let ranges = [
            range(100, 50),
            range(0, 100),
            range(150, 10),
            range(400, 0),
            range(300, 200),
        ];
        assert_eq!(windows(&ranges, 160), vec![vec![1, 0, 2], vec![4]]);
        // An entry larger than a window is a window alone.
        assert_eq!(
            windows(&[range(0, 10), range(10, 500)], 100),
            vec![vec![0], vec![1]]
        );
        assert_eq!(span_of(&ranges, &[1, 0, 2]), (0, 160));
        assert!(windows(&[range(5, 0)], 100).is_empty());
    }

    #[test]
    fn windows_grow_with_the_entries_and_threads_up_to_a_bound() {
        let of =
            |len: u64, n: u64| -> Vec<ReadRange> { (0..n).map(|i| range(i * len, len)).collect() };
        // Small entries: the least window.
        assert_eq!(window_for(&of(4096, 20_000), 16), WINDOW);
        assert_eq!(window_for(&of(64 << 10, 4096), 16), WINDOW);
        // 1 MiB entries on 16 threads: four each, 64 MiB.
        assert_eq!(window_for(&of(1 << 20, 256), 16), 64 << 20);
        assert_eq!(window_for(&of(1 << 20, 256), 8), 32 << 20);
        // Never past the bound, whatever the entries.
        assert_eq!(window_for(&of(1 << 30, 2), 16), MAX_WINDOW);
        assert_eq!(window_for(&[], 16), WINDOW);
    }

    #[test]
    fn adjacent_whole_entries_make_one_copy() {
        let c = |offset, len| Copy { offset, len };
        // Back to back: one copy.
        assert_eq!(
            copies(&[(0, 10, Ok(10)), (10, 10, Ok(10)), (20, 5, Ok(5))]),
            vec![c(0, 25)]
        );
        // A gap, a short entry (end of file), a failure: each ends a run.
        assert_eq!(
            copies(&[
                (0, 10, Ok(10)),
                (12, 10, Ok(10)),
                (22, 10, Ok(4)),
                (32, 10, Ok(10)),
                (42, 10, Err(())),
                (52, 10, Ok(10)),
                (62, 10, Ok(0)),
            ]),
            vec![c(0, 10), c(12, 14), c(32, 10), c(52, 10)]
        );
    }
}
