//! `CuFile`: KvikIO's file handle on kvik-policy's `FileHandle`.
//!
//! Every call into kvik-policy's `FileHandle` from Python is in this file
//! and in `request.rs`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use kvik_policy::{FileHandle, IoBuffer, IoBufferMut, OpenOptions, Settings};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::to_python;
use crate::errors::to_py_err;
use crate::future::{self, IoFuture};
use crate::memory::{Access, Memory, Window};
use crate::request::{self, Direction, LastReport, Report, Request};

/// A file opened for reads and writes into host or device memory (KvikIO's
/// `CuFile`).
///
/// `flags` is "r", "r+", "w" or "w+" ("a" is refused, as in KvikIO). Device
/// memory goes through cuFile where it has a direct path (compat mode AUTO)
/// or always (OFF), else through pinned bounce buffers; host memory through
/// POSIX reads and writes. How the file was routed, and why, is in
/// `routing`; the path every request took is in its future's `report` and
/// in `last_report`. Use it as a context manager, or call `close()`.
#[pyclass(module = "kvik", name = "CuFile", frozen, subclass)]
pub(crate) struct CuFile {
    path: PathBuf,
    mode: String,
    open: Mutex<Option<OpenFile>>,
    last_report: LastReport,
}

struct OpenFile {
    handle: FileHandle,
    /// Handles for requests with their own `task_size` (see `handle_for`).
    by_task_size: Vec<FileHandle>,
}

#[pymethods]
impl CuFile {
    #[new]
    #[pyo3(signature = (file, flags = "r"))]
    fn new(py: Python<'_>, file: PathBuf, flags: &str) -> PyResult<CuFile> {
        let handle = py
            .detach(|| FileHandle::open(&file, flags))
            .map_err(|e| to_py_err(&e))?;
        Ok(CuFile {
            path: file,
            mode: flags.to_string(),
            open: Mutex::new(Some(OpenFile {
                handle,
                by_task_size: Vec::new(),
            })),
            last_report: LastReport::default(),
        })
    }

    /// Close the file. Requests still running keep it open until they finish.
    fn close(&self) {
        self.lock().take();
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }

    /// The file descriptor (the one without O_DIRECT).
    fn fileno(&self) -> PyResult<i32> {
        Ok(self.handle()?.fd())
    }

    /// The file's size in bytes.
    fn nbytes(&self) -> PyResult<u64> {
        self.handle()?.nbytes().map_err(|e| to_py_err(&e))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) {
        self.close();
    }

    /// Read into `buf` from `file_offset` in the background; returns an
    /// `IOFuture` whose `get()` gives the bytes read.
    ///
    /// `buf`: host memory (buffer protocol) or device memory
    /// (`__cuda_array_interface__`, DLPack), contiguous, any dtype. `size`:
    /// bytes to read (default: all of `buf`). `task_size`: this request's
    /// task size (default: `kvik.defaults.get("task_size")`).
    #[pyo3(signature = (buf, size = None, file_offset = 0, task_size = None))]
    fn pread(
        &self,
        buf: &Bound<'_, PyAny>,
        size: Option<usize>,
        file_offset: u64,
        task_size: Option<u64>,
    ) -> PyResult<IoFuture> {
        self.start(Direction::Read, buf, size, file_offset, task_size)
    }

    /// Write `buf` at `file_offset` in the background; returns an `IOFuture`
    /// whose `get()` gives the bytes written. Arguments as for `pread`.
    #[pyo3(signature = (buf, size = None, file_offset = 0, task_size = None))]
    fn pwrite(
        &self,
        buf: &Bound<'_, PyAny>,
        size: Option<usize>,
        file_offset: u64,
        task_size: Option<u64>,
    ) -> PyResult<IoFuture> {
        self.start(Direction::Write, buf, size, file_offset, task_size)
    }

    /// Read into `buf` from `file_offset` and return the bytes read (fewer
    /// than asked only at the end of the file). Arguments as for `pread`.
    /// The GIL is released meanwhile; Ctrl-C stops a long read between
    /// pieces.
    #[pyo3(signature = (buf, size = None, file_offset = 0, task_size = None))]
    fn read(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        size: Option<usize>,
        file_offset: u64,
        task_size: Option<u64>,
    ) -> PyResult<u64> {
        self.blocking(py, Direction::Read, buf, size, file_offset, task_size)
    }

    /// Write `buf` at `file_offset` and return the bytes written. Arguments
    /// as for `pread`.
    #[pyo3(signature = (buf, size = None, file_offset = 0, task_size = None))]
    fn write(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        size: Option<usize>,
        file_offset: u64,
        task_size: Option<u64>,
    ) -> PyResult<u64> {
        self.blocking(py, Direction::Write, buf, size, file_offset, task_size)
    }

