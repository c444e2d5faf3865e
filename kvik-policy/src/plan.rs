//! The plan of one request: which backend serves it and why, where its
//! tasks run, how it is cut into tasks, and — for tasks that go to cuFile —
//! how cuFile will cut each task into work units.
//!
//! One function decides: [`plan`]. `FileHandle` executes what it returns
//! and `kvik plan` prints it, so what is printed is what runs.
//!
//! A plan never lists its tasks: they are computed by index
//! ([`Plan::task`]), and described as runs of equal tasks
//! ([`Plan::runs`]), so planning (and executing) a request costs the same
//! memory whatever its size and task size.
//!
//! ```
//! use kvik_policy::plan::{self, Execution, Request};
//! use kvik_policy::routing::{self, CuFileAvailability};
//! use kvik_policy::{CompatMode, MemoryKind, Operation, Settings};
//!
//! let mut settings = Settings::default();
//! settings.set_task_size(4 << 20)?.set_num_threads(8)?;
//! let file = routing::route_file(CompatMode::On, &CuFileAvailability::not_asked()).unwrap();
//! let request = Request::read(0, 10 << 20, MemoryKind::Host);
//! let plan = plan::plan(request, &settings, &file, None);
//! assert_eq!(plan.task_count(), 3); // 4 MiB + 4 MiB + 2 MiB
//! assert_eq!(plan.execution, Execution::Pool { threads: 8 });
//! # Ok::<(), kvik_policy::Error>(())
//! ```

use serde::Serialize;

use cufile_config::ExecutionConfig;
use gds_core::schedule::{self, Registration, SplitRule, WorkUnits};

use crate::Settings;
use crate::path_report::Operation;
use crate::routing::{self, Backend, FileRouting, MemoryKind, RequestRoute, RouteReason};
use crate::task::{self, Task, TaskRun, TaskSplit};

/// What is asked: an operation on a range of a file, into or out of some memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Request {
    /// Read or write.
    pub operation: Operation,
    /// Where in the file the request starts.
    pub file_offset: u64,
    /// Bytes.
    pub size: u64,
    /// The memory read into or written from.
    pub memory: MemoryKind,
}

impl Request {
    /// A read of `size` bytes at `file_offset` into `memory`.
    pub fn read(file_offset: u64, size: u64, memory: MemoryKind) -> Request {
        Request {
            operation: Operation::Read,
            file_offset,
            size,
            memory,
        }
    }

    /// A write of `size` bytes at `file_offset` from `memory`.
    pub fn write(file_offset: u64, size: u64, memory: MemoryKind) -> Request {
        Request {
            operation: Operation::Write,
            file_offset,
            size,
            memory,
        }
    }
}

/// Where a request's tasks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Execution {
    /// On the thread that made the request (one task, or KvikIO's shortcut
    /// for device requests below `gds_threshold`). For a background request
    /// that is the pool thread running it.
    CallingThread,
    /// On the I/O pool of `threads` threads, in file order.
    Pool {
        /// The pool's threads.
        threads: usize,
    },
    /// Enqueued on a CUDA stream as one operation (cuFile's stream API),
    /// run when the stream gets there.
    CudaStream,
}

impl std::fmt::Display for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Execution::CallingThread => f.write_str("on the calling thread"),
            Execution::CudaStream => f.write_str("as one operation on a CUDA stream"),
            Execution::Pool { threads } => write!(
                f,
                "on {threads} pool thread{}",
                if *threads == 1 { "" } else { "s" }
            ),
        }
    }
}

impl Execution {
    /// The threads that can work on the request at once.
    pub fn threads(self) -> usize {
        match self {
            Execution::CallingThread | Execution::CudaStream => 1,
            Execution::Pool { threads } => threads,
        }
    }
}

/// What cuFile's split of a task depends on besides the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CuFileSplit {
    /// cuFile's effective execution settings (its driver's, or a cufile.json's).
    pub execution: ExecutionConfig,
    /// Whether the device buffer is registered with `cuFileBufRegister`.
    pub registration: Registration,
}

