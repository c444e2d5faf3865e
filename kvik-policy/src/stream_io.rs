//! Stream-ordered I/O, as KvikIO's `read_async` / `write_async`: a request
//! that starts after the work already queued on a CUDA stream, and that the
//! work queued on that stream afterwards waits for.
//!
//! The ordering, precisely, for `read_async(buf, offset, stream)`:
//! * the request touches `buf` only after everything queued on `stream`
//!   before the call has finished (for cudarc memory, also after the work
//!   queued on the memory's own stream, and on the streams cudarc saw use it);
//! * everything queued on `stream` after the call starts only once the
//!   request has finished — its bytes are in device memory (read) or in the
//!   file (write) — or failed;
//! * the call itself returns at once; [`StreamIo::wait`] gives the result
//!   (and the buffer, for owned buffers) and the path report. A failed
//!   request still releases the stream, so check the result before trusting
//!   what later work computed.
//!
//! How: where the file goes to cuFile and libcufile has its stream API, the
//! request is one `cuFileReadAsync` / `cuFileWriteAsync` on `stream`.
//! Otherwise (POSIX through pinned bounce buffers, host memory, or a request
//! below `gds_threshold`) the stream is made to wait at the call's position
//! for a 32-bit flag in device memory (`cuStreamWaitValue32`, the flag
//! allocated and freed in stream order); a pool thread waits for the work
//! queued before that position, runs the request as a blocking one would,
//! then sets the flag (`cuStreamWriteValue32`) — also when the request
//! fails or panics, so the stream never waits forever.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaStream, sys};

use crate::buffer::{Buf, BufMut, IoBuffer, IoBufferMut};
use crate::error::Result;
use crate::file_handle::{CuFileOnStream, FileHandle, Memory, Transfer};
use crate::gpu::event::{Event, check};
use crate::pending_io::PendingIo;

/// A stream-ordered request in flight. Wait on it for the result; dropping
/// it does not cancel the request, and a dropped request still releases the
/// stream when it ends.
#[must_use = "the request runs anyway; wait on it to learn how it ended"]
pub struct StreamIo<B> {
    state: State<B>,
}

enum State<B> {
    /// Behind a gate, on the pool.
    Gated(PendingIo<B>),
    /// One cuFile operation on the stream.
    OnStream {
        buf: B,
        file: FileHandle,
        op: Box<CuFileOnStream>,
    },
    Taken,
}

impl<B> std::fmt::Debug for StreamIo<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamIo")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl<B> StreamIo<B> {
    /// Block until the request finishes: the buffer, the bytes moved and
    /// the path report. (Work queued on the stream after the request may
    /// still be running.)
    pub fn wait(mut self) -> Result<(B, Transfer)> {
        match std::mem::replace(&mut self.state, State::Taken) {
            State::Gated(pending) => pending.wait(),
            State::OnStream { buf, file, op } => Ok((buf, file.finish_on_stream(*op)?)),
            State::Taken => unreachable!("wait takes the request once"),
        }
    }

    /// Whether the request has finished.
    pub fn is_finished(&self) -> bool {
        match &self.state {
            State::Gated(pending) => pending.is_finished(),
            State::OnStream { op, .. } => op.is_done(),
            State::Taken => true,
        }
    }
}

impl<B> Drop for StreamIo<B> {
    /// cuFile writes the result (and, for a read, the memory) when the
    /// stream gets there: neither may go before.
    fn drop(&mut self) {
        if let State::OnStream { op, .. } = &mut self.state {
            if !op.wait_quietly() {
                // Whether cuFile is done with them cannot be known: never
                // free what it may still write.
                std::mem::forget(std::mem::replace(&mut self.state, State::Taken));
            }
        }
    }
}

impl<B> StreamIo<B> {
    pub(crate) fn gated(pending: PendingIo<B>) -> StreamIo<B> {
        StreamIo {
            state: State::Gated(pending),
        }
    }
}

