//! `kvik.defaults`' native half: KvikIO's settings by name, read from and
//! written to kvik-policy's process-wide `Settings` (the `KVIKIO_*`
//! environment, read once, then whatever the API set).
//!
//! `kvik/defaults.py` builds KvikIO's API on these (`get`, `set` as a
//! context manager that restores the keys it changed).

use std::sync::Mutex;

use kvik_policy::{CompatMode, Settings, parse_size, settings::parse_bool};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use crate::convert::to_python;
use crate::errors::to_py_err;

/// Serialises read-modify-write of the global settings.
static UPDATE: Mutex<()> = Mutex::new(());

fn global() -> PyResult<Settings> {
    Settings::global().map_err(|e| to_py_err(&e))
}

fn unknown(name: &str) -> PyErr {
    let names: Vec<&str> = kvik_policy::settings::SETTINGS
        .iter()
        .map(|s| s.name)
        .collect();
    PyValueError::new_err(format!(
        "{name:?} is not a setting; the settings are {}",
        names.join(", ")
    ))
}

/// The value of setting `name`; the compat mode as "ON", "OFF" or "AUTO".
#[pyfunction]
pub(crate) fn get_setting<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let s = global()?;
    Ok(match name {
        "compat_mode" => s.compat_mode().to_string().into_pyobject(py)?.into_any(),
        "num_threads" => s.num_threads().into_pyobject(py)?.into_any(),
        "task_size" => s.task_size().into_pyobject(py)?.into_any(),
        "gds_threshold" => s.gds_threshold().into_pyobject(py)?.into_any(),
        "bounce_buffer_size" => s.bounce_buffer_size().into_pyobject(py)?.into_any(),
        "auto_direct_io_read" => PyBool::new(py, s.auto_direct_io_read())
            .to_owned()
            .into_any(),
        "auto_direct_io_write" => PyBool::new(py, s.auto_direct_io_write())
            .to_owned()
            .into_any(),
        "cold_reads_direct" => PyBool::new(py, s.cold_reads_direct()).to_owned().into_any(),
        "http_max_attempts" => s.http_max_attempts().into_pyobject(py)?.into_any(),
        "http_timeout" => s.http_timeout().into_pyobject(py)?.into_any(),
        "http_status_codes" => s.http_status_codes().to_vec().into_pyobject(py)?.into_any(),
        _ => return Err(unknown(name)),
    })
}

/// Set every setting in `values` at once: all are checked before any
/// changes.
#[pyfunction]
pub(crate) fn set_settings(values: &Bound<'_, PyDict>) -> PyResult<()> {
    let _serial = UPDATE.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = global()?;
    apply_all(&mut s, values)?;
    Settings::set_global(s);
    Ok(())
}

/// Apply every `name: value` of `values` to `s`.
pub(crate) fn apply_all(s: &mut Settings, values: &Bound<'_, PyDict>) -> PyResult<()> {
    for (name, value) in values.iter() {
        let name: String = name
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("setting names are strings, not {name}")))?;
        apply(s, &name, &value)?;
    }
    Ok(())
}

