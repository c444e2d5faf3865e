//! `PathReport`: which path one read or write took, and why — per layer.
//!
//! * `kvik`: how the file was routed when it opened (compat mode asked for
//!   and in effect, the decision, its evidence, any fallback), the backend
//!   of this request and why, where its tasks ran, the tasks as runs of
//!   equal tasks, and how much moved with O_DIRECT;
//! * `cufile`: cuFile's own view, for requests whose tasks called cuFile:
//!   its statistics counters for the request next to the work units the
//!   scheduling model predicted, and a verdict on the path it took.
//!
//! Every reason is a typed value: `Display` writes it for people, serde
//! writes a stable `kind` tag for programs (`--json`).

use std::fmt::{self, Write as _};
use std::path::PathBuf;

use crate::Size;
use crate::plan::Execution;
use crate::routing::{FileRouting, MemoryKind, RequestRoute};
use crate::size::bytes_text;
use crate::task::TaskRun;

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Read,
    Write,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Read => "read",
            Operation::Write => "write",
        })
    }
}

/// The path one request took.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PathReport {
    pub operation: Operation,
    #[serde(serialize_with = "crate::path_serde::serialize")]
    pub path: PathBuf,
    pub file_offset: u64,
    /// Bytes asked for.
    pub requested_bytes: u64,
    /// Bytes moved (fewer than asked only for a read that met the end of
    /// the file).
    pub bytes: u64,
    pub memory: MemoryKind,
    pub kvik: KvikLayer,
    pub cufile: CuFileLayer,
}

/// kvik-policy's decisions for one request.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KvikLayer {
    /// How the file was routed when it opened.
    pub file: FileRouting,
    /// The backend of this request, and why.
    pub route: RequestRoute,
    /// Routes of later requests folded into this report
    /// ([`PathReport::absorb`]) that differ from `route`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_routes: Vec<RequestRoute>,
    /// Where the tasks ran.
    pub execution: Execution,
    /// The task size setting.
    pub task_size: u64,
    /// The tasks, as runs of equal tasks in file order.
    pub tasks: Vec<TaskRun>,
    pub direct_io: DirectIoUse,
}

/// Whether host I/O used O_DIRECT for the page-aligned middle of each task.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DirectIoUse {
    pub status: DirectIoStatus,
    /// Bytes moved with O_DIRECT (the rest went through the page cache).
    pub bytes: u64,
}

/// Why O_DIRECT was or was not used.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DirectIoStatus {
    /// The setting (`auto_direct_io_read` / `_write`) is off.
    Off { setting: &'static str },
    /// On: the page-aligned middle of each task with O_DIRECT, the
    /// unaligned head and tail through the page cache.
    On { setting: &'static str },
    /// On, but the O_DIRECT descriptor could not be opened.
    Unavailable {
        setting: &'static str,
        reason: String,
    },
    /// On, but the filesystem refused O_DIRECT I/O mid-request: the rest
    /// went through the page cache.
    Refused {
        setting: &'static str,
        error: String,
    },
    /// Device memory: cuFile opens its own O_DIRECT descriptor, and the
    /// bounce-buffer path reads through the page cache.
    NotForDeviceMemory,
    /// Off for the request, but cold tasks (`cold_reads_direct`) were
    /// judged one by one: `direct_tasks` read with O_DIRECT; `first` is the
    /// first judgement, with its evidence.
    ColdReads {
        direct_tasks: u64,
        first: crate::residency::ReadPathDecision,
    },
}

impl fmt::Display for DirectIoStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectIoStatus::Off { setting } => write!(f, "not used ({setting} is off)"),
            DirectIoStatus::On { setting } => write!(
                f,
                "{setting} is on: page-aligned middle of each task with O_DIRECT, unaligned \
                 head and tail through the page cache"
            ),
            DirectIoStatus::Unavailable { setting, reason } => {
                write!(f, "{setting} is on, but {reason}: not used")
            }
            DirectIoStatus::Refused { setting, error } => write!(
                f,
                "{setting} is on, but the filesystem refused O_DIRECT I/O ({error}): the rest \
                 went through the page cache"
            ),
            DirectIoStatus::NotForDeviceMemory => {
                f.write_str("not used for device memory (cuFile opens its own O_DIRECT descriptor)")
            }
            DirectIoStatus::ColdReads {
                direct_tasks,
                first,
            } => write!(
                f,
                "cold reads: {direct_tasks} task{} with O_DIRECT (cold_reads_direct); first: {first}",
                if *direct_tasks == 1 { "" } else { "s" }
            ),
        }
    }
}

