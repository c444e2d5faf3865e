//! The bounce-buffer pipeline between files and device memory.
//!
//! Each pool worker keeps, per GPU, its own non-blocking stream and two
//! pinned, page-aligned host buffers, allocated once and reused (allocating
//! pinned memory per request costs more than half the throughput). A read
//! fills one buffer with `pread` while the other is being copied to the
//! device, so disk (or page cache) and the copy engine work at the same time;
//! KvikIO instead synchronizes after every chunk. A worker only waits for a
//! buffer's previous copy right before refilling it, so the overlap also
//! spans consecutive tasks on the same worker; the request waits for all
//! copies once, at the end ([`StagedCopies::wait`]).

use std::cell::RefCell;
use std::ffi::c_void;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys};

use std::path::Path;

use super::event::{Event, check};
use crate::buffer::DeviceRange;
use crate::error::Error;
use crate::path_report::Operation;
use crate::posix::io_error;

/// Pinned, page-aligned host memory (`cuMemHostAlloc`, portable).
pub(super) struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
    ctx: Arc<CudaContext>,
}

impl PinnedBuffer {
    pub(super) fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<PinnedBuffer, Error> {
        ctx.bind_to_thread()
            .map_err(|e| super::driver_error("cuCtxSetCurrent", e))?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: allocates `len` bytes of page-locked memory.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(&mut ptr, len, sys::CU_MEMHOSTALLOC_PORTABLE)
        })?;
        Ok(PinnedBuffer {
            ptr: ptr.cast(),
            len,
            ctx: ctx.clone(),
        })
    }

    pub(super) fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: `len <= self.len` (callers pass at most the chunk size),
        // the memory is ours and no copy uses it (the caller waited).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len.min(self.len)) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: frees the allocation made in `new`, once.
        unsafe { sys::cuMemFreeHost(self.ptr.cast()) };
    }
}

pub(super) struct StagingBuffer {
    pub(super) host: PinnedBuffer,
    pub(super) copied: Event,
}

// SAFETY: the pinned allocation is owned (freed once, on drop) and only
// touched by whoever holds the buffer; CUDA allows any thread to use it.
unsafe impl Send for StagingBuffer {}

impl StagingBuffer {
    pub(super) fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<StagingBuffer, Error> {
        Ok(StagingBuffer {
            host: PinnedBuffer::new(ctx, len)?,
            copied: Event::new(ctx)?,
        })
    }
}

/// One worker's staging state for one GPU and chunk size.
struct Staging {
    ordinal: u32,
    chunk: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    buffers: [StagingBuffer; 2],
    next: usize,
}

impl Staging {
    fn new(ordinal: u32, chunk: usize) -> Result<Staging, Error> {
        let ctx = super::context(ordinal)?;
        let stream = ctx
            .new_stream()
            .map_err(|e| super::driver_error("cuStreamCreate", e))?;
        let buffer = || StagingBuffer::new(&ctx, chunk);
        let buffers = [buffer()?, buffer()?];
        Ok(Staging {
            ordinal,
            chunk,
            ctx,
            stream,
            buffers,
            next: 0,
        })
    }

    /// The next buffer, once its previous copy has finished.
    fn next_buffer(&mut self) -> Result<&mut StagingBuffer, Error> {
        let i = self.next;
        self.next ^= 1;
        let buffer = &mut self.buffers[i];
        buffer.copied.wait()?;
        Ok(buffer)
    }
}

thread_local! {
    static STAGING: RefCell<Vec<Staging>> = const { RefCell::new(Vec::new()) };
}

