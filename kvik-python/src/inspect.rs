//! What KvikIO does not have: `kvik.check()` (is GDS usable here, and why),
//! `kvik.config.validate()` (cufile.json diagnostics) and `kvik.plan()` (what
//! a request would do, without doing it).

use std::path::PathBuf;

use cufile_config::{ConfigLocation, ExecutionConfig, Libcufile, ParsedConfig, ValidateOptions};
use gds_core::readiness;
use gds_core::schedule::Registration;
use kvik_policy::plan::{CuFileSplit, Request};
use kvik_policy::routing::{self, CuFileAvailability};
use kvik_policy::{Backend, MemoryKind, Settings};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Serialize;

use crate::convert::to_python;
use crate::errors::to_py_err;

/// GDS readiness: every fact that decides whether cuFile can be used here
/// (and for `path`, when given), with its evidence, and the verdict —
/// `direct_path_possible`, `compat_mode_only` or `posix_only` — with its
/// reasons. The cuFile driver is opened only where a CUDA driver reported a
/// GPU.
#[pyfunction]
#[pyo3(signature = (path = None))]
pub(crate) fn check(py: Python<'_>, path: Option<PathBuf>) -> PyResult<Bound<'_, PyAny>> {
    let report = py.detach(|| readiness::check(path.as_deref()));
    to_python(py, &report)
}

/// Validate a cufile.json (default: the one cuFile would read here:
/// `CUFILE_ENV_PATH_JSON`, else /etc/cufile.json) for libcufile `library`
/// ("1.15" or "1.20"). Returns a dict: `file`, `valid` (no errors),
/// `errors`, `warnings`, and `diagnostics`, each with `severity`, `kind`,
/// `path` (the JSON path), `line`, `column`, `message` and, where known,
/// `expected` and `help`.
#[pyfunction]
#[pyo3(signature = (path = None, library = "1.15", check_paths = false))]
pub(crate) fn validate_config<'py>(
    py: Python<'py>,
    path: Option<PathBuf>,
    library: &str,
    check_paths: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let library: Libcufile = library.parse().map_err(PyValueError::new_err)?;
    let path = match path {
        Some(p) => p,
        None => cufile_path()?,
    };
    let options = ValidateOptions {
        library,
        check_paths,
    };
    let parsed = py
        .detach(|| ParsedConfig::read(&path, &options))
        .map_err(config_error)?;
    let name = path.display().to_string();
    #[derive(Serialize)]
    struct Validation<'a> {
        file: &'a str,
        library: Libcufile,
        valid: bool,
        errors: usize,
        warnings: usize,
        diagnostics: &'a [cufile_config::Diagnostic],
    }
    to_python(
        py,
        &Validation {
            file: &name,
            library,
            valid: !parsed.has_errors(),
            errors: parsed.error_count(),
            warnings: parsed.warning_count(),
            diagnostics: &parsed.diagnostics,
        },
    )
}

/// The cufile.json cuFile reads here, or why there is none.
fn cufile_path() -> PyResult<PathBuf> {
    let location = ConfigLocation::from_env();
    match (&location.path, location.exists) {
        (Some(p), true) => Ok(p.clone()),
        (Some(p), false) => Err(PyOSError::new_err((
            2,
            format!(
                "{} (named by {}) {}",
                p.display(),
                location.source,
                location.why_not_read().unwrap_or("cannot be read")
            ),
            p.display().to_string(),
        ))),
        (None, _) => Err(PyOSError::new_err((
            2,
            format!(
                "no cufile.json here: {} is unset and {} does not exist (cuFile runs on its \
                 built-in defaults)",
                cufile_config::ENV_CONFIG_PATH,
                cufile_config::DEFAULT_CONFIG_PATH
            ),
        ))),
    }
}

fn config_error(e: cufile_config::ConfigError) -> PyErr {
    match &e {
        cufile_config::ConfigError::Read { path, source } => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, e.to_string(), path.display().to_string())),
            None => PyOSError::new_err(e.to_string()),
        },
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// The most tasks a plan lists.
const MAX_LISTED_TASKS: u64 = 1 << 16;

