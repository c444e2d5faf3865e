//! GDS readiness: every fact that decides whether cuFile can be used on this
//! machine (and for one path), with the evidence, and a verdict.
//!
//! The cuFile driver is opened only where that is safe (a CUDA driver with a
//! GPU answered, libcufile loaded): then the report also has the driver's own
//! view (nvidia-fs version, PCI P2PDMA, compat mode allowed) and, for a path,
//! whether cuFile can register a file there — with cufile.log's explanation
//! when it cannot.
//!
//! Facts and reasons are typed: each [`Reason`] is a variant with the data
//! behind it, printed for people by `Display` and serialized with a stable
//! `kind` tag, so a program matches `{"kind": "no_cuda", …}` rather than
//! words.

use std::fmt;
use std::path::{Path, PathBuf};

use cufile_config::{
    ConfigLocation, Diagnostic, EffectiveExecution, ParsedConfig, ValidateOptions,
};
use cufile_sys::CuFileLibrary;
use serde::Serialize;

use crate::cuda::{self, CudaDriver, CudaUnavailable};
use crate::driver::{DirectPath, Driver, DriverProperties};
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
        missing_features: Vec<MissingFeature>,
    },
    Missing {
        reason: String,
    },
}

/// An optional feature the loaded libcufile lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingFeature {
    /// What the feature is, e.g. "in-process statistics".
    pub feature: &'static str,
    /// The symbols the library lacks for it.
    pub missing: Vec<&'static str>,
}

impl fmt::Display for MissingFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (missing {})", self.feature, self.missing.join(", "))
    }
}

/// What the cuFile driver said when opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DriverFact {
    /// Not opened, and why (opening it without a GPU would hang).
    NotOpened {
        reason: NotOpened,
    },
    Opened {
        properties: DriverProperties,
        /// What gives cuFile a direct path, per the driver.
        direct_path: Option<DirectPath>,
        /// Whether cuFile may run its compatibility mode (`properties.allow_compat_mode`).
        compat_mode_allowed: bool,
        log: LogLocation,
    },
    Failed {
        error: String,
    },
}

/// Why the cuFile driver was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotOpened {
    /// libcufile could not be loaded.
    NoLibcufile,
    /// No CUDA driver with a GPU: `cuFileDriverOpen` would never return.
    NoCuda,
}

impl fmt::Display for NotOpened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotOpened::NoLibcufile => "libcufile is not available",
            NotOpened::NoCuda => "no CUDA driver with a GPU (cuFileDriverOpen would never return)",
        })
    }
}

/// Whether cuFile could register a file at the checked path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RegistrationFact {
    NotTried { reason: NotTried },
    Registered { file: PathBuf },
    Failed { file: PathBuf, error: String },
}

/// Why registration was not tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotTried {
    /// The cuFile driver is not open.
    DriverNotOpen,
    /// The path refuses O_DIRECT, which cuFile needs.
    NoDirectIo,
}

impl fmt::Display for NotTried {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotTried::DriverNotOpen => "the cuFile driver is not open",
            NotTried::NoDirectIo => "O_DIRECT is not supported here",
        })
    }
}

/// The cufile.json cuFile will read, checked the way cuFile reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigFact {
    #[serde(flatten)]
    pub location: ConfigLocation,
    /// `N errors, M warnings`, when a file was read.
    pub summary: Option<String>,
    pub errors: usize,
    /// The first error: cuFile refuses a file with errors.
    pub first_error: Option<Diagnostic>,
    /// Why the file could not be read, if it could not.
    pub read_error: Option<String>,
    /// The `execution` settings cuFile will use here, each with its source.
    pub execution: EffectiveExecution,
}

/// A cufile.json error as one line: `line:col: key = message`.
pub fn diagnostic_line(d: &Diagnostic) -> String {
    format!("{}:{}: {} = {}", d.line, d.column, d.path, d.message)
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
                first_error: parsed.diagnostics.iter().find(|d| d.is_error()).cloned(),
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

impl fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VerdictKind::DirectPathPossible => "direct path possible",
            VerdictKind::CompatModeOnly => "cuFile compat mode only",
            VerdictKind::PosixOnly => "POSIX only",
        })
    }
}

