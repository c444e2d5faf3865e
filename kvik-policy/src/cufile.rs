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

#[cfg(test)]
use cufile_config::ExecutionConfig;
use gds_core::schedule::Registration;
use gds_core::{CuFileHandle, Driver, StatsSnapshot};

use crate::path_report::{CuFileLayer, CuFileVerdict, Operation};
use crate::plan::{CuFileSplit, Plan};
use crate::routing::CuFileSetupFailure;

static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();

/// The process's cuFile driver, opened on first use (only where a CUDA
/// driver with a GPU exists: gds-core checks before opening).
pub(crate) fn driver() -> Result<&'static Driver, String> {
    DRIVER
        .get_or_init(|| {
            let driver = Driver::open().map_err(|e| e.to_string())?;
            // libcufile 1.15's own teardown crashes (SIGSEGV, exit 139) when
            // the process exits with its driver open, after the work is
            // done (seen on the H200 in test binaries and examples): close
            // it first. atexit handlers run before the destructors that
            // libcufile registered when it was loaded, earlier.
            // SAFETY: registers a plain extern "C" function.
            unsafe { libc::atexit(close_driver_at_exit) };
            Ok(driver)
        })
        .as_ref()
        .map_err(Clone::clone)
}

extern "C" fn close_driver_at_exit() {
    if let Some(Ok(driver)) = DRIVER.get() {
        driver.shutdown();
    }
}

/// Register `path` with cuFile through (a duplicate of) its O_DIRECT descriptor.
pub(crate) fn register(direct: &File, path: &Path) -> Result<CuFileHandle, CuFileSetupFailure> {
    let driver = driver().map_err(|message| CuFileSetupFailure::Driver { message })?;
    let fd = direct
        .try_clone()
        .map_err(|e| CuFileSetupFailure::DirectDescriptor {
            errno: e.raw_os_error(),
            message: format!("cannot duplicate it: {e}"),
        })?;
    CuFileHandle::register(driver, fd, path).map_err(|e| CuFileSetupFailure::Registration {
        status: match &e {
            gds_core::Error::CuFile { status, .. } => Some(status.err.code()),
            _ => None,
        },
        message: e.to_string(),
    })
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

/// cuFile's execution settings as its driver reports them (for the plan's
/// work-unit prediction), or `None` when they cannot be read.
pub(crate) fn split(handle: &CuFileHandle, registration: Registration) -> Option<CuFileSplit> {
    let execution = handle.driver().parameters().execution().ok()?;
    Some(CuFileSplit {
        execution,
        registration,
    })
}

impl Evidence {
    /// Read cuFile's counters before a request on `handle`.
    pub(crate) fn start(handle: &CuFileHandle) -> Evidence {
        let driver = handle.driver().clone();
        let before = StatsSnapshot::read(&driver).map_err(|e| e.to_string());
        Evidence { driver, before }
    }

    /// The cuFile layer of the report: what cuFile counted during the
    /// request next to what the plan predicted, and a verdict.
    pub(crate) fn finish(self, plan: &Plan, registration: Registration) -> CuFileLayer {
        let stats = self.before.and_then(|before| {
            StatsSnapshot::read(&self.driver)
                .map(|after| after.delta_since(&before))
                .map_err(|e| e.to_string())
        });
        let (delta, stats_unavailable) = match stats {
            Ok(delta) => (Some(delta), None),
            Err(reason) => (None, Some(reason)),
        };
        let counted = delta.as_ref().map(|d| match plan.request.operation {
            Operation::Read => d.reads(),
            Operation::Write => d.writes(),
        });
        CuFileLayer::Called {
            registered_buffer: registration.is_registered(),
            predicted_units: plan.total_work_units(),
            execution: plan.cufile.map(|s| s.execution),
            verdict: CuFileVerdict::judge(counted.as_ref(), stats_unavailable.as_deref()),
            stats: delta,
            stats_unavailable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{self, Request};
    use crate::routing::{CuFileAvailability, MemoryKind, route_file};
    use crate::{CompatMode, Settings};

    #[test]
    fn the_plan_predicts_nvidias_worked_example() {
        let file = route_file(
            CompatMode::Off,
            &CuFileAvailability {
                usable: true,
                direct_path: true,
                evidence: vec![],
            },
        )
        .unwrap();
        let split = CuFileSplit {
            execution: ExecutionConfig::STOCK_FILE,
            registration: Registration::Unregistered,
        };
        let device = MemoryKind::Device { ordinal: 0 };
        // Stock config, 1 GiB in 4 MiB tasks: 256 tasks, 256 units.
        let mut settings = Settings::default();
        settings.set_task_size(4 << 20).unwrap();
        let p = plan::plan(
            Request::read(0, 1 << 30, device),
            &settings,
            &file,
            Some(split),
        );
        assert_eq!(p.total_work_units(), Some(256));
        // One 1 GiB task: 4 units of 256 MiB.
        settings.set_task_size(1 << 30).unwrap();
        let p = plan::plan(
            Request::read(0, 1 << 30, device),
            &settings,
            &file,
            Some(split),
        );
        assert_eq!(p.total_work_units(), Some(4));
    }
}
