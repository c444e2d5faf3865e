//! Batch reads: many `(file offset, length, destination)` in one call, with
//! a result per entry and one [`BatchReport`] for the batch.
//!
//! ```no_run
//! use kvik_policy::{FileHandle, ReadInto, ReadRange};
//! let file = FileHandle::open("/data/rows.bin", "r")?;
//! // Into sub-ranges of one buffer (overlapping ranges are refused before any I/O):
//! let mut rows = vec![0u8; 3 * 4096];
//! let ranges = [
//!     ReadRange { file_offset: 0, buffer_offset: 0, len: 4096 },
//!     ReadRange { file_offset: 1 << 20, buffer_offset: 4096, len: 4096 },
//!     ReadRange { file_offset: 4096, buffer_offset: 8192, len: 4096 },
//! ];
//! let done = file.read_batch_into(&mut rows, &ranges)?;
//! for (range, result) in ranges.iter().zip(&done.entries) {
//!     println!("{range:?}: {:?}", result.as_ref().map(|bytes| *bytes));
//! }
//! println!("{}", done.report);
//! // Into separate slices:
//! let (mut a, mut b) = (vec![0u8; 100], vec![0u8; 200]);
//! let done = file.read_batch([ReadInto::new(0, &mut a), ReadInto::new(5000, &mut b)])?;
//! # Ok::<(), kvik_policy::Error>(())
//! ```
//!
//! How a batch runs (host memory, the POSIX backend):
//! * The entries are checked first: an entry reaching past the largest file
//!   offset, or (one buffer) outside the buffer or overlapping another
//!   entry's destination, refuses the whole batch before any I/O.
//! * Entries are taken in file order. Neighbours that are adjacent both in
//!   the file and in the destination (sub-ranges of one buffer) are read by
//!   one `pread`, up to `task_size` bytes; an entry larger than `task_size`
//!   is read in `task_size` pieces. Separate slices are never merged: they
//!   are separate allocations, and one `pread` cannot span two of them.
//! * The reads are handed to the file's pool in a few jobs per thread (in
//!   file order), each job a run of reads: a 4 KiB read from the page cache
//!   costs about as much as handing a job to a thread, so one job per read
//!   would halve the rate. With one thread, the calling thread reads.
//! * Each entry's result: its bytes (fewer at end of file; 0 for an empty
//!   entry or one starting past the end), or its own error. One entry's
//!   failure does not stop the others. A read shared by several entries that
//!   fails is retried entry by entry, so each error belongs to its entry.
//! * The call returns when no read is left running.
//!
//! Destinations are described by [`ReadRange`] (file offset, buffer offset,
//! length) independently of the memory they land in: a device buffer takes
//! the same entries ([`FileHandle::read_batch_into`] with a
//! `DeviceSliceMut`), read through pinned staging windows and few
//! host→device copies (`gpu::gather`, a prototype).

use std::fmt::{self, Write as _};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use crate::buffer::BufMut;
use crate::error::{Error, Result};
use crate::path_report::Operation;
use crate::posix::{self, Descriptors};
use crate::routing::{Backend, MemoryKind};
use crate::size::bytes_text;
use crate::task_runner::Running;
use crate::task_runner::TaskOutcome;
use crate::{FileHandle, Size, thread_pool};

/// One entry of [`FileHandle::read_batch_into`]: `len` bytes at
/// `file_offset` into `buffer_offset..buffer_offset + len` of the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ReadRange {
    pub file_offset: u64,
    pub buffer_offset: u64,
    pub len: u64,
}

/// One entry of [`FileHandle::read_batch`]: fill `buf` from `file_offset`.
#[derive(Debug)]
pub struct ReadInto<'a> {
    pub file_offset: u64,
    pub buf: &'a mut [u8],
}

impl<'a> ReadInto<'a> {
    pub fn new(file_offset: u64, buf: &'a mut [u8]) -> ReadInto<'a> {
        ReadInto { file_offset, buf }
    }
}

/// Why a batch was refused before any I/O: the entry's problem.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum BatchProblem {
    /// The entry ends past the largest file offset (2^63 − 1).
    #[error(
        "{len} bytes at file offset {file_offset} end beyond the largest file offset (2^63 - 1)"
    )]
    BeyondLargestOffset { file_offset: u64, len: u64 },
    /// The entry's destination does not fit in the buffer.
    #[error("destination {buffer_offset}..{} is outside the {buffer_len}-byte buffer", buffer_offset.saturating_add(*len))]
    OutsideBuffer {
        buffer_offset: u64,
        len: u64,
        buffer_len: u64,
    },
    /// Two entries would write the same bytes of the buffer.
    #[error("destination {buffer_offset}..{} overlaps entry {other}'s {other_offset}..{other_end}", buffer_offset + len)]
    OverlappingDestinations {
        buffer_offset: u64,
        len: u64,
        other: usize,
        other_offset: u64,
        other_end: u64,
    },
}

