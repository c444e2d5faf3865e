//! Device memory: CUDA contexts, pointer classification, and the pipelined
//! bounce-buffer path that moves file bytes to and from GPU memory without
//! cuFile.
//!
//! Everything here first asks `gds_core::cuda::probe()`: cudarc panics when
//! `libcuda.so.1` is missing, and this library must never panic on a machine
//! without a GPU.

mod context;
mod pointer;
mod staging;

pub use context::context;
pub use pointer::{PointerInfo, pointer_info};
pub use staging::{StagedCopies, read_to_device, write_from_device};

/// Why a device operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No CUDA driver or GPU: device memory cannot exist here.
    #[error(transparent)]
    NoCuda(#[from] gds_core::cuda::CudaUnavailable),
    /// A CUDA driver call failed.
    #[error("{operation} failed: CUDA error {code}")]
    Cuda {
        operation: &'static str,
        code: gds_core::cuda::CudaResult,
    },
    /// A read or write through the bounce buffers failed.
    #[error("{operation} {path} at offset {offset}: {message}")]
    Io {
        operation: &'static str,
        path: String,
        offset: u64,
        errno: Option<i32>,
        message: String,
    },
}

impl GpuError {
    fn cuda(operation: &'static str, e: cudarc::driver::DriverError) -> GpuError {
        GpuError::Cuda {
            operation,
            code: gds_core::cuda::CudaResult(e.0 as u32),
        }
    }
}
