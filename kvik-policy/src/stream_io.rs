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
//! How: where the file goes to cuFile, cuFile has a direct path and
//! libcufile has its stream API, the request is one `cuFileReadAsync` /
//! `cuFileWriteAsync` on `stream`. (Without a direct path, libcufile 1.15's
//! `cuFileReadAsync` waits, on the calling thread, for the work queued on
//! the stream — seen on the H200 — so the call would not return at once.)
//! Otherwise the stream is made to wait at the call's position for a
//! 32-bit flag in pinned, device-mapped host memory (`cuStreamWaitValue32`);
//! a pool thread waits for the work queued before that position, runs the
//! request as a blocking one would, then sets the flag — also when the
//! request fails or panics, so the stream never waits forever.

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
        let mut buf = match self.started(on_stream, buf) {
            Ok(started) => return started,
            Err(buf) => buf,
        };
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
        let on_stream = self.cufile_on_stream(Memory::Write(buf.as_buf()), offset, stream);
        let buf = match self.started(on_stream, buf) {
            Ok(started) => return started,
            Err(buf) => buf,
        };
        let own = own_stream_of(&buf.as_buf());
        let file = self.clone();
        StreamIo::gated(self.spawn_ordered(stream, own, move |cancel| {
            let done = file.transfer_write(unordered(buf.as_buf()), offset, cancel)?;
            Ok((buf, done))
        }))
    }

    /// The request as cuFile took it on the stream (or its error), or
    /// `buf` back when cuFile does not take it.
    fn started<B: Send + 'static>(
        &self,
        on_stream: Result<Option<CuFileOnStream>>,
        buf: B,
    ) -> std::result::Result<StreamIo<B>, B> {
        match on_stream {
            Ok(Some(op)) => Ok(StreamIo {
                state: State::OnStream {
                    buf,
                    file: self.clone(),
                    op: Box::new(op),
                },
            }),
            Ok(None) => Err(buf),
            Err(e) => Ok(StreamIo::gated(PendingIo::ready(Err(e)))),
        }
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
    /// The flag the stream waits to become 1 (taken back when opened).
    flag: Option<Flag>,
    /// Recorded on the stream just before the wait: the work the request
    /// must wait for.
    before: Event,
}

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
        let mut flag = Flag::take(&ctx)?;
        let mut before = Event::new(&ctx)?;
        before.record(stream)?;
        // SAFETY: the stream waits for a word of pinned, device-mapped
        // memory that stays allocated (flags are pooled, never freed, and
        // reused only once the stream is past this wait).
        check("cuStreamWaitValue32", unsafe {
            sys::cuStreamWaitValue32_v2(
                stream.cu_stream(),
                flag.device,
                1,
                sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_EQ as u32,
            )
        })?;
        flag.passed.record(stream)?;
        if let Some(own) = other {
            // Later work on the memory's own stream (its free, say) waits too.
            let _ = own.join(stream);
        }
        Ok(Gate {
            flag: Some(flag),
            before,
        })
    }
}

impl Drop for Gate {
    /// Open: set the flag (the stream polls it), and give the flag back.
    fn drop(&mut self) {
        if let Some(flag) = self.flag.take() {
            // SAFETY: the host address of our pinned word; the GPU only
            // reads it.
            unsafe { std::ptr::write_volatile(flag.host, 1) };
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            FLAGS.lock().unwrap_or_else(|p| p.into_inner()).push(flag);
        }
    }
}

/// One 32-bit word of pinned host memory that GPU `ordinal` can read (the
/// stream waits on its device address), with an event recorded after the
/// wait that uses it: it is free again once that event has completed.
struct Flag {
    ordinal: usize,
    host: *mut u32,
    device: sys::CUdeviceptr,
    passed: Event,
}

// SAFETY: the word is pinned memory owned by the pool (never freed); the
// event is a driver handle. Both are usable from any thread.
unsafe impl Send for Flag {}

/// Flags no gate uses, per GPU; and the pages they live in (kept for the
/// life of the process).
static FLAGS: Mutex<Vec<Flag>> = Mutex::new(Vec::new());

impl Flag {
    /// A free flag of `ctx`'s GPU, set to 0.
    fn take(ctx: &Arc<CudaContext>) -> Result<Flag> {
        let ordinal = ctx.ordinal();
        {
            let mut free = FLAGS.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = free
                .iter()
                .position(|f| f.ordinal == ordinal && f.passed.is_done())
            {
                let flag = free.swap_remove(i);
                // SAFETY: our pinned word; no stream waits on it any more.
                unsafe { std::ptr::write_volatile(flag.host, 0) };
                return Ok(flag);
            }
        }
        // A new page of 1024 flags.
        const WORDS: usize = 1024;
        let mut page: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: allocates pinned host memory mapped into the device.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(
                &mut page,
                WORDS * 4,
                sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
            )
        })?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: the page was just allocated with DEVICEMAP.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device, page, 0)
        })?;
        let words = page.cast::<u32>();
        let mut flags = Vec::with_capacity(WORDS);
        for i in 0..WORDS {
            // SAFETY: inside the page.
            let host = unsafe { words.add(i) };
            // SAFETY: a plain store to our own pinned memory.
            unsafe { std::ptr::write_volatile(host, 0) };
            flags.push(Flag {
                ordinal,
                host,
                device: device + 4 * i as u64,
                passed: Event::new(ctx)?,
            });
        }
        let flag = flags.pop().expect("a page holds flags");
        FLAGS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(flags);
        Ok(flag)
    }
}
