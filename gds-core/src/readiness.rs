//! GDS readiness: every fact that decides whether cuFile can be used on this
//! machine (and for one path), with the evidence, and a verdict.
//!
//! The cuFile driver is opened only where that is safe (a CUDA driver with a
//! GPU answered, libcufile loaded): then the report also has the driver's own
//! view (nvidia-fs version, PCI P2PDMA, compat mode allowed) and, for a path,
//! whether cuFile can register a file there — with cufile.log's explanation
//! when it cannot.

use std::path::{Path, PathBuf};

use cufile_config::{ConfigLocation, EffectiveExecution, ParsedConfig, ValidateOptions};
use cufile_sys::CuFileLibrary;
use serde::Serialize;

use crate::cuda::{self, CudaDriver, CudaUnavailable};
use crate::driver::{Driver, DriverProperties};
use crate::handle::{CuFileHandle, OpenFlags};
use crate::log::LogLocation;
use crate::platform::{self, DirectIo, FileSystem, NvidiaFs};

/// What the loader found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LibcufileFact {
    Loaded {
        /// The file the dynamic loader opened.
        path: String,
        /// How it was found (`KVIK_CUFILE_LIBRARY` or the default search).
        found_by: String,
        /// `cuFileGetVersion`, e.g. "1.15".
        version: Option<String>,
        version_error: Option<String>,
        /// Optional features the library lacks, with the missing symbols.
        missing_features: Vec<String>,
    },
    Missing {
        reason: String,
    },
}

/// What the cuFile driver said when opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DriverFact {
    /// Not opened, and why (opening it without a GPU would hang).
    NotOpened {
        reason: String,
    },
    Opened {
        properties: DriverProperties,
        /// What gives cuFile a direct path, per the driver.
        direct_path: Option<String>,
        /// Whether cuFile may run its compatibility mode (`properties.allow_compat_mode`).
        compat_mode_allowed: bool,
        log: LogLocation,
    },
    Failed {
        error: String,
    },
}

/// Whether cuFile could register a file at the checked path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RegistrationFact {
    NotTried { reason: String },
    Registered { file: PathBuf },
    Failed { file: PathBuf, error: String },
}

/// The cufile.json cuFile will read, checked the way cuFile reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigFact {
    #[serde(flatten)]
    pub location: ConfigLocation,
    /// `N errors, M warnings`, when a file was read.
    pub summary: Option<String>,
    pub errors: usize,
    /// The first error (`line:col: path = message`): cuFile refuses a file with errors.
    pub first_error: Option<String>,
    /// Why the file could not be read, if it could not.
    pub read_error: Option<String>,
    /// The `execution` settings cuFile will use here, each with its source.
    pub execution: EffectiveExecution,
}

impl ConfigFact {
    pub fn read(location: ConfigLocation) -> ConfigFact {
        let no_file = |read_error| ConfigFact {
            location: location.clone(),
            summary: None,
            errors: 0,
            first_error: None,
            read_error,
            execution: ParsedConfig::parse("{}").execution(),
        };
        let Some(path) = location.path.as_ref().filter(|_| location.exists) else {
            return no_file(None);
        };
        match ParsedConfig::read(path, &ValidateOptions::default()) {
            Ok(parsed) => ConfigFact {
                summary: Some(cufile_config::summary(&parsed.diagnostics)),
                errors: parsed.error_count(),
                first_error: parsed
                    .diagnostics
                    .iter()
                    .find(|d| d.is_error())
                    .map(|d| format!("{}:{}: {} = {}", d.line, d.column, d.path, d.message)),
                read_error: None,
                execution: parsed.execution(),
                location,
            },
            Err(e) => no_file(Some(e.to_string())),
        }
    }
}

/// Facts about one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathFacts {
    pub path: PathBuf,
    #[serde(serialize_with = "outcome")]
    pub filesystem: Result<FileSystem, String>,
    pub direct_io: DirectIo,
    pub registration: RegistrationFact,
}

/// The overall answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// cuFile can reach storage without staging through host memory.
    DirectPathPossible,
    /// cuFile works, but only in its own compatibility mode (host staging with O_DIRECT).
    CompatModeOnly,
    /// cuFile cannot be used; only the POSIX path is available.
    PosixOnly,
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VerdictKind::DirectPathPossible => "direct path possible",
            VerdictKind::CompatModeOnly => "cuFile compat mode only",
            VerdictKind::PosixOnly => "POSIX only",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    /// Every reason behind the verdict, most decisive first.
    pub reasons: Vec<String>,
}