/// Why no task of a request called cuFile.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NotCalledReason {
    /// Host memory never goes to cuFile.
    HostMemory,
    /// The request took POSIX (see the route).
    PosixRoute,
}

impl fmt::Display for NotCalledReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotCalledReason::HostMemory => "host memory never goes to cuFile",
            NotCalledReason::PosixRoute => "the request took POSIX (see backend)",
        })
    }
}

/// Which path cuFile took, judged from its own counters.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CuFileVerdict {
    /// Every work unit went direct (nvidia-fs or PCI P2P).
    Accelerated { nvfs: u64, p2p: u64 },
    /// cuFile's own compatibility mode served every unit through host memory.
    CompatibilityMode { posix: u64 },
    /// Some units direct, some through cuFile's compatibility mode.
    Mixed { direct: u64, posix: u64 },
    /// cuFile counted nothing (statistics level below 3?).
    NothingCounted,
    /// The counters could not be read.
    StatsUnavailable { reason: String },
}

impl CuFileVerdict {
    /// Judge from the counters of the request's direction.
    pub fn judge(counted: Option<&gds_core::stats::IoCounters>, unavailable: Option<&str>) -> Self {
        let Some(c) = counted else {
            return CuFileVerdict::StatsUnavailable {
                reason: unavailable.unwrap_or("unknown").to_string(),
            };
        };
        if c.n == 0 {
            return CuFileVerdict::NothingCounted;
        }
        let direct = c.nvfs + c.p2p;
        match (direct, c.posix) {
            (_, 0) => CuFileVerdict::Accelerated {
                nvfs: c.nvfs,
                p2p: c.p2p,
            },
            (0, posix) => CuFileVerdict::CompatibilityMode { posix },
            (direct, posix) => CuFileVerdict::Mixed { direct, posix },
        }
    }
}

impl fmt::Display for CuFileVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CuFileVerdict::Accelerated { nvfs, p2p } => write!(
                f,
                "accelerated path: all {} work units went direct (nvfs {nvfs}, p2p {p2p})",
                nvfs + p2p
            ),
            CuFileVerdict::CompatibilityMode { posix } => write!(
                f,
                "cuFile fell back inside: its compatibility mode served all {posix} work units \
                 through host memory (posix {posix}, nvfs 0)"
            ),
            CuFileVerdict::Mixed { direct, posix } => write!(
                f,
                "mixed: {direct} work units direct, {posix} through cuFile's compatibility mode"
            ),
            CuFileVerdict::NothingCounted => f.write_str(
                "cuFile was called but counted no work units (statistics level below 3?)",
            ),
            CuFileVerdict::StatsUnavailable { reason } => {
                write!(
                    f,
                    "cuFile was called; its statistics are unavailable ({reason})"
                )
            }
        }
    }
}

/// cuFile's view of the request.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CuFileLayer {
    /// No task of this request called cuFile, and why.
    NotCalled { reason: NotCalledReason },
    /// The request's tasks called cuFile.
    Called {
        /// Whether the device buffer was registered (`cuFileBufRegister`).
        registered_buffer: bool,
        /// Work units the scheduling model predicts for these tasks under
        /// cuFile's effective execution settings.
        predicted_units: Option<u64>,
        /// Those settings, as the driver reported them.
        execution: Option<cufile_config::ExecutionConfig>,
        /// cuFile's own counters for the request (per GPU: n, nvfs, posix, …).
        /// Process-wide: concurrent cuFile requests in this process are included.
        stats: Option<gds_core::StatsDelta>,
        /// Why there are no counters (statistics off, libcufile < 1.15, …).
        stats_unavailable: Option<String>,
        verdict: CuFileVerdict,
    },
}