/// A finished batch: each entry's result, in the order given, and the report.
#[derive(Debug)]
pub struct BatchRead {
    /// Bytes read per entry (fewer than asked only at end of file), or the
    /// entry's error.
    pub entries: Vec<Result<usize>>,
    pub report: BatchReport,
}

/// Where a batch's entries land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Destinations {
    /// A slice per entry ([`FileHandle::read_batch`]).
    SeparateSlices,
    /// Sub-ranges of one buffer ([`FileHandle::read_batch_into`]).
    OneBuffer,
}

impl fmt::Display for Destinations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Destinations::SeparateSlices => "a slice per entry",
            Destinations::OneBuffer => "sub-ranges of one buffer",
        })
    }
}

/// How a batch's entries became reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Grouping {
    /// `pread` requests issued (each continued after a short transfer).
    pub reads: usize,
    /// The most one read moves: merged neighbours up to it, larger entries
    /// cut into pieces of it (the `task_size`).
    pub read_limit: u64,
    /// Entries that shared a read with a neighbour.
    pub coalesced_entries: usize,
    /// Entries larger than `read_limit`, read in pieces.
    pub split_entries: usize,
    /// Jobs the reads were handed to the pool in (0: the calling thread did
    /// them).
    pub jobs: usize,
    pub threads: usize,
}

impl Grouping {
    /// Two parts of one batch (windows of a device batch) as one.
    pub(crate) fn absorb(self, later: Grouping) -> Grouping {
        Grouping {
            reads: self.reads + later.reads,
            read_limit: self.read_limit,
            coalesced_entries: self.coalesced_entries + later.coalesced_entries,
            split_entries: self.split_entries + later.split_entries,
            jobs: self.jobs + later.jobs,
            threads: self.threads,
        }
    }
}

/// One path report for a whole batch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BatchReport {
    pub operation: Operation,
    pub path: PathBuf,
    pub memory: MemoryKind,
    pub destinations: Destinations,
    pub backend: Backend,
    pub entries: usize,
    /// Entries of length 0 (they read nothing and cost nothing).
    pub empty_entries: usize,
    /// Entries that got fewer bytes than asked (end of file).
    pub short_entries: usize,
    pub failed_entries: usize,
    pub requested_bytes: u64,
    pub bytes: u64,
    /// Of which with O_DIRECT (`auto_direct_io_read`).
    pub direct_io_bytes: u64,
    pub grouping: Grouping,
    /// Device memory: how the bytes went through pinned staging.
    pub staging: Option<DeviceStaging>,
}

/// How a batch into device memory was staged: read into pinned host memory
/// window by window, then one host→device copy per run of entries adjacent
/// in the device buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DeviceStaging {
    /// Staging windows (each at most `window_bytes` of the device buffer).
    pub windows: usize,
    pub window_bytes: u64,
    /// Host→device copies issued.
    pub copies: usize,
    /// Bytes copied to the device.
    pub copied_bytes: u64,
}

impl fmt::Display for BatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.grouping;
        let mut out = String::new();
        let mut row = |label: &str, text: String| {
            let _ = writeln!(out, "  {label:<13} {text}");
        };
        row(
            "batch",
            format!(
                "{} of {} entries ({}) from {}: {} moved",
                self.operation,
                self.entries,
                bytes_text(self.requested_bytes),
                self.path.display(),
                bytes_text(self.bytes)
            ),
        );
        let memory = match self.memory {
            MemoryKind::Host => "host".to_string(),
            MemoryKind::Device { ordinal } => format!("device (GPU {ordinal})"),
        };
        row("memory", format!("{memory}, {}", self.destinations));
        row(
            "entries",
            format!(
                "{} short (end of file), {} failed, {} empty",
                self.short_entries, self.failed_entries, self.empty_entries
            ),
        );
        let placement = if g.jobs == 0 {
            "on the calling thread".to_string()
        } else {
            format!(
                "in {} job{} on {} thread{}",
                g.jobs,
                plural(g.jobs),
                g.threads,
                plural(g.threads)
            )
        };
        row(
            "reads",
            format!(
                "{} (at most {} each; {} entries coalesced, {} split), {placement}",
                g.reads,
                Size(g.read_limit),
                g.coalesced_entries,
                g.split_entries
            ),
        );
        let why = match self.memory {
            MemoryKind::Host => "host memory never goes to cuFile",
            MemoryKind::Device { .. } => "batch reads into device memory are staged (prototype)",
        };
        row("backend", format!("{}: {why}", self.backend));
        if self.direct_io_bytes > 0 {
            row("O_DIRECT", bytes_text(self.direct_io_bytes));
        }
        if let Some(st) = &self.staging {
            row(
                "staging",
                format!(
                    "pinned host memory, {} window{} of at most {}; {} host→device cop{} ({})",
                    st.windows,
                    plural(st.windows),
                    Size(st.window_bytes),
                    st.copies,
                    if st.copies == 1 { "y" } else { "ies" },
                    bytes_text(st.copied_bytes)
                ),
            );
        }
        f.write_str(&out)
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One entry, as the planner sees it: where in the file, into which
/// destination (0 for one buffer; the entry's index for separate slices) at
/// which offset, how many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub file_offset: u64,
    pub dest: usize,
    pub dest_offset: u64,
    pub len: u64,
}