fn apply(s: &mut Settings, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let policy = |r: kvik_policy::Result<&mut Settings>| r.map(drop).map_err(|e| to_py_err(&e));
    match name {
        "compat_mode" => {
            s.set_compat_mode(compat_mode(value)?);
        }
        "num_threads" => {
            let n: u64 = whole(name, value)?;
            policy(s.set_num_threads(usize::try_from(n).unwrap_or(usize::MAX)))?;
        }
        "task_size" => policy(s.set_task_size(size(name, value)?))?,
        "gds_threshold" => {
            s.set_gds_threshold(size(name, value)?);
        }
        "bounce_buffer_size" => policy(s.set_bounce_buffer_size(size(name, value)?))?,
        "auto_direct_io_read" => {
            s.set_auto_direct_io_read(flag(name, value)?);
        }
        "auto_direct_io_write" => {
            s.set_auto_direct_io_write(flag(name, value)?);
        }
        "cold_reads_direct" => {
            s.set_cold_reads_direct(flag(name, value)?);
        }
        "http_max_attempts" => {
            let n = whole(name, value)?;
            policy(s.set_http_max_attempts(usize::try_from(n).unwrap_or(usize::MAX)))?;
        }
        "http_timeout" => policy(s.set_http_timeout(whole(name, value)?))?,
        "http_status_codes" => {
            let codes: Vec<u16> = value.extract().map_err(|_| {
                PyTypeError::new_err("http_status_codes takes a list of HTTP statuses (ints)")
            })?;
            policy(s.set_http_status_codes(codes))?;
        }
        _ => return Err(unknown(name)),
    }
    Ok(())
}

/// `CompatMode.ON` (any int: KvikIO's OFF = 0, ON = 1, AUTO = 2), a string
/// (`"on"`, `"auto"`, …, as `KVIKIO_COMPAT_MODE`), or a bool (True = ON).
fn compat_mode(value: &Bound<'_, PyAny>) -> PyResult<CompatMode> {
    if let Ok(text) = value.cast::<PyString>() {
        return text
            .to_str()?
            .parse()
            .map_err(|e: kvik_policy::ParseCompatModeError| PyValueError::new_err(e.to_string()));
    }
    if value.is_instance_of::<PyInt>() {
        return match value.extract::<i64>()? {
            0 => Ok(CompatMode::Off),
            1 => Ok(CompatMode::On),
            2 => Ok(CompatMode::Auto),
            n => Err(PyValueError::new_err(format!(
                "{n} is not a compat mode: use kvik.CompatMode.ON, OFF or AUTO"
            ))),
        };
    }
    Err(PyTypeError::new_err(format!(
        "compat_mode takes kvik.CompatMode or a string such as \"on\", not {}",
        value.get_type().name()?
    )))
}

fn whole(name: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{name} takes a whole number, not {}",
            value.repr()?
        )));
    }
    value.extract::<u64>().map_err(|_| {
        PyValueError::new_err(format!(
            "{name} = {} is invalid: must be ≥ 0",
            value.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })
}

/// Bytes: an int, or a string with a unit (`"4MiB"`), as `KVIKIO_TASK_SIZE`.
fn size(name: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(text) = value.cast::<PyString>() {
        return parse_size(text.to_str()?)
            .map_err(|e| PyValueError::new_err(format!("{name}: {e}")));
    }
    whole(name, value)
}

/// A bool, 0 or 1, or a string as `KVIKIO_AUTO_DIRECT_IO_READ` takes it.
fn flag(name: &str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(b.is_true());
    }
    if let Ok(text) = value.cast::<PyString>() {
        return parse_bool(text.to_str()?)
            .map_err(|e| PyValueError::new_err(format!("{name} = {text}: {e}")));
    }
    match whole(name, value)? {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(PyValueError::new_err(format!(
            "{name} = {n}: expected a bool"
        ))),
    }
}

/// Every setting with its value, source (default, environment variable, or
/// API), variables, default and rule.
#[pyfunction]
pub(crate) fn describe_settings(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    to_python(py, &global()?.describe())
}

/// KvikIO's `is_compat_mode_preferred`: whether device memory would go
/// through POSIX rather than cuFile here (compat mode ON, or AUTO where
/// cuFile has no direct path).
#[pyfunction]
pub(crate) fn is_compat_mode_preferred(py: Python<'_>) -> PyResult<bool> {
    Ok(match global()?.compat_mode() {
        CompatMode::On => true,
        CompatMode::Off => false,
        CompatMode::Auto => {
            let readiness = py.detach(|| gds_core::readiness::check(None));
            readiness.verdict.kind != gds_core::readiness::VerdictKind::DirectPathPossible
        }
    })
}