fn with_staging<T>(
    ordinal: u32,
    chunk: usize,
    f: impl FnOnce(&mut Staging) -> Result<T, Error>,
) -> Result<T, Error> {
    STAGING.with(|cell| {
        let mut all = cell.borrow_mut();
        let index = match all
            .iter()
            .position(|s| s.ordinal == ordinal && s.chunk == chunk)
        {
            Some(i) => i,
            None => {
                // Settings changed (another chunk size): drop this worker's
                // old buffers for the GPU rather than hoarding pinned memory.
                all.retain(|s| s.ordinal != ordinal);
                all.push(Staging::new(ordinal, chunk)?);
                all.len() - 1
            }
        };
        let staging = &mut all[index];
        staging
            .ctx
            .bind_to_thread()
            .map_err(|e| super::driver_error("cuCtxSetCurrent", e))?;
        f(staging)
    })
}

/// Allocate this thread's stream and pinned buffers for GPU `ordinal` and
/// `chunk`-byte chunks now, so that the first request does not pay for them.
pub fn prepare(ordinal: u32, chunk: usize) -> Result<(), Error> {
    with_staging(ordinal, chunk.max(1), |_| Ok(()))
}

/// Copies still in flight on worker streams; wait for them before the
/// caller may use the device memory.
#[derive(Debug, Default)]
pub(crate) struct StagedCopies {
    streams: Vec<Arc<CudaStream>>,
}

impl StagedCopies {
    pub(crate) fn merge(&mut self, other: StagedCopies) {
        for stream in other.streams {
            if !self
                .streams
                .iter()
                .any(|s| s.cu_stream() == stream.cu_stream())
            {
                self.streams.push(stream);
            }
        }
    }

    /// Block until every copy has reached the device.
    pub(crate) fn wait(&self) -> Result<(), Error> {
        for stream in &self.streams {
            stream
                .synchronize()
                .map_err(|e| super::driver_error("cuStreamSynchronize", e))?;
        }
        Ok(())
    }
}

/// `pread` until `buf` is full or end of file; EINTR is retried.
fn pread_full(file: &File, buf: &mut [u8], offset: u64, path: &Path) -> Result<usize, Error> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(io_error(
                    Operation::Read,
                    "pread",
                    path,
                    offset + done as u64,
                    e,
                ));
            }
        }
    }
    Ok(done)
}

/// `pread` of `want` bytes into the pinned `buffer` through the O_DIRECT
/// descriptor `direct`: offsets and lengths rounded to whole pages (the
/// buffer is page-aligned and a whole number of pages), the count capped at
/// `want`. `None` when O_DIRECT cannot take this read (an unaligned
/// offset, or the filesystem refused it): the caller reads buffered.
fn pread_direct(
    direct: &File,
    buffer: &mut [u8],
    want: usize,
    offset: u64,
    path: &Path,
) -> Option<Result<usize, Error>> {
    let page = crate::task::page_size() as usize;
    if offset % page as u64 != 0 {
        return None;
    }
    let len = want.next_multiple_of(page).min(buffer.len());
    if len < want {
        return None;
    }
    let mut done = 0;
    while done < len {
        match direct.read_at(&mut buffer[done..len], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                // A short O_DIRECT read ends at the end of the file.
                if n % page != 0 {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && done == 0 => return None,
            Err(e) => {
                let at = offset + done as u64;
                return Some(Err(io_error(Operation::Read, "pread", path, at, e)));
            }
        }
    }
    Some(Ok(done.min(want)))
}

/// Read `dst.len` bytes at `file_offset` into device memory `dst` through
/// this worker's pinned buffers, `chunk` bytes at a time; with `direct`
/// (a cold range), the preads go through that O_DIRECT descriptor. Returns the bytes
/// read (short at end of file) and the copies in flight. On an error, the
/// copies already queued have landed before it returns.
///
/// # Safety
/// `dst` must be device memory of its GPU, allocated and written by nobody
/// else until the returned copies have been waited for.
pub(crate) unsafe fn read_to_device(
    file: &File,
    direct: Option<&File>,
    path: &Path,
    file_offset: u64,
    dst: DeviceRange,
    chunk: usize,
) -> Result<(usize, StagedCopies), Error> {
    let chunk = chunk.max(1);
    let size = dst.len;
    with_staging(dst.ordinal, chunk, |staging| {
        let stream = staging.stream.clone();
        let mut done = 0;
        let mut step = || -> Result<bool, Error> {
            let want = chunk.min(size - done);
            let buffer = staging.next_buffer()?;
            let at = file_offset + done as u64;
            let whole = buffer.host.slice_mut(chunk);
            let n = match direct.and_then(|d| pread_direct(d, whole, want, at, path)) {
                Some(n) => n?,
                None => pread_full(file, &mut whole[..want], at, path)?,
            };
            let host = &whole[..n];
            if n > 0 {
                // SAFETY: the caller guarantees `dst` is device memory of
                // its GPU; the host buffer stays untouched until the event
                // recorded below completes.
                check("cuMemcpyHtoDAsync", unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        dst.ptr + done as u64,
                        host.as_ptr().cast(),
                        n,
                        stream.cu_stream(),
                    )
                })?;
                buffer.copied.record(&stream)?;
            }
            done += n;
            Ok(n == want && done < size)
        };
        loop {
            match step() {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    // No copy of this worker may land after the request has
                    // returned its error.
                    let _ = stream.synchronize();
                    return Err(e);
                }
            }
        }
        Ok((
            done,
            StagedCopies {
                streams: vec![stream],
            },
        ))
    })
}

