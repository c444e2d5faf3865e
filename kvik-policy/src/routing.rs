//! Routing: which backend serves a request, and why.
//!
//! Two decisions, as in KvikIO:
//! 1. per file, when the handle opens ([`route_file`]): will device-memory
//!    requests go to cuFile at all? It depends on the compat mode and on what
//!    cuFile can do here ([`CuFileAvailability`]);
//! 2. per request ([`route_request`]): host memory always takes POSIX, and
//!    device requests below `gds_threshold` take POSIX on the calling thread.
//!
//! Where we differ from KvikIO, on purpose: under AUTO, KvikIO uses cuFile
//! whenever libcufile loads, even where cuFile has no direct path and would
//! run its own compatibility mode. That mode reads with O_DIRECT, staged
//! through host memory, so it never reads from the page cache and runs at
//! the disk's speed; our bounce buffers read a page-cached file at memory
//! speed, and an uncached one as fast as the disk allows. We take the
//! faster path and say why.
//!
//! ```
//! use kvik_policy::routing::{self, CuFileAvailability, FileDecision, RouteReason};
//! use kvik_policy::{Backend, CompatMode, MemoryKind};
//!
//! // cuFile loads here but has no direct path (no nvidia-fs, no P2PDMA).
//! let compat_only = CuFileAvailability { usable: true, direct_path: false, evidence: vec![] };
//! let file = routing::route_file(CompatMode::Auto, &compat_only).unwrap();
//! assert_eq!(file.decision, FileDecision::AutoNoDirectPath);
//! assert_eq!(file.device_backend, Backend::Posix);
//!
//! // Compat mode OFF insists on cuFile: a 1 MiB device read goes there, a
//! // 4 KiB one (below the 16 KiB gds_threshold) is one POSIX call.
//! let file = routing::route_file(CompatMode::Off, &compat_only).unwrap();
//! let gpu = MemoryKind::Device { ordinal: 0 };
//! assert_eq!(routing::route_request(&file, gpu, 1 << 20, 16 << 10).backend, Backend::Cufile);
//! let small = routing::route_request(&file, gpu, 4096, 16 << 10);
//! assert!(matches!(small.reason, RouteReason::BelowGdsThreshold { .. }));
//! // Typed reasons: Display for people, a stable `kind` tag for programs.
//! println!("{}", small.reason);
//! ```

use std::fmt;

use gds_core::readiness::{Readiness, Reason, VerdictKind};

use crate::CompatMode;
use crate::size::bytes_text;

/// Who moves the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Our POSIX path: `pread`/`pwrite`, through bounce buffers for device memory.
    Posix,
    /// `cuFileRead`/`cuFileWrite`.
    Cufile,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Posix => "posix",
            Backend::Cufile => "cufile",
        })
    }
}

/// Where the caller's buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum MemoryKind {
    /// Host (CPU) memory.
    Host,
    /// Device memory of GPU `ordinal`.
    Device {
        /// The CUDA device ordinal.
        ordinal: u32,
    },
}

/// What cuFile can do for a file on this machine.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CuFileAvailability {
    /// KvikIO's checks pass: libcufile loads with its required symbols,
    /// `/run/udev` exists, not WSL — and a CUDA driver with a GPU answers
    /// (without one, opening the cuFile driver never returns).
    pub usable: bool,
    /// cuFile has a direct path (nvidia-fs, or PCI P2PDMA for the storage);
    /// without one it could only run its own compatibility mode.
    pub direct_path: bool,
    /// The evidence, most decisive first (gds-core's readiness reasons).
    pub evidence: Vec<Reason>,
}

impl CuFileAvailability {
    /// From a readiness report (for the file's path, when it names one).
    pub fn from_readiness(readiness: &Readiness) -> CuFileAvailability {
        let (usable, direct_path) = match readiness.verdict.kind {
            VerdictKind::PosixOnly => (false, false),
            VerdictKind::CompatModeOnly => (true, false),
            VerdictKind::DirectPathPossible => (true, true),
        };
        CuFileAvailability {
            usable,
            direct_path,
            evidence: readiness.verdict.reasons.clone(),
        }
    }

    /// Compat mode ON never asks: nothing is known, nothing is used.
    pub fn not_asked() -> CuFileAvailability {
        CuFileAvailability {
            usable: false,
            direct_path: false,
            evidence: Vec::new(),
        }
    }
}

