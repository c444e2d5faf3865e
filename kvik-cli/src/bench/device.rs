//! GPU memory for the benchmark: the device buffer reads land in (and
//! writes come from), and the host→device copy ceilings.
//!
//! Every entry point asks `gds_core::cuda::probe()` first, through
//! `kvik_policy::gpu::context`: cudarc panics without `libcuda.so.1`.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr as _};
use kvik_policy::{DeviceSlice, DeviceSliceMut};

/// Why a device figure could not be measured, in the report's words.
pub fn unavailable(e: impl std::fmt::Display) -> String {
    format!("skipped: {e}")
}

fn cuda(what: &str, e: cudarc::driver::DriverError) -> String {
    format!("{what} failed: {e:?}")
}

/// `len` bytes of GPU memory on GPU `ordinal`, allocated once for the run.
pub struct DeviceBuffer {
    ordinal: u32,
    ptr: u64,
    len: usize,
    stream: Arc<CudaStream>,
    // Keeps the allocation alive; `ptr` points into it.
    _memory: CudaSlice<u8>,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ordinal", &self.ordinal)
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .finish()
    }
}

impl DeviceBuffer {
    /// Allocate and fill with `pattern` (copied from host memory, so writes
    /// from the device write real data, not zeros a disk could shortcut).
    pub fn new(ordinal: u32, pattern: &[u8]) -> Result<DeviceBuffer, String> {
        gds_core::cuda::probe().map_err(unavailable)?;
        let ctx = kvik_policy::gpu::context(ordinal).map_err(unavailable)?;
        let stream = ctx.default_stream();
        let mut memory = stream
            .alloc_zeros::<u8>(pattern.len())
            .map_err(|e| cuda("cuMemAlloc", e))?;
        stream
            .memcpy_htod(pattern, &mut memory)
            .map_err(|e| cuda("cuMemcpyHtoD", e))?;
        let ptr = {
            let (ptr, _record) = memory.device_ptr(&stream);
            ptr
        };
        stream
            .synchronize()
            .map_err(|e| cuda("cuStreamSynchronize", e))?;
        Ok(DeviceBuffer {
            ordinal,
            ptr,
            len: pattern.len(),
            stream,
            _memory: memory,
        })
    }

    /// The first `len` bytes (at most the buffer), to read into.
    pub fn window_mut(&mut self, len: usize) -> DeviceSliceMut<'_> {
        // SAFETY: `ptr..ptr + len.min(self.len)` is our allocation on GPU
        // `ordinal`, alive as long as `self`, and `&mut self` keeps anyone
        // else from using it.
        unsafe { DeviceSliceMut::from_raw(self.ordinal, self.ptr, len.min(self.len)) }
    }

    /// The first `len` bytes (at most the buffer), to write from.
    pub fn window(&self, len: usize) -> DeviceSlice<'_> {
        // SAFETY: as in `window_mut`; nobody writes it while borrowed.
        unsafe { DeviceSlice::from_raw(self.ordinal, self.ptr, len.min(self.len)) }
    }

    /// Wait for everything queued in the GPU's context: the bounce-buffer
    /// pipeline copies on its own non-blocking streams, which the default
    /// stream does not wait for.
    pub fn synchronize(&self) -> Result<(), String> {
        self.stream
            .context()
            .synchronize()
            .map_err(|e| cuda("cuCtxSynchronize", e))
    }
}

/// The host→device copy ceilings of GPU `ordinal` for `len` bytes: seconds
/// per repetition from pinned memory (`cuMemHostAlloc` with flags 0: cached,
/// not write-combined, as bounce buffers are) and from pageable memory
/// (`pageable`, already faulted in). One untimed copy first.
pub fn htod_seconds(
    ordinal: u32,
    pageable: &[u8],
    reps: usize,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    gds_core::cuda::probe().map_err(unavailable)?;
    let ctx: Arc<CudaContext> = kvik_policy::gpu::context(ordinal).map_err(unavailable)?;
    let stream = ctx.default_stream();
    let len = pageable.len();
    // SAFETY: the memory is filled before it is read.
    let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(len, 0) }
        .map_err(|e| cuda("cuMemHostAlloc", e))?;
    pinned
        .as_mut_slice()
        .map_err(|e| cuda("cuEventSynchronize", e))?
        .copy_from_slice(pageable);
    // SAFETY: every byte is written by the copies before anyone reads it.
    let mut device = unsafe { stream.alloc::<u8>(len) }.map_err(|e| cuda("cuMemAlloc", e))?;

    let mut time = |from_pinned: bool| -> Result<Vec<f64>, String> {
        let mut seconds = Vec::with_capacity(reps);
        for rep in 0..=reps {
            let start = Instant::now();
            if from_pinned {
                stream.memcpy_htod(&pinned, &mut device)
            } else {
                stream.memcpy_htod(pageable, &mut device)
            }
            .map_err(|e| cuda("cuMemcpyHtoDAsync", e))?;
            stream
                .synchronize()
                .map_err(|e| cuda("cuStreamSynchronize", e))?;
            if rep > 0 {
                seconds.push(start.elapsed().as_secs_f64());
            }
        }
        Ok(seconds)
    };
    let pinned_seconds = time(true)?;
    let pageable_seconds = time(false)?;
    Ok((pinned_seconds, pageable_seconds))
}
