//! The memory a command moves data through, one window at a time: host
//! memory (page-aligned, faulted in before timing) or a GPU allocation,
//! and reading a range into it window by window, from a local file or a
//! remote object, with one report for the whole range.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use kvik_policy::{AlignedBuffer, Error, FileHandle, MemoryKind, Transfer};
use kvik_remote::{Source, SourceReport, SourceTransfer};

use crate::CliError;
use crate::args::MemoryChoice;

/// The most host memory a command reads into at once; longer ranges are
/// read in windows of this size, reusing the buffer.
pub const DEFAULT_WINDOW: u64 = 1 << 30;

/// The memory a command moves data through, one window at a time: host
/// memory (page-aligned, faulted in before timing) or a GPU allocation.
pub enum WindowBuffer {
    Host(AlignedBuffer),
    Device(DeviceWindow),
}

/// A window of GPU memory and the stream it was allocated on.
pub struct DeviceWindow {
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    slice: cudarc::driver::CudaSlice<u8>,
    /// Host copies of the window (for checksums and uploads), made lazily.
    staging: Vec<u8>,
}

impl std::fmt::Debug for WindowBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowBuffer::Host(b) => write!(f, "WindowBuffer::Host({} bytes)", b.len()),
            WindowBuffer::Device(d) => write!(
                f,
                "WindowBuffer::Device(GPU {}, {} bytes)",
                d.slice.ordinal(),
                d.slice.len()
            ),
        }
    }
}

fn cuda_failed(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!("{what}: {e}"))
}

impl WindowBuffer {
    /// A window of `len` bytes in the chosen memory.
    pub fn new(memory: &MemoryChoice, len: u64) -> Result<WindowBuffer, CliError> {
        match memory.kind {
            MemoryKind::Host => Ok(WindowBuffer::Host(host_buffer(len)?)),
            MemoryKind::Device { ordinal } => {
                let ctx = kvik_policy::gpu::context(ordinal)?;
                let stream = ctx.default_stream();
                let slice = stream.alloc_zeros::<u8>(len as usize).map_err(|e| {
                    cuda_failed(
                        &format!("allocating {} on GPU {ordinal}", kvik_policy::Size(len)),
                        e,
                    )
                })?;
                Ok(WindowBuffer::Device(DeviceWindow {
                    stream,
                    slice,
                    staging: Vec::new(),
                }))
            }
        }
    }

    /// For a GPU window: allocate `file`'s pinned bounce buffers now, before
    /// any clock starts (as host windows are faulted in before timing).
    pub fn prepare(&self, file: &FileHandle) -> Result<(), CliError> {
        match self {
            WindowBuffer::Host(_) => Ok(()),
            WindowBuffer::Device(d) => Ok(file.prepare_device(d.slice.ordinal() as u32)?),
        }
    }

    /// [`WindowBuffer::prepare`] for a local source (a remote one has no
    /// bounce buffers of kvik-policy's).
    pub fn prepare_source(&self, source: &Source) -> Result<(), CliError> {
        match source {
            Source::Local(file) => self.prepare(file),
            _ => Ok(()),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            WindowBuffer::Host(b) => b.len(),
            WindowBuffer::Device(d) => d.slice.len(),
        }
    }

    /// Read `n` bytes of `source` at `offset` into the start of the window:
    /// all of them, or an error.
    pub fn read(
        &mut self,
        source: &Source,
        n: usize,
        offset: u64,
    ) -> Result<SourceTransfer, kvik_remote::Error> {
        match self {
            WindowBuffer::Host(b) => source.read_with_report(&mut b[..n], offset),
            WindowBuffer::Device(d) => {
                let ordinal = d.slice.ordinal() as u32;
                let mut view = d.slice.slice_mut(0..n);
                let (ptr, _recorded) =
                    cudarc::driver::DevicePtrMut::device_ptr_mut(&mut view, &d.stream);
                // SAFETY: `ptr..ptr+n` lies in the window's allocation, which
                // this `&mut self` borrow keeps alive and unshared.
                let range = unsafe { kvik_policy::DeviceSliceMut::from_raw(ordinal, ptr, n) };
                source.read_with_report(range, offset)
            }
        }
    }

    /// Write the first `n` bytes of the window to `file` at `offset`.
    pub fn write(&self, file: &FileHandle, n: usize, offset: u64) -> Result<Transfer, Error> {
        match self {
            WindowBuffer::Host(b) => file.write_with_report(&b[..n], offset),
            WindowBuffer::Device(d) => {
                let view = d.slice.slice(0..n);
                let (ptr, _recorded) = cudarc::driver::DevicePtr::device_ptr(&view, &d.stream);
                // SAFETY: as in `read`; the bytes are only read.
                let range =
                    unsafe { kvik_policy::DeviceSlice::from_raw(d.slice.ordinal() as u32, ptr, n) };
                file.write_with_report(range, offset)
            }
        }
    }

