//! Device memory: `__cuda_array_interface__` (CuPy, PyTorch, Numba) and
//! DLPack (`__dlpack__`, for objects without the former; also host memory
//! that only speaks DLPack, such as PyTorch CPU tensors).
//!
//! The device of a pointer is asked of CUDA (`cuPointerGetAttribute`), not
//! taken on trust; kvik-policy checks the range against its allocation again
//! before any I/O. Work the producer queued on its stream is waited for
//! first, so a read cannot race the kernel or copy that produced the array.

use std::ffi::{CStr, c_void};

use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::{ffi, intern};

use super::{Access, Memory, Place, host::contiguous, type_name};
use crate::errors::to_py_err;

/// The memory behind `__cuda_array_interface__`, or `None` when the object
/// has none.
pub(super) fn from_cuda_array_interface(
    object: &Bound<'_, PyAny>,
    access: Access,
) -> PyResult<Option<Memory>> {
    let py = object.py();
    let interface = match object.getattr(intern!(py, "__cuda_array_interface__")) {
        Ok(i) => i,
        Err(e) if e.is_instance_of::<PyAttributeError>(py) => return Ok(None),
        // PyTorch refuses for tensors that require grad, and says so.
        Err(e) => return Err(e),
    };
    let what = type_name(object);
    let interface = interface.cast_into::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!("{what}.__cuda_array_interface__ is not a dict"))
    })?;
    let item = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        Ok(interface.get_item(key)?.filter(|v| !v.is_none()))
    };
    let missing = |key: &str| {
        PyValueError::new_err(format!("{what}.__cuda_array_interface__ has no {key:?}"))
    };
    if item("mask")?.is_some() {
        return Err(PyValueError::new_err(format!(
            "{what}: masked arrays (__cuda_array_interface__[\"mask\"]) are not supported"
        )));
    }
    let (ptr, readonly): (u64, bool) = item("data")?.ok_or_else(|| missing("data"))?.extract()?;
    let shape: Vec<isize> = item("shape")?.ok_or_else(|| missing("shape"))?.extract()?;
    let typestr: String = item("typestr")?
        .ok_or_else(|| missing("typestr"))?
        .extract()?;
    let strides: Vec<isize> = item("strides")?
        .map(|s| s.extract())
        .transpose()?
        .unwrap_or_default();
    let stream: Option<u64> = item("stream")?.map(|s| s.extract()).transpose()?;
    let itemsize = typestr
        .trim_start_matches(['<', '>', '|', '='])
        .get(1..)
        .and_then(|digits| digits.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "{what}: cannot tell the item size from typestr {typestr:?}"
            ))
        })?;
    if access == Access::Fill && readonly {
        return Err(PyTypeError::new_err(format!(
            "{what} is read-only (__cuda_array_interface__[\"data\"][1] is True): a read \
             needs writable memory"
        )));
    }
    let layout = Layout {
        what,
        ptr,
        shape,
        strides,
        itemsize,
    };
    let len = layout.checked_len()?;
    let memory = device_memory(py, object.clone().unbind(), ptr, len, &layout.what)?;
    if let (Some(stream), Place::Device { ordinal }) = (stream, memory.place) {
        py.detach(|| synchronize(ordinal, stream))
            .map_err(|e| to_py_err(&e))?;
    }
    Ok(Some(memory))
}