impl Span {
    /// The spans of entries into one buffer (destination 0).
    pub(crate) fn of(ranges: &[ReadRange]) -> Vec<Span> {
        ranges
            .iter()
            .map(|r| Span {
                file_offset: r.file_offset,
                dest: 0,
                dest_offset: r.buffer_offset,
                len: r.len,
            })
            .collect()
    }
}

/// A batch's settings and descriptors, fixed after its checks.
pub(crate) struct BatchSetup<'f> {
    pub settings: crate::Settings,
    pub fds: Descriptors<'f>,
}

/// What reading a batch's spans gave: a result per span, and how.
pub(crate) struct SpanReads {
    pub entries: Vec<Result<usize>>,
    pub direct_io_bytes: u64,
    pub grouping: Grouping,
}

/// One `pread` request of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReadOp {
    file_offset: u64,
    dest: usize,
    dest_offset: u64,
    len: u64,
    /// How many entries it serves.
    entries: usize,
}

/// Part of an entry served by one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    entry: usize,
    /// Where the piece starts within the entry.
    entry_offset: u64,
    op: usize,
    /// Where the piece starts within the read.
    op_offset: u64,
    len: u64,
}

/// The reads of a batch and how entries map onto them.
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    /// In file order.
    ops: Vec<ReadOp>,
    /// Each entry's pieces together, by offset within the entry (the
    /// order the plan makes them in: no sort needed, and none is paid for).
    pieces: Vec<Piece>,
    coalesced_entries: usize,
    split_entries: usize,
}

/// Turn entries into reads: file order; neighbours adjacent in the file and
/// in the same destination merged (when `coalesce`) up to `limit` bytes;
/// entries larger than `limit` cut into pieces. Empty entries get no read.
fn plan(spans: &[Span], limit: u64, coalesce: bool) -> Plan {
    let limit = limit.max(1);
    // Keys are unique (empty entries are left out; destinations do not
    // overlap), so an unstable sort is deterministic. The keys are laid out
    // next to the indices: sorting through `spans[i]` at every comparison
    // cost 200 ns an entry (20,000 entries: 4 ms, more than their reads on
    // 16 threads).
    let mut keyed: Vec<((u64, usize, u64), usize)> = spans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.len > 0)
        .map(|(i, s)| ((s.file_offset, s.dest, s.dest_offset), i))
        .collect();
    keyed.sort_unstable();
    // Room for every entry up front: growing these vectors entry by entry
    // copied them and touched fresh pages again at each doubling.
    let mut p = Plan {
        ops: Vec::with_capacity(keyed.len()),
        pieces: Vec::with_capacity(keyed.len()),
        ..Plan::default()
    };
    let order = keyed.into_iter().map(|(_, i)| i);
    // The read that may still grow, if any.
    let mut open: Option<usize> = None;
    for i in order {
        let s = spans[i];
        if s.len > limit {
            open = None;
            p.split_entries += 1;
            let mut done = 0;
            while done < s.len {
                let len = limit.min(s.len - done);
                p.pieces.push(Piece {
                    entry: i,
                    entry_offset: done,
                    op: p.ops.len(),
                    op_offset: 0,
                    len,
                });
                p.ops.push(ReadOp {
                    file_offset: s.file_offset + done,
                    dest: s.dest,
                    dest_offset: s.dest_offset + done,
                    len,
                    entries: 1,
                });
                done += len;
            }
            continue;
        }
        if let Some(o) = open.filter(|_| coalesce) {
            let op = &mut p.ops[o];
            if op.file_offset + op.len == s.file_offset
                && op.dest == s.dest
                && op.dest_offset + op.len == s.dest_offset
                && op.len + s.len <= limit
            {
                p.pieces.push(Piece {
                    entry: i,
                    entry_offset: 0,
                    op: o,
                    op_offset: op.len,
                    len: s.len,
                });
                op.len += s.len;
                op.entries += 1;
                continue;
            }
        }
        open = Some(p.ops.len());
        p.pieces.push(Piece {
            entry: i,
            entry_offset: 0,
            op: p.ops.len(),
            op_offset: 0,
            len: s.len,
        });
        p.ops.push(ReadOp {
            file_offset: s.file_offset,
            dest: s.dest,
            dest_offset: s.dest_offset,
            len: s.len,
            entries: 1,
        });
    }
    p.coalesced_entries = p
        .ops
        .iter()
        .filter(|o| o.entries > 1)
        .map(|o| o.entries)
        .sum();
    p
}

