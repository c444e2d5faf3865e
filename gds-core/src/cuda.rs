//! Is there a CUDA driver with at least one GPU?
//!
//! Asked before anything that may open the cuFile driver: on a machine
//! without a CUDA driver, libcufile's `cuFileDriverOpen` logs "running in
//! compatible mode" and never returns. The probe loads `libcuda.so.1` with
//! libloading (never linking it, never panicking) and calls `cuInit` and
//! `cuDeviceGetCount`; the answer is computed once per process.

use std::ffi::{CStr, c_char, c_int, c_uint};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The CUDA driver library's name.
pub const CUDA_DRIVER_LIBRARY: &str = "libcuda.so.1";

/// A CUDA driver API status (`CUresult`), kept as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct CudaResult(pub u32);

impl CudaResult {
    pub const SUCCESS: CudaResult = CudaResult(0);
    pub const NOT_INITIALIZED: CudaResult = CudaResult(3);
    pub const NO_DEVICE: CudaResult = CudaResult(100);
    pub const INSUFFICIENT_DRIVER: CudaResult = CudaResult(35);

    /// The driver API's name for common codes.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "CUDA_SUCCESS",
            1 => "CUDA_ERROR_INVALID_VALUE",
            2 => "CUDA_ERROR_OUT_OF_MEMORY",
            3 => "CUDA_ERROR_NOT_INITIALIZED",
            4 => "CUDA_ERROR_DEINITIALIZED",
            34 => "CUDA_ERROR_STUB_LIBRARY",
            35 => "CUDA_ERROR_INSUFFICIENT_DRIVER",
            46 => "CUDA_ERROR_DEVICES_UNAVAILABLE",
            100 => "CUDA_ERROR_NO_DEVICE",
            101 => "CUDA_ERROR_INVALID_DEVICE",
            201 => "CUDA_ERROR_INVALID_CONTEXT",
            304 => "CUDA_ERROR_OPERATING_SYSTEM",
            999 => "CUDA_ERROR_UNKNOWN",
            _ => return None,
        })
    }
}

impl std::fmt::Display for CudaResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{} {name}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// A CUDA driver that answered, with at least one GPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CudaDriver {
    /// The file the dynamic loader opened for `libcuda.so.1`.
    pub library: Option<PathBuf>,
    /// `cuDriverGetVersion`: `1000 * major + 10 * minor` (13.0 → 13000).
    pub driver_version: i32,
    pub devices: Vec<String>,
}

impl CudaDriver {
    /// "13.0" for 13000.
    pub fn version_string(&self) -> String {
        format!(
            "{}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        )
    }
}

/// Why there is no usable CUDA driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CudaUnavailable {
    #[error("no CUDA driver: {CUDA_DRIVER_LIBRARY} cannot be loaded ({message})")]
    LibraryMissing { message: String },
    #[error("{CUDA_DRIVER_LIBRARY} lacks `{symbol}`")]
    SymbolMissing { symbol: &'static str },
    #[error("CUDA driver present but {call} failed: {code}")]
    CallFailed {
        call: &'static str,
        code: CudaResult,
    },
    #[error("CUDA driver {driver_version} present but it reports no GPU")]
    NoDevice { driver_version: String },
}

type CuInit = unsafe extern "C" fn(c_uint) -> c_uint;
type CuDriverGetVersion = unsafe extern "C" fn(*mut c_int) -> c_uint;
type CuDeviceGetCount = unsafe extern "C" fn(*mut c_int) -> c_uint;
type CuDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_uint;
type CuDeviceGetName = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_uint;

static PROBE: OnceLock<Result<CudaDriver, CudaUnavailable>> = OnceLock::new();

/// The CUDA driver of this process, probed once.
pub fn probe() -> Result<&'static CudaDriver, CudaUnavailable> {
    PROBE
        .get_or_init(probe_uncached)
        .as_ref()
        .map_err(Clone::clone)
}

