//! cuFile's typed parameters (`cuFileGetParameter*` / `cuFileSetParameter*`).
//!
//! Values read before the driver opens are the *staged* ones (built-in
//! defaults, then cufile.json, then the environment); setting one only works
//! before the driver opens. Reading is safe without a CUDA driver (checked on
//! libcufile 1.15 and 1.20); gds-core still points the log away from the
//! working directory first, since some reads log CUDA errors.

use std::ffi::{CStr, CString, c_char};

use cufile_config::ExecutionConfig;
use cufile_sys::CuFileLibrary;
pub use cufile_sys::bindings::{
    CUFileBoolConfigParameter_t as BoolParameter, CUFileSizeTConfigParameter_t as SizeParameter,
    CUFileStringConfigParameter_t as StringParameter,
};
use cufile_sys::cufile_fn;

use crate::error::{Error, Result};

/// Parameter access for one loaded library.
#[derive(Debug, Clone, Copy)]
pub struct Parameters {
    lib: &'static CuFileLibrary,
}

fn check(operation: &'static str, status: cufile_sys::bindings::CUfileError_t) -> Result<()> {
    if status.is_success() {
        Ok(())
    } else {
        Err(Error::CuFile {
            operation,
            status,
            path: None,
            log: None,
        })
    }
}

impl Parameters {
    pub fn new(lib: &'static CuFileLibrary) -> Parameters {
        crate::log::location(lib);
        Parameters { lib }
    }

    pub fn size_t(&self, param: SizeParameter) -> Result<usize> {
        let get = cufile_fn!(self.lib, cuFileGetParameterSizeT)?;
        let mut value = 0;
        // SAFETY: writes one size_t.
        check("cuFileGetParameterSizeT", unsafe { get(param, &mut value) })?;
        Ok(value)
    }

    /// The range the library accepts for a size parameter.
    pub fn size_t_range(&self, param: SizeParameter) -> Result<(usize, usize)> {
        let get = cufile_fn!(self.lib, cuFileGetParameterMinMaxValue)?;
        let (mut min, mut max) = (0, 0);
        // SAFETY: writes two size_t values.
        check("cuFileGetParameterMinMaxValue", unsafe {
            get(param, &mut min, &mut max)
        })?;
        Ok((min, max))
    }

    pub fn bool(&self, param: BoolParameter) -> Result<bool> {
        let get = cufile_fn!(self.lib, cuFileGetParameterBool)?;
        let mut value = false;
        // SAFETY: writes one C bool.
        check("cuFileGetParameterBool", unsafe { get(param, &mut value) })?;
        Ok(value)
    }

    pub fn string(&self, param: StringParameter) -> Result<String> {
        let get = cufile_fn!(self.lib, cuFileGetParameterString)?;
        let mut buf = [0 as c_char; 4096];
        // SAFETY: writes at most `len` bytes including the NUL.
        check("cuFileGetParameterString", unsafe {
            get(param, buf.as_mut_ptr(), buf.len() as i32)
        })?;
        // SAFETY: NUL-terminated within the buffer on success.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// The `execution` settings cuFile is using (staged before open,
    /// effective after): what the scheduling model needs.
    pub fn execution(&self) -> Result<ExecutionConfig> {
        let size = |p| self.size_t(p).map(|v| v as u64);
        Ok(ExecutionConfig {
            max_io_queue_depth: size(SizeParameter::CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH)?,
            max_io_threads: size(SizeParameter::CUFILE_PARAM_EXECUTION_MAX_IO_THREADS)?,
            parallel_io: self.bool(BoolParameter::CUFILE_PARAM_EXECUTION_PARALLEL_IO)?,
            min_io_threshold_size_kb: size(
                SizeParameter::CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB,
            )?,
            max_request_parallelism: size(
                SizeParameter::CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM,
            )?,
        })
    }

    /// Set a size parameter (before the driver opens).
    pub fn set_size_t(&self, param: SizeParameter, value: usize) -> Result<()> {
        let set = cufile_fn!(self.lib, cuFileSetParameterSizeT)?;
        // SAFETY: plain values.
        check("cuFileSetParameterSizeT", unsafe { set(param, value) })
    }

    /// Set a boolean parameter (before the driver opens).
    pub fn set_bool(&self, param: BoolParameter, value: bool) -> Result<()> {
        let set = cufile_fn!(self.lib, cuFileSetParameterBool)?;
        // SAFETY: plain values.
        check("cuFileSetParameterBool", unsafe { set(param, value) })
    }

    /// Set a string parameter (before the driver opens).
    pub fn set_string(&self, param: StringParameter, value: &str) -> Result<()> {
        let set = cufile_fn!(self.lib, cuFileSetParameterString)?;
        let value = CString::new(value).map_err(|_| Error::CuFile {
            operation: "cuFileSetParameterString",
            status: cufile_sys::bindings::CUfileError_t {
                err: cufile_sys::bindings::CUfileOpError::CU_FILE_INVALID_VALUE,
                cu_err: 0,
            },
            path: None,
            log: None,
        })?;
        // SAFETY: a NUL-terminated string the library copies.
        check("cuFileSetParameterString", unsafe {
            set(param, value.as_ptr())
        })
    }
}