/// Why a file's device-memory requests go where they go.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileDecision {
    /// Compat mode ON: cuFile is never used (libcufile is not even loaded).
    CompatOn,
    /// Compat mode OFF: cuFile is always used; without a direct path it
    /// runs its own compatibility mode (reads staged through host memory).
    CompatOff { direct_path: bool },
    /// AUTO, and cuFile cannot be used here.
    AutoUnavailable,
    /// AUTO, and cuFile could only run its own compatibility mode, which
    /// reads with O_DIRECT and so never from the page cache; our bounce
    /// buffers read cached data at memory speed and uncached data as fast.
    AutoNoDirectPath,
    /// AUTO, and cuFile has a direct path.
    AutoDirectPath,
}

impl fmt::Display for FileDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileDecision::CompatOn => "compat mode ON: cuFile is never used",
            FileDecision::CompatOff { direct_path: true } => {
                "compat mode OFF: cuFile is always used, and it has a direct path here"
            }
            FileDecision::CompatOff { direct_path: false } => {
                "compat mode OFF: cuFile is always used; it has no direct path here, so it runs \
                 its own compatibility mode (reads staged through host memory)"
            }
            FileDecision::AutoUnavailable => {
                "compat mode AUTO: cuFile cannot be used here, so POSIX through bounce buffers"
            }
            FileDecision::AutoNoDirectPath => {
                "compat mode AUTO: cuFile has no direct path here and its compatibility mode \
                 reads with O_DIRECT, bypassing the page cache; POSIX through bounce buffers \
                 reads cached data at memory speed, so POSIX is used"
            }
            FileDecision::AutoDirectPath => "compat mode AUTO: cuFile has a direct path here",
        })
    }
}

/// cuFile was chosen for a file but could not take it (AUTO then falls
/// back to POSIX for that file; OFF fails).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CuFileSetupFailure {
    /// The O_DIRECT descriptor cuFile registers could not be opened.
    DirectDescriptor {
        /// The OS error number.
        errno: Option<i32>,
        message: String,
    },
    /// The cuFile driver could not be opened.
    Driver { message: String },
    /// `cuFileHandleRegister` refused the file.
    Registration {
        /// cuFile's status code (`err`), when the call returned one.
        status: Option<u32>,
        message: String,
    },
}

impl fmt::Display for CuFileSetupFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CuFileSetupFailure::DirectDescriptor { message, .. } => {
                write!(
                    f,
                    "cannot open the O_DIRECT descriptor cuFile needs: {message}"
                )
            }
            CuFileSetupFailure::Driver { message } => {
                write!(f, "cannot open the cuFile driver: {message}")
            }
            CuFileSetupFailure::Registration { message, .. } => {
                write!(f, "cuFile cannot register the file: {message}")
            }
        }
    }
}

/// The per-file decision, kept for the life of the handle and shown in every
/// path report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileRouting {
    /// The compat mode asked for (settings or API).
    pub requested: CompatMode,
    /// What it resolved to: ON (POSIX) or OFF (cuFile). AUTO never remains.
    pub effective: CompatMode,
    /// The backend device-memory requests use (subject to `gds_threshold`).
    pub device_backend: Backend,
    /// Why.
    pub decision: FileDecision,
    /// What cuFile's availability was judged on (empty under compat mode ON).
    pub evidence: Vec<Reason>,
    /// cuFile was chosen but could not take this file, so it fell back to POSIX.
    pub fallback: Option<CuFileSetupFailure>,
}

impl FileRouting {
    /// cuFile was chosen but failed for this file (registration, say): under
    /// AUTO the file falls back to POSIX with the reason kept.
    pub fn fall_back(&mut self, failure: CuFileSetupFailure) {
        self.effective = CompatMode::On;
        self.device_backend = Backend::Posix;
        self.fallback = Some(failure);
    }

    /// Every reason, most decisive first, as lines for people.
    pub fn reasons(&self) -> Vec<String> {
        let mut lines = vec![self.decision.to_string()];
        if let Some(failure) = &self.fallback {
            lines.push(format!("falling back to POSIX: {failure}"));
        }
        lines.extend(self.evidence.iter().map(ToString::to_string));
        lines
    }
}