impl PathReport {
    /// Fold a later request over the same file into this one (a read done in
    /// windows reports as one): bytes add up, task runs merge, cuFile's
    /// counters and predictions add up and the verdict is judged again.
    pub fn absorb(&mut self, later: PathReport) {
        self.requested_bytes += later.requested_bytes;
        self.bytes += later.bytes;
        let k = &mut self.kvik;
        k.direct_io.bytes += later.kvik.direct_io.bytes;
        for run in later.kvik.tasks {
            TaskRun::push_merged(&mut k.tasks, run);
        }
        for route in std::iter::once(later.kvik.route).chain(later.kvik.other_routes) {
            if route != k.route && !k.other_routes.contains(&route) {
                k.other_routes.push(route);
            }
        }
        if k.execution != later.kvik.execution && later.kvik.execution.threads() > 1 {
            k.execution = later.kvik.execution;
        }
        self.cufile = match (
            std::mem::replace(&mut self.cufile, placeholder()),
            later.cufile,
        ) {
            (
                CuFileLayer::Called {
                    registered_buffer,
                    predicted_units,
                    execution,
                    stats,
                    stats_unavailable,
                    ..
                },
                CuFileLayer::Called {
                    predicted_units: later_units,
                    stats: later_stats,
                    stats_unavailable: later_unavailable,
                    ..
                },
            ) => {
                let stats = match (stats, later_stats) {
                    (Some(mut a), Some(b)) => {
                        a.merge(&b);
                        Some(a)
                    }
                    _ => None,
                };
                let stats_unavailable = stats_unavailable.or(later_unavailable);
                let counted = stats.as_ref().map(|d| match self.operation {
                    Operation::Read => d.reads(),
                    Operation::Write => d.writes(),
                });
                CuFileLayer::Called {
                    registered_buffer,
                    predicted_units: predicted_units.zip(later_units).map(|(a, b)| a + b),
                    execution,
                    verdict: CuFileVerdict::judge(counted.as_ref(), stats_unavailable.as_deref()),
                    stats,
                    stats_unavailable,
                }
            }
            (called @ CuFileLayer::Called { .. }, CuFileLayer::NotCalled { .. }) => called,
            (CuFileLayer::NotCalled { .. }, later) => later,
        };
    }

    /// The tasks in one line: `256 × 4 MiB`, `2 × 4 MiB + 1 × 2 MiB`.
    pub fn task_summary(&self) -> String {
        let runs = &self.kvik.tasks;
        if runs.is_empty() {
            return "none (empty request)".into();
        }
        // Windows repeat the same pattern; equal sizes that are not adjacent
        // merge into one group when there are many runs, to keep the line short.
        let mut groups: Vec<(u64, u64)> = Vec::new();
        for run in runs {
            match groups.last_mut() {
                Some((size, n)) if *size == run.size => *n += run.count,
                _ => groups.push((run.size, run.count)),
            }
        }
        if groups.len() > 4 {
            let mut merged: Vec<(u64, u64)> = Vec::new();
            for (size, n) in groups {
                match merged.iter_mut().find(|(s, _)| *s == size) {
                    Some((_, m)) => *m += n,
                    None => merged.push((size, n)),
                }
            }
            groups = merged;
        }
        let total: u64 = runs.iter().map(|r| r.count).sum();
        let parts: Vec<String> = groups
            .iter()
            .map(|(size, n)| format!("{n} × {}", Size(*size)))
            .collect();
        format!(
            "{total} task{}: {}",
            if total == 1 { "" } else { "s" },
            parts.join(" + ")
        )
    }

    /// The number of tasks.
    pub fn task_count(&self) -> u64 {
        self.kvik.tasks.iter().map(|r| r.count).sum()
    }
}

fn placeholder() -> CuFileLayer {
    CuFileLayer::NotCalled {
        reason: NotCalledReason::PosixRoute,
    }
}