/// One reason behind a verdict: a fact, with the data behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    // Blockers: cuFile cannot be used at all.
    /// libcufile cannot be loaded.
    NoLibcufile { error: String },
    /// No CUDA driver with a GPU answered.
    NoCuda { cause: CudaUnavailable },
    /// `/run/udev` is missing: cuFile cannot identify filesystems (KvikIO
    /// requires it).
    NoUdev,
    /// The kernel is WSL's, where cuFile is not supported.
    Wsl,
    /// cufile.json has errors, so cuFile refuses to start.
    ConfigErrors {
        path: Option<PathBuf>,
        errors: usize,
        first: Diagnostic,
    },
    /// `cuFileDriverOpen` (or reading its properties) failed.
    DriverFailed { error: String },
    /// The path refuses O_DIRECT, so cuFile cannot register files there.
    NoDirectIo { path: PathBuf, error: String },
    /// cuFile could not register a file at the path.
    RegistrationFailed { path: PathBuf, error: String },
    /// No direct path, and the configuration forbids cuFile's compatibility
    /// mode: cuFile would refuse I/O.
    CompatModeDisallowed,

    // Why there is no direct path (cuFile could run in compat mode only).
    /// Nothing gives cuFile a direct path: nvidia-fs is not loaded, and (when
    /// the driver was asked) PCI P2PDMA is not supported either.
    NoDirectPath { driver_asked: bool },
    /// The path's filesystem is not one GDS serves directly.
    FilesystemWithoutDirectPath { path: PathBuf, filesystem: String },

    // Evidence for the direct path.
    /// The driver reports a direct path.
    DirectPath { via: DirectPath },
    /// The nvidia-fs kernel module is loaded (the driver was not asked).
    NvidiaFsLoaded { version: Option<String> },
    /// The path's filesystem takes O_DIRECT.
    DirectIo { path: PathBuf, filesystem: String },
}

/// What a [`Reason`] does to the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// cuFile cannot be used: POSIX only.
    Blocks,
    /// No direct path: cuFile's compatibility mode at best.
    NoDirectPath,
    /// Evidence that the direct path is possible.
    Supports,
}

