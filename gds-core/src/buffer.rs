//! `BufferRegistration`: a device allocation registered with cuFile
//! (`cuFileBufRegister`), deregistered on drop.
//!
//! Registration pins the buffer for cuFile's direct path and changes how
//! cuFile schedules a request (see `schedule`). Overlapping registrations are
//! refused before cuFile sees them, with both ranges in the error.

use std::collections::BTreeMap;
use std::sync::Mutex;

use cufile_sys::cufile_fn;

use crate::driver::Driver;
use crate::error::{Error, Result};
use crate::log::LogMark;

/// Ranges registered through this process: base → size.
static REGISTERED: Mutex<BTreeMap<u64, usize>> = Mutex::new(BTreeMap::new());

/// A registered device range.
#[derive(Debug)]
pub struct BufferRegistration {
    base: u64,
    size: usize,
    driver: Driver,
}

impl BufferRegistration {
    /// Register `size` bytes of device memory at `base` with `flags`
    /// (0, or `CU_FILE_RDMA_REGISTER`…).
    ///
    /// # Safety
    /// `base..base + size` must be device memory of the current context that
    /// stays allocated until the registration is dropped.
    pub unsafe fn register(
        driver: &Driver,
        base: u64,
        size: usize,
        flags: i32,
    ) -> Result<BufferRegistration> {
        let mut registered = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((&existing_base, &existing_size)) = overlapping(&registered, base, size) {
            return Err(Error::AlreadyRegistered {
                base,
                size,
                existing_base,
                existing_size,
            });
        }
        let register = cufile_fn!(driver.library(), cuFileBufRegister)?;
        let _open = driver.enter("cuFileBufRegister")?;
        let mark = LogMark::new(driver.log());
        // SAFETY: the caller guarantees the range is live device memory.
        let status = unsafe { register(base as *const std::ffi::c_void, size, flags) };
        if !status.is_success() {
            return Err(Error::CuFile {
                operation: "cuFileBufRegister",
                status,
                path: None,
                log: mark.excerpt(),
            });
        }
        registered.insert(base, size);
        Ok(BufferRegistration {
            base,
            size,
            driver: driver.clone(),
        })
    }

    pub fn base(&self) -> u64 {
        self.base
    }

    pub fn size(&self) -> usize {
        self.size
    }
}

/// The registration (base, size) containing `ptr`, if this process
/// registered one: cuFile schedules requests into registered buffers
/// differently (see `schedule`), so reports and plans need to know.
pub fn registration_containing(ptr: u64) -> Option<(u64, usize)> {
    let registered = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    overlapping(&registered, ptr, 1).map(|(b, s)| (*b, *s))
}

fn overlapping(
    registered: &BTreeMap<u64, usize>,
    base: u64,
    size: usize,
) -> Option<(&u64, &usize)> {
    let end = base.saturating_add(size as u64);
    // The nearest registration starting before `end` is the only candidate
    // that can overlap, since registrations never overlap each other.
    registered
        .range(..end)
        .next_back()
        .filter(|(b, s)| b.saturating_add(**s as u64) > base)
}

impl Drop for BufferRegistration {
    fn drop(&mut self) {
        // A driver shut down since has forgotten the registration.
        if let Ok(_open) = self.driver.enter("cuFileBufDeregister")
            && let Ok(deregister) = cufile_fn!(self.driver.library(), cuFileBufDeregister)
        {
            // SAFETY: deregisters the range registered in `register`, once.
            unsafe { deregister(self.base as *const std::ffi::c_void) };
        }
        REGISTERED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.base);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_detection() {
        let mut map = BTreeMap::new();
        map.insert(0x1000, 0x1000);
        map.insert(0x4000, 0x100);
        assert!(overlapping(&map, 0x1000, 1).is_some());
        assert!(overlapping(&map, 0x1fff, 0x10).is_some());
        assert!(overlapping(&map, 0x0800, 0x1000).is_some());
        assert!(overlapping(&map, 0x2000, 0x2000).is_none());
        assert!(overlapping(&map, 0x0, 0x1000).is_none());
        assert!(overlapping(&map, 0x40ff, 1).is_some());
        assert!(overlapping(&map, 0x4100, 1).is_none());
    }
}