/// The full readiness report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Readiness {
    pub libcufile: LibcufileFact,
    #[serde(serialize_with = "outcome")]
    pub cuda: Result<CudaDriver, CudaUnavailable>,
    pub driver: DriverFact,
    pub nvidia_fs: NvidiaFs,
    pub udev: bool,
    pub wsl: bool,
    pub config: ConfigFact,
    pub path: Option<PathFacts>,
    pub verdict: Verdict,
}

/// Serialize a `Result` as `{"ok": value}` or `{"error": "message"}`.
fn outcome<S, T, E>(result: &Result<T, E>, serializer: S) -> Result<S::Ok, S::Error>
where
    S: serde::Serializer,
    T: Serialize,
    E: std::fmt::Display,
{
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(1))?;
    match result {
        Ok(value) => map.serialize_entry("ok", value)?,
        Err(error) => map.serialize_entry("error", &error.to_string())?,
    }
    map.end()
}

/// Collect the facts for this machine, and for `path` when given, opening
/// the cuFile driver where that is safe (it is closed again afterwards
/// unless another `Driver` keeps it open).
pub fn check(path: Option<&Path>) -> Readiness {
    check_with(path, None)
}

/// [`check`], using an already open driver when the caller has one.
pub fn check_with(path: Option<&Path>, driver: Option<&Driver>) -> Readiness {
    let library = CuFileLibrary::load();
    let libcufile = match library {
        Ok(lib) => libcufile_fact(lib),
        Err(ref e) => LibcufileFact::Missing {
            reason: e.to_string(),
        },
    };
    let cuda = cuda::probe().cloned();
    let opened: Result<Driver, DriverFact> = match (driver, &library, &cuda) {
        (Some(d), _, _) => Ok(d.clone()),
        (None, Err(_), _) => Err(DriverFact::NotOpened {
            reason: "libcufile is not available".into(),
        }),
        (None, _, Err(_)) => Err(DriverFact::NotOpened {
            reason: "no CUDA driver with a GPU (cuFileDriverOpen would never return)".into(),
        }),
        (None, Ok(_), Ok(_)) => Driver::open().map_err(|e| DriverFact::Failed {
            error: e.to_string(),
        }),
    };
    let driver_fact = match &opened {
        Ok(driver) => match driver.properties() {
            Ok(properties) => DriverFact::Opened {
                direct_path: properties.direct_path(),
                compat_mode_allowed: properties.control.contains(&"allow_compat_mode"),
                properties,
                log: driver.log().clone(),
            },
            Err(e) => DriverFact::Failed {
                error: e.to_string(),
            },
        },
        Err(fact) => fact.clone(),
    };
    let path = path.map(|p| {
        let direct_io = platform::direct_io(p);
        let registration = match (&opened, &direct_io) {
            (Err(_), _) => RegistrationFact::NotTried {
                reason: "the cuFile driver is not open".into(),
            },
            (_, DirectIo::Unsupported { .. }) => RegistrationFact::NotTried {
                reason: "O_DIRECT is not supported here".into(),
            },
            (Ok(driver), _) => try_register(driver, p),
        };
        PathFacts {
            path: platform::absolute(p),
            filesystem: platform::filesystem(p).map_err(|e| e.to_string()),
            direct_io,
            registration,
        }
    });
    let facts = Facts {
        libcufile,
        cuda,
        driver: driver_fact,
        nvidia_fs: platform::nvidia_fs(),
        udev: platform::udev_present(),
        wsl: platform::is_wsl(),
        config: ConfigFact::read(ConfigLocation::from_env()),
        path,
    };
    facts.into_readiness()
}

/// Register the file at `path`, or a probe file created in the directory `path`.
fn try_register(driver: &Driver, path: &Path) -> RegistrationFact {
    let (file, probe) = if path.is_dir() {
        (
            path.join(format!(".kvik-register-probe-{}", std::process::id())),
            true,
        )
    } else {
        (path.to_path_buf(), false)
    };
    let flags = if probe {
        OpenFlags::CREATE
    } else {
        OpenFlags::READ
    };
    let result = CuFileHandle::open(driver, &file, flags);
    if probe {
        let _ = std::fs::remove_file(&file);
    }
    match result {
        Ok(handle) => {
            drop(handle);
            RegistrationFact::Registered {
                file: platform::absolute(&file),
            }
        }
        Err(e) => RegistrationFact::Failed {
            file: platform::absolute(&file),
            error: e.to_string(),
        },
    }
}

