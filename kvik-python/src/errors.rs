//! kvik-policy's errors as the Python exceptions users expect, each with the
//! whole Rust message (operation, path, offset, errno, cuFile's code and
//! cufile.log's words where there are any).
//!
//! | error | exception |
//! |---|---|
//! | open failed, I/O failed | `OSError(errno, message, path)`, which Python turns into `FileNotFoundError`, `PermissionError`, `IsADirectoryError`, … by errno |
//! | bad settings, bad mode, impossible request, bad device range | `ValueError` |
//! | reading a write-only file (or the reverse) | `io.UnsupportedOperation` |
//! | a read that ended early where it must not | `EOFError` |
//! | cuFile, CUDA, no GPU, thread pool | `RuntimeError` |

use std::error::Error as _;

use kvik_policy::Error;
use pyo3::exceptions::{PyEOFError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// The Python exception for `error`.
pub(crate) fn to_py_err(error: &Error) -> PyErr {
    let message = full_message(error);
    match error {
        Error::Open { path, source, .. } => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, message, path.display().to_string())),
            None => PyOSError::new_err(message),
        },
        Error::Io { path, errno, .. } => match errno {
            Some(errno) => PyOSError::new_err((*errno, message, path.display().to_string())),
            None => PyOSError::new_err(message),
        },
        Error::Environment { .. }
        | Error::InvalidSetting { .. }
        | Error::OpenMode { .. }
        | Error::InvalidRequest { .. }
        | Error::DeviceBuffer { .. } => PyValueError::new_err(message),
        Error::ModeForbids { .. } => unsupported_operation(message),
        Error::UnexpectedEof { .. } => PyEOFError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// The message and every cause below it that it does not already include.
fn full_message(error: &Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = c.source();
    }
    message
}

/// `io.UnsupportedOperation` (an `OSError` and a `ValueError`), what Python's
/// own files raise for `read` on a file opened for writing.
fn unsupported_operation(message: String) -> PyErr {
    Python::attach(|py| {
        match py
            .import("io")
            .and_then(|io| io.getattr("UnsupportedOperation"))
        {
            Ok(class) => PyErr::from_type(class.cast_into().expect("a type"), message),
            Err(e) => e,
        }
    })
}
