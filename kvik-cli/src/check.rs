//! `kvik check [PATH] [--json]`: GDS readiness with evidence and a verdict.
//! Exits 0 whatever the verdict (the check itself succeeded).

use std::fmt::Write as _;
use std::path::PathBuf;

use cufile_config::{FileKind, LocationSource};
use gds_core::log::LogLocation;
use gds_core::readiness::{self, DriverFact, LibcufileFact, Readiness, RegistrationFact};

use crate::CliError;
use crate::error::print_json;
use crate::output::escaped;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A file or directory to check: filesystem type, O_DIRECT support.
    pub path: Option<PathBuf>,
    /// Print the report as JSON (an object with a `verdict` key).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    if let Some(path) = &args.path {
        check_path(path)?;
    }
    let report = readiness::check(args.path.as_deref());
    if args.json {
        print_json(&report)
    } else {
        crate::output::print(&render(&report))
    }
}

/// PATH must be a directory (where files would be created) or a file
/// cuFile could open: a regular file or a block device. A FIFO, a socket or
/// a character device is refused before anything opens it: cuFile registers
/// none of them, and opening a FIFO (the O_DIRECT probe does) waits for a
/// writer forever.
fn check_path(path: &std::path::Path) -> Result<(), CliError> {
    match crate::input::kind("PATH", path)? {
        None | Some(FileKind::Directory | FileKind::BlockDevice) => Ok(()),
        Some(kind) => Err(CliError::Usage(format!(
            "PATH {} is {kind}: kvik check takes a directory, a regular file or a block \
             device (cuFile reads and writes those; opening this would not tell, and a FIFO's \
             open waits for a writer)",
            escaped(path)
        ))),
    }
}

/// The human-readable report.
pub fn render(r: &Readiness) -> String {
    let mut out = String::from("GPUDirect Storage readiness\n\n");
    let mut row = |label: &str, text: String| {
        let mut lines = text.lines();
        let _ = writeln!(out, "  {label:<13} {}", lines.next().unwrap_or(""));
        for line in lines {
            let _ = writeln!(out, "  {:<13} {line}", "");
        }
    };

    row(
        "libcufile",
        match &r.libcufile {
            LibcufileFact::Loaded {
                path,
                found_by,
                version,
                version_error,
                missing_features,
            } => {
                let mut text = format!(
                    "loaded {path} (libcufile {}, found by {found_by})",
                    version.as_deref().unwrap_or("version unknown")
                );
                if let Some(e) = version_error {
                    let _ = write!(text, "\nversion unavailable: {e}");
                }
                for f in missing_features {
                    let _ = write!(text, "\nlacks {f}");
                }
                text
            }
            LibcufileFact::Missing { reason } => format!("not available: {reason}"),
        },
    );
    row(
        "CUDA driver",
        match &r.cuda {
            Ok(driver) => format!(
                "{} (driver API {}), {} GPU{}: {}",
                driver
                    .library
                    .as_ref()
                    .map(|p| escaped(&p).to_string())
                    .unwrap_or_else(|| "libcuda.so.1".into()),
                driver.version_string(),
                driver.devices.len(),
                if driver.devices.len() == 1 { "" } else { "s" },
                driver.devices.join(", ")
            ),
            Err(reason) => format!("not available: {reason}"),
        },
    );
    row(
        "cuFile driver",
        match &r.driver {
            DriverFact::Opened {
                properties,
                direct_path,
                compat_mode_allowed,
                log,
            } => {
                let mut text = format!(
                    "opened: direct path {}, compat mode {}",
                    direct_path
                        .map(|path| path.to_string())
                        .unwrap_or_else(|| "none".into()),
                    if *compat_mode_allowed {
                        "allowed"
                    } else {
                        "disallowed"
                    }
                );
                if !properties.supported_storage.is_empty() {
                    let _ = write!(text, "\nstorage: {}", properties.supported_storage);
                }
                let _ = write!(text, "\nlog: {}", describe_log(log));
                text
            }
            DriverFact::NotOpened { reason } => format!("not opened: {reason}"),
            DriverFact::Failed { error } => format!("failed to open: {error}"),
        },
    );
    row(
        "nvidia-fs",
        if r.nvidia_fs.loaded {
            format!(
                "loaded ({})",
                r.nvidia_fs.version.as_deref().unwrap_or("version unknown")
            )
        } else {
            format!(
                "not loaded ({} missing)",
                gds_core::platform::NVIDIA_FS_VERSION_FILE
            )
        },
    );
    row(
        "/run/udev",
        if r.udev {
            "present".into()
        } else {
            "missing".into()
        },
    );
    row("WSL", if r.wsl { "yes".into() } else { "no".into() });
    row("cufile.json", {
        let location = &r.config.location;
        let mut text = match (&location.source, &location.path) {
            (LocationSource::BuiltInDefaults, _) => format!(
                "none: built-in defaults ({} unset, {} missing)",
                cufile_config::ENV_CONFIG_PATH,
                cufile_config::DEFAULT_CONFIG_PATH
            ),
            (source, Some(path)) if location.exists => {
                format!("{} (from {source})", escaped(&path))
            }
            (source, Some(path)) => format!(
                "{} (from {source}) {}",
                escaped(&path),
                location.why_not_read().unwrap_or("cannot be read")
            ),
            (source, None) => format!("from {source}"),
        };
        if let Some(summary) = &r.config.summary {
            let _ = write!(text, "\nvalidation: {summary}");
        }
        if let Some(first) = &r.config.first_error {
            let _ = write!(text, "\nfirst error: {}", readiness::diagnostic_line(first));
        }
        if let Some(e) = &r.config.read_error {
            let _ = write!(text, "\ncannot read: {e}");
        }
        let (exec, src) = (&r.config.execution.config, &r.config.execution.sources);
        let _ = write!(
            text,
            "\nexecution: parallel_io {} ({}), max_io_threads {} ({}), max_request_parallelism {} ({}), \
                 min_io_threshold_size_kb {} ({})",
            exec.parallel_io,
            src.parallel_io,
            exec.max_io_threads,
            src.max_io_threads,
            exec.max_request_parallelism,
            src.max_request_parallelism,
            exec.min_io_threshold_size_kb,
            src.min_io_threshold_size_kb
        );
        text
    });
    if let Some(p) = &r.path {
        let fs = match &p.filesystem {
            Ok(fs) => format!("{} (statfs magic 0x{:x})", fs.name, fs.magic),
            Err(e) => format!("filesystem unknown: {e}"),
        };
        let direct = &p.direct_io;
        let registration = match &p.registration {
            RegistrationFact::Registered { file } => {
                format!("cuFile registered {}", escaped(&file))
            }
            RegistrationFact::Failed { file, error } => {
                format!("cuFile cannot register {}: {error}", escaped(&file))
            }
            RegistrationFact::NotTried { reason } => {
                format!("cuFile registration not tried: {reason}")
            }
        };
        row(
            "path",
            format!("{}\n{fs}\n{direct}\n{registration}", escaped(&p.path)),
        );
    }

    let _ = writeln!(out, "\nverdict: {}", r.verdict.kind);
    for reason in &r.verdict.reasons {
        let _ = writeln!(out, "  - {reason}");
    }
    out
}