    /// The path report (a dict) of the request on this file that finished
    /// last, or None before any has.
    #[getter]
    fn last_report<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let report = self
            .last_report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        report.map(|r| to_python(py, &*r)).transpose()
    }

    /// How device-memory requests on this file are served, decided at open:
    /// the compat mode asked for and in effect, the backend, and why.
    #[getter]
    fn routing<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.handle()?.routing())
    }

    /// For `bench/python_overhead.py`: the kvik-policy calls behind `pread`
    /// + `get` (`op="pread"`: `FileHandle::pread(..).wait()`) or `read`
    /// (`op="read"`: `FileHandle::read_with_report`), made from Rust on this
    /// file into `buf` (the first `size` bytes, at offset 0), `inner` times
    /// per repetition with the GIL released. Returns seconds per call, one
    /// figure per repetition: the baseline Python's overhead is measured
    /// against, in the same process, on the same file and memory.
    #[pyo3(signature = (buf, op, repeat, inner, size = None))]
    fn _time_in_rust(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        op: &str,
        repeat: usize,
        inner: usize,
        size: Option<usize>,
    ) -> PyResult<Vec<f64>> {
        let handle = self.handle()?;
        let memory = Self::memory(buf, Direction::Read, size)?;
        let len = memory.len();
        let pread = match op {
            "pread" => true,
            "read" => false,
            other => {
                return Err(PyValueError::new_err(format!(
                    "op is \"pread\" or \"read\", not {other:?}"
                )));
            }
        };
        let inner = inner.max(1);
        py.detach(|| {
            let mut window = Window::new(memory, 0, len);
            let mut timings = Vec::with_capacity(repeat);
            for _ in 0..repeat {
                let start = std::time::Instant::now();
                for _ in 0..inner {
                    if pread {
                        window = handle.pread(window, 0).wait()?.0;
                    } else {
                        handle.read_with_report(window.as_buf_mut(), 0)?;
                    }
                }
                timings.push(start.elapsed().as_secs_f64() / inner as f64);
            }
            Ok(timings)
        })
        .map_err(|e: kvik_policy::Error| to_py_err(&e))
    }

    fn __repr__(&self) -> String {
        format!(
            "<kvik.CuFile {:?} mode {:?}{}>",
            self.path.display().to_string(),
            self.mode,
            if self.closed() { " (closed)" } else { "" }
        )
    }
}

impl CuFile {
    fn lock(&self) -> MutexGuard<'_, Option<OpenFile>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn handle(&self) -> PyResult<FileHandle> {
        match &*self.lock() {
            Some(open) => Ok(open.handle.clone()),
            None => Err(closed()),
        }
    }

    /// The handle a request with `task_size` runs on.
    ///
    /// kvik-policy reads the task size from a handle's settings, not per
    /// request; a request with a task size of its own runs on a second
    /// handle of the same path, opened (once per task size and settings)
    /// with those settings — without truncating, whatever the mode.
    fn handle_for(&self, task_size: Option<u64>) -> PyResult<FileHandle> {
        let mut guard = self.lock();
        let open = guard.as_mut().ok_or_else(closed)?;
        let Some(task_size) = task_size else {
            return Ok(open.handle.clone());
        };
        let mut settings: Settings = open.handle.settings().map_err(|e| to_py_err(&e))?;
        if settings.task_size() == task_size {
            return Ok(open.handle.clone());
        }
        settings
            .set_task_size(task_size)
            .map_err(|e| to_py_err(&e))?;
        let current = |h: &FileHandle| h.settings().is_ok_and(|s| s == settings);
        if let Some(handle) = open.by_task_size.iter().find(|h| current(h)) {
            return Ok(handle.clone());
        }
        // The same open file under other settings (never reopened by name,
        // so never truncated, and never another file).
        let handle = open
            .handle
            .reopen_with(OpenOptions::new(open.handle.mode()).settings(settings))
            .map_err(|e| to_py_err(&e))?;
        open.by_task_size
            .retain(|h| h.settings().is_ok_and(|s| s.task_size() != task_size));
        open.by_task_size.push(handle.clone());
        Ok(handle)
    }

    fn memory(
        buf: &Bound<'_, PyAny>,
        direction: Direction,
        size: Option<usize>,
    ) -> PyResult<Arc<Memory>> {
        let access = match direction {
            Direction::Read => Access::Fill,
            Direction::Write => Access::Drain,
        };
        let mut memory = Memory::from_object(buf, access)?;
        memory.truncate(size)?;
        Ok(Arc::new(memory))
    }

    fn start(
        &self,
        direction: Direction,
        buf: &Bound<'_, PyAny>,
        size: Option<usize>,
        file_offset: u64,
        task_size: Option<u64>,
    ) -> PyResult<IoFuture> {
        let handle = self.handle_for(task_size)?;
        let memory = Self::memory(buf, direction, size)?;
        // Starting only queues work on the pool: no need to release the GIL.
        let request = Request::start(
            handle,
            direction,
            memory,
            file_offset,
            self.last_report.clone(),
        )
        .map_err(|e| to_py_err(&e))?;
        Ok(IoFuture::new(request))
    }

    /// A blocking read or write: one kvik-policy call when it fits one
    /// window (a single task then runs on this thread, with no hand-off to
    /// the pool), else a background request waited on with Ctrl-C honoured.
    fn blocking(
        &self,
        py: Python<'_>,
        direction: Direction,
        buf: &Bound<'_, PyAny>,
        size: Option<usize>,
        file_offset: u64,
        task_size: Option<u64>,
    ) -> PyResult<u64> {
        let handle = self.handle_for(task_size)?;
        let memory = Self::memory(buf, direction, size)?;
        let settings = handle.settings().map_err(|e| to_py_err(&e))?;
        if memory.len() as u64 > request::window_bytes(&settings) {
            let request = Request::start(
                handle,
                direction,
                memory,
                file_offset,
                self.last_report.clone(),
            )
            .map_err(|e| to_py_err(&e))?;
            future::wait(py, &request)?;
            return future::result(py, &request);
        }
        let len = memory.len();
        let mut window = Window::new(memory, 0, len);
        let transfer = py
            .detach(|| match direction {
                Direction::Read => handle.read_with_report(window.as_buf_mut(), file_offset),
                Direction::Write => handle.write_with_report(window.as_buf(), file_offset),
            })
            .map_err(|e| to_py_err(&e))?;
        request::remember(&self.last_report, Arc::new(Report::single(transfer.report)));
        Ok(transfer.bytes as u64)
    }
}

fn closed() -> PyErr {
    PyValueError::new_err("I/O operation on closed file")
}