fn libcufile_fact(lib: &CuFileLibrary) -> LibcufileFact {
    let (version, version_error) = match lib.version() {
        Ok(v) => (Some(v.to_string()), None),
        Err(e) => (None, Some(e)),
    };
    let missing_features = lib
        .features()
        .into_iter()
        .filter(|f| !f.available())
        .map(|f| {
            format!(
                "{} (missing {})",
                f.feature.description(),
                f.missing.join(", ")
            )
        })
        .collect();
    LibcufileFact::Loaded {
        path: lib.display_name(),
        found_by: lib.origin().to_string(),
        version,
        version_error,
        missing_features,
    }
}

/// The facts before judgement; separated so the verdict rules can be tested
/// with any combination of facts.
#[derive(Debug, Clone)]
pub struct Facts {
    pub libcufile: LibcufileFact,
    pub cuda: Result<CudaDriver, CudaUnavailable>,
    pub driver: DriverFact,
    pub nvidia_fs: NvidiaFs,
    pub udev: bool,
    pub wsl: bool,
    pub config: ConfigFact,
    pub path: Option<PathFacts>,
}

impl Facts {
    pub fn into_readiness(self) -> Readiness {
        let verdict = self.verdict();
        Readiness {
            libcufile: self.libcufile,
            cuda: self.cuda,
            driver: self.driver,
            nvidia_fs: self.nvidia_fs,
            udev: self.udev,
            wsl: self.wsl,
            config: self.config,
            path: self.path,
            verdict,
        }
    }

    /// The rules:
    /// * POSIX only when cuFile cannot run at all: no libcufile, no CUDA
    ///   driver or GPU, no `/run/udev`, WSL (KvikIO's availability checks);
    ///   the driver failed to open; the path refuses O_DIRECT or cuFile cannot
    ///   register a file there; or there is no direct path and the
    ///   configuration forbids cuFile's compatibility mode;
    /// * otherwise compat mode only when nothing gives cuFile a direct path
    ///   (nvidia-fs, or PCI P2PDMA per the driver), or the path's filesystem
    ///   is not one GDS supports;
    /// * otherwise a direct path is possible.
    pub fn verdict(&self) -> Verdict {
        let mut blockers = Vec::new();
        if let LibcufileFact::Missing { reason } = &self.libcufile {
            blockers.push(reason.clone());
        }
        if let Err(reason) = &self.cuda {
            blockers.push(reason.to_string());
        }
        if !self.udev {
            blockers.push(
                "/run/udev is missing: cuFile cannot identify filesystems (KvikIO requires it)"
                    .into(),
            );
        }
        if self.wsl {
            blockers.push("running under WSL: cuFile is not supported there".into());
        }
        if let Some(first) = &self.config.first_error {
            blockers.push(format!(
                "{} has {} error(s), so cuFile refuses to start; first: {first}",
                self.config
                    .location
                    .path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                self.config.errors
            ));
        }
        if let DriverFact::Failed { error } = &self.driver {
            blockers.push(format!("the cuFile driver did not open: {error}"));
        }
        if let Some(path) = &self.path {
            if let DirectIo::Unsupported { error, .. } = &path.direct_io {
                blockers.push(format!(
                    "{}: O_DIRECT is not supported ({error}); cuFile cannot register files there",
                    path.path.display()
                ));
            }
            if let RegistrationFact::Failed { error, .. } = &path.registration {
                blockers.push(format!(
                    "cuFile cannot register a file at {}: {error}",
                    path.path.display()
                ));
            }
        }

        // The driver's view of the direct path wins over /proc when we have it.
        let direct_path = match &self.driver {
            DriverFact::Opened { direct_path, .. } => direct_path.clone(),
            _ => self.nvidia_fs.loaded.then(|| {
                format!(
                    "nvidia-fs {}",
                    self.nvidia_fs
                        .version
                        .as_deref()
                        .unwrap_or("(version unknown)")
                )
            }),
        };
        let mut no_direct = Vec::new();
        if direct_path.is_none() {
            no_direct.push(format!(
                "nvidia-fs is not loaded ({} missing){}: cuFile has no direct path and can only run in its \
                 compatibility mode",
                platform::NVIDIA_FS_VERSION_FILE,
                if matches!(self.driver, DriverFact::Opened { .. }) { " and PCI P2PDMA is not supported" } else { "" }
            ));
            if let DriverFact::Opened {
                compat_mode_allowed: false,
                ..
            } = &self.driver
            {
                blockers.push(
                    "cuFile has no direct path and its compatibility mode is disabled \
                     (properties.allow_compat_mode is false): cuFile would refuse I/O"
                        .into(),
                );
            }
        }
        if let Some(PathFacts {
            path,
            filesystem: Ok(fs),
            ..
        }) = &self.path
            && !fs.gds_capable
        {
            no_direct.push(format!(
                "{}: filesystem {} has no GDS direct path",
                path.display(),
                fs.name
            ));
        }

        if !blockers.is_empty() {
            blockers.extend(no_direct);
            return Verdict {
                kind: VerdictKind::PosixOnly,
                reasons: blockers,
            };
        }
        if !no_direct.is_empty() {
            return Verdict {
                kind: VerdictKind::CompatModeOnly,
                reasons: no_direct,
            };
        }
        let mut reasons = vec![format!(
            "cuFile has a direct path: {}",
            direct_path.unwrap_or_default()
        )];
        if let Some(PathFacts {
            path,
            filesystem: Ok(fs),
            ..
        }) = &self.path
        {
            reasons.push(format!("{}: {} with O_DIRECT", path.display(), fs.name));
        }
        Verdict {
            kind: VerdictKind::DirectPathPossible,
            reasons,
        }
    }
}