fn probe_uncached() -> Result<CudaDriver, CudaUnavailable> {
    // SAFETY: loading libcuda runs its initialisers, which is what every
    // CUDA program does; the library is leaked below so it stays loaded.
    let lib = unsafe { libloading::Library::new(CUDA_DRIVER_LIBRARY) }.map_err(|e| {
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message = s.to_string();
            source = s.source();
        }
        CudaUnavailable::LibraryMissing { message }
    })?;
    let lib: &'static libloading::Library = Box::leak(Box::new(lib));

    fn sym<T: Copy>(
        lib: &'static libloading::Library,
        name: &'static str,
    ) -> Result<T, CudaUnavailable> {
        // SAFETY: each type alias above matches the driver API's prototype.
        unsafe { lib.get::<T>(name) }
            .map(|s| *s)
            .map_err(|_| CudaUnavailable::SymbolMissing { symbol: name })
    }
    let cu_init: CuInit = sym(lib, "cuInit")?;
    let get_version: CuDriverGetVersion = sym(lib, "cuDriverGetVersion")?;
    let get_count: CuDeviceGetCount = sym(lib, "cuDeviceGetCount")?;
    let device_get: CuDeviceGet = sym(lib, "cuDeviceGet")?;
    let get_name: CuDeviceGetName = sym(lib, "cuDeviceGetName")?;

    let check = |call: &'static str, code: c_uint| {
        if code == 0 {
            Ok(())
        } else {
            Err(CudaUnavailable::CallFailed {
                call,
                code: CudaResult(code),
            })
        }
    };
    let mut driver_version = 0;
    // SAFETY: writes one int.
    check("cuDriverGetVersion", unsafe {
        get_version(&mut driver_version)
    })?;
    let version_string = format!("{}.{}", driver_version / 1000, (driver_version % 1000) / 10);
    // SAFETY: cuInit(0) is the documented first call.
    let init = unsafe { cu_init(0) };
    if init == CudaResult::NO_DEVICE.0 {
        return Err(CudaUnavailable::NoDevice {
            driver_version: version_string,
        });
    }
    check("cuInit", init)?;
    let mut count = 0;
    // SAFETY: writes one int.
    check("cuDeviceGetCount", unsafe { get_count(&mut count) })?;
    if count <= 0 {
        return Err(CudaUnavailable::NoDevice {
            driver_version: version_string,
        });
    }
    let mut devices = Vec::new();
    for ordinal in 0..count {
        let mut device = 0;
        let mut name = [0 as c_char; 256];
        // SAFETY: writes one device handle, then at most 256 bytes including the NUL.
        let ok = unsafe { device_get(&mut device, ordinal) } == 0
            && unsafe { get_name(name.as_mut_ptr(), name.len() as c_int, device) } == 0;
        devices.push(if ok {
            // SAFETY: cuDeviceGetName NUL-terminates within the buffer.
            unsafe { CStr::from_ptr(name.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        } else {
            format!("GPU {ordinal}")
        });
    }
    let library = cufile_sys::loaded_file_of(cu_init as *const ());
    Ok(CudaDriver {
        library,
        driver_version,
        devices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_answers_without_panicking_and_is_cached() {
        let first = probe();
        let second = probe();
        assert_eq!(first.is_ok(), second.is_ok());
        match first {
            Ok(driver) => {
                assert!(!driver.devices.is_empty());
                assert!(driver.driver_version >= 1000);
            }
            Err(reason) => {
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("note: this machine has no usable CUDA driver: {reason}\n").as_bytes(),
                );
                assert!(!reason.to_string().is_empty());
            }
        }
    }

    #[test]
    fn result_codes_keep_their_numbers() {
        assert_eq!(CudaResult(100).to_string(), "100 CUDA_ERROR_NO_DEVICE");
        assert_eq!(CudaResult(12345).to_string(), "12345");
    }
}
