//! Python objects as the memory of a request.
//!
//! * host memory: anything with the buffer protocol (`bytearray`, numpy
//!   arrays, `memoryview`, `mmap`), C- or Fortran-contiguous;
//! * device memory: anything with `__cuda_array_interface__` (CuPy arrays,
//!   PyTorch CUDA tensors, Numba device arrays) or, failing that, DLPack
//!   (`__dlpack__`) on a CUDA device; contiguous, any dtype.
//!
//! A [`Memory`] owns a reference to the Python object (and, for host memory,
//! a `memoryview` that keeps the buffer exported), so the bytes stay where
//! they are for as long as any request holds it — also when the caller drops
//! the future. It is released without the GIL when a pool thread drops it:
//! pyo3 queues the reference and releases it the next time Python runs our
//! code.
//!
//! A request is cut into [`Window`]s (see `request.rs`): disjoint ranges of
//! one `Memory`, each an owned buffer kvik-policy can run in the background.

mod device;
mod host;

use std::sync::Arc;

use kvik_policy::{Buf, BufMut, DeviceSlice, DeviceSliceMut, IoBuffer, IoBufferMut};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// What the request does to the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// A read fills it: it must be writable.
    Fill,
    /// A write takes its bytes from it.
    Drain,
}

/// Where the bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Host,
    Device { ordinal: u32 },
}

/// The bytes of a Python object, kept alive.
#[derive(Debug)]
pub(crate) struct Memory {
    /// The object (or the exported view of it) that owns the bytes.
    _owner: Py<PyAny>,
    place: Place,
    ptr: u64,
    len: usize,
}

// SAFETY: `Memory` is an address range plus a reference to the Python
// object that owns it; `Py<PyAny>` is Send + Sync, and the range is only
// turned into slices through `Window`s, which never overlap.
unsafe impl Send for Memory {}
// SAFETY: as above; shared access hands out nothing but the address.
unsafe impl Sync for Memory {}

impl Memory {
    /// The bytes of `object`: the buffer protocol when its type has it (host
    /// memory; asked first because it costs no failed attribute lookup),
    /// else `__cuda_array_interface__`, else DLPack.
    pub(crate) fn from_object(object: &Bound<'_, PyAny>, access: Access) -> PyResult<Memory> {
        if host::exports_buffers(object) {
            if let Some(memory) = host::from_buffer_protocol(object, access)? {
                return Ok(memory);
            }
        }
        if let Some(memory) = device::from_cuda_array_interface(object, access)? {
            return Ok(memory);
        }
        if let Some(memory) = device::from_dlpack(object, access)? {
            return Ok(memory);
        }
        Err(PyTypeError::new_err(format!(
            "{} is not memory kvik can use: pass host memory with the buffer protocol \
             (bytearray, numpy array, memoryview) or device memory with \
             __cuda_array_interface__ or __dlpack__ (CuPy array, PyTorch CUDA tensor)",
            type_name(object)
        )))
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Use only the first `size` bytes (KvikIO's `size` argument).
    pub(crate) fn truncate(&mut self, size: Option<usize>) -> PyResult<()> {
        match size {
            None => Ok(()),
            Some(n) if n <= self.len => {
                self.len = n;
                Ok(())
            }
            Some(n) => Err(PyValueError::new_err(format!(
                "size {n} is larger than the buffer ({} bytes)",
                self.len
            ))),
        }
    }
}

/// `numpy.ndarray`, `bytes`, … for messages.
pub(crate) fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .fully_qualified_name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "this object".into())
}

/// Bytes `offset..offset + len` of a [`Memory`], owned (it holds the
/// `Memory`), for one kvik-policy request.
#[derive(Debug)]
pub(crate) struct Window {
    memory: Arc<Memory>,
    offset: usize,
    len: usize,
}

impl Window {
    /// # Panics
    /// When the range is not inside the memory (a bug in the caller).
    pub(crate) fn new(memory: Arc<Memory>, offset: usize, len: usize) -> Window {
        assert!(offset.checked_add(len).is_some_and(|end| end <= memory.len));
        Window {
            memory,
            offset,
            len,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn address(&self) -> u64 {
        self.memory.ptr + self.offset as u64
    }

    /// A non-null host pointer (an empty range may have none).
    fn host_ptr(&self) -> *mut u8 {
        if self.len == 0 {
            std::ptr::NonNull::<u8>::dangling().as_ptr()
        } else {
            self.address() as usize as *mut u8
        }
    }
}

// Windows of one request never overlap (request.rs cuts them end to end),
// and the caller's promise — as with KvikIO — is not to touch the memory
// until the request finishes. The exporter was checked writable for `Fill`.
impl IoBufferMut for Window {
    fn as_buf_mut(&mut self) -> BufMut<'_> {
        match self.memory.place {
            Place::Host => {
                // SAFETY: the range lies inside a writable buffer kept exported
                // by `Memory` for as long as this window lives, and no other
                // window covers it.
                BufMut::Host(unsafe { std::slice::from_raw_parts_mut(self.host_ptr(), self.len) })
            }
            Place::Device { ordinal } => {
                // SAFETY: device memory of GPU `ordinal` (CUDA said so),
                // kept allocated by the object `Memory` holds; no other
                // window covers it.
                BufMut::Device(unsafe {
                    DeviceSliceMut::from_raw(ordinal, self.address(), self.len)
                })
            }
        }
    }
}

impl IoBuffer for Window {
    fn as_buf(&self) -> Buf<'_> {
        match self.memory.place {
            Place::Host => {
                // SAFETY: the range lies inside a buffer kept exported by
                // `Memory` for as long as this window lives.
                Buf::Host(unsafe { std::slice::from_raw_parts(self.host_ptr(), self.len) })
            }
            Place::Device { ordinal } => {
                // SAFETY: device memory of GPU `ordinal`, kept allocated by
                // the object `Memory` holds.
                Buf::Device(unsafe { DeviceSlice::from_raw(ordinal, self.address(), self.len) })
            }
        }
    }
}
