//! Host memory through the buffer protocol.
//!
//! The object is wrapped in a `memoryview` (which holds the export for as
//! long as it lives, and is released by reference counting alone, with no
//! call that needs the GIL at a precise time), then the view's layout is
//! read once to check it and find the address.

use std::ffi::{c_char, c_int, c_void};

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;

use super::{Access, Memory, Place, type_name};

/// `Py_buffer`. pyo3 declares the buffer protocol only for abi3 modules
/// that target Python 3.11 or later, the release that added it to the
/// stable ABI; the struct and the two calls below have kept this layout and
/// these signatures since Python 3.0, so a module built for 3.10 may use
/// them on every interpreter it loads into.
#[repr(C)]
struct BufferView {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

/// `PyBUF_STRIDES`: shape and strides, read-only views allowed (checked here,
/// with a clearer message than the exporter's).
const PYBUF_STRIDES: c_int = 0x0010 | 0x0008;

unsafe extern "C" {
    fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut BufferView, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut BufferView);
}

/// Whether the object's type has the buffer protocol (asked of the type's
/// slot, so that a "no" raises nothing).
pub(super) fn exports_buffers(object: &Bound<'_, PyAny>) -> bool {
    let ty = object.get_type();
    // SAFETY: a live type object; since Python 3.10 PyType_GetSlot accepts
    // static types too.
    !unsafe { ffi::PyType_GetSlot(ty.as_type_ptr(), ffi::Py_bf_getbuffer) }.is_null()
}

/// The memory of an object with the buffer protocol, or `None` when it
/// refuses to export a buffer (as device arrays that have the slot do).
pub(super) fn from_buffer_protocol(
    object: &Bound<'_, PyAny>,
    access: Access,
) -> PyResult<Option<Memory>> {
    let py = object.py();
    let view = match PyMemoryView::from(object) {
        Ok(view) => view,
        Err(e) if e.is_instance_of::<PyTypeError>(py) || e.is_instance_of::<PyBufferError>(py) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let layout = Layout::of(&view)?;
    if access == Access::Fill && layout.readonly {
        return Err(PyTypeError::new_err(format!(
            "{} is read-only: a read needs writable memory (a bytearray, a numpy array, …)",
            type_name(object)
        )));
    }
    if !layout.contiguous() {
        return Err(PyValueError::new_err(format!(
            "{} is not contiguous (shape {:?}, strides {:?}, {}-byte items): kvik moves one \
             contiguous range of bytes; pass a contiguous copy (numpy.ascontiguousarray)",
            type_name(object),
            layout.shape,
            layout.strides,
            layout.itemsize
        )));
    }
    Ok(Some(Memory {
        _owner: view.into_any().unbind(),
        place: Place::Host,
        ptr: layout.address,
        len: layout.len,
    }))
}

/// What a buffer looks like.
#[derive(Debug)]
struct Layout {
    address: u64,
    len: usize,
    readonly: bool,
    itemsize: usize,
    shape: Vec<isize>,
    /// Empty when the exporter gave none (C-contiguous).
    strides: Vec<isize>,
    indirect: bool,
}

impl Layout {
    fn of(view: &Bound<'_, PyMemoryView>) -> PyResult<Layout> {
        let mut raw = std::mem::MaybeUninit::<BufferView>::zeroed();
        // SAFETY: `view` is a live memoryview (the GIL is held through
        // `Bound`); `raw` is a zeroed Py_buffer for the call to fill.
        if unsafe { PyObject_GetBuffer(view.as_ptr(), raw.as_mut_ptr(), PYBUF_STRIDES) } != 0 {
            return Err(PyErr::fetch(view.py()));
        }
        // SAFETY: the call succeeded, so it filled the struct.
        let mut raw = unsafe { raw.assume_init() };
        let ndim = usize::try_from(raw.ndim).unwrap_or(0);
        let read = |p: *mut ffi::Py_ssize_t| -> Vec<isize> {
            if p.is_null() {
                Vec::new()
            } else {
                // SAFETY: the exporter gives `ndim` entries for shape and strides.
                unsafe { std::slice::from_raw_parts(p, ndim) }.to_vec()
            }
        };
        let layout = Layout {
            address: raw.buf as u64,
            len: usize::try_from(raw.len).unwrap_or(0),
            readonly: raw.readonly != 0,
            itemsize: usize::try_from(raw.itemsize).unwrap_or(1).max(1),
            shape: read(raw.shape),
            strides: read(raw.strides),
            indirect: !raw.suboffsets.is_null(),
        };
        // SAFETY: releasing the view just obtained; the memoryview keeps its
        // own export of the object, so the address stays valid.
        unsafe { PyBuffer_Release(&mut raw) };
        Ok(layout)
    }

    fn contiguous(&self) -> bool {
        !self.indirect && contiguous(&self.shape, &self.strides, self.itemsize as isize)
    }
}

/// Whether `shape`/`strides` (bytes) describe one contiguous block, in C or
/// Fortran order. No strides means C order.
pub(super) fn contiguous(shape: &[isize], strides: &[isize], itemsize: isize) -> bool {
    if strides.is_empty() || shape.contains(&0) {
        return true;
    }
    let dense = |order: &mut dyn Iterator<Item = usize>| {
        let mut expected = itemsize;
        for i in order {
            if shape[i] != 1 && strides[i] != expected {
                return false;
            }
            expected *= shape[i];
        }
        true
    };
    dense(&mut (0..shape.len()).rev()) || dense(&mut (0..shape.len()))
}