impl fmt::Display for PathReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.kvik;
        let mut out = String::new();
        let mut row = |label: &str, text: &str| {
            let mut lines = text.lines();
            let _ = writeln!(out, "  {label:<13} {}", lines.next().unwrap_or(""));
            for line in lines {
                let _ = writeln!(out, "  {:<13} {line}", "");
            }
        };
        row(
            "request",
            &format!(
                "{} {} at offset {} of {}: {} moved",
                self.operation,
                bytes_text(self.requested_bytes),
                self.file_offset,
                self.path.display(),
                bytes_text(self.bytes),
            ),
        );
        row(
            "memory",
            &match self.memory {
                MemoryKind::Host => "host".to_string(),
                MemoryKind::Device { ordinal } => format!("device (GPU {ordinal})"),
            },
        );
        row(
            "compat mode",
            &format!(
                "{} requested, {} in effect",
                k.file.requested, k.file.effective
            ),
        );
        row("file routing", &bullets(&k.file.reasons()));
        let mut backend = format!("{}: {}", k.route.backend, k.route.reason);
        for other in &k.other_routes {
            let _ = write!(backend, "\nthen {}: {}", other.backend, other.reason);
        }
        row("backend", &backend);
        row(
            "tasks",
            &format!(
                "{}, task size {}, {}",
                self.task_summary(),
                Size(k.task_size),
                k.execution
            ),
        );
        row(
            "O_DIRECT",
            &if k.direct_io.bytes > 0 {
                format!(
                    "{} of {} ({})",
                    bytes_text(k.direct_io.bytes),
                    bytes_text(self.bytes),
                    k.direct_io.status
                )
            } else {
                k.direct_io.status.to_string()
            },
        );
        match &self.cufile {
            CuFileLayer::NotCalled { reason } => row("cuFile", &format!("not called: {reason}")),
            CuFileLayer::Called {
                registered_buffer,
                predicted_units,
                stats,
                verdict,
                ..
            } => {
                row("cuFile", &verdict.to_string());
                let counted = match (stats, self.operation) {
                    (Some(d), Operation::Read) => Some(d.reads()),
                    (Some(d), Operation::Write) => Some(d.writes()),
                    (None, _) => None,
                };
                let mut units = match predicted_units {
                    Some(p) => format!("predicted {p}"),
                    None => "predicted ? (execution settings unreadable)".to_string(),
                };
                if let Some(c) = counted {
                    let _ = write!(
                        units,
                        ", counted {} (nvfs {}, posix {}, p2p {}, unaligned {}, errors {})",
                        c.n, c.nvfs, c.posix, c.p2p, c.unaligned, c.errors
                    );
                }
                let _ = write!(
                    units,
                    "; device buffer {}",
                    if *registered_buffer {
                        "registered"
                    } else {
                        "not registered"
                    }
                );
                row("cuFile units", &units);
            }
        }
        f.write_str(&out)
    }
}

fn bullets(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| format!("- {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gds_core::stats::IoCounters;

    #[test]
    fn verdicts_name_the_path() {
        let counters = |nvfs, posix| IoCounters {
            n: nvfs + posix,
            nvfs,
            posix,
            ..Default::default()
        };
        assert_eq!(
            CuFileVerdict::judge(Some(&counters(4, 0)), None),
            CuFileVerdict::Accelerated { nvfs: 4, p2p: 0 }
        );
        assert_eq!(
            CuFileVerdict::judge(Some(&counters(0, 4)), None),
            CuFileVerdict::CompatibilityMode { posix: 4 }
        );
        assert_eq!(
            CuFileVerdict::judge(Some(&counters(1, 3)), None),
            CuFileVerdict::Mixed {
                direct: 1,
                posix: 3
            }
        );
        assert_eq!(
            CuFileVerdict::judge(Some(&counters(0, 0)), None),
            CuFileVerdict::NothingCounted
        );
        let off = CuFileVerdict::judge(None, Some("statistics are off"));
        assert!(off.to_string().contains("statistics are off"));
        assert_eq!(
            serde_json::to_value(&off).unwrap()["kind"],
            "stats_unavailable"
        );
    }
}