/// What a read of `size` bytes at `file_offset` into `memory` ("device" or
/// "host") would do here, without doing it: the routing decision with its
/// reasons, the task split, and for every task that goes to cuFile the work
/// units cuFile schedules. Settings not given come from `kvik.defaults`;
/// cuFile's execution settings from `config` (a cufile.json), else the one
/// cuFile reads here, else its built-in defaults. Where compat mode OFF
/// cannot run here, the plan is made as if cuFile could, and `refused` says
/// why it cannot.
#[pyfunction]
#[pyo3(signature = (size, file_offset = 0, memory = "device", *, compat_mode = None,
    task_size = None, gds_threshold = None, registered = false, config = None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan<'py>(
    py: Python<'py>,
    size: u64,
    file_offset: u64,
    memory: &str,
    compat_mode: Option<&Bound<'py, PyAny>>,
    task_size: Option<&Bound<'py, PyAny>>,
    gds_threshold: Option<&Bound<'py, PyAny>>,
    registered: bool,
    config: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let memory = match memory {
        "device" => MemoryKind::Device { ordinal: 0 },
        "host" => MemoryKind::Host,
        other => {
            return Err(PyValueError::new_err(format!(
                "memory is \"device\" or \"host\", not {other:?}"
            )));
        }
    };
    let mut settings = Settings::global().map_err(|e| to_py_err(&e))?;
    let overrides = PyDict::new(py);
    for (name, value) in [
        ("compat_mode", compat_mode),
        ("task_size", task_size),
        ("gds_threshold", gds_threshold),
    ] {
        if let Some(value) = value {
            overrides.set_item(name, value)?;
        }
    }
    crate::defaults::apply_all(&mut settings, &overrides)?;

    let readiness = py.detach(|| readiness::check(None));
    let available = CuFileAvailability::from_readiness(&readiness);
    let (file_routing, refused) = match routing::route_file(settings.compat_mode(), &available) {
        Ok(r) => (r, None),
        Err(required) => {
            // Plan as if cuFile could run here (with a direct path), and say
            // why it cannot.
            let assumed = CuFileAvailability {
                usable: true,
                direct_path: true,
                evidence: Vec::new(),
            };
            let r = routing::route_file(settings.compat_mode(), &assumed)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            (r, Some(vec![required.to_string()]))
        }
    };
    // The same planning function a CuFile's requests run under.
    let unplanned = kvik_policy::plan::plan(
        Request::read(file_offset, size, memory),
        &settings,
        &file_routing,
        None,
    );
    let execution = match (unplanned.route.backend, config) {
        (Backend::Cufile, config) => Some(execution_config(py, config)?),
        _ => None,
    };
    let plan = kvik_policy::plan::plan(
        Request::read(file_offset, size, memory),
        &settings,
        &file_routing,
        execution.as_ref().map(|(config, _)| CuFileSplit {
            execution: *config,
            registration: Registration::from(registered),
        }),
    );
    let count = plan.task_count();
    if count > MAX_LISTED_TASKS {
        return Err(PyValueError::new_err(format!(
            "{count} tasks are too many to list (at most {MAX_LISTED_TASKS}): plan with a larger \
             task_size"
        )));
    }
    #[derive(Serialize)]
    struct PlannedTask {
        file_offset: u64,
        buffer_offset: u64,
        size: u64,
        backend: Backend,
        /// cuFile's work units for this task, when it goes to cuFile.
        cufile_units: Option<u64>,
    }
    let tasks: Vec<PlannedTask> = plan
        .tasks()
        .map(|t| PlannedTask {
            file_offset: t.file_offset,
            buffer_offset: t.buffer_offset,
            size: t.size,
            backend: plan.route.backend,
            cufile_units: plan.work_units(&t).map(|u| u.unit_count()),
        })
        .collect();
    #[derive(Serialize)]
    struct CuFileView {
        execution: ExecutionConfig,
        source: String,
        registered: bool,
        units: u64,
    }
    #[derive(Serialize)]
    struct View {
        settings: Settings,
        routing: kvik_policy::FileRouting,
        refused: Option<Vec<String>>,
        route: kvik_policy::RequestRoute,
        execution: kvik_policy::plan::Execution,
        task_count: u64,
        runs: Vec<kvik_policy::plan::PlannedRun>,
        tasks: Vec<PlannedTask>,
        cufile: Option<CuFileView>,
    }
    let cufile = execution.map(|(execution, source)| CuFileView {
        execution,
        source,
        registered,
        units: plan.total_work_units().unwrap_or(0),
    });
    to_python(
        py,
        &View {
            settings,
            routing: file_routing,
            refused,
            route: plan.route,
            execution: plan.execution,
            task_count: count,
            runs: plan.runs(),
            tasks,
            cufile,
        },
    )
}

/// cuFile's execution settings, and where they came from.
fn execution_config(
    py: Python<'_>,
    config: Option<PathBuf>,
) -> PyResult<(ExecutionConfig, String)> {
    let path = match config {
        Some(p) => p,
        None => {
            let location = ConfigLocation::from_env();
            match location.path.filter(|_| location.exists) {
                Some(p) => p,
                None => {
                    return Ok((
                        ExecutionConfig::LIBRARY_DEFAULTS_1_15,
                        "libcufile's built-in defaults (no cufile.json here)".into(),
                    ));
                }
            }
        }
    };
    let parsed = py
        .detach(|| ParsedConfig::read(&path, &ValidateOptions::default()))
        .map_err(config_error)?;
    if parsed.has_errors() {
        return Err(PyValueError::new_err(format!(
            "{} has {} error(s) and cuFile would refuse it (kvik.config.validate() lists them)",
            path.display(),
            parsed.error_count()
        )));
    }
    Ok((parsed.execution().config, path.display().to_string()))
}
