//! The native half of the Python package `kvik` (the module `kvik._kvik`):
//! KvikIO's everyday API on kvik-policy, plus what KvikIO lacks — the path
//! report of every request, readiness checks, plans and cufile.json
//! validation. The Python half (`python/kvik/`) arranges it as KvikIO's
//! modules are arranged and holds the type stubs.
//!
//! Where kvik-policy is called: `file.rs` and `request.rs` (files and
//! requests), `defaults.rs` (settings), `inspect.rs` (readiness, plans,
//! cufile.json), `memory/device.rs` (pointer classification, streams).

mod convert;
mod defaults;
mod errors;
mod file;
mod future;
mod inspect;
mod memory;
mod request;

use pyo3::prelude::*;

#[pymodule]
fn _kvik(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("WINDOW_ROUNDS", request::WINDOW_ROUNDS)?;
    m.add_class::<file::CuFile>()?;
    m.add_class::<future::IoFuture>()?;
    m.add_function(wrap_pyfunction!(defaults::get_setting, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::set_settings, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::describe_settings, m)?)?;
    m.add_function(wrap_pyfunction!(defaults::is_compat_mode_preferred, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::check, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::validate_config, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::plan, m)?)?;
    // The batch read API (many small reads in one call, from the small-reads
    // issue) registers here when kvik-policy has it: a `batch.rs` beside
    // `file.rs`, taking a CuFile and a list of (buffer, file_offset, size)
    // through `memory::Memory`, returning one future (and report) per read;
    // `python/kvik/__init__.py` re-exports it next to CuFile.
    Ok(())
}
