//! Where a pointer points: host or device memory, which GPU, and the
//! allocation it belongs to.
//!
//! cuFile finds a registered buffer by the allocation base it was registered
//! with, so a request into the middle of an allocation is passed to cuFile as
//! (base, offset); `cuPointerGetAttribute` gives both.

use std::ffi::c_void;

use cudarc::driver::sys;

use crate::error::Error;
use crate::routing::MemoryKind;

/// What CUDA knows about a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PointerInfo {
    pub memory: MemoryKind,
    /// Managed (unified) memory; counted as device memory, as KvikIO does.
    pub managed: bool,
    /// Start of the allocation containing the pointer (the pointer itself for host memory).
    pub allocation_base: u64,
    pub allocation_size: u64,
    /// `pointer - allocation_base`.
    pub offset: u64,
}

impl PointerInfo {
    fn host(ptr: u64) -> PointerInfo {
        PointerInfo {
            memory: MemoryKind::Host,
            managed: false,
            allocation_base: ptr,
            allocation_size: 0,
            offset: 0,
        }
    }
}

/// Classify `ptr`. Without a CUDA driver every pointer is host memory.
/// Every attribute read is checked: an address CUDA knows as device memory
/// but cannot describe is an error, not a guess.
pub(crate) fn pointer_info(ptr: u64) -> Result<PointerInfo, Error> {
    if gds_core::cuda::probe().is_err() {
        return Ok(PointerInfo::host(ptr));
    }
    let attribute = |attr: sys::CUpointer_attribute, out: *mut c_void| {
        // SAFETY: the driver is present (probed above); `out` points to a
        // value of the size the attribute writes.
        unsafe { sys::cuPointerGetAttribute(out, attr, ptr) }
    };
    let checked = |attr, out, call| match attribute(attr, out) {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        status => Err(super::cuda_error(call, status as u32)),
    };
    let mut memory_type: u32 = 0;
    let status = attribute(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        (&mut memory_type as *mut u32).cast(),
    );
    // Unregistered host memory is unknown to CUDA: the call fails with
    // CUDA_ERROR_INVALID_VALUE. Any other failure is a failure.
    match status {
        sys::CUresult::CUDA_SUCCESS => {}
        sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(PointerInfo::host(ptr)),
        status => {
            return Err(super::cuda_error(
                "cuPointerGetAttribute(MEMORY_TYPE)",
                status as u32,
            ));
        }
    }
    let mut managed: u32 = 0;
    checked(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        (&mut managed as *mut u32).cast(),
        "cuPointerGetAttribute(IS_MANAGED)",
    )?;
    let is_device = memory_type == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
        || memory_type == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32
        || managed != 0;
    if !is_device {
        // Pinned (page-locked) host memory: still host memory.
        return Ok(PointerInfo::host(ptr));
    }
    let mut ordinal: i32 = 0;
    checked(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        (&mut ordinal as *mut i32).cast(),
        "cuPointerGetAttribute(DEVICE_ORDINAL)",
    )?;
    let mut base: sys::CUdeviceptr = 0;
    let mut size: usize = 0;
    checked(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        (&mut base as *mut u64).cast(),
        "cuPointerGetAttribute(RANGE_START_ADDR)",
    )?;
    checked(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        (&mut size as *mut usize).cast(),
        "cuPointerGetAttribute(RANGE_SIZE)",
    )?;
    Ok(PointerInfo {
        memory: MemoryKind::Device {
            ordinal: ordinal.max(0) as u32,
        },
        managed: managed != 0,
        allocation_base: base,
        allocation_size: size as u64,
        offset: ptr.saturating_sub(base),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_is_host_memory() {
        let data = vec![0u8; 4096];
        let info = pointer_info(data.as_ptr() as u64).unwrap();
        assert_eq!(info.memory, MemoryKind::Host);
        assert!(!info.managed);
        assert_eq!(info.allocation_base, data.as_ptr() as u64);
    }
}