impl FileHandle {
    /// Read into `buf` from `offset`, ordered on `stream` (see the
    /// [module docs](crate::stream_io) for the exact ordering). The buffer
    /// comes back from [`StreamIo::wait`].
    pub fn read_async<B: IoBufferMut>(
        &self,
        mut buf: B,
        offset: u64,
        stream: &Arc<CudaStream>,
    ) -> StreamIo<B> {
        let on_stream = self.cufile_on_stream(Memory::Read(buf.as_buf_mut()), offset, stream);
        match on_stream {
            Ok(Some(op)) => {
                return StreamIo {
                    state: State::OnStream {
                        buf,
                        file: self.clone(),
                        op: Box::new(op),
                    },
                };
            }
            Ok(None) => {}
            Err(e) => return StreamIo::gated(PendingIo::ready(Err(e))),
        }
        let own = own_stream(&buf.as_buf_mut());
        let file = self.clone();
        StreamIo::gated(self.spawn_ordered(stream, own, move |cancel| {
            let done = file.transfer_read(unordered_mut(buf.as_buf_mut()), offset, cancel)?;
            Ok((buf, done))
        }))
    }

    /// Write `buf` at `offset`, ordered on `stream`.
    pub fn write_async<B: IoBuffer>(
        &self,
        buf: B,
        offset: u64,
        stream: &Arc<CudaStream>,
    ) -> StreamIo<B> {
        match self.cufile_on_stream(Memory::Write(buf.as_buf()), offset, stream) {
            Ok(Some(op)) => {
                return StreamIo {
                    state: State::OnStream {
                        buf,
                        file: self.clone(),
                        op: Box::new(op),
                    },
                };
            }
            Ok(None) => {}
            Err(e) => return StreamIo::gated(PendingIo::ready(Err(e))),
        }
        let own = own_stream_of(&buf.as_buf());
        let file = self.clone();
        StreamIo::gated(self.spawn_ordered(stream, own, move |cancel| {
            let done = file.transfer_write(unordered(buf.as_buf()), offset, cancel)?;
            Ok((buf, done))
        }))
    }

    /// Run `job` on the pool, ordered on `stream` as the module docs say.
    /// `own` is the memory's own stream, if it has one.
    pub(crate) fn spawn_ordered<B: Send + 'static>(
        &self,
        stream: &Arc<CudaStream>,
        own: Option<Arc<CudaStream>>,
        job: impl FnOnce(&AtomicBool) -> Result<(B, Transfer)> + Send + 'static,
    ) -> PendingIo<B> {
        let gate = match Gate::close(stream, own.as_ref()) {
            Ok(gate) => gate,
            Err(e) => return PendingIo::ready(Err(e)),
        };
        let gate = Mutex::new(Some(gate));
        self.spawn(move |cancel| {
            // Opens the gate when dropped: after the request, or on any way out.
            let mut gate = gate
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("the gate is taken once");
            gate.before.wait()?;
            let result = job(cancel);
            drop(gate);
            result
        })
    }
}

/// The memory's own stream (cudarc memory names it).
fn own_stream(buf: &BufMut<'_>) -> Option<Arc<CudaStream>> {
    match buf {
        BufMut::Device(d) => d.after_stream().cloned(),
        BufMut::Host(_) => None,
    }
}

fn own_stream_of(buf: &Buf<'_>) -> Option<Arc<CudaStream>> {
    match buf {
        Buf::Device(d) => d.after_stream().cloned(),
        Buf::Host(_) => None,
    }
}

