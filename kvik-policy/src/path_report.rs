//! `PathReport`: which path one read or write took, and why — per layer.
//!
//! * `kvik`: the compat mode asked for and the one in effect, why (the
//!   per-file routing decided at open), the backend of the request and of
//!   each task, the task split, and how much moved with O_DIRECT;
//! * `cufile`: cuFile's own view. No host-memory request calls cuFile; the
//!   device-memory issue adds the statistics delta of the requests that do.

use std::fmt::{self, Write as _};
use std::path::PathBuf;

use crate::routing::{Backend, MemoryKind};
use crate::size::bytes_text;
use crate::{CompatMode, Size};

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KvikLayer {
    pub requested_compat_mode: CompatMode,
    pub effective_compat_mode: CompatMode,
    /// The backend of this request.
    pub backend: Backend,
    /// Why this request took that backend.
    pub reason: String,
    /// Why the file was routed as it was when it opened (compat mode, what
    /// cuFile can do here).
    pub file_reasons: Vec<String>,
    pub threads: usize,
    pub task_size: u64,
    pub direct_io: DirectIoUse,
    /// Every task, in file order.
    pub tasks: Vec<TaskReport>,
}

/// One task of the split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TaskReport {
    pub file_offset: u64,
    pub size: u64,
    pub backend: Backend,
    /// Bytes this task moved.
    pub bytes: u64,
    /// Of which with O_DIRECT.
    pub direct_io_bytes: u64,
}

/// Whether host I/O used O_DIRECT for the page-aligned middle of each task.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DirectIoUse {
    /// `auto_direct_io_read` / `auto_direct_io_write` for this request.
    pub requested: bool,
    /// Why O_DIRECT was or was not used.
    pub status: String,
    /// Bytes moved with O_DIRECT (the rest went through the page cache).
    pub bytes: u64,
}

/// cuFile's view of the request.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CuFileLayer {
    /// No task of this request called cuFile, and why.
    NotCalled { reason: String },
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
        /// One line: accelerated path, fallback inside cuFile, or mixed.
        verdict: String,
    },
}

impl CuFileLayer {
    pub(crate) fn not_called(reason: impl Into<String>) -> CuFileLayer {
        CuFileLayer::NotCalled {
            reason: reason.into(),
        }
    }
}

impl PathReport {
    /// Fold a later request over the same file into this one (a read done in
    /// windows reports as one): bytes add up, tasks append.
    pub fn absorb(&mut self, later: PathReport) {
        self.requested_bytes += later.requested_bytes;
        self.bytes += later.bytes;
        self.kvik.direct_io.bytes += later.kvik.direct_io.bytes;
        self.kvik.tasks.extend(later.kvik.tasks);
        if later.kvik.backend != self.kvik.backend {
            self.kvik.reason = format!("{}; then {}", self.kvik.reason, later.kvik.reason);
        }
    }

    /// Task sizes, grouped: `256 × 4 MiB`, `2 × 4 MiB + 1 × 2 MiB`.
    pub fn task_summary(&self) -> String {
        let tasks = &self.kvik.tasks;
        if tasks.is_empty() {
            return "none (empty request)".into();
        }
        let mut groups: Vec<(u64, usize)> = Vec::new();
        for t in tasks {
            match groups.last_mut() {
                Some((size, n)) if *size == t.size => *n += 1,
                _ => groups.push((t.size, 1)),
            }
        }
        // Windows repeat the same pattern; merge equal sizes that are not adjacent
        // only when there are many groups, to keep the line short.
        if groups.len() > 4 {
            let mut merged: Vec<(u64, usize)> = Vec::new();
            for (size, n) in groups {
                match merged.iter_mut().find(|(s, _)| *s == size) {
                    Some((_, m)) => *m += n,
                    None => merged.push((size, n)),
                }
            }
            groups = merged;
        }
        let parts: Vec<String> = groups
            .iter()
            .map(|(size, n)| format!("{n} × {}", Size(*size)))
            .collect();
        format!(
            "{} task{}: {}",
            tasks.len(),
            if tasks.len() == 1 { "" } else { "s" },
            parts.join(" + ")
        )
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
                k.requested_compat_mode, k.effective_compat_mode
            ),
        );
        row("file routing", &bullets(&k.file_reasons));
        row("backend", &format!("{}: {}", k.backend, k.reason));
        let backends = {
            let posix = k
                .tasks
                .iter()
                .filter(|t| t.backend == Backend::Posix)
                .count();
            let cufile = k.tasks.len() - posix;
            match (posix, cufile) {
                (_, 0) => "all posix".to_string(),
                (0, _) => "all cufile".to_string(),
                (p, c) => format!("{p} posix, {c} cufile"),
            }
        };
        row(
            "tasks",
            &format!(
                "{} ({backends}), task size {}, {} thread{}",
                self.task_summary(),
                Size(k.task_size),
                k.threads,
                if k.threads == 1 { "" } else { "s" }
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
                k.direct_io.status.clone()
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
                row("cuFile", verdict);
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
