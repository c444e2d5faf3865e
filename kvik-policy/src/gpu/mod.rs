//! Device memory: CUDA contexts, pointer classification, and the pipelined
//! bounce-buffer path that moves file bytes to and from GPU memory without
//! cuFile.
//!
//! Everything here first asks `gds_core::cuda::probe()`: cudarc panics when
//! `libcuda.so.1` is missing, and this library must never panic on a machine
//! without a GPU.

mod context;
pub(crate) mod gather;
mod pointer;
mod staging;

pub use context::context;
pub use pointer::{PointerInfo, pointer_info};
pub use staging::{StagedCopies, prepare, read_to_device, write_from_device};

use crate::error::Error;

/// A failed CUDA driver call, as the crate's error.
fn cuda_error(call: &'static str, code: u32) -> Error {
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
