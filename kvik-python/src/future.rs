//! `IOFuture`: KvikIO's future (`get()`, `done()`), plus the path report and
//! `cancel()`.

use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::convert::to_python;
use crate::errors::to_py_err;
use crate::request::{Failure, Request};

/// How often a waiting thread looks for Ctrl-C (Python runs signal handlers
/// only when the main thread comes back to it).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// A read or write running in the background (returned by `CuFile.pread` and
/// `CuFile.pwrite`).
///
/// `get()` waits for it and returns the bytes moved; `done()` says whether it
/// has finished; `report` is its path report once it has; `cancel()` stops
/// it between pieces. The buffer is kept alive (and exported) until the
/// request finishes, also when this future is dropped; do not use the buffer
/// before then. Any thread may wait on a future, and several may.
#[pyclass(module = "kvik", name = "IOFuture", frozen)]
pub(crate) struct IoFuture {
    request: Arc<Request>,
}

impl IoFuture {
    pub(crate) fn new(request: Arc<Request>) -> IoFuture {
        IoFuture { request }
    }
}

#[pymethods]
impl IoFuture {
    /// Wait for the request and return the number of bytes read or written
    /// (fewer than asked only for a read that met the end of the file).
    ///
    /// The GIL is released while waiting. Ctrl-C (KeyboardInterrupt) while
    /// waiting cancels the request: the pieces already running finish (so
    /// nothing writes to the buffer afterwards), then KeyboardInterrupt is
    /// raised. A request that failed raises its error (OSError with errno,
    /// ValueError, RuntimeError for cuFile and CUDA) every time `get()` is
    /// called; a cancelled one raises `concurrent.futures.CancelledError`.
    fn get(&self, py: Python<'_>) -> PyResult<u64> {
        wait(py, &self.request)?;
        result(py, &self.request)
    }

    /// Whether the request has finished (successfully or not).
    fn done(&self) -> bool {
        self.request.is_done()
    }

    /// Stop the request: no new piece starts; the ones running finish.
    /// Returns whether it was still running. Waiting on it afterwards raises
    /// `concurrent.futures.CancelledError` unless it had already finished.
    fn cancel(&self) -> bool {
        self.request.cancel()
    }

    /// The path report (a dict) once the request has finished, else None:
    /// the compat mode asked for and in effect, the backend and why, every
    /// task, O_DIRECT use, and cuFile's own counters when cuFile was called.
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let report = self
            .request
            .with_outcome(|outcome| outcome.report.clone())
            .flatten();
        report.map(|r| to_python(py, &*r)).transpose()
    }

    fn __repr__(&self) -> String {
        let state = if self.request.is_done() {
            "done"
        } else {
            "running"
        };
        format!("<kvik.IOFuture {}: {state}>", self.request.what())
    }
}

/// Wait for `request` with the GIL released, looking for Ctrl-C meanwhile;
/// on Ctrl-C, cancel it, wait for the pieces in flight, and raise.
pub(crate) fn wait(py: Python<'_>, request: &Request) -> PyResult<()> {
    if request.is_done() {
        return Ok(());
    }
    loop {
        if py.detach(|| request.wait_for(SIGNAL_POLL)) {
            return Ok(());
        }
        if let Err(interrupt) = py.check_signals() {
            request.cancel();
            py.detach(|| request.wait());
            return Err(interrupt);
        }
    }
}

/// How a finished request ended.
enum Ending {
    Bytes(u64),
    Failed(PyErr),
    Panicked(String),
    Cancelled(u64),
}

/// The bytes a finished request moved, or its error.
pub(crate) fn result(py: Python<'_>, request: &Request) -> PyResult<u64> {
    let ending = request
        .with_outcome(|outcome| match &outcome.error {
            Some(Failure::Policy(e)) => Ending::Failed(to_py_err(e)),
            Some(Failure::Panic(message)) => Ending::Panicked(message.clone()),
            None if outcome.cancelled && !outcome.ended && outcome.bytes < outcome.requested => {
                Ending::Cancelled(outcome.bytes)
            }
            None => Ending::Bytes(outcome.bytes),
        })
        .unwrap_or_else(|| Ending::Failed(PyRuntimeError::new_err("the request has not finished")));
    // The request's description locks it: only now that the outcome is released.
    match ending {
        Ending::Bytes(n) => Ok(n),
        Ending::Failed(e) => Err(e),
        Ending::Panicked(message) => Err(PyRuntimeError::new_err(format!(
            "{}: the request panicked (a bug in kvik): {message}",
            request.what()
        ))),
        Ending::Cancelled(bytes) => {
            let cancelled = py.import("concurrent.futures")?.getattr("CancelledError")?;
            Err(PyErr::from_value(cancelled.call1((format!(
                "{} was cancelled after {bytes} bytes",
                request.what()
            ),))?))
        }
    }
}