/// The plan of one request. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Plan {
    /// What is asked.
    pub request: Request,
    /// The backend, and why.
    pub route: RequestRoute,
    /// Where the tasks run.
    pub execution: Execution,
    /// The task size setting the split used (a request below
    /// `gds_threshold` is one task whatever it is).
    pub task_size: u64,
    /// Present when the tasks go to cuFile and its settings are known.
    pub cufile: Option<CuFileSplit>,
    tasks: TaskSplit,
}

/// Decide how `request` runs on a file routed as `file`, under `settings`.
/// `cufile` gives cuFile's execution settings, for the work units of tasks
/// that go to cuFile (`None`: unknown, the units are not predicted).
pub fn plan(
    request: Request,
    settings: &Settings,
    file: &FileRouting,
    cufile: Option<CuFileSplit>,
) -> Plan {
    let route =
        routing::route_request(file, request.memory, request.size, settings.gds_threshold());
    let below_threshold = matches!(route.reason, RouteReason::BelowGdsThreshold { .. });
    let task_size = if below_threshold {
        u64::MAX
    } else {
        settings.task_size()
    };
    let tasks = task::split(request.file_offset, request.size, task_size);
    let execution = if below_threshold || tasks.task_count() <= 1 {
        Execution::CallingThread
    } else {
        Execution::Pool {
            threads: settings.num_threads(),
        }
    };
    Plan {
        request,
        route,
        execution,
        task_size: settings.task_size(),
        cufile: cufile.filter(|_| route.backend == Backend::Cufile),
        tasks,
    }
}

/// A run of equal tasks, with what cuFile does with each of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedRun {
    #[serde(flatten)]
    pub tasks: TaskRun,
    pub backend: Backend,
    /// cuFile's work units per task (cuFile tasks with known settings).
    pub work_units_per_task: Option<u64>,
    /// One task's unit sizes as `(count, size)` runs.
    pub unit_sizes: Vec<(u64, u64)>,
    /// Why cuFile cuts each task so.
    pub split_rule: Option<SplitRule>,
}

impl Plan {
    /// This plan as one operation on a CUDA stream: one task, the whole
    /// request (cuFile's stream API takes a request whole, as KvikIO's
    /// `read_async` passes it).
    pub fn as_one_stream_operation(mut self) -> Plan {
        self.tasks = task::split(self.request.file_offset, self.request.size, u64::MAX);
        self.execution = Execution::CudaStream;
        self
    }

    /// The tasks, in file order (an iterator that computes each in turn).
    pub fn tasks(&self) -> TaskSplit {
        self.tasks.clone()
    }

    /// Task `index`, in constant time.
    pub fn task(&self, index: u64) -> Option<Task> {
        self.tasks.task(index)
    }

    /// The number of tasks.
    pub fn task_count(&self) -> u64 {
        self.tasks.task_count()
    }

    /// cuFile's work units for one task, when it goes to cuFile and the
    /// settings are known.
    pub fn work_units(&self, task: &Task) -> Option<WorkUnits> {
        let split = self.cufile?;
        Some(schedule::plan(
            schedule::Request {
                file_offset: task.file_offset,
                buffer_offset: task.buffer_offset,
                size: task.size,
            },
            &split.execution,
            split.registration,
        ))
    }

    /// The tasks as runs of equal tasks (at most two), each with its cuFile
    /// split: a task's units depend only on its size, so this is arithmetic.
    pub fn runs(&self) -> Vec<PlannedRun> {
        self.tasks
            .runs()
            .into_iter()
            .map(|run| {
                let first = Task {
                    file_offset: run.first_file_offset,
                    buffer_offset: run.first_file_offset - self.request.file_offset,
                    size: run.size,
                };
                let units = self.work_units(&first);
                PlannedRun {
                    tasks: run,
                    backend: self.route.backend,
                    work_units_per_task: units.as_ref().map(WorkUnits::unit_count),
                    unit_sizes: units
                        .as_ref()
                        .map(|u| u.size_runs().collect())
                        .unwrap_or_default(),
                    split_rule: units.as_ref().map(WorkUnits::rule),
                }
            })
            .collect()
    }