/// Compat mode OFF demands cuFile, and cuFile cannot work here.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CuFileRequired {
    /// cuFile is not usable on this machine.
    #[error(
        "compat mode is OFF (cuFile required) but cuFile cannot be used: {}",
        join(evidence)
    )]
    Unavailable { evidence: Vec<Reason> },
    /// cuFile is usable but could not take this file.
    #[error("compat mode is OFF (cuFile required) but {failure}")]
    SetupFailed { failure: CuFileSetupFailure },
}

fn join(reasons: &[Reason]) -> String {
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Decide, for one file, whether device-memory requests go to cuFile.
pub fn route_file(
    requested: CompatMode,
    cufile: &CuFileAvailability,
) -> Result<FileRouting, CuFileRequired> {
    let (effective, decision) = match requested {
        CompatMode::On => (CompatMode::On, FileDecision::CompatOn),
        CompatMode::Off if !cufile.usable => {
            return Err(CuFileRequired::Unavailable {
                evidence: cufile.evidence.clone(),
            });
        }
        CompatMode::Off => (
            CompatMode::Off,
            FileDecision::CompatOff {
                direct_path: cufile.direct_path,
            },
        ),
        CompatMode::Auto if !cufile.usable => (CompatMode::On, FileDecision::AutoUnavailable),
        CompatMode::Auto if !cufile.direct_path => (CompatMode::On, FileDecision::AutoNoDirectPath),
        CompatMode::Auto => (CompatMode::Off, FileDecision::AutoDirectPath),
    };
    Ok(FileRouting {
        requested,
        effective,
        device_backend: match effective {
            CompatMode::Off => Backend::Cufile,
            _ => Backend::Posix,
        },
        decision,
        evidence: cufile.evidence.clone(),
        fallback: None,
    })
}

/// Why one request takes its backend.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RouteReason {
    /// Host memory is always read and written with POSIX.
    HostMemory,
    /// The file sends device memory through pinned bounce buffers.
    FileRoutedToPosix { effective_compat_mode: CompatMode },
    /// A device request below `gds_threshold` is one POSIX call through a
    /// bounce buffer on the calling thread (KvikIO's shortcut).
    BelowGdsThreshold { size: u64, gds_threshold: u64 },
    /// A device request of at least `gds_threshold` on a file routed to cuFile.
    CuFile { size: u64, gds_threshold: u64 },
}

impl fmt::Display for RouteReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteReason::HostMemory => {
                f.write_str("host memory is always read and written with POSIX")
            }
            RouteReason::FileRoutedToPosix {
                effective_compat_mode,
            } => write!(
                f,
                "device memory through pinned bounce buffers (effective compat mode {effective_compat_mode})"
            ),
            RouteReason::BelowGdsThreshold {
                size,
                gds_threshold,
            } => write!(
                f,
                "{} is below gds_threshold ({}): one POSIX call through a bounce buffer on the \
                 calling thread",
                bytes_text(*size),
                bytes_text(*gds_threshold)
            ),
            RouteReason::CuFile {
                size,
                gds_threshold,
            } => write!(
                f,
                "cuFile ({} is at least gds_threshold, {})",
                bytes_text(*size),
                bytes_text(*gds_threshold)
            ),
        }
    }
}

/// The per-request decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RequestRoute {
    /// Who moves the bytes.
    pub backend: Backend,
    /// Why.
    pub reason: RouteReason,
}