/// Refuse entries past the largest file offset.
fn check_offsets(spans: &[Span]) -> std::result::Result<(), (usize, BatchProblem)> {
    for (i, s) in spans.iter().enumerate() {
        if s.file_offset
            .checked_add(s.len)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err((
                i,
                BatchProblem::BeyondLargestOffset {
                    file_offset: s.file_offset,
                    len: s.len,
                },
            ));
        }
    }
    Ok(())
}

/// Refuse destinations outside a buffer of `buffer_len` bytes, and
/// destinations that overlap (empty ones overlap nothing).
fn check_destinations(
    ranges: &[ReadRange],
    buffer_len: u64,
) -> std::result::Result<(), (usize, BatchProblem)> {
    for (i, r) in ranges.iter().enumerate() {
        if r.buffer_offset
            .checked_add(r.len)
            .is_none_or(|end| end > buffer_len)
        {
            return Err((
                i,
                BatchProblem::OutsideBuffer {
                    buffer_offset: r.buffer_offset,
                    len: r.len,
                    buffer_len,
                },
            ));
        }
    }
    let mut order: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].len > 0).collect();
    order.sort_by_key(|&i| (ranges[i].buffer_offset, i));
    // The entry reaching furthest so far: any overlap shows against it.
    let mut furthest: Option<usize> = None;
    for i in order {
        let r = ranges[i];
        if let Some(f) = furthest {
            let end = ranges[f].buffer_offset + ranges[f].len;
            if r.buffer_offset < end {
                let (first, second) = (f.min(i), f.max(i));
                let (a, b) = (ranges[second], ranges[first]);
                return Err((
                    second,
                    BatchProblem::OverlappingDestinations {
                        buffer_offset: a.buffer_offset,
                        len: a.len,
                        other: first,
                        other_offset: b.buffer_offset,
                        other_end: b.buffer_offset + b.len,
                    },
                ));
            }
            if r.buffer_offset + r.len <= end {
                continue;
            }
        }
        furthest = Some(i);
    }
    Ok(())
}

/// Cut each read's destination out of its buffer: `buffers[d]` is
/// destination `d`. The reads of one destination must not overlap (checked
/// before planning).
fn carve<'a>(ops: &[ReadOp], buffers: Vec<&'a mut [u8]>) -> Vec<&'a mut [u8]> {
    let mut keyed: Vec<((usize, u64), usize)> = ops
        .iter()
        .enumerate()
        .map(|(o, op)| ((op.dest, op.dest_offset), o))
        .collect();
    keyed.sort_unstable();
    let order = keyed.into_iter().map(|(_, o)| o);
    let mut out: Vec<&'a mut [u8]> = (0..ops.len()).map(|_| <&mut [u8]>::default()).collect();
    let mut buffers: Vec<Option<(&'a mut [u8], u64)>> =
        buffers.into_iter().map(|b| Some((b, 0))).collect();
    for o in order {
        let op = ops[o];
        let (rest, at) = buffers[op.dest].take().expect("one destination at a time");
        let (_, from) = rest.split_at_mut((op.dest_offset - at) as usize);
        let (mine, after) = from.split_at_mut(op.len as usize);
        out[o] = mine;
        buffers[op.dest] = Some((after, op.dest_offset + op.len));
    }
    out
}

/// An entry's result, once its reads are done.
#[derive(Debug)]
enum Settled {
    Done(Result<usize>),
    /// Its read was shared with other entries and failed: read it alone,
    /// so the error (if it persists) is its own.
    RetryAlone,
}

/// The entries' results from the reads' results (`outcomes[o]` of read `o`;
/// errors are taken out).
fn settle(plan: &Plan, lens: &[u64], outcomes: &mut [Option<Result<TaskOutcome>>]) -> Vec<Settled> {
    // Empty entries have no pieces: they read 0 bytes.
    let mut results: Vec<Settled> = lens.iter().map(|_| Settled::Done(Ok(0))).collect();
    let mut pieces = plan.pieces.iter().peekable();
    while let Some(first) = pieces.next() {
        let entry = first.entry;
        let mut bytes = 0u64;
        let mut settled: Option<Settled> = None;
        let mut piece = Some(first);
        while let Some(p) = piece {
            if settled.is_none() {
                match &outcomes[p.op] {
                    Some(Ok(o)) => {
                        let got = o.bytes.saturating_sub(p.op_offset).min(p.len);
                        bytes += got;
                        if got < p.len {
                            settled = Some(Settled::Done(Ok(bytes as usize)));
                        }
                    }
                    Some(Err(_)) if plan.ops[p.op].entries == 1 => {
                        let error = outcomes[p.op].take().and_then(|r| r.err());
                        settled = error.map(|e| Settled::Done(Err(e)));
                    }
                    // Shared and failed, or never run.
                    _ => settled = Some(Settled::RetryAlone),
                }
            }
            piece = pieces.next_if(|next| next.entry == entry);
        }
        results[entry] = settled.unwrap_or(Settled::Done(Ok(bytes as usize)));
    }
    results
}

