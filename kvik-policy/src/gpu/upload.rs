//! Host bytes that arrive in pieces (a network body) into device memory,
//! through pinned staging buffers: the bytes are gathered into one pinned
//! buffer until it is full, copied to the device asynchronously while the
//! next one fills, and [`DeviceUpload::finish`] waits for the last copy.
//!
//! Unlike the file path's per-thread staging, an upload owns its two
//! buffers and its stream (taken from a pool, given back when it ends), so
//! it may move between threads — an async task does — between writes.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaStream, sys};

use super::event::check;
use super::staging::StagingBuffer;
use crate::buffer::DeviceRange;
use crate::error::Error;

/// The pinned buffers and streams of uploads that ended, for the next.
struct Pool {
    buffers: Vec<(u32, usize, StagingBuffer)>,
    streams: Vec<(u32, Arc<CudaStream>)>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    buffers: Vec::new(),
    streams: Vec::new(),
});

/// More than any number of uploads keep busy at once; the rest are freed.
const MAX_IDLE_BUFFERS: usize = 64;

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// An upload into one range of device memory, written front to back.
pub struct DeviceUpload {
    dst: DeviceRange,
    staging: usize,
    stream: Arc<CudaStream>,
    buffers: [Option<StagingBuffer>; 2],
    /// The buffer being filled.
    current: usize,
    /// Bytes in the current buffer.
    filled: usize,
    /// Where the current buffer's first byte goes, from `dst`'s start.
    at: u64,
}

impl std::fmt::Debug for DeviceUpload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceUpload")
            .field("dst", &self.dst)
            .field("at", &(self.at + self.filled as u64))
            .finish_non_exhaustive()
    }
}

impl DeviceUpload {
    /// An upload into `dst`, through pinned buffers of `staging` bytes.
    ///
    /// # Safety
    /// `dst` must be device memory of its GPU that stays allocated, and
    /// that nobody else uses, until the upload is finished or dropped.
    pub unsafe fn new(dst: DeviceRange, staging: usize) -> Result<DeviceUpload, Error> {
        let ctx = super::context(dst.ordinal)?;
        ctx.bind_to_thread()
            .map_err(|e| super::driver_error("cuCtxSetCurrent", e))?;
        let staging = staging.max(4096);
        let (stream, mut taken) = {
            let mut pool = pool();
            let stream = pool
                .streams
                .iter()
                .position(|(o, _)| *o == dst.ordinal)
                .map(|i| pool.streams.swap_remove(i).1);
            let mut taken = Vec::new();
            while taken.len() < 2 {
                match pool
                    .buffers
                    .iter()
                    .position(|(o, len, _)| *o == dst.ordinal && *len == staging)
                {
                    Some(i) => taken.push(pool.buffers.swap_remove(i).2),
                    None => break,
                }
            }
            (stream, taken)
        };
        let stream = match stream {
            Some(s) => s,
            None => ctx
                .new_stream()
                .map_err(|e| super::driver_error("cuStreamCreate", e))?,
        };
        while taken.len() < 2 {
            taken.push(StagingBuffer::new(&ctx, staging)?);
        }
        let second = taken.pop();
        let first = taken.pop();
        Ok(DeviceUpload {
            dst,
            staging,
            stream,
            buffers: [first, second],
            current: 0,
            filled: 0,
            at: 0,
        })
    }

    /// Put `bytes` at `offset` from the start of the range. Writes come in
    /// order; a write that does not continue the last one first sends what
    /// is gathered.
    pub fn write(&mut self, offset: u64, mut bytes: &[u8]) -> Result<(), Error> {
        let end = offset
            .checked_add(bytes.len() as u64)
            .filter(|&end| end <= self.dst.len as u64);
        if end.is_none() {
            return Err(Error::DeviceBuffer {
                operation: crate::Operation::Read,
                path: std::path::PathBuf::new(),
                offset,
                ordinal: self.dst.ordinal,
                ptr: self.dst.ptr,
                len: self.dst.len,
                problem: format!("{} bytes at {offset} fall outside the range", bytes.len()),
            });
        }
        if offset != self.at + self.filled as u64 {
            self.send()?;
            self.at = offset;
        }
        while !bytes.is_empty() {
            let buffer = self.buffers[self.current]
                .as_mut()
                .expect("both buffers are present until drop");
            let room = self.staging - self.filled;
            let n = room.min(bytes.len());
            buffer.host.slice_mut(self.staging)[self.filled..self.filled + n]
                .copy_from_slice(&bytes[..n]);
            self.filled += n;
            bytes = &bytes[n..];
            if self.filled == self.staging {
                self.send()?;
            }
        }
        Ok(())
    }

    /// Send what the current buffer gathered; wait for the other buffer's
    /// last copy before filling it.
    fn send(&mut self) -> Result<(), Error> {
        if self.filled > 0 {
            let buffer = self.buffers[self.current]
                .as_mut()
                .expect("both buffers are present until drop");
            // SAFETY: `at + filled` is inside `dst` (checked in `write`),
            // which `new`'s caller vouched for; the pinned buffer is not
            // touched again until the event recorded after the copy.
            check("cuMemcpyHtoDAsync", unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    self.dst.ptr + self.at,
                    buffer.host.slice_mut(self.staging).as_ptr().cast(),
                    self.filled,
                    self.stream.cu_stream(),
                )
            })?;
            buffer.copied.record(&self.stream)?;
            self.at += self.filled as u64;
            self.filled = 0;
            self.current ^= 1;
        }
        self.buffers[self.current]
            .as_mut()
            .expect("both buffers are present until drop")
            .copied
            .wait()
    }

    /// Send what is left and wait until every byte is in device memory.
    pub fn finish(mut self) -> Result<(), Error> {
        self.send()?;
        self.stream
            .synchronize()
            .map_err(|e| super::driver_error("cuStreamSynchronize", e))
    }
}

impl Drop for DeviceUpload {
    /// No copy may outlive the upload: wait for them, then give the buffers
    /// and the stream back (a failed wait keeps the buffers: they may still
    /// be read by a copy).
    fn drop(&mut self) {
        let _ = self.stream.context().bind_to_thread();
        if self.stream.synchronize().is_err() {
            for buffer in &mut self.buffers {
                std::mem::forget(buffer.take());
            }
            return;
        }
        let mut pool = pool();
        for buffer in self.buffers.iter_mut().filter_map(Option::take) {
            if pool.buffers.len() < MAX_IDLE_BUFFERS {
                let mut buffer = buffer;
                buffer.copied.pending = false;
                pool.buffers.push((self.dst.ordinal, self.staging, buffer));
            }
        }
        pool.streams.push((self.dst.ordinal, self.stream.clone()));
    }
}
