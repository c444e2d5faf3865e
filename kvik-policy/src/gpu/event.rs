//! CUDA events: a point in a stream that a thread (or another stream) can
//! wait for.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys};

use crate::error::Error;

/// Events that block the waiting thread (instead of spinning, which would
/// steal the cores `pread` needs) and record no timing.
const EVENT_FLAGS: u32 = 0x1 | 0x2;

/// A driver call's status as a result.
pub(crate) fn check(call: &'static str, status: sys::CUresult) -> Result<(), Error> {
    if status == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(super::cuda_error(call, status as u32))
    }
}

/// A CUDA event, re-recorded as often as needed; `wait` waits for the last record.
pub(crate) struct Event {
    raw: sys::CUevent,
    ctx: Arc<CudaContext>,
    pub(crate) pending: bool,
}

// SAFETY: a CUevent is a driver handle usable from any thread (the context
// is bound before each use).
unsafe impl Send for Event {}

impl Event {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Event, Error> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: creates one event in the current context.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut raw, EVENT_FLAGS)
        })?;
        Ok(Event {
            raw,
            ctx: ctx.clone(),
            pending: false,
        })
    }

    pub(crate) fn record(&mut self, stream: &CudaStream) -> Result<(), Error> {
        // SAFETY: both belong to the current context.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.raw, stream.cu_stream())
        })?;
        self.pending = true;
        Ok(())
    }

    /// Block until the work before the last record is done.
    pub(crate) fn wait(&mut self) -> Result<(), Error> {
        if self.pending {
            // SAFETY: a valid, recorded event.
            check("cuEventSynchronize", unsafe {
                sys::cuEventSynchronize(self.raw)
            })?;
            self.pending = false;
        }
        Ok(())
    }
}

impl Event {
    /// Whether the work before the last record is done, without blocking.
    pub(crate) fn is_done(&self) -> bool {
        // SAFETY: a valid event of our context.
        !self.pending || unsafe { sys::cuEventQuery(self.raw) } == sys::CUresult::CUDA_SUCCESS
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: destroys the event created in `new`, once (pending work
        // is allowed: the driver releases it when done).
        unsafe { sys::cuEventDestroy_v2(self.raw) };
    }
}