/// Write `src.len` bytes of device memory `src` to `file_offset`: the copy
/// of the next chunk to host memory runs while the current one is written.
/// Returns when every byte is in the file (or on the first error, once no
/// copy is left in flight).
///
/// # Safety
/// `src` must be device memory of its GPU that stays allocated, and that
/// nobody writes, during the call.
pub(crate) unsafe fn write_from_device(
    file: &File,
    path: &Path,
    file_offset: u64,
    src: DeviceRange,
    chunk: usize,
) -> Result<usize, Error> {
    let chunk = chunk.max(1);
    let size = src.len;
    with_staging(src.ordinal, chunk, |staging| {
        let stream = staging.stream.clone();
        let chunks = size.div_ceil(chunk);
        // Enqueue the device→host copy of chunk `i` into buffer `i % 2`.
        let enqueue = |staging: &mut Staging, i: usize| -> Result<(), Error> {
            let start = i * chunk;
            let len = chunk.min(size - start);
            let buffer = &mut staging.buffers[i % 2];
            buffer.copied.wait()?;
            // SAFETY: the caller guarantees `src` is readable device
            // memory; the buffer is free (waited above).
            check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    buffer.host.ptr.cast(),
                    src.ptr + start as u64,
                    len,
                    stream.cu_stream(),
                )
            })?;
            buffer.copied.record(&stream)
        };
        let mut all = || -> Result<(), Error> {
            if chunks > 0 {
                enqueue(staging, 0)?;
            }
            for i in 0..chunks {
                if i + 1 < chunks {
                    enqueue(staging, i + 1)?;
                }
                let start = i * chunk;
                let len = chunk.min(size - start);
                let buffer = &mut staging.buffers[i % 2];
                buffer.copied.wait()?;
                let offset = file_offset + start as u64;
                file.write_all_at(&buffer.host.slice_mut(len)[..len], offset)
                    .map_err(|e| io_error(Operation::Write, "pwrite", path, offset, e))?;
            }
            Ok(())
        };
        let result = all();
        if result.is_err() {
            // The next chunk's copy may still be in flight into our buffer.
            let _ = stream.synchronize();
            for buffer in &mut staging.buffers {
                buffer.copied.pending = false;
            }
        }
        // Leave both buffers free for the next user of this worker.
        staging.next = 0;
        result.map(|()| size)
    })
}

/// The staging chunk for `settings`: the bounce buffer size, at most a task.
pub(crate) fn staging_chunk(settings: &crate::Settings) -> usize {
    settings
        .bounce_buffer_size()
        .min(settings.task_size())
        .max(1) as usize
}
