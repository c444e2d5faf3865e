//! Synchronous cuFile reads and writes.
//!
//! cuFile returns the bytes moved, `-1` with errno set, or a negated cuFile
//! status. Short counts are returned as short counts; the two kinds of
//! failure become [`Error::Io`] with the raw code kept.

use cufile_sys::bindings::CUfileOpError;
use cufile_sys::cufile_fn;

use crate::error::{Error, Result};
use crate::handle::CuFileHandle;

/// Read `size` bytes at `file_offset` into device memory at
/// `device_base + buffer_offset`.
///
/// `device_base` should be the base of the allocation (or of its
/// registration) so cuFile finds a registered buffer; `buffer_offset`
/// addresses inside it.
///
/// # Safety
/// `device_base + buffer_offset .. + size` must be writable device memory
/// that stays allocated during the call.
pub unsafe fn read(
    handle: &CuFileHandle,
    device_base: u64,
    size: usize,
    file_offset: u64,
    buffer_offset: u64,
) -> Result<usize> {
    let read = cufile_fn!(handle.driver().library(), cuFileRead)?;
    let (file_off, buf_off) = offsets(handle, "cuFileRead", size, file_offset, buffer_offset)?;
    let _open = handle.driver().enter("cuFileRead")?;
    // SAFETY: the handle is registered; the caller guarantees the buffer.
    let ret = unsafe {
        read(
            handle.raw(),
            device_base as *mut std::ffi::c_void,
            size,
            file_off,
            buf_off,
        )
    };
    classify(handle, "cuFileRead", ret, size, file_offset)
}

/// Write `size` bytes from device memory at `device_base + buffer_offset` to
/// `file_offset`.
///
/// # Safety
/// `device_base + buffer_offset .. + size` must be readable device memory
/// that stays allocated during the call.
pub unsafe fn write(
    handle: &CuFileHandle,
    device_base: u64,
    size: usize,
    file_offset: u64,
    buffer_offset: u64,
) -> Result<usize> {
    let write = cufile_fn!(handle.driver().library(), cuFileWrite)?;
    let (file_off, buf_off) = offsets(handle, "cuFileWrite", size, file_offset, buffer_offset)?;
    let _open = handle.driver().enter("cuFileWrite")?;
    // SAFETY: the handle is registered; the caller guarantees the buffer.
    let ret = unsafe {
        write(
            handle.raw(),
            device_base as *const std::ffi::c_void,
            size,
            file_off,
            buf_off,
        )
    };
    classify(handle, "cuFileWrite", ret, size, file_offset)
}

/// Offsets as `off_t`, refusing values cuFile would see as negative.
pub(crate) fn offsets(
    handle: &CuFileHandle,
    operation: &'static str,
    size: usize,
    file_offset: u64,
    buffer_offset: u64,
) -> Result<(i64, i64)> {
    let invalid = || Error::Io {
        operation,
        path: handle.path().to_path_buf(),
        file_offset,
        size,
        code: None,
        errno: Some(libc::EINVAL),
    };
    let file_off = i64::try_from(file_offset).map_err(|_| invalid())?;
    let buf_off = i64::try_from(buffer_offset).map_err(|_| invalid())?;
    file_off.checked_add(size as i64).ok_or_else(invalid)?;
    Ok((file_off, buf_off))
}

/// The meaning of a read/write return value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoReturn {
    Bytes(usize),
    /// `-1`: errno says why.
    Errno,
    /// `-(5000 + n)`: a cuFile status.
    CuFile(CUfileOpError),
    /// Another negative value: some versions return `-errno` directly.
    NegatedErrno(i32),
}

impl IoReturn {
    pub fn classify(ret: isize) -> IoReturn {
        if ret >= 0 {
            return IoReturn::Bytes(ret as usize);
        }
        if ret == -1 {
            return IoReturn::Errno;
        }
        match CUfileOpError::from_io_return(ret) {
            Some(code) => IoReturn::CuFile(code),
            None => IoReturn::NegatedErrno(i32::try_from(-ret).unwrap_or(libc::EIO)),
        }
    }
}

fn classify(
    handle: &CuFileHandle,
    operation: &'static str,
    ret: isize,
    size: usize,
    file_offset: u64,
) -> Result<usize> {
    classify_return(operation, handle.path(), ret, size, file_offset)
}

/// A read/write return value as bytes or the error it means. Call it right
/// after the operation: `-1` reads this thread's errno.
pub(crate) fn classify_return(
    operation: &'static str,
    path: &std::path::Path,
    ret: isize,
    size: usize,
    file_offset: u64,
) -> Result<usize> {
    let error = |code, errno| Error::Io {
        operation,
        path: path.to_path_buf(),
        file_offset,
        size,
        code,
        errno,
    };
    match IoReturn::classify(ret) {
        IoReturn::Bytes(n) => Ok(n),
        IoReturn::Errno => Err(error(None, std::io::Error::last_os_error().raw_os_error())),
        IoReturn::CuFile(code) => Err(error(Some(code), None)),
        IoReturn::NegatedErrno(errno) => Err(error(None, Some(errno))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_values_are_classified() {
        assert_eq!(IoReturn::classify(0), IoReturn::Bytes(0));
        assert_eq!(IoReturn::classify(4096), IoReturn::Bytes(4096));
        assert_eq!(IoReturn::classify(-1), IoReturn::Errno);
        assert_eq!(
            IoReturn::classify(-5024),
            IoReturn::CuFile(CUfileOpError::CU_FILE_MEMORY_NOT_REGISTERED)
        );
        assert_eq!(
            IoReturn::classify(-(libc::EIO as isize)),
            IoReturn::NegatedErrno(libc::EIO)
        );
    }
}