/// DLPack's `kDLCPU`, `kDLCUDA`, `kDLCUDAHost`, `kDLCUDAManaged`.
const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DL_CUDA_HOST: i32 = 3;
const DL_CUDA_MANAGED: i32 = 13;
/// CUDA's legacy default stream, as a stream handle (`CU_STREAM_LEGACY`).
const LEGACY_STREAM: u64 = 1;

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor` (dlpack.h, unchanged since DLPack 0.2).
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// The memory behind `__dlpack__`, or `None` when the object has none.
///
/// The capsule is not consumed: it is kept (with the object) for as long as
/// the memory is used, and its own destructor frees the tensor afterwards,
/// as the protocol provides for capsules nobody consumed.
pub(super) fn from_dlpack(
    object: &Bound<'_, PyAny>,
    // DLPack 0.x has no read-only flag: every tensor counts as writable.
    _access: Access,
) -> PyResult<Option<Memory>> {
    let py = object.py();
    let Ok(device) = object.getattr(intern!(py, "__dlpack_device__")) else {
        return Ok(None);
    };
    let what = type_name(object);
    let (device_type, _device_id): (i32, i32) = device.call0()?.extract()?;
    let on_device = match device_type {
        DL_CUDA | DL_CUDA_MANAGED => true,
        DL_CPU | DL_CUDA_HOST => false,
        other => {
            return Err(PyValueError::new_err(format!(
                "{what} lives on DLPack device type {other}: kvik reads into host memory \
                 and CUDA device memory"
            )));
        }
    };
    // On a CUDA device, ask the producer to make the data ready for the
    // legacy default stream, then wait for that stream.
    let stream = if on_device {
        LEGACY_STREAM.into_pyobject(py)?.into_any()
    } else {
        py.None().into_bound(py)
    };
    let kwargs = PyDict::new(py);
    kwargs.set_item("stream", stream)?;
    let capsule = object.call_method(intern!(py, "__dlpack__"), (), Some(&kwargs))?;
    // SAFETY: a capsule named "dltensor" holds a DLManagedTensor, whose
    // first member is the DLTensor; PyCapsule_GetPointer checks the name.
    let tensor = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), DLTENSOR.as_ptr()) };
    if tensor.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: see above; the capsule (kept below) keeps the tensor alive.
    let tensor = unsafe { &*(tensor as *const DlTensor) };
    let bits = u64::from(tensor.dtype.bits) * u64::from(tensor.dtype.lanes);
    if bits == 0 || bits % 8 != 0 {
        return Err(PyValueError::new_err(format!(
            "{what}: {bits}-bit items are not whole bytes"
        )));
    }
    let ndim = usize::try_from(tensor.ndim).unwrap_or(0);
    let read = |p: *mut i64| -> Vec<isize> {
        if p.is_null() {
            Vec::new()
        } else {
            // SAFETY: DLPack gives `ndim` entries for shape and strides.
            unsafe { std::slice::from_raw_parts(p, ndim) }
                .iter()
                .map(|&v| v as isize)
                .collect()
        }
    };
    let itemsize = (bits / 8) as usize;
    let layout = Layout {
        what: what.clone(),
        ptr: tensor.data as u64 + tensor.byte_offset,
        shape: read(tensor.shape),
        // DLPack strides count items; ours count bytes.
        strides: read(tensor.strides)
            .into_iter()
            .map(|s| s * itemsize as isize)
            .collect(),
        itemsize,
    };
    let len = layout.checked_len()?;
    let owner = PyTuple::new(py, [object.clone(), capsule])?
        .into_any()
        .unbind();
    if !on_device {
        return Ok(Some(Memory {
            _owner: owner,
            place: Place::Host,
            ptr: layout.ptr,
            len,
        }));
    }
    let memory = device_memory(py, owner, layout.ptr, len, &what)?;
    if let Place::Device { ordinal } = memory.place {
        py.detach(|| synchronize(ordinal, LEGACY_STREAM))
            .map_err(|e| to_py_err(&e))?;
    }
    Ok(Some(memory))
}

const DLTENSOR: &CStr = c"dltensor";

/// An array's layout, for the contiguity check and its size in bytes.
struct Layout {
    what: String,
    ptr: u64,
    shape: Vec<isize>,
    strides: Vec<isize>,
    itemsize: usize,
}

impl Layout {
    fn checked_len(&self) -> PyResult<usize> {
        if !contiguous(&self.shape, &self.strides, self.itemsize as isize) {
            return Err(PyValueError::new_err(format!(
                "{} is not contiguous (shape {:?}, strides {:?} bytes, {}-byte items): kvik \
                 moves one contiguous range of bytes; pass a contiguous copy \
                 (cupy.ascontiguousarray, tensor.contiguous())",
                self.what, self.shape, self.strides, self.itemsize
            )));
        }
        self.shape
            .iter()
            .try_fold(self.itemsize, |n, &d| {
                n.checked_mul(usize::try_from(d).ok()?)
            })
            .ok_or_else(|| {
                PyValueError::new_err(format!("{}: bad shape {:?}", self.what, self.shape))
            })
    }
}

/// `ptr..ptr + len` as device memory, on the GPU CUDA says it belongs to.
/// An empty range moves nothing and needs no GPU: it is host memory.
fn device_memory(
    py: Python<'_>,
    owner: Py<PyAny>,
    ptr: u64,
    len: usize,
    what: &str,
) -> PyResult<Memory> {
    if len == 0 {
        return Ok(Memory {
            _owner: owner,
            place: Place::Host,
            ptr: 0,
            len: 0,
        });
    }
    if let Err(why) = gds_core::cuda::probe() {
        return Err(PyRuntimeError::new_err(format!(
            "{what} is device memory, which needs a CUDA driver with a GPU: {why}"
        )));
    }
    // SAFETY: only asks CUDA which GPU the range is on; the slice is
    // dropped at once (requests make their own from `Memory`).
    let located = py.detach(|| unsafe { kvik_policy::DeviceSlice::locate(ptr, len) });
    match located {
        Ok(slice) => Ok(Memory {
            _owner: owner,
            place: Place::Device {
                ordinal: slice.range().ordinal,
            },
            ptr,
            len,
        }),
        Err(kvik_policy::Error::DeviceBuffer { .. }) => Err(PyValueError::new_err(format!(
            "{what} says it is device memory, but CUDA does not know {ptr:#x} as device memory"
        ))),
        Err(e) => Err(crate::errors::to_py_err(&e)),
    }
}

/// Wait for the work queued on `stream` (a CUDA stream handle; 1 and 2 are
/// the legacy and per-thread default streams) of GPU `ordinal`.
fn synchronize(ordinal: u32, stream: u64) -> Result<(), kvik_policy::Error> {
    let ctx = kvik_policy::gpu::context(ordinal)?;
    let failed = |call, e: cudarc::driver::DriverError| kvik_policy::Error::Cuda {
        call,
        code: gds_core::cuda::CudaResult(e.0 as u32),
        path: None,
        offset: None,
    };
    ctx.bind_to_thread()
        .map_err(|e| failed("cuCtxSetCurrent", e))?;
    let handle = stream as usize as cudarc::driver::sys::CUstream;
    // SAFETY: a CUDA driver exists (`context` probed it) and the context of
    // that GPU is current; the handle is the producer's stream, which the
    // array interface promises to be valid.
    unsafe { cudarc::driver::sys::cuStreamSynchronize(handle) }
        .result()
        .map_err(|e| failed("cuStreamSynchronize", e))
}