#[cfg(test)]
mod tests {
    use cufile_config::LocationSource;

    use super::*;

    fn gpu_machine_without_nvidia_fs() -> Facts {
        Facts {
            libcufile: LibcufileFact::Loaded {
                path: "/usr/local/cuda/lib64/libcufile.so.1.15.1".into(),
                found_by: "default search".into(),
                version: Some("1.15".into()),
                version_error: None,
                missing_features: vec![],
            },
            cuda: Ok(CudaDriver {
                library: None,
                driver_version: 13000,
                devices: vec!["NVIDIA H200".into()],
            }),
            driver: DriverFact::NotOpened {
                reason: "test".into(),
            },
            nvidia_fs: NvidiaFs {
                loaded: false,
                version: None,
            },
            udev: true,
            wsl: false,
            config: ConfigFact::read(ConfigLocation {
                source: LocationSource::BuiltInDefaults,
                path: None,
                exists: false,
            }),
            path: None,
        }
    }

    fn opened(direct_path: Option<&str>, compat_mode_allowed: bool) -> DriverFact {
        let raw = cufile_sys::bindings::CUfileDrvProps_t::default();
        DriverFact::Opened {
            properties: DriverProperties::from_raw(&raw),
            direct_path: direct_path.map(String::from),
            compat_mode_allowed,
            log: LogLocation::Redirected {
                path: "/tmp/kvik-0/cufile-1.log".into(),
            },
        }
    }

    fn ext4_path(direct_io: DirectIo, registration: RegistrationFact) -> Option<PathFacts> {
        Some(PathFacts {
            path: "/data/model.bin".into(),
            filesystem: Ok(platform::filesystem_from_magic(0xEF53)),
            direct_io,
            registration,
        })
    }

    const SUPPORTED: fn() -> DirectIo = || DirectIo::Supported {
        probe: "opened with O_DIRECT and read 4 KiB".into(),
    };

    #[test]
    fn gpu_without_nvidia_fs_is_compat_mode_only() {
        let v = gpu_machine_without_nvidia_fs().verdict();
        assert_eq!(v.kind, VerdictKind::CompatModeOnly);
        assert_eq!(v.reasons.len(), 1);
        assert!(v.reasons[0].contains("nvidia-fs is not loaded"), "{v:?}");

        let mut with_driver = gpu_machine_without_nvidia_fs();
        with_driver.driver = opened(None, true);
        let v = with_driver.verdict();
        assert_eq!(v.kind, VerdictKind::CompatModeOnly);
        assert!(
            v.reasons[0].contains("PCI P2PDMA is not supported"),
            "{v:?}"
        );
    }