/// The same memory without its stream to wait for: a stream-ordered request
/// is ordered by the gate instead (waiting for a stream that waits for us
/// would never end).
pub(crate) fn unordered_mut(buf: BufMut<'_>) -> BufMut<'_> {
    match buf {
        BufMut::Device(d) => BufMut::Device(d.without_stream()),
        host => host,
    }
}

pub(crate) fn unordered(buf: Buf<'_>) -> Buf<'_> {
    match buf {
        Buf::Device(d) => Buf::Device(d.without_stream()),
        host => host,
    }
}

/// A stream held at a position until the request opens it.
struct Gate {
    ctx: Arc<CudaContext>,
    /// The flag the stream waits to become 1 (device memory, allocated and
    /// freed on the stream around the wait).
    flag: sys::CUdeviceptr,
    /// Recorded on the stream just before the wait: the work the request
    /// must wait for.
    before: Event,
}

// SAFETY: the flag is a device address and the event a driver handle; both
// are usable from any thread of the process (the context is bound before
// each use).
unsafe impl Send for Gate {}

impl Gate {
    /// Hold `stream` here. `own`: the memory's own stream, whose queued
    /// work the request must also wait for, and which must wait for the
    /// request in turn.
    fn close(stream: &Arc<CudaStream>, own: Option<&Arc<CudaStream>>) -> Result<Gate> {
        gds_core::cuda::probe()?;
        let ctx = stream.context().clone();
        let driver =
            |call, e: cudarc::driver::DriverError| crate::gpu::cuda_error(call, e.0 as u32);
        ctx.bind_to_thread()
            .map_err(|e| driver("cuCtxSetCurrent", e))?;
        let other = own.filter(|own| own.cu_stream() != stream.cu_stream());
        if let Some(own) = other {
            stream
                .join(own)
                .map_err(|e| driver("cuStreamWaitEvent", e))?;
        }
        let s = stream.cu_stream();
        let mut flag: sys::CUdeviceptr = 0;
        // SAFETY: a 4-byte allocation ordered on `s`, in the bound context.
        check("cuMemAllocAsync", unsafe {
            sys::cuMemAllocAsync(&mut flag, 4, s)
        })?;
        let free = || {
            // SAFETY: frees the allocation above, ordered on the same stream.
            unsafe { sys::cuMemFreeAsync(flag, s) };
        };
        let mut before = match Event::new(&ctx) {
            Ok(event) => event,
            Err(e) => {
                free();
                return Err(e);
            }
        };
        let closed = (|| {
            // SAFETY: the flag is ours, on this stream.
            check("cuMemsetD32Async", unsafe {
                sys::cuMemsetD32Async(flag, 0, 1, s)
            })?;
            before.record(stream)?;
            // SAFETY: the stream waits for the flag it owns to become 1.
            check("cuStreamWaitValue32", unsafe {
                sys::cuStreamWaitValue32_v2(
                    s,
                    flag,
                    1,
                    sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_EQ as u32,
                )
            })
        })();
        if let Err(e) = closed {
            free();
            return Err(e);
        }
        // The flag is freed once the stream is past the wait; a failure here
        // leaks four bytes, nothing more.
        free();
        if let Some(own) = other {
            // Later work on the memory's own stream (its free, say) waits too.
            let _ = own.join(stream);
        }
        Ok(Gate { ctx, flag, before })
    }
}

impl Drop for Gate {
    /// Open: set the flag from a stream of our own, which nothing else
    /// queues behind.
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        let Ok(signal) = signal_stream(&self.ctx) else {
            return;
        };
        // SAFETY: the flag is live until the gated stream is past its wait,
        // which needs this very write; the request waited for the event
        // recorded after the flag's allocation, so it exists.
        unsafe {
            sys::cuStreamWriteValue32_v2(signal.cu_stream(), self.flag, 1, 0);
        }
    }
}

/// One stream per GPU that only ever sets flags.
fn signal_stream(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>> {
    static STREAMS: Mutex<Vec<Arc<CudaStream>>> = Mutex::new(Vec::new());
    let mut streams = STREAMS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = streams
        .iter()
        .find(|s| Arc::ptr_eq(s.context(), ctx) || s.context().ordinal() == ctx.ordinal())
    {
        return Ok(s.clone());
    }
    let stream = ctx
        .new_stream()
        .map_err(|e| crate::gpu::cuda_error("cuStreamCreate", e.0 as u32))?;
    streams.push(stream.clone());
    Ok(stream)
}