fn describe_log(log: &LogLocation) -> String {
    match log {
        LogLocation::Environment { path } => format!("{} (CUFILE_LOGFILE_PATH)", escaped(&path)),
        LogLocation::ConfigDir { dir } => format!("in {} (logging.dir)", escaped(&dir)),
        LogLocation::Redirected { path } => escaped(&path).to_string(),
        LogLocation::WorkingDirectory { path } => format!("{} (cuFile's default)", escaped(&path)),
    }
}

#[cfg(test)]
mod tests {
    use cufile_config::{ConfigLocation, LocationSource};
    use gds_core::driver::{
        ControlFlags, DirectPath, DriverProperties, FeatureFlags, StorageFlags,
    };
    use gds_core::platform::{DirectIo, DirectIoStep, NvidiaFs};
    use gds_core::readiness::{ConfigFact, DriverFact, Facts, LibcufileFact, PathFacts};

    use super::*;

    /// A GPU machine with nvidia-fs, and a cufile.json with one error.
    fn facts(config: &std::path::Path) -> Facts {
        Facts {
            libcufile: LibcufileFact::Loaded {
                path: "/usr/local/cuda/lib64/libcufile.so.1.15.1".into(),
                found_by: "default search".into(),
                version: Some("1.15".into()),
                version_error: None,
                missing_features: vec![],
            },
            cuda: Ok(gds_core::cuda::CudaDriver {
                library: None,
                driver_version: 13000,
                devices: vec!["GPU 0".into()],
            }),
            driver: DriverFact::Opened {
                properties: DriverProperties {
                    nvfs_version: Some((2, 26)),
                    poll_threshold_size: 4,
                    max_direct_io_size: 16384,
                    supported_storage: StorageFlags::NVME | StorageFlags::NFS,
                    control: ControlFlags::ALLOW_COMPAT_MODE,
                    features: FeatureFlags::BATCH_IO,
                    max_device_cache_size: 0,
                    per_buffer_cache_size: 0,
                    max_device_pinned_mem_size: 0,
                    max_batch_io_size: 0,
                    max_batch_io_timeout_msecs: 0,
                },
                direct_path: Some(DirectPath::NvidiaFs {
                    major: 2,
                    minor: 26,
                }),
                compat_mode_allowed: true,
                log: LogLocation::Redirected {
                    path: "/tmp/kvik-0/cufile-1.log".into(),
                },
            },
            nvidia_fs: NvidiaFs {
                loaded: true,
                version: Some("2.26".into()),
            },
            udev: true,
            wsl: false,
            config: ConfigFact::read(ConfigLocation {
                source: LocationSource::Environment,
                path: Some(config.to_path_buf()),
                exists: true,
            }),
            path: Some(PathFacts {
                path: "/data".into(),
                filesystem: Ok(gds_core::platform::filesystem_from_magic(0xEF53)),
                direct_io: DirectIo::Supported {
                    probe: DirectIoStep::Write,
                },
                registration: RegistrationFact::Registered {
                    file: "/data/.kvik-register-probe-1".into(),
                },
            }),
        }
    }

    #[test]
    fn typed_facts_print_as_sentences() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("cufile.json");
        std::fs::write(
            &config,
            "{\n  \"execution\": { \"max_io_threads\": -1 }\n}\n",
        )
        .unwrap();
        let text = render(&facts(&config).into_readiness());
        for line in [
            "  cuFile driver opened: direct path nvidia-fs 2.26, compat mode allowed",
            "                storage: nfs, nvme",
            "                O_DIRECT works (created a file with O_DIRECT and wrote 4 KiB)",
            "                cuFile registered /data/.kvik-register-probe-1",
            "verdict: POSIX only",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in:\n{text}"
            );
        }
        let first_error = text
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("first error: "))
            .expect("the config's first error");
        assert!(first_error.starts_with("2:"), "{first_error}");
        assert!(
            first_error.contains("execution.max_io_threads = "),
            "{first_error}"
        );
        let reason = text
            .lines()
            .find_map(|l| l.strip_prefix("  - "))
            .expect("a reason");
        assert!(
            reason.contains("has 1 error(s), so cuFile refuses to start"),
            "{reason}"
        );
    }
}