/// One read of a batch. Through the page cache: plain `pread`s (EINTR
/// retried, short transfers continued, end of file a short count). The
/// POSIX backend's task read first probes the cache (`preadv2` with
/// `RWF_NOWAIT`, 10% dearer than `pread` for a cached 4 KiB read) and on a
/// miss fetches ahead four times the read, which suits a sequential task
/// and costs a random batch entry. With O_DIRECT on, the backend's read
/// (aligned middle direct, head and tail buffered).
fn read_one(
    fds: Descriptors<'_>,
    buf: &mut [u8],
    offset: u64,
    cancel: &AtomicBool,
) -> Result<TaskOutcome> {
    if fds.direct.is_some() {
        return posix::read(fds, buf, offset, cancel);
    }
    let mut done = 0;
    while done < buf.len() {
        let at = offset + done as u64;
        match posix::retry(|| posix::pread(fds.buffered, &mut buf[done..], at)) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) => return Err(posix::io_error(Operation::Read, "pread", fds.path, at, e)),
        }
    }
    Ok(TaskOutcome {
        bytes: done as u64,
        ..TaskOutcome::default()
    })
}

impl FileHandle {
    /// Read many ranges, each into its own slice; one result per entry (in
    /// the order given) and one report. See [`crate::batch`].
    pub fn read_batch<'a>(
        &self,
        reads: impl IntoIterator<Item = ReadInto<'a>>,
    ) -> Result<BatchRead> {
        let mut buffers = Vec::new();
        let mut spans = Vec::new();
        for (i, r) in reads.into_iter().enumerate() {
            spans.push(Span {
                file_offset: r.file_offset,
                dest: i,
                dest_offset: 0,
                len: r.buf.len() as u64,
            });
            buffers.push(r.buf);
        }
        self.run_batch(&spans, buffers, Destinations::SeparateSlices)
    }

    /// Read many ranges into sub-ranges of one buffer; one result per entry
    /// (in the order given) and one report. Destinations outside the buffer
    /// or overlapping each other refuse the batch before any I/O. See
    /// [`crate::batch`].
    pub fn read_batch_into<'a>(
        &self,
        buf: impl Into<BufMut<'a>>,
        ranges: &[ReadRange],
    ) -> Result<BatchRead> {
        let buf = buf.into();
        let refused = |(entry, problem)| Error::InvalidBatch {
            path: self.path().to_path_buf(),
            entry,
            problem,
        };
        check_destinations(ranges, buf.len() as u64).map_err(refused)?;
        match buf {
            BufMut::Host(host) => {
                self.run_batch(&Span::of(ranges), vec![host], Destinations::OneBuffer)
            }
            BufMut::Device(d) => {
                // Work queued on the memory's own stream finishes first.
                d.wait_for_stream()?;
                crate::gpu::gather::read_batch(self, d.range(), ranges)
            }
        }
    }

    fn run_batch(
        &self,
        spans: &[Span],
        buffers: Vec<&mut [u8]>,
        destinations: Destinations,
    ) -> Result<BatchRead> {
        let setup = self.batch_setup(spans)?;
        let coalesce = destinations == Destinations::OneBuffer;
        let reads = self.read_spans(&setup, spans, buffers, coalesce)?;
        let report = self.batch_report(spans, &reads, MemoryKind::Host, destinations, None);
        Ok(BatchRead {
            entries: reads.entries,
            report,
        })
    }

    /// What every batch checks first (mode, offsets), and the settings and
    /// descriptors it then runs with.
    pub(crate) fn batch_setup(&self, spans: &[Span]) -> Result<BatchSetup<'_>> {
        if !self.mode().readable() {
            return Err(Error::ModeForbids {
                operation: Operation::Read,
                path: self.path().to_path_buf(),
                mode: self.mode(),
            });
        }
        check_offsets(spans).map_err(|(entry, problem)| Error::InvalidBatch {
            path: self.path().to_path_buf(),
            entry,
            problem,
        })?;
        let settings = self.settings()?;
        let direct = if settings.auto_direct_io_read() {
            self.direct_file().ok()
        } else {
            None
        };
        let fds = Descriptors {
            path: self.path(),
            buffered: self.buffered_file(),
            direct,
            // Batch entries are small reads: the page cache serves them.
            cold_direct: None,
            bounce_size: settings.bounce_buffer_size(),
        };
        Ok(BatchSetup { settings, fds })
    }

    /// Read `spans` into `buffers` (destination `d` of a span is
    /// `buffers[d]`): plan, run on the pool, settle each entry.
    pub(crate) fn read_spans(
        &self,
        setup: &BatchSetup<'_>,
        spans: &[Span],
        buffers: Vec<&mut [u8]>,
        coalesce: bool,
    ) -> Result<SpanReads> {
        let threads = setup.settings.num_threads();
        let fds = setup.fds;
        let plan = plan(spans, setup.settings.task_size(), coalesce);
        let mut dests = carve(&plan.ops, buffers);

        // A few jobs per thread, each a run of reads in file order; with one
        // thread (or one read), the calling thread does them: no hand-off.
        let jobs = if plan.ops.len() <= 1 || threads == 1 {
            0
        } else {
            plan.ops.len().min(threads * 4)
        };
        let never = AtomicBool::new(false);
        let in_flight = self.in_flight_counter();
        let mut outcomes: Vec<Option<Result<TaskOutcome>>> =
            (0..plan.ops.len()).map(|_| None).collect();
        let read_all =
            |ops: &[ReadOp], dests: &mut [&mut [u8]], out: &mut [Option<Result<TaskOutcome>>]| {
                let _running = Running::start(in_flight);
                for ((op, dest), slot) in ops.iter().zip(dests.iter_mut()).zip(out.iter_mut()) {
                    *slot = Some(read_one(fds, dest, op.file_offset, &never));
                }
            };
        if jobs == 0 {
            read_all(&plan.ops, &mut dests, &mut outcomes);
        } else {
            let per_job = plan.ops.len().div_ceil(jobs);
            let read_all = &read_all;
            // A panic in a job reaches the caller when the scope ends.
            thread_pool::get(threads)?.scope_fifo(|s| {
                for ((ops, dests), out) in plan
                    .ops
                    .chunks(per_job)
                    .zip(dests.chunks_mut(per_job))
                    .zip(outcomes.chunks_mut(per_job))
                {
                    s.spawn_fifo(move |_| read_all(ops, dests, out));
                }
            });
        }

        let lens: Vec<u64> = spans.iter().map(|s| s.len).collect();
        let direct_io_bytes = outcomes
            .iter()
            .flatten()
            .filter_map(|r| r.as_ref().ok())
            .map(|o| o.direct_bytes)
            .sum();
        let settled = settle(&plan, &lens, &mut outcomes);
        // Entries whose shared read failed: each alone, for its own result.
        let mut entries = Vec::with_capacity(spans.len());
        for (i, result) in settled.into_iter().enumerate() {
            entries.push(match result {
                Settled::Done(r) => r,
                Settled::RetryAlone => self.retry_alone(&plan, i, &mut dests, fds),
            });
        }
        Ok(SpanReads {
            entries,
            direct_io_bytes,
            grouping: Grouping {
                reads: plan.ops.len(),
                read_limit: setup.settings.task_size(),
                coalesced_entries: plan.coalesced_entries,
                split_entries: plan.split_entries,
                jobs,
                threads,
            },
        })
    }

    /// The report of a batch whose entries `reads` settled.
    pub(crate) fn batch_report(
        &self,
        spans: &[Span],
        reads: &SpanReads,
        memory: MemoryKind,
        destinations: Destinations,
        staging: Option<DeviceStaging>,
    ) -> BatchReport {
        let entries = &reads.entries;
        let lens = || spans.iter().map(|s| s.len);
        let short_entries = entries
            .iter()
            .zip(lens())
            .filter(|(r, len)| matches!(r, Ok(b) if (*b as u64) < *len))
            .count();
        BatchReport {
            operation: Operation::Read,
            path: self.path().to_path_buf(),
            memory,
            destinations,
            backend: Backend::Posix,
            entries: spans.len(),
            empty_entries: lens().filter(|&l| l == 0).count(),
            short_entries,
            failed_entries: entries.iter().filter(|r| r.is_err()).count(),
            requested_bytes: lens().sum(),
            bytes: entries
                .iter()
                .filter_map(|r| r.as_ref().ok())
                .map(|&b| b as u64)
                .sum(),
            direct_io_bytes: reads.direct_io_bytes,
            grouping: reads.grouping,
            staging,
        }
    }

    /// Read entry `entry` again on its own (its shared read failed): its
    /// pieces in order, stopping at a short one or the first error.
    fn retry_alone(
        &self,
        plan: &Plan,
        entry: usize,
        dests: &mut [&mut [u8]],
        fds: Descriptors<'_>,
    ) -> Result<usize> {
        let never = AtomicBool::new(false);
        let _running = Running::start(self.in_flight_counter());
        let mut bytes = 0usize;
        for p in plan.pieces.iter().filter(|p| p.entry == entry) {
            let op = plan.ops[p.op];
            let start = p.op_offset as usize;
            let dest = &mut dests[p.op][start..start + p.len as usize];
            let got = read_one(fds, dest, op.file_offset + p.op_offset, &never)?.bytes;
            bytes += got as usize;
            if got < p.len {
                break;
            }
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::common;
    use crate::fault::{Rule, inject};
    use crate::posix::Syscall;

    fn span(file_offset: u64, dest_offset: u64, len: u64) -> Span {
        Span {
            file_offset,
            dest: 0,
            dest_offset,
            len,
        }
    }

    #[test]
    fn neighbours_in_file_and_buffer_share_a_read() {
        // Entries given out of order; 0 and 2 are adjacent in the file and
        // in the buffer, 1 is adjacent in the file only.
        let spans = [
            span(0, 100, 10),
            span(20, 0, 10),
            span(10, 110, 10),
            span(500, 500, 0),
        ];
        let p = plan(&spans, 1 << 20, true);
        assert_eq!(p.ops.len(), 2);
        assert_eq!(
            p.ops[0],
            ReadOp {
                file_offset: 0,
                dest: 0,
                dest_offset: 100,
                len: 20,
                entries: 2
            }
        );
        assert_eq!((p.ops[1].file_offset, p.ops[1].dest_offset), (20, 0));
        assert_eq!(p.coalesced_entries, 2);
        let entry2 = p.pieces.iter().find(|piece| piece.entry == 2).unwrap();
        assert_eq!((entry2.op, entry2.op_offset), (0, 10));
        assert!(
            p.pieces.iter().all(|piece| piece.entry != 3),
            "empty entries get no read"
        );
        // Without coalescing: one read each.
        assert_eq!(plan(&spans, 1 << 20, false).ops.len(), 3);
        // The limit stops a merge.
        assert_eq!(plan(&spans, 15, true).ops.len(), 3);
    }

    #[test]
    fn large_entries_are_read_in_pieces() {
        let p = plan(&[span(7, 0, 25), span(32, 25, 3)], 10, true);
        let sizes: Vec<u64> = p.ops.iter().map(|o| o.len).collect();
        assert_eq!(
            sizes,
            vec![10, 10, 5, 3],
            "pieces never merge with neighbours"
        );
        assert_eq!(p.split_entries, 1);
        let offsets: Vec<u64> = p
            .pieces
            .iter()
            .filter(|piece| piece.entry == 0)
            .map(|piece| piece.entry_offset)
            .collect();
        assert_eq!(offsets, vec![0, 10, 20]);
        assert_eq!(p.ops[2].dest_offset, 20);
    }

    #[test]
    fn overlapping_or_outside_destinations_are_refused() {
        let r = |buffer_offset, len| ReadRange {
            file_offset: 0,
            buffer_offset,
            len,
        };
        assert_eq!(check_destinations(&[r(0, 10), r(10, 10)], 20), Ok(()));
        // Empty entries overlap nothing, even inside another's range.
        assert_eq!(check_destinations(&[r(0, 10), r(5, 0)], 20), Ok(()));
        let (entry, problem) = check_destinations(&[r(10, 10), r(0, 11)], 20).unwrap_err();
        assert_eq!(entry, 1);
        assert_eq!(
            problem,
            BatchProblem::OverlappingDestinations {
                buffer_offset: 0,
                len: 11,
                other: 0,
                other_offset: 10,
                other_end: 20
            }
        );
        // A long range hides behind a short one in start order.
        let (entry, problem) =
            check_destinations(&[r(0, 100), r(10, 5), r(50, 5)], 100).unwrap_err();
        assert_eq!(entry, 1);
        assert!(matches!(
            problem,
            BatchProblem::OverlappingDestinations { other: 0, .. }
        ));
        let (_, problem) = check_destinations(&[r(0, 100), r(20, 5)], 100).unwrap_err();
        assert_eq!(
            problem.to_string(),
            "destination 20..25 overlaps entry 0's 0..100"
        );
        let (entry, problem) = check_destinations(&[r(0, 1), r(15, 6)], 20).unwrap_err();
        assert_eq!(entry, 1);
        assert_eq!(
            problem.to_string(),
            "destination 15..21 is outside the 20-byte buffer"
        );
        assert!(check_destinations(&[r(u64::MAX, 2)], 20).is_err());
        let json = serde_json::to_value(&problem).unwrap();
        assert_eq!(json["problem"], "outside_buffer");
    }

    #[test]
    fn reads_land_in_their_own_part_of_each_buffer() {
        let spans = [span(0, 8, 4), span(100, 0, 4), span(50, 4, 2)];
        let p = plan(&spans, 100, true);
        let mut buffer = [0u8; 12];
        let dests = carve(&p.ops, vec![&mut buffer[..]]);
        for (op, dest) in p.ops.iter().zip(dests) {
            assert_eq!(dest.len() as u64, op.len);
            dest.fill(op.file_offset as u8);
        }
        assert_eq!(buffer, [100, 100, 100, 100, 50, 50, 0, 0, 0, 0, 0, 0]);
    }

    fn done(settled: &Settled) -> usize {
        match settled {
            Settled::Done(Ok(bytes)) => *bytes,
            other => panic!("not done: {other:?}"),
        }
    }

    #[test]
    fn entry_results_follow_their_pieces() {
        // Entry 0: two pieces (split); entry 1 and 2 share a read; entry 3
        // is empty.
        let spans = [
            span(0, 0, 20),
            span(100, 20, 4),
            span(104, 24, 4),
            span(0, 28, 0),
        ];
        let p = plan(&spans, 10, true);
        assert_eq!(p.ops.len(), 3);
        let outcome = |bytes| {
            Some(Ok(TaskOutcome {
                bytes,
                ..Default::default()
            }))
        };
        // The file ends at 106: the shared read gets 6 of 8 bytes.
        let mut outcomes = vec![outcome(10), outcome(10), outcome(6)];
        let results = settle(&p, &[20, 4, 4, 0], &mut outcomes);
        let bytes: Vec<usize> = results.iter().map(done).collect();
        assert_eq!(bytes, vec![20, 4, 2, 0]);

        // A failing piece fails its entry; a failing shared read leaves its
        // entries for a retry alone.
        let eio = || {
            Some(Err(Error::Io {
                operation: Operation::Read,
                syscall: "pread",
                path: PathBuf::from("f"),
                offset: 10,
                errno: Some(libc::EIO),
                source: std::io::Error::from_raw_os_error(libc::EIO),
            }))
        };
        let mut outcomes = vec![outcome(10), eio(), eio()];
        let results = settle(&p, &[20, 4, 4, 0], &mut outcomes);
        assert!(
            matches!(&results[0], Settled::Done(Err(e)) if e.errno() == Some(libc::EIO)),
            "{:?}",
            results[0]
        );
        assert!(matches!(results[1], Settled::RetryAlone));
        assert!(matches!(results[2], Settled::RetryAlone));
        assert_eq!(done(&results[3]), 0);
        // A short first piece settles the entry; later pieces do not matter.
        let mut outcomes = vec![outcome(3), eio(), outcome(8)];
        let results = settle(&p, &[20, 4, 4, 0], &mut outcomes);
        assert_eq!(done(&results[0]), 3);
    }

    #[test]
    fn entries_past_the_largest_offset_are_refused() {
        assert_eq!(check_offsets(&[span(0, 0, 10)]), Ok(()));
        let (entry, problem) =
            check_offsets(&[span(0, 0, 1), span(i64::MAX as u64, 0, 1)]).unwrap_err();
        assert_eq!(entry, 1);
        assert!(matches!(problem, BatchProblem::BeyondLargestOffset { .. }));
        assert!(check_offsets(&[span(u64::MAX, 0, 2)]).is_err());
    }

    #[test]
    fn a_failing_entry_fails_alone() {
        let data = common::random_bytes(64 << 10, 9);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, &data).unwrap();
        // Entries 0 and 1 are neighbours in the file and in the buffer: one
        // read. The disk fails at byte 5000, inside entry 1.
        let ranges = [
            ReadRange {
                file_offset: 0,
                buffer_offset: 0,
                len: 4096,
            },
            ReadRange {
                file_offset: 4096,
                buffer_offset: 4096,
                len: 4096,
            },
            ReadRange {
                file_offset: 20_000,
                buffer_offset: 8192,
                len: 1000,
            },
            ReadRange {
                file_offset: 40_000,
                buffer_offset: 9192,
                len: 1000,
            },
        ];
        let faults = inject(
            &path,
            vec![
                Rule::on(&[Syscall::Pread, Syscall::PreadNowait])
                    .at(5000)
                    .fail(libc::EIO),
            ],
        );
        let f = FileHandle::open_with(&path, "r", &common::settings(2, 1 << 20)).unwrap();
        let mut buf = vec![0u8; 10_192];
        let done = f.read_batch_into(&mut buf, &ranges).unwrap();
        assert!(
            faults.injected() >= 2,
            "the shared read and the retry met the fault"
        );
        assert_eq!(done.report.grouping.coalesced_entries, 2);
        assert_eq!(done.report.failed_entries, 1);
        let (_, syscall, _, offset, errno) =
            common::io_error_parts(done.entries[1].as_ref().unwrap_err());
        assert_eq!((syscall, offset, errno), ("pread", 5000, Some(libc::EIO)));
        for i in [0, 2, 3] {
            let r = ranges[i];
            let (at, len) = (r.file_offset as usize, r.len as usize);
            assert_eq!(*done.entries[i].as_ref().unwrap(), len, "entry {i}");
            let dest = r.buffer_offset as usize;
            assert!(
                buf[dest..dest + len] == data[at..at + len],
                "entry {i}'s bytes"
            );
        }
        assert_eq!(f.tasks_in_flight(), 0);
    }
}