    /// The first `n` bytes as host memory (a device window is copied back;
    /// callers do this outside their timed region).
    pub fn host_bytes(&mut self, n: usize) -> Result<&[u8], CliError> {
        match self {
            WindowBuffer::Host(b) => Ok(&b[..n]),
            WindowBuffer::Device(d) => {
                d.staging.resize(n, 0);
                d.stream
                    .memcpy_dtoh(&d.slice.slice(0..n), &mut d.staging[..])
                    .and_then(|()| d.stream.synchronize())
                    .map_err(|e| cuda_failed("copying the window back from the GPU", e))?;
                Ok(&d.staging[..n])
            }
        }
    }

    /// Fill up to `n` bytes from `source` (a stream: fewer at its end);
    /// returns how many. A device window is filled through host memory.
    pub fn fill_from(
        &mut self,
        n: usize,
        source: &mut crate::source::Source,
    ) -> Result<usize, CliError> {
        let mut got = 0;
        self.try_fill(n, |window| {
            got = source.read_stream(window)?;
            Ok(got)
        })?;
        Ok(got)
    }

    /// Fill the first `n` bytes with `fill` (run on host memory; a device
    /// window is then uploaded).
    pub fn fill(&mut self, n: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), CliError> {
        self.try_fill(n, |window| {
            fill(window);
            Ok(window.len())
        })
    }

    /// Let `fill` write up to `n` bytes on host memory and say how many it
    /// wrote; a device window then gets those bytes uploaded.
    fn try_fill(
        &mut self,
        n: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<usize, CliError>,
    ) -> Result<(), CliError> {
        match self {
            WindowBuffer::Host(b) => fill(&mut b[..n]).map(drop),
            WindowBuffer::Device(d) => {
                d.staging.resize(n, 0);
                let filled = fill(&mut d.staging[..n])?;
                let mut view = d.slice.slice_mut(0..filled);
                d.stream
                    .memcpy_htod(&d.staging[..filled], &mut view)
                    .and_then(|()| d.stream.synchronize())
                    .map_err(|e| cuda_failed("uploading the window to the GPU", e))
            }
        }
    }
}

/// A page-aligned host buffer of `len` bytes, faulted in before any clock
/// starts (page faults are the allocation's cost, not the read's). More
/// than the system will give (`--buffer 1TiB`) is an error, not a crash.
pub fn host_buffer(len: u64) -> Result<AlignedBuffer, CliError> {
    let mut buffer = usize::try_from(len)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::ENOMEM))
        .and_then(AlignedBuffer::try_new)
        .map_err(|e| {
            CliError::Failed(format!(
                "cannot allocate a {} buffer: {e} (use a smaller --buffer)",
                kvik_policy::Size(len)
            ))
        })?;
    buffer.prefault();
    Ok(buffer)
}

/// A range read window by window.
#[derive(Debug)]
pub struct ReadResult {
    pub bytes: u64,
    /// Time spent in the reads only.
    pub seconds: f64,
    /// The reports of every window, folded into one.
    pub report: SourceReport,
}

/// Read `size` bytes of `source` from `offset` into `buffer`,
/// a window at a time, handing each window to `each` (the buffer, the bytes
/// in it, and their offset from `offset`). Each window is read whole or the
/// read fails. Only the reads are timed.
pub fn read_windows(
    source: &Source,
    offset: u64,
    size: u64,
    buffer: &mut WindowBuffer,
    bar: &ProgressBar,
    mut each: impl FnMut(&mut WindowBuffer, usize, u64) -> Result<(), CliError>,
) -> Result<ReadResult, CliError> {
    let window = buffer.len() as u64;
    let mut report: Option<SourceReport> = None;
    let mut elapsed = Duration::ZERO;
    let mut done = 0u64;
    loop {
        let n = (size - done).min(window) as usize;
        let start = Instant::now();
        let transfer = buffer.read(source, n, offset + done)?;
        elapsed += start.elapsed();
        each(buffer, n, done)?;
        done += n as u64;
        bar.inc(n as u64);
        match &mut report {
            None => report = Some(transfer.report),
            Some(r) => r.absorb(transfer.report),
        }
        if done >= size {
            break;
        }
    }
    Ok(ReadResult {
        bytes: done,
        seconds: elapsed.as_secs_f64(),
        report: report.expect("at least one window"),
    })
}
