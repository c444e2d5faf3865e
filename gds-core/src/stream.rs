//! Stream-ordered cuFile reads and writes: `cuFileReadAsync` /
//! `cuFileWriteAsync`.
//!
//! The call only enqueues the operation on a CUDA stream: it runs after the
//! work queued on that stream before it, and work queued after it waits for
//! it. cuFile reads its arguments (size, offsets) and writes the result
//! (bytes moved, or a negative status) through pointers when the stream gets
//! there, so they live in a [`StreamOp`] at a fixed address that must
//! outlive the stream's execution of the operation — hence `unsafe`.

use std::ffi::c_void;

use cufile_sys::bindings::{CUfileError_t, CUfileHandle_t, CUstream, off_t};
use cufile_sys::cufile_fn;

use crate::error::{Error, Result};
use crate::handle::CuFileHandle;

/// What cuFile reads when the stream reaches the operation, and where it
/// writes the result.
#[derive(Debug)]
#[repr(C)]
struct Arguments {
    size: usize,
    file_offset: libc::off_t,
    buffer_offset: libc::off_t,
    /// Written by cuFile: bytes moved, or `-1` / a negated status.
    result: isize,
}

/// A stream-ordered operation, enqueued. Its result is known once the
/// stream has executed it ([`StreamOp::result`]).
#[derive(Debug)]
pub struct StreamOp {
    arguments: Box<Arguments>,
    operation: &'static str,
    path: std::path::PathBuf,
    file_offset: u64,
}

// SAFETY: the arguments are plain numbers that cuFile writes once, through
// the stream; reading them back is synchronised by the caller waiting for
// the stream.
unsafe impl Send for StreamOp {}

impl StreamOp {
    /// The bytes moved (short at end of file for a read).
    ///
    /// # Safety
    /// The stream must have executed the operation (synchronize it, or an
    /// event recorded after the operation), or the value is a data race with
    /// cuFile writing it.
    pub unsafe fn result(&self) -> Result<usize> {
        // SAFETY: the caller guarantees the stream wrote it; the box keeps
        // the address fixed.
        let ret = unsafe { std::ptr::read_volatile(&self.arguments.result) };
        if ret == -1 {
            // cuFile set errno on one of its own threads: unknown here.
            return Err(Error::Io {
                operation: self.operation,
                path: self.path.clone(),
                file_offset: self.file_offset,
                size: self.arguments.size,
                code: None,
                errno: None,
            });
        }
        crate::io::classify_return(
            self.operation,
            &self.path,
            ret,
            self.arguments.size,
            self.file_offset,
        )
    }
}

/// Enqueue a read of `size` bytes at `file_offset` into device memory at
/// `device_base + buffer_offset`, on `stream` (a `CUstream` of the current
/// context, as a raw pointer).
///
/// # Safety
/// The device memory must be writable and stay allocated until the stream
/// has executed the read; `stream` must be a live stream; the returned
/// [`StreamOp`] must not be dropped before the stream has executed the
/// read (cuFile writes its result into it).
pub unsafe fn read_async(
    handle: &CuFileHandle,
    device_base: u64,
    size: usize,
    file_offset: u64,
    buffer_offset: u64,
    stream: *mut c_void,
) -> Result<StreamOp> {
    let call = cufile_fn!(handle.driver().library(), cuFileReadAsync)?;
    // SAFETY: the caller vouches for the memory and the stream.
    unsafe {
        enqueue(
            call,
            "cuFileReadAsync",
            handle,
            device_base,
            size,
            file_offset,
            buffer_offset,
            stream,
        )
    }
}

/// Enqueue a write of `size` bytes from device memory at `device_base +
/// buffer_offset` to `file_offset`, on `stream`.
///
/// # Safety
/// As [`read_async`], with the memory only read.
pub unsafe fn write_async(
    handle: &CuFileHandle,
    device_base: u64,
    size: usize,
    file_offset: u64,
    buffer_offset: u64,
    stream: *mut c_void,
) -> Result<StreamOp> {
    let call = cufile_fn!(handle.driver().library(), cuFileWriteAsync)?;
    // SAFETY: as in `read_async`.
    unsafe {
        enqueue(
            call,
            "cuFileWriteAsync",
            handle,
            device_base,
            size,
            file_offset,
            buffer_offset,
            stream,
        )
    }
}

/// `cuFileReadAsync` and `cuFileWriteAsync` have one signature: enqueue
/// either with its arguments in a [`StreamOp`] that outlives the call.
///
/// # Safety
/// As [`read_async`].
#[allow(clippy::too_many_arguments)]
unsafe fn enqueue(
    call: unsafe extern "C" fn(
        CUfileHandle_t,
        *mut c_void,
        *mut usize,
        *mut off_t,
        *mut off_t,
        *mut isize,
        CUstream,
    ) -> CUfileError_t,
    operation: &'static str,
    handle: &CuFileHandle,
    device_base: u64,
    size: usize,
    file_offset: u64,
    buffer_offset: u64,
    stream: *mut c_void,
) -> Result<StreamOp> {
    let mut op = StreamOp::new(handle, operation, size, file_offset, buffer_offset)?;
    let a = &mut *op.arguments;
    // SAFETY: the handle is registered; the arguments live in a box the
    // caller keeps until the stream is done; the caller vouches for the
    // memory and the stream.
    let status = unsafe {
        call(
            handle.raw(),
            device_base as *mut c_void,
            &mut a.size,
            &mut a.file_offset,
            &mut a.buffer_offset,
            &mut a.result,
            stream as CUstream,
        )
    };
    op.check(handle, status)
}

impl StreamOp {
    fn new(
        handle: &CuFileHandle,
        operation: &'static str,
        size: usize,
        file_offset: u64,
        buffer_offset: u64,
    ) -> Result<StreamOp> {
        let (file_off, buf_off) =
            crate::io::offsets(handle, operation, size, file_offset, buffer_offset)?;
        Ok(StreamOp {
            arguments: Box::new(Arguments {
                size,
                file_offset: file_off,
                buffer_offset: buf_off,
                result: 0,
            }),
            operation,
            path: handle.path().to_path_buf(),
            file_offset,
        })
    }

    fn check(
        self,
        handle: &CuFileHandle,
        status: cufile_sys::bindings::CUfileError_t,
    ) -> Result<StreamOp> {
        if status.is_success() {
            return Ok(self);
        }
        Err(Error::CuFile {
            operation: self.operation,
            status,
            path: Some(handle.path().to_path_buf()),
            log: None,
        })
    }
}