    #[test]
    fn a_config_cufile_refuses_blocks_cufile_and_names_the_key() {
        let dir = std::env::temp_dir().join(format!("gds-core-readiness-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cufile.json");
        std::fs::write(
            &file,
            "{\n  \"execution\": { \"max_request_parallelism\": 16 }\n}\n",
        )
        .unwrap();
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.config = ConfigFact::read(ConfigLocation {
            source: cufile_config::LocationSource::Environment,
            path: Some(file.clone()),
            exists: true,
        });
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(facts.config.errors, 1);
        let v = facts.verdict();
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert!(
            v.reasons[0].contains("execution.max_request_parallelism"),
            "{v:?}"
        );
        assert!(v.reasons[0].contains("2:"), "names the line: {v:?}");
    }

    #[test]
    fn compat_mode_disabled_without_a_direct_path_means_posix_only() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.driver = opened(None, false);
        let v = facts.verdict();
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert!(v.reasons[0].contains("allow_compat_mode is false"), "{v:?}");
    }

    #[test]
    fn p2pdma_per_the_driver_is_a_direct_path() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.driver = opened(Some("PCI P2PDMA"), false);
        facts.path = ext4_path(
            SUPPORTED(),
            RegistrationFact::Registered {
                file: "/data/model.bin".into(),
            },
        );
        let v = facts.verdict();
        assert_eq!(v.kind, VerdictKind::DirectPathPossible, "{v:?}");
        assert!(v.reasons[0].contains("PCI P2PDMA"));
    }

    #[test]
    fn cpu_machine_is_posix_only_with_every_reason() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.cuda = Err(CudaUnavailable::LibraryMissing {
            message: "libcuda.so.1: cannot open shared object file".into(),
        });
        let v = facts.verdict();
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert!(v.reasons[0].contains("no CUDA driver"), "{v:?}");
        assert!(
            v.reasons
                .iter()
                .any(|r| r.contains("nvidia-fs is not loaded")),
            "{v:?}"
        );
    }

    #[test]
    fn missing_udev_or_wsl_blocks_cufile() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.udev = false;
        facts.wsl = true;
        let v = facts.verdict();
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert!(v.reasons[0].contains("/run/udev"));
        assert!(v.reasons[1].contains("WSL"));
    }

    #[test]
    fn a_failed_registration_blocks_the_path_with_its_explanation() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.driver = opened(None, true);
        facts.path = ext4_path(
            SUPPORTED(),
            RegistrationFact::Failed {
                file: "/data/model.bin".into(),
                error:
                    "cuFileHandleRegister failed: 5027 …; udev property not found: ID_FS_USAGE vda"
                        .into(),
            },
        );
        let v = facts.verdict();
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert!(v.reasons[0].contains("udev property not found"), "{v:?}");
    }

    #[test]
    fn nvidia_fs_on_ext4_allows_the_direct_path() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.nvidia_fs = NvidiaFs {
            loaded: true,
            version: Some("version: 2.26".into()),
        };
        facts.path = ext4_path(
            SUPPORTED(),
            RegistrationFact::NotTried {
                reason: "test".into(),
            },
        );
        let v = facts.verdict();
        assert_eq!(v.kind, VerdictKind::DirectPathPossible, "{v:?}");

        // The same machine, but the file lives on tmpfs.
        let mut on_tmpfs = facts.clone();
        on_tmpfs.path.as_mut().unwrap().filesystem =
            Ok(platform::filesystem_from_magic(0x0102_1994));
        assert_eq!(on_tmpfs.verdict().kind, VerdictKind::CompatModeOnly);

        // And a filesystem that refuses O_DIRECT.
        let mut no_odirect = facts;
        no_odirect.path.as_mut().unwrap().direct_io = DirectIo::Unsupported {
            probe: "opened".into(),
            errno: libc::EINVAL,
            error: "Invalid argument".into(),
        };
        assert_eq!(no_odirect.verdict().kind, VerdictKind::PosixOnly);
    }

    #[test]
    fn the_real_check_always_answers() {
        let report = check(Some(Path::new("/proc/self/status")));
        assert!(!report.verdict.reasons.is_empty());
        // /proc refuses O_DIRECT, so whatever the machine, this path cannot use cuFile.
        assert_ne!(report.verdict.kind, VerdictKind::DirectPathPossible);
        if cuda::probe().is_err() {
            assert!(
                matches!(report.driver, DriverFact::NotOpened { .. }),
                "{:?}",
                report.driver
            );
            assert!(matches!(
                report.path.unwrap().registration,
                RegistrationFact::NotTried { .. }
            ));
        }
    }
}