    /// cuFile's work units for the whole request, when predicted.
    pub fn total_work_units(&self) -> Option<u64> {
        self.cufile?;
        Some(
            self.runs()
                .iter()
                .map(|r| r.tasks.count * r.work_units_per_task.unwrap_or(0))
                .sum(),
        )
    }
}

impl Serialize for Plan {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a> {
            request: &'a Request,
            route: &'a RequestRoute,
            execution: Execution,
            task_size: u64,
            task_count: u64,
            runs: Vec<PlannedRun>,
            cufile: Option<CuFileSplit>,
            work_units: Option<u64>,
        }
        View {
            request: &self.request,
            route: &self.route,
            execution: self.execution,
            task_size: self.task_size,
            task_count: self.task_count(),
            runs: self.runs(),
            cufile: self.cufile,
            work_units: self.total_work_units(),
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::{CuFileAvailability, route_file};
    use crate::{CompatMode, Settings};

    const MIB: u64 = 1 << 20;
    const DEVICE: MemoryKind = MemoryKind::Device { ordinal: 0 };

    fn settings(task_size: u64, gds_threshold: u64) -> Settings {
        let mut s = Settings::default();
        s.set_task_size(task_size)
            .unwrap()
            .set_gds_threshold(gds_threshold)
            .set_num_threads(16)
            .unwrap();
        s
    }

    fn file(mode: CompatMode) -> FileRouting {
        let direct = CuFileAvailability {
            usable: true,
            direct_path: true,
            evidence: vec![],
        };
        route_file(mode, &direct).unwrap()
    }

    #[test]
    fn below_gds_threshold_a_device_request_is_one_task_whatever_the_compat_mode() {
        // The divergence an earlier `kvik plan` had: 32 MiB under a 64 MiB
        // threshold with 4 MiB tasks is one task, on the calling thread.
        for mode in [CompatMode::On, CompatMode::Off, CompatMode::Auto] {
            let p = plan(
                Request::read(0, 32 * MIB, DEVICE),
                &settings(4 * MIB, 64 * MIB),
                &file(mode),
                None,
            );
            assert_eq!(p.task_count(), 1, "{mode}");
            assert_eq!(p.execution, Execution::CallingThread);
            assert_eq!(p.route.backend, Backend::Posix);
        }
    }

    #[test]
    fn cufile_tasks_carry_the_scheduling_model() {
        let split = CuFileSplit {
            execution: ExecutionConfig::STOCK_FILE,
            registration: Registration::Unregistered,
        };
        // NVIDIA's worked example: 1 GiB in 4 MiB tasks → 256 tasks, 256 units.
        let p = plan(
            Request::read(0, 1 << 30, DEVICE),
            &settings(4 * MIB, 16 << 10),
            &file(CompatMode::Off),
            Some(split),
        );
        assert_eq!((p.task_count(), p.total_work_units()), (256, Some(256)));
        assert_eq!(p.execution, Execution::Pool { threads: 16 });
        // One 1 GiB task → 4 units of 256 MiB.
        let p = plan(
            Request::read(0, 1 << 30, DEVICE),
            &settings(1 << 30, 16 << 10),
            &file(CompatMode::Off),
            Some(split),
        );
        let runs = p.runs();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].unit_sizes, vec![(4, 256 * MIB)]);
        // Host memory never predicts units.
        let p = plan(
            Request::read(0, 1 << 30, MemoryKind::Host),
            &settings(4 * MIB, 16 << 10),
            &file(CompatMode::Off),
            Some(split),
        );
        assert_eq!(p.total_work_units(), None);
    }

    #[test]
    fn plans_serialize_runs_not_tasks() {
        let p = plan(
            Request::read(0, 1 << 40, MemoryKind::Host),
            &settings(1, 0),
            &file(CompatMode::On),
            None,
        );
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["task_count"], 1u64 << 40);
        assert_eq!(json["runs"].as_array().unwrap().len(), 1);
        assert_eq!(json["route"]["reason"]["kind"], "host_memory");
    }
}
