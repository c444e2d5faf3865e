//! The cuFile side of a `FileHandle`: the process's driver, the file's
//! registration, and the evidence around each request (cuFile's statistics
//! delta next to the scheduling model's prediction).
//!
//! The driver is opened once and kept open for the life of the process, as
//! KvikIO does: opening it costs topology discovery (hundreds of
//! milliseconds), and every file needs it.

use std::fs::File;
use std::path::Path;
use std::sync::OnceLock;

use cufile_config::ExecutionConfig;
use gds_core::schedule::{self, Registration, Request};
use gds_core::stats::IoCounters;
use gds_core::{CuFileHandle, Driver, StatsDelta, StatsSnapshot};

use crate::path_report::{CuFileLayer, Operation};
use crate::task::Task;

static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();

/// The process's cuFile driver, opened on first use (only where a CUDA
/// driver with a GPU exists: gds-core checks before opening).
pub(crate) fn driver() -> Result<&'static Driver, String> {
    DRIVER
        .get_or_init(|| Driver::open().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(Clone::clone)
}

/// Register `path` with cuFile through (a duplicate of) its O_DIRECT descriptor.
pub(crate) fn register(direct: &File, path: &Path) -> Result<CuFileHandle, String> {
    let driver = driver()?;
    let fd = direct
        .try_clone()
        .map_err(|e| format!("cannot duplicate the O_DIRECT descriptor: {e}"))?;
    CuFileHandle::register(driver, fd, path).map_err(|e| e.to_string())
}

/// The base cuFile must be given for a device pointer, and the offset from
/// it: the registration containing the pointer (cuFile finds registered
/// buffers by the base they were registered with), else the allocation.
pub(crate) fn base_and_offset(ptr: u64, allocation_base: u64) -> (u64, u64, Registration) {
    match gds_core::buffer::registration_containing(ptr) {
        Some((base, _)) => (base, ptr - base, Registration::Registered),
        None => (
            allocation_base,
            ptr - allocation_base,
            Registration::Unregistered,
        ),
    }
}

/// Snapshot before a request; turned into the report's cuFile layer after it.
pub(crate) struct Evidence {
    driver: Driver,
    before: Result<StatsSnapshot, String>,
}

impl Evidence {
    /// Read cuFile's counters before a request on `handle`.
    pub(crate) fn start(handle: &CuFileHandle) -> Evidence {
        let driver = handle.driver().clone();
        let before = StatsSnapshot::read(&driver).map_err(|e| e.to_string());
        Evidence { driver, before }
    }

    /// The cuFile layer of the report: what cuFile counted during the
    /// request, what the model predicted for these tasks, and a plain verdict.
    pub(crate) fn finish(
        self,
        operation: Operation,
        tasks: &[Task],
        registration: Registration,
    ) -> CuFileLayer {
        let execution = self.driver.parameters().execution();
        let predicted_units = execution
            .as_ref()
            .ok()
            .map(|exec| predicted(tasks, exec, registration));
        let stats = self.before.and_then(|before| {
            StatsSnapshot::read(&self.driver)
                .map(|after| after.delta_since(&before))
                .map_err(|e| e.to_string())
        });
        let (delta, stats_unavailable) = match stats {
            Ok(delta) => (Some(delta), None),
            Err(reason) => (None, Some(reason)),
        };
        let verdict = verdict(operation, delta.as_ref(), stats_unavailable.as_deref());
        CuFileLayer::Called {
            registered_buffer: registration.is_registered(),
            predicted_units,
            execution: execution.ok(),
            stats: delta,
            stats_unavailable,
            verdict,
        }
    }
}

/// The scheduling model's unit count for these tasks.
fn predicted(tasks: &[Task], execution: &ExecutionConfig, registration: Registration) -> u64 {
    tasks
        .iter()
        .map(|t| {
            let request = Request {
                file_offset: t.file_offset,
                buffer_offset: t.buffer_offset,
                size: t.size,
            };
            schedule::plan(request, execution, registration).len() as u64
        })
        .sum()
}

/// One line that says which path cuFile took.
fn verdict(operation: Operation, delta: Option<&StatsDelta>, unavailable: Option<&str>) -> String {
    let Some(delta) = delta else {
        return format!(
            "cuFile was called; its statistics are unavailable ({})",
            unavailable.unwrap_or("unknown")
        );
    };
    let c: IoCounters = match operation {
        Operation::Read => delta.reads(),
        Operation::Write => delta.writes(),
    };
    if c.n == 0 {
        return "cuFile was called but counted no work units (statistics level below 3?)".into();
    }
    let direct = c.nvfs + c.p2p;
    match (direct, c.posix) {
        (d, 0) => format!(
            "accelerated path: all {d} work units went direct (nvfs {}, p2p {})",
            c.nvfs, c.p2p
        ),
        (0, p) => format!(
            "cuFile fell back inside: its compatibility mode served all {p} work units through host memory \
             (posix {p}, nvfs 0)"
        ),
        (d, p) => format!("mixed: {d} work units direct, {p} through cuFile's compatibility mode"),
    }
}

#[cfg(test)]
mod tests {
    use gds_core::stats::GpuCounters;

    use super::*;

    fn delta(nvfs: u64, posix: u64) -> StatsDelta {
        StatsDelta {
            gpus: vec![GpuCounters {
                uuid: "gpu".into(),
                reads: IoCounters {
                    n: nvfs + posix,
                    nvfs,
                    posix,
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn verdicts_name_the_path() {
        assert!(verdict(Operation::Read, Some(&delta(4, 0)), None).starts_with("accelerated path"));
        assert!(verdict(Operation::Read, Some(&delta(0, 4)), None).contains("fell back inside"));
        assert!(verdict(Operation::Read, Some(&delta(1, 3)), None).starts_with("mixed"));
        assert!(verdict(Operation::Write, Some(&delta(0, 4)), None).contains("no work units"));
        assert!(
            verdict(Operation::Read, None, Some("statistics are off"))
                .contains("statistics are off")
        );
    }

    #[test]
    fn the_model_predicts_nvidias_worked_example() {
        // Stock config, 1 GiB in 4 MiB tasks: 256 tasks, 256 units.
        let tasks: Vec<Task> =
            crate::task::split_with_page_size(0, 1 << 30, 4 << 20, 4096).collect();
        assert_eq!(
            predicted(
                &tasks,
                &ExecutionConfig::STOCK_FILE,
                Registration::Unregistered
            ),
            256
        );
        // One 1 GiB task: 4 units of 256 MiB.
        let one: Vec<Task> = crate::task::split_with_page_size(0, 1 << 30, 1 << 30, 4096).collect();
        assert_eq!(
            predicted(
                &one,
                &ExecutionConfig::STOCK_FILE,
                Registration::Unregistered
            ),
            4
        );
    }
}
