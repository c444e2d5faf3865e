//! Device memory: CUDA contexts, pointer classification, and the pipelined
//! bounce-buffer path that moves file bytes to and from GPU memory without
//! cuFile.
//!
//! Public here: the per-GPU context and [`prepare`] (allocate a thread's
//! pinned buffers ahead of time). What takes a device address stays inside
//! the crate: requests reach it through typed buffers only.
//!
//! Everything here first asks `gds_core::cuda::probe()`: cudarc panics when
//! `libcuda.so.1` is missing, and this library must never panic on a machine
//! without a GPU.

mod context;
pub(crate) mod event;
pub(crate) mod gather;
mod pointer;
mod staging;
#[cfg(test)]
mod tests;
mod upload;

pub use context::context;
pub use pointer::PointerInfo;
pub(crate) use pointer::pointer_info;
pub use staging::prepare;
pub(crate) use staging::{StagedCopies, read_to_device, staging_chunk, write_from_device};
pub use upload::DeviceUpload;

use crate::error::Error;

/// A failed CUDA driver call, as the crate's error.
pub(crate) fn cuda_error(call: &'static str, code: u32) -> Error {
    Error::Cuda {
        call,
        code: gds_core::cuda::CudaResult(code),
        path: None,
        offset: None,
    }
}

fn driver_error(call: &'static str, e: cudarc::driver::DriverError) -> Error {
    cuda_error(call, e.0 as u32)
}