impl Reason {
    pub fn effect(&self) -> Effect {
        match self {
            Reason::NoLibcufile { .. }
            | Reason::NoCuda { .. }
            | Reason::NoUdev
            | Reason::Wsl
            | Reason::ConfigErrors { .. }
            | Reason::DriverFailed { .. }
            | Reason::NoDirectIo { .. }
            | Reason::RegistrationFailed { .. }
            | Reason::CompatModeDisallowed => Effect::Blocks,
            Reason::NoDirectPath { .. } | Reason::FilesystemWithoutDirectPath { .. } => {
                Effect::NoDirectPath
            }
            Reason::DirectPath { .. } | Reason::NvidiaFsLoaded { .. } | Reason::DirectIo { .. } => {
                Effect::Supports
            }
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NoLibcufile { error } => f.write_str(error),
            Reason::NoCuda { cause } => write!(f, "{cause}"),
            Reason::NoUdev => f.write_str(
                "/run/udev is missing: cuFile cannot identify filesystems (KvikIO requires it)",
            ),
            Reason::Wsl => f.write_str("running under WSL: cuFile is not supported there"),
            Reason::ConfigErrors {
                path,
                errors,
                first,
            } => write!(
                f,
                "{} has {errors} error(s), so cuFile refuses to start; first: {}",
                path.as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                diagnostic_line(first)
            ),
            Reason::DriverFailed { error } => write!(f, "the cuFile driver did not open: {error}"),
            Reason::NoDirectIo { path, error } => write!(
                f,
                "{}: O_DIRECT is not supported ({error}); cuFile cannot register files there",
                path.display()
            ),
            Reason::RegistrationFailed { path, error } => write!(
                f,
                "cuFile cannot register a file at {}: {error}",
                path.display()
            ),
            Reason::CompatModeDisallowed => f.write_str(
                "cuFile has no direct path and its compatibility mode is disabled \
                 (properties.allow_compat_mode is false): cuFile would refuse I/O",
            ),
            Reason::NoDirectPath { driver_asked } => write!(
                f,
                "nvidia-fs is not loaded ({} missing){}: cuFile has no direct path and can only \
                 run in its compatibility mode",
                platform::NVIDIA_FS_VERSION_FILE,
                if *driver_asked {
                    " and PCI P2PDMA is not supported"
                } else {
                    ""
                }
            ),
            Reason::FilesystemWithoutDirectPath { path, filesystem } => write!(
                f,
                "{}: filesystem {filesystem} has no GDS direct path",
                path.display()
            ),
            Reason::DirectPath { via } => write!(f, "cuFile has a direct path: {via}"),
            Reason::NvidiaFsLoaded { version } => write!(
                f,
                "cuFile has a direct path: nvidia-fs {}",
                version.as_deref().unwrap_or("(version unknown)")
            ),
            Reason::DirectIo { path, filesystem } => {
                write!(f, "{}: {filesystem} with O_DIRECT", path.display())
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    /// Every reason behind the verdict, most decisive first.
    pub reasons: Vec<Reason>,
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
    E: fmt::Display,
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
            reason: NotOpened::NoLibcufile,
        }),
        (None, _, Err(_)) => Err(DriverFact::NotOpened {
            reason: NotOpened::NoCuda,
        }),
        (None, Ok(_), Ok(_)) => Driver::open().map_err(|e| DriverFact::Failed {
            error: e.to_string(),
        }),
    };
    let driver_fact = match &opened {
        Ok(driver) => match driver.properties() {
            Ok(properties) => DriverFact::Opened {
                direct_path: properties.direct_path(),
                compat_mode_allowed: properties.compat_mode_allowed(),
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
                reason: NotTried::DriverNotOpen,
            },
            (_, DirectIo::Unsupported { .. }) => RegistrationFact::NotTried {
                reason: NotTried::NoDirectIo,
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
        .map(|f| MissingFeature {
            feature: f.feature.description(),
            missing: f.missing,
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
            blockers.push(Reason::NoLibcufile {
                error: reason.clone(),
            });
        }
        if let Err(cause) = &self.cuda {
            blockers.push(Reason::NoCuda {
                cause: cause.clone(),
            });
        }
        if !self.udev {
            blockers.push(Reason::NoUdev);
        }
        if self.wsl {
            blockers.push(Reason::Wsl);
        }
        if let Some(first) = &self.config.first_error {
            blockers.push(Reason::ConfigErrors {
                path: self.config.location.path.clone(),
                errors: self.config.errors,
                first: first.clone(),
            });
        }
        if let DriverFact::Failed { error } = &self.driver {
            blockers.push(Reason::DriverFailed {
                error: error.clone(),
            });
        }
        if let Some(path) = &self.path {
            if let DirectIo::Unsupported { error, .. } = &path.direct_io {
                blockers.push(Reason::NoDirectIo {
                    path: path.path.clone(),
                    error: error.clone(),
                });
            }
            if let RegistrationFact::Failed { error, .. } = &path.registration {
                blockers.push(Reason::RegistrationFailed {
                    path: path.path.clone(),
                    error: error.clone(),
                });
            }
        }

        // The driver's view of the direct path wins over /proc when we have it.
        let direct_path = match &self.driver {
            DriverFact::Opened { direct_path, .. } => {
                direct_path.map(|via| Reason::DirectPath { via })
            }
            _ => self.nvidia_fs.loaded.then(|| Reason::NvidiaFsLoaded {
                version: self.nvidia_fs.version.clone(),
            }),
        };
        let mut no_direct = Vec::new();
        if direct_path.is_none() {
            no_direct.push(Reason::NoDirectPath {
                driver_asked: matches!(self.driver, DriverFact::Opened { .. }),
            });
            if let DriverFact::Opened {
                compat_mode_allowed: false,
                ..
            } = &self.driver
            {
                blockers.push(Reason::CompatModeDisallowed);
            }
        }
        if let Some(PathFacts {
            path,
            filesystem: Ok(fs),
            ..
        }) = &self.path
            && !fs.gds_capable
        {
            no_direct.push(Reason::FilesystemWithoutDirectPath {
                path: path.clone(),
                filesystem: fs.name.clone(),
            });
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
        let mut reasons: Vec<Reason> = direct_path.into_iter().collect();
        if let Some(PathFacts {
            path,
            filesystem: Ok(fs),
            ..
        }) = &self.path
        {
            reasons.push(Reason::DirectIo {
                path: path.clone(),
                filesystem: fs.name.clone(),
            });
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
    use crate::platform::DirectIoStep;

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
                devices: vec!["NVIDIA GPU".into()],
            }),
            driver: DriverFact::NotOpened {
                reason: NotOpened::NoCuda,
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

    fn opened(direct_path: Option<DirectPath>, compat_mode_allowed: bool) -> DriverFact {
        let raw = cufile_sys::bindings::CUfileDrvProps_t::default();
        DriverFact::Opened {
            properties: DriverProperties::from_raw(&raw),
            direct_path,
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

    const SUPPORTED: DirectIo = DirectIo::Supported {
        probe: DirectIoStep::Read,
    };

    /// The verdict, checked against the effects of its reasons: POSIX only
    /// exactly when a reason blocks cuFile, compat mode only when a reason
    /// denies the direct path and none blocks.
    fn judged(facts: &Facts) -> Verdict {
        let v = facts.verdict();
        let has = |effect| v.reasons.iter().any(|r| r.effect() == effect);
        let expected = if has(Effect::Blocks) {
            VerdictKind::PosixOnly
        } else if has(Effect::NoDirectPath) {
            VerdictKind::CompatModeOnly
        } else {
            VerdictKind::DirectPathPossible
        };
        assert_eq!(v.kind, expected, "{v:?}");
        assert!(!v.reasons.is_empty());
        v
    }

    #[test]
    fn gpu_without_nvidia_fs_is_compat_mode_only() {
        let v = judged(&gpu_machine_without_nvidia_fs());
        assert_eq!(v.kind, VerdictKind::CompatModeOnly);
        assert_eq!(
            v.reasons,
            [Reason::NoDirectPath {
                driver_asked: false
            }]
        );

        let mut with_driver = gpu_machine_without_nvidia_fs();
        with_driver.driver = opened(None, true);
        let v = judged(&with_driver);
        assert_eq!(v.kind, VerdictKind::CompatModeOnly);
        assert_eq!(v.reasons, [Reason::NoDirectPath { driver_asked: true }]);
        assert!(
            v.reasons[0]
                .to_string()
                .contains("PCI P2PDMA is not supported")
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
        let v = judged(&facts);
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        match &v.reasons[0] {
            Reason::ConfigErrors {
                path,
                errors: 1,
                first,
            } => {
                assert_eq!(path.as_ref(), Some(&file));
                assert_eq!(first.path, "execution.max_request_parallelism");
                assert_eq!(first.line, 2, "names the line");
            }
            other => panic!("expected the config's errors first, got {other:?}"),
        }
    }

    #[test]
    fn compat_mode_disabled_without_a_direct_path_means_posix_only() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.driver = opened(None, false);
        let v = judged(&facts);
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert_eq!(
            v.reasons,
            [
                Reason::CompatModeDisallowed,
                Reason::NoDirectPath { driver_asked: true }
            ]
        );
    }

    #[test]
    fn p2pdma_per_the_driver_is_a_direct_path() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.driver = opened(Some(DirectPath::PciP2pDma), false);
        facts.path = ext4_path(
            SUPPORTED,
            RegistrationFact::Registered {
                file: "/data/model.bin".into(),
            },
        );
        let v = judged(&facts);
        assert_eq!(v.kind, VerdictKind::DirectPathPossible, "{v:?}");
        assert_eq!(
            v.reasons,
            [
                Reason::DirectPath {
                    via: DirectPath::PciP2pDma
                },
                Reason::DirectIo {
                    path: "/data/model.bin".into(),
                    filesystem: "ext4".into()
                }
            ]
        );
    }

    #[test]
    fn cpu_machine_is_posix_only_with_every_reason() {
        let mut facts = gpu_machine_without_nvidia_fs();
        let cause = CudaUnavailable::LibraryMissing {
            message: "libcuda.so.1: cannot open shared object file".into(),
        };
        facts.cuda = Err(cause.clone());
        let v = judged(&facts);
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert_eq!(
            v.reasons,
            [
                Reason::NoCuda { cause },
                Reason::NoDirectPath {
                    driver_asked: false
                }
            ]
        );
    }

    #[test]
    fn missing_udev_or_wsl_blocks_cufile() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.udev = false;
        facts.wsl = true;
        let v = judged(&facts);
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert_eq!(v.reasons[..2], [Reason::NoUdev, Reason::Wsl]);
    }

    #[test]
    fn a_failed_registration_blocks_the_path_with_its_explanation() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.driver = opened(None, true);
        let error = "cuFileHandleRegister failed: 5027 …; udev property not found: ID_FS_USAGE vda";
        facts.path = ext4_path(
            SUPPORTED,
            RegistrationFact::Failed {
                file: "/data/model.bin".into(),
                error: error.into(),
            },
        );
        let v = judged(&facts);
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert_eq!(
            v.reasons[0],
            Reason::RegistrationFailed {
                path: "/data/model.bin".into(),
                error: error.into()
            }
        );
    }

    #[test]
    fn nvidia_fs_on_ext4_allows_the_direct_path() {
        let mut facts = gpu_machine_without_nvidia_fs();
        facts.nvidia_fs = NvidiaFs {
            loaded: true,
            version: Some("version: 2.26".into()),
        };
        facts.path = ext4_path(
            SUPPORTED,
            RegistrationFact::NotTried {
                reason: NotTried::DriverNotOpen,
            },
        );
        let v = judged(&facts);
        assert_eq!(v.kind, VerdictKind::DirectPathPossible, "{v:?}");
        assert_eq!(
            v.reasons[0],
            Reason::NvidiaFsLoaded {
                version: Some("version: 2.26".into())
            }
        );

        // The same machine, but the file lives on tmpfs.
        let mut on_tmpfs = facts.clone();
        on_tmpfs.path.as_mut().unwrap().filesystem =
            Ok(platform::filesystem_from_magic(0x0102_1994));
        let v = judged(&on_tmpfs);
        assert_eq!(v.kind, VerdictKind::CompatModeOnly);
        assert_eq!(
            v.reasons,
            [Reason::FilesystemWithoutDirectPath {
                path: "/data/model.bin".into(),
                filesystem: "tmpfs".into()
            }]
        );

        // And a filesystem that refuses O_DIRECT.
        let mut no_odirect = facts;
        no_odirect.path.as_mut().unwrap().direct_io = DirectIo::Unsupported {
            probe: DirectIoStep::Open,
            errno: libc::EINVAL,
            error: "Invalid argument".into(),
        };
        let v = judged(&no_odirect);
        assert_eq!(v.kind, VerdictKind::PosixOnly);
        assert_eq!(
            v.reasons[0],
            Reason::NoDirectIo {
                path: "/data/model.bin".into(),
                error: "Invalid argument".into()
            }
        );
    }

    #[test]
    fn reasons_serialize_with_a_stable_kind_and_read_as_sentences() {
        let reasons = [
            (Reason::NoUdev, "no_udev"),
            (Reason::Wsl, "wsl"),
            (Reason::CompatModeDisallowed, "compat_mode_disallowed"),
            (
                Reason::NoDirectPath { driver_asked: true },
                "no_direct_path",
            ),
            (
                Reason::DirectPath {
                    via: DirectPath::NvidiaFs {
                        major: 2,
                        minor: 26,
                    },
                },
                "direct_path",
            ),
            (
                Reason::NoCuda {
                    cause: CudaUnavailable::NoDevice {
                        driver_version: "13.0".into(),
                    },
                },
                "no_cuda",
            ),
        ];
        for (reason, kind) in reasons {
            let json = serde_json::to_value(&reason).unwrap();
            assert_eq!(json["kind"], kind, "{json}");
            let text = reason.to_string();
            assert!(!text.is_empty() && !text.contains('{'), "{text}");
        }
        let json = serde_json::to_value(Reason::DirectPath {
            via: DirectPath::NvidiaFs {
                major: 2,
                minor: 26,
            },
        })
        .unwrap();
        assert_eq!(json["via"]["kind"], "nvidia_fs");
        assert_eq!(json["via"]["minor"], 26);
        let fact = serde_json::to_value(DriverFact::NotOpened {
            reason: NotOpened::NoCuda,
        })
        .unwrap();
        assert_eq!(
            fact,
            serde_json::json!({"status": "not_opened", "reason": "no_cuda"})
        );
    }

    #[test]
    fn the_real_check_always_answers() {
        let report = check(Some(Path::new("/proc/self/status")));
        assert!(!report.verdict.reasons.is_empty());
        // /proc refuses O_DIRECT, so whatever the machine, this path cannot use cuFile.
        assert_ne!(report.verdict.kind, VerdictKind::DirectPathPossible);
        if cuda::probe().is_err() {
            assert!(
                matches!(
                    report.driver,
                    DriverFact::NotOpened {
                        reason: NotOpened::NoCuda | NotOpened::NoLibcufile
                    }
                ),
                "{:?}",
                report.driver
            );
            assert_eq!(
                report.path.unwrap().registration,
                RegistrationFact::NotTried {
                    reason: NotTried::DriverNotOpen
                }
            );
            assert!(
                report
                    .verdict
                    .reasons
                    .iter()
                    .any(|r| matches!(r, Reason::NoCuda { .. })),
                "{:?}",
                report.verdict
            );
        }
    }
}