/// Decide the backend for one request of `size` bytes into `memory`.
pub fn route_request(
    file: &FileRouting,
    memory: MemoryKind,
    size: u64,
    gds_threshold: u64,
) -> RequestRoute {
    let (backend, reason) = match memory {
        MemoryKind::Host => (Backend::Posix, RouteReason::HostMemory),
        // KvikIO's shortcut comes first: whatever the file's routing, a small
        // device request is one synchronous POSIX call.
        MemoryKind::Device { .. } if size < gds_threshold => (
            Backend::Posix,
            RouteReason::BelowGdsThreshold {
                size,
                gds_threshold,
            },
        ),
        MemoryKind::Device { .. } if file.device_backend == Backend::Posix => (
            Backend::Posix,
            RouteReason::FileRoutedToPosix {
                effective_compat_mode: file.effective,
            },
        ),
        MemoryKind::Device { .. } => (
            Backend::Cufile,
            RouteReason::CuFile {
                size,
                gds_threshold,
            },
        ),
    };
    RequestRoute { backend, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn availability(usable: bool, direct_path: bool) -> CuFileAvailability {
        CuFileAvailability {
            usable,
            direct_path,
            evidence: vec![Reason::NoUdev],
        }
    }

    const DEVICE: MemoryKind = MemoryKind::Device { ordinal: 0 };

    #[test]
    fn on_never_uses_cufile_even_with_a_direct_path() {
        let file = route_file(CompatMode::On, &availability(true, true)).unwrap();
        assert_eq!(
            (file.effective, file.device_backend, file.decision),
            (CompatMode::On, Backend::Posix, FileDecision::CompatOn)
        );
        assert_eq!(
            route_request(&file, DEVICE, 1 << 30, 16 << 10).reason,
            RouteReason::FileRoutedToPosix {
                effective_compat_mode: CompatMode::On
            }
        );
    }

    #[test]
    fn off_uses_cufile_even_in_its_compat_mode_and_fails_when_unusable() {
        let file = route_file(CompatMode::Off, &availability(true, false)).unwrap();
        assert_eq!(file.device_backend, Backend::Cufile);
        assert_eq!(
            file.decision,
            FileDecision::CompatOff { direct_path: false }
        );
        let err = route_file(CompatMode::Off, &availability(false, false)).unwrap_err();
        assert_eq!(
            err,
            CuFileRequired::Unavailable {
                evidence: vec![Reason::NoUdev]
            }
        );
    }

    #[test]
    fn auto_takes_cufile_only_with_a_direct_path() {
        let cases = [
            (
                (true, false),
                FileDecision::AutoNoDirectPath,
                Backend::Posix,
            ),
            (
                (false, false),
                FileDecision::AutoUnavailable,
                Backend::Posix,
            ),
            ((true, true), FileDecision::AutoDirectPath, Backend::Cufile),
        ];
        for ((usable, direct), decision, backend) in cases {
            let file = route_file(CompatMode::Auto, &availability(usable, direct)).unwrap();
            assert_eq!((file.decision, file.device_backend), (decision, backend));
            assert_eq!(file.evidence, vec![Reason::NoUdev]);
        }
    }

    #[test]
    fn host_memory_is_always_posix_and_small_device_requests_skip_cufile() {
        let file = route_file(CompatMode::Off, &availability(true, true)).unwrap();
        let host = route_request(&file, MemoryKind::Host, 1 << 30, 16 << 10);
        assert_eq!(
            (host.backend, host.reason),
            (Backend::Posix, RouteReason::HostMemory)
        );
        let small = route_request(&file, DEVICE, (16 << 10) - 1, 16 << 10);
        assert_eq!(
            small.reason,
            RouteReason::BelowGdsThreshold {
                size: (16 << 10) - 1,
                gds_threshold: 16 << 10
            }
        );
        assert_eq!(
            route_request(&file, DEVICE, 16 << 10, 16 << 10).backend,
            Backend::Cufile
        );
        // The shortcut holds whatever the file's routing (KvikIO checks the
        // threshold before anything else).
        let posix = route_file(CompatMode::On, &availability(true, true)).unwrap();
        assert!(matches!(
            route_request(&posix, DEVICE, 100, 16 << 10).reason,
            RouteReason::BelowGdsThreshold { .. }
        ));
    }

    #[test]
    fn a_registration_failure_falls_back_with_its_reason() {
        let mut file = route_file(CompatMode::Auto, &availability(true, true)).unwrap();
        let failure = CuFileSetupFailure::Registration {
            status: Some(5027),
            message: "cuFileHandleRegister failed".into(),
        };
        file.fall_back(failure.clone());
        assert_eq!(
            (file.effective, file.device_backend),
            (CompatMode::On, Backend::Posix)
        );
        assert_eq!(file.fallback, Some(failure));
        assert!(file.reasons()[1].starts_with("falling back to POSIX"));
    }

    #[test]
    fn reasons_serialize_with_stable_tags() {
        let json = serde_json::to_value(RouteReason::BelowGdsThreshold {
            size: 1,
            gds_threshold: 2,
        })
        .unwrap();
        assert_eq!(json["kind"], "below_gds_threshold");
        let json = serde_json::to_value(FileDecision::CompatOff { direct_path: false }).unwrap();
        assert_eq!(json["kind"], "compat_off");
        assert_eq!(json["direct_path"], false);
    }
}
