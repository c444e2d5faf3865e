//! Where a pointer points: host or device memory, which GPU, and the
//! allocation it belongs to.
//!
//! cuFile finds a registered buffer by the allocation base it was registered
//! with, so a request into the middle of an allocation is passed to cuFile as
//! (base, offset); `cuPointerGetAttribute` gives both.

use std::ffi::c_void;

use cudarc::driver::sys;

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
pub fn pointer_info(ptr: u64) -> PointerInfo {
    if gds_core::cuda::probe().is_err() {
        return PointerInfo::host(ptr);
    }
    let attribute = |attr: sys::CUpointer_attribute, out: *mut c_void| {
        // SAFETY: the driver is present (probed above); `out` points to a
        // value of the size the attribute writes.
        unsafe { sys::cuPointerGetAttribute(out, attr, ptr) }
    };
    let mut memory_type: u32 = 0;
    let status = attribute(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        (&mut memory_type as *mut u32).cast(),
    );
    // Unregistered host memory is unknown to CUDA: the call fails.
    if status != sys::CUresult::CUDA_SUCCESS {
        return PointerInfo::host(ptr);
    }
    let mut managed: u32 = 0;
    attribute(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        (&mut managed as *mut u32).cast(),
    );
    let is_device = memory_type == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
        || memory_type == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32
        || managed != 0;
    if !is_device {
        // Pinned (page-locked) host memory: still host memory.
        return PointerInfo::host(ptr);
    }
    let mut ordinal: i32 = 0;
    attribute(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        (&mut ordinal as *mut i32).cast(),
    );
    let mut base: sys::CUdeviceptr = ptr;
    let mut size: usize = 0;
    attribute(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        (&mut base as *mut u64).cast(),
    );
    attribute(
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
        (&mut size as *mut usize).cast(),
    );
    PointerInfo {
        memory: MemoryKind::Device {
            ordinal: ordinal.max(0) as u32,
        },
        managed: managed != 0,
        allocation_base: base,
        allocation_size: size as u64,
        offset: ptr.saturating_sub(base),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_memory_is_host_memory() {
        let data = vec![0u8; 4096];
        let info = pointer_info(data.as_ptr() as u64);
        assert_eq!(info.memory, MemoryKind::Host);
        assert!(!info.managed);
        assert_eq!(info.allocation_base, data.as_ptr() as u64);
    }
}
