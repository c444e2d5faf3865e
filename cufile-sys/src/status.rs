//! Names and messages for cuFile status codes.
//!
//! Codes are never converted into a Rust enum: a library newer than our header
//! may return codes we have never seen. [`CUfileOpError`] keeps the number and
//! knows a name and message where the header declares one.

use std::fmt;

use crate::bindings::{CUFILE_OP_STATUS_ENTRIES, CUfileError_t, CUfileOpError};

impl CUfileOpError {
    /// The code as a plain number (0 or 5000 + n).
    pub fn code(self) -> u32 {
        self.0
    }

    /// Whether the code is 0 (`CU_FILE_SUCCESS`).
    pub fn is_success(self) -> bool {
        self.0 == 0
    }

    /// The header's name for this code (`CU_FILE_HANDLE_NOT_REGISTERED`), if it has one.
    pub fn name(self) -> Option<&'static str> {
        lookup(self.0).map(|(_, name, _)| name)
    }

    /// The header's message for this code, if it has one.
    pub fn message(self) -> Option<&'static str> {
        lookup(self.0).map(|(_, _, message)| message)
    }

    /// The code a negative `cuFileRead`/`cuFileWrite` return stands for
    /// (`-5011` → 5011), when it is in cuFile's range rather than `-1` (errno).
    pub fn from_io_return(ret: isize) -> Option<Self> {
        let code = ret.checked_neg()?;
        (code > crate::bindings::CUFILEOP_BASE_ERR as isize)
            .then(|| u32::try_from(code).ok().map(CUfileOpError))
            .flatten()
    }
}

fn lookup(code: u32) -> Option<(u32, &'static str, &'static str)> {
    CUFILE_OP_STATUS_ENTRIES
        .iter()
        .copied()
        .find(|(c, _, _)| *c == code)
}

impl fmt::Display for CUfileOpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match lookup(self.0) {
            Some((code, name, message)) => write!(f, "{code} {name} ({message})"),
            None => write!(f, "{} (unknown cuFile status)", self.0),
        }
    }
}

impl CUfileError_t {
    pub fn is_success(&self) -> bool {
        self.err.is_success()
    }
}

impl fmt::Display for CUfileError_t {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.err)?;
        if self.cu_err != 0 {
            write!(f, ", CUDA driver error {}", self.cu_err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes_have_names_and_messages() {
        assert_eq!(CUfileOpError::CU_FILE_SUCCESS.code(), 0);
        assert_eq!(
            CUfileOpError(5027).name(),
            Some("CU_FILE_HANDLE_NOT_REGISTERED")
        );
        assert_eq!(
            CUfileOpError::CU_FILE_DRIVER_NOT_INITIALIZED.to_string(),
            "5001 CU_FILE_DRIVER_NOT_INITIALIZED (nvidia-fs driver is not loaded. \
             Set allow_compat_mode to true in cufile.json file to enable compatible mode)"
        );
        // Every named constant bindgen generated appears in the table with the same value.
        assert_eq!(
            CUfileOpError::CU_FILE_IO_MAX_ERROR.name(),
            Some("CU_FILE_IO_MAX_ERROR"),
            "status table and generated constants disagree"
        );
    }

    #[test]
    fn unknown_codes_stay_numbers() {
        let unknown = CUfileOpError(5999);
        assert_eq!(unknown.name(), None);
        assert_eq!(unknown.to_string(), "5999 (unknown cuFile status)");
        // 5021 is a hole in the header's table.
        assert_eq!(CUfileOpError(5021).name(), None);
    }

    #[test]
    fn io_returns_are_classified() {
        assert_eq!(
            CUfileOpError::from_io_return(-5011),
            Some(CUfileOpError::CU_FILE_CUDA_DRIVER_ERROR)
        );
        assert_eq!(
            CUfileOpError::from_io_return(-1),
            None,
            "-1 means errno, not a cuFile code"
        );
        assert_eq!(CUfileOpError::from_io_return(4096), None);
        assert_eq!(CUfileOpError::from_io_return(isize::MIN), None);
    }

    #[test]
    fn error_pairs_print_the_cuda_code() {
        let e = CUfileError_t {
            err: CUfileOpError::CU_FILE_CUDA_DRIVER_ERROR,
            cu_err: 100,
        };
        assert!(!e.is_success());
        assert_eq!(
            e.to_string(),
            "5011 CU_FILE_CUDA_DRIVER_ERROR (CUDA Driver API error), CUDA driver error 100"
        );
    }
}
