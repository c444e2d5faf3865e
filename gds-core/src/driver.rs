//! The cuFile driver: opened once per process while anyone uses it.
//!
//! [`Driver::open`] checks for a CUDA driver with a GPU *before* anything
//! that could open the cuFile driver (without one, `cuFileDriverOpen` spins
//! forever), points cufile.log at a per-process file, sets the statistics
//! level, and opens. Every `Driver` value shares that one open driver; the
//! last one dropped closes it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use cufile_sys::bindings::CUfileDrvProps_t;
use cufile_sys::{CuFileLibrary, Feature, LibraryVersion, cufile_fn};

use crate::error::{Error, Result};
use crate::log::{LogLocation, LogMark};
use crate::parameters::Parameters;

/// How to open the driver.
#[derive(Debug, Clone, Copy)]
pub struct DriverOptions {
    /// The libcufile to use (default: [`CuFileLibrary::load`]).
    pub library: Option<&'static CuFileLibrary>,
    /// Statistics level to set before opening (3 = per-GPU counters, which
    /// the path report needs). `None` leaves the library's setting. Ignored
    /// when `CUFILE_STATS_LEVEL` is set (the user's choice wins) or the
    /// library has no statistics API.
    pub stats_level: Option<u32>,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            library: None,
            stats_level: Some(3),
        }
    }
}

/// A handle on the process's open cuFile driver. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Driver {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Set once the driver has been closed (by [`Driver::shutdown`] or drop).
    closed: std::sync::atomic::AtomicBool,
    lib: &'static CuFileLibrary,
    log: &'static LogLocation,
    /// The statistics level in force after open (0 = off).
    stats_level: u32,
}

static OPEN: Mutex<Weak<Shared>> = Mutex::new(Weak::new());

/// The cufile.json cuFile will open (`CUFILE_ENV_PATH_JSON`, else
/// `/etc/cufile.json`) is a regular file, a directory (whose read fails at
/// once) or nothing.
fn config_is_readable() -> Result<()> {
    config_is_readable_at(
        std::env::var_os(cufile_config::ENV_CONFIG_PATH),
        std::path::Path::new(cufile_config::DEFAULT_CONFIG_PATH),
    )
}

/// [`config_is_readable`] for a value of `CUFILE_ENV_PATH_JSON` and a
/// default path.
fn config_is_readable_at(
    env_value: Option<std::ffi::OsString>,
    default_path: &std::path::Path,
) -> Result<()> {
    use cufile_config::{FileKind, LocationSource};
    let (path, found_by) = match env_value {
        Some(value) if !value.is_empty() => (PathBuf::from(value), LocationSource::Environment),
        _ => (default_path.to_path_buf(), LocationSource::DefaultPath),
    };
    let Ok(meta) = std::fs::metadata(&path) else {
        return Ok(());
    };
    match FileKind::of(&meta.file_type()) {
        None | Some(FileKind::Directory) => Ok(()),
        Some(kind) => Err(Error::ConfigNotAFile {
            path,
            found_by,
            kind,
        }),
    }
}

impl Driver {
    /// Open (or join) the driver with default options.
    pub fn open() -> Result<Driver> {
        Driver::open_with(DriverOptions::default())
    }

    pub fn open_with(options: DriverOptions) -> Result<Driver> {
        let lib = match options.library {
            Some(lib) => lib,
            None => CuFileLibrary::load()?,
        };
        // A poisoned lock only means a thread panicked while holding it; the
        // Weak inside is still meaningful.
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(shared) = open.upgrade() {
            return Ok(Driver { shared });
        }
        // The hazard guard: no GPU, no cuFileDriverOpen.
        crate::cuda::probe()?;
        // And no cuFileDriverOpen that would read its configuration from a
        // FIFO (waiting for a writer) or a device (without end).
        config_is_readable()?;
        let log = crate::log::location(lib);
        let stats = lib.feature(Feature::Stats).available();
        if stats
            && std::env::var_os("CUFILE_STATS_LEVEL").is_none()
            && let Some(level) = options.stats_level
        {
            let set = cufile_fn!(lib, cuFileSetStatsLevel)?;
            // SAFETY: plain value, before the driver opens.
            let status = unsafe { set(level as i32) };
            if !status.is_success() {
                return Err(Error::CuFile {
                    operation: "cuFileSetStatsLevel",
                    status,
                    path: None,
                    log: None,
                });
            }
        }
        let mark = LogMark::new(log);
        let driver_open = cufile_fn!(lib, cuFileDriverOpen)?;
        // SAFETY: a CUDA driver with a GPU exists (probed above).
        let status = unsafe { driver_open() };
        if !status.is_success() {
            return Err(Error::CuFile {
                operation: "cuFileDriverOpen",
                status,
                path: None,
                log: mark.excerpt(),
            });
        }
        let stats_level = if stats {
            current_stats_level(lib).unwrap_or(0)
        } else {
            0
        };
        if stats_level > 0 {
            let start = cufile_fn!(lib, cuFileStatsStart)?;
            // SAFETY: the driver is open and the level is set.
            let status = unsafe { start() };
            if !status.is_success() {
                // Counters would stay empty: report it, but the driver itself works.
                close(lib);
                return Err(Error::CuFile {
                    operation: "cuFileStatsStart",
                    status,
                    path: None,
                    log: mark.excerpt(),
                });
            }
        }
        let shared = Arc::new(Shared {
            closed: std::sync::atomic::AtomicBool::new(false),
            lib,
            log,
            stats_level,
        });
        *open = Arc::downgrade(&shared);
        Ok(Driver { shared })
    }

    /// Close the driver now, even though handles on it remain — for process
    /// exit, where libcufile's own teardown must not find it open (seen:
    /// a crash at exit after `CUFILE_FORCE_COMPAT_MODE=true` reads, or after a
    /// failed registration, when the driver was left open). Idempotent; the
    /// driver must not be used afterwards.
    pub fn shutdown(&self) {
        if !self
            .shared
            .closed
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            close(self.shared.lib);
        }
    }

    pub fn library(&self) -> &'static CuFileLibrary {
        self.shared.lib
    }

    pub fn version(&self) -> Option<LibraryVersion> {
        self.shared.lib.version().ok()
    }

    /// Where this process's cufile.log goes.
    pub fn log(&self) -> &'static LogLocation {
        self.shared.log
    }

    /// The statistics level in force (0 = statistics off).
    pub fn stats_level(&self) -> u32 {
        self.shared.stats_level
    }

    pub fn parameters(&self) -> Parameters {
        Parameters::new(self.shared.lib)
    }

    /// `cuFileDriverGetProperties`, decoded.
    pub fn properties(&self) -> Result<DriverProperties> {
        let get = cufile_fn!(self.shared.lib, cuFileDriverGetProperties)?;
        let mut raw = CUfileDrvProps_t::default();
        // SAFETY: the driver is open; fills one struct of the header's layout
        // (unchanged between 1.15 and 1.20).
        let status = unsafe { get(&mut raw) };
        if !status.is_success() {
            return Err(Error::CuFile {
                operation: "cuFileDriverGetProperties",
                status,
                path: None,
                log: None,
            });
        }
        Ok(DriverProperties::from_raw(&raw))
    }
}

fn current_stats_level(lib: &CuFileLibrary) -> Option<u32> {
    let get = cufile_fn!(lib, cuFileGetStatsLevel).ok()?;
    let mut level = 0;
    // SAFETY: writes one int.
    let status = unsafe { get(&mut level) };
    status.is_success().then_some(level.max(0) as u32)
}

fn close(lib: &CuFileLibrary) {
    let close = if lib.driver_close_symbol() == "cuFileDriverClose_v2" {
        cufile_fn!(lib, cuFileDriverClose_v2)
    } else {
        cufile_fn!(lib, cuFileDriverClose)
    };
    if let Ok(close) = close {
        // SAFETY: pairs the successful cuFileDriverOpen of this Shared. A
        // failure here cannot be acted on (we are dropping).
        let _ = unsafe { close() };
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // cuFile counts opens itself, so an open racing with this close
        // (another thread found the Weak dead and opened again) stays open.
        if !self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            close(self.lib);
        }
    }
}

/// `CUfileDrvProps_t`, decoded. Raw bit fields are kept next to their names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DriverProperties {
    /// nvidia-fs version as the driver sees it; `None` when nvidia-fs is not loaded.
    pub nvfs_version: Option<(u32, u32)>,
    pub poll_threshold_size: usize,
    pub max_direct_io_size: usize,
    /// Storage types cuFile can serve directly (`dstatusflags`).
    pub supported_storage: Vec<&'static str>,
    pub dstatusflags: u32,
    /// `dcontrolflags`: poll mode, compat mode allowed, …
    pub control: Vec<&'static str>,
    pub dcontrolflags: u32,
    /// `fflags`: batch I/O, streams, parallel I/O, P2P, …
    pub features: Vec<&'static str>,
    pub fflags: u32,
    pub max_device_cache_size: u32,
    pub per_buffer_cache_size: u32,
    pub max_device_pinned_mem_size: u32,
    pub max_batch_io_size: u32,
    pub max_batch_io_timeout_msecs: u32,
}

/// Bit positions of `CUfileDriverStatusFlags_t` (cufile.h 1.20).
const STORAGE_BITS: &[(u32, &str)] = &[
    (0, "lustre"),
    (1, "wekafs"),
    (2, "nfs"),
    (3, "gpfs"),
    (4, "nvme"),
    (5, "nvmeof"),
    (6, "scsi"),
    (7, "scaleflux_csd"),
    (8, "nvmesh"),
    (9, "beegfs"),
    (11, "nvme_p2p"),
    (12, "scatefs"),
    (13, "virtiofs"),
    (14, "panfs"),
];
/// Bit positions of `CUfileDriverControlFlags_t`.
const CONTROL_BITS: &[(u32, &str)] = &[
    (0, "use_poll_mode"),
    (1, "allow_compat_mode"),
    (2, "posix_io_mode"),
    (4, "fallback_io_mode"),
];
/// Bit positions of `CUfileFeatureFlags_t`.
const FEATURE_BITS: &[(u32, &str)] = &[
    (0, "dynamic_routing"),
    (1, "batch_io"),
    (2, "streams"),
    (3, "parallel_io"),
    (4, "p2p"),
];

fn bit_names(bits: u32, table: &[(u32, &'static str)]) -> Vec<&'static str> {
    table
        .iter()
        .filter(|(bit, _)| bits & (1 << bit) != 0)
        .map(|(_, name)| *name)
        .collect()
}

impl DriverProperties {
    pub fn from_raw(raw: &CUfileDrvProps_t) -> DriverProperties {
        let nvfs = (raw.nvfs.major_version, raw.nvfs.minor_version);
        DriverProperties {
            nvfs_version: (nvfs != (0, 0)).then_some(nvfs),
            poll_threshold_size: raw.nvfs.poll_thresh_size,
            max_direct_io_size: raw.nvfs.max_direct_io_size,
            supported_storage: bit_names(raw.nvfs.dstatusflags, STORAGE_BITS),
            dstatusflags: raw.nvfs.dstatusflags,
            control: bit_names(raw.nvfs.dcontrolflags, CONTROL_BITS),
            dcontrolflags: raw.nvfs.dcontrolflags,
            features: bit_names(raw.fflags, FEATURE_BITS),
            fflags: raw.fflags,
            max_device_cache_size: raw.max_device_cache_size,
            per_buffer_cache_size: raw.per_buffer_cache_size,
            max_device_pinned_mem_size: raw.max_device_pinned_mem_size,
            max_batch_io_size: raw.max_batch_io_size,
            max_batch_io_timeout_msecs: raw.max_batch_io_timeout_msecs,
        }
    }

    /// What gives cuFile a direct path here, if anything: nvidia-fs, or PCI
    /// P2PDMA (the `p2p` feature flag of 1.19+, or 1.15's `nvme_p2p` storage flag).
    pub fn direct_path(&self) -> Option<String> {
        if let Some((major, minor)) = self.nvfs_version {
            return Some(format!("nvidia-fs {major}.{minor}"));
        }
        if self.features.contains(&"p2p") || self.supported_storage.contains(&"nvme_p2p") {
            return Some("PCI P2PDMA".into());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_that_is_a_fifo_or_a_device_stops_the_driver_open() {
        let dir = std::env::temp_dir().join(format!("gds-core-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("cufile.json");
        let _ = std::fs::remove_file(&fifo);
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let missing = dir.join("missing.json");
        for (env, default, refused) in [
            (Some(fifo.clone().into_os_string()), missing.as_path(), true),
            (None, fifo.as_path(), true),
            (Some("".into()), fifo.as_path(), true),
            (Some("/dev/zero".into()), missing.as_path(), true),
            (
                Some(missing.clone().into_os_string()),
                fifo.as_path(),
                false,
            ),
            (None, missing.as_path(), false),
            (Some(dir.clone().into_os_string()), missing.as_path(), false),
        ] {
            let result = config_is_readable_at(env.clone(), default);
            assert_eq!(
                matches!(result, Err(Error::ConfigNotAFile { .. })),
                refused,
                "{env:?} {default:?}: {result:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn properties_decode_bits_and_find_the_direct_path() {
        let mut raw = CUfileDrvProps_t::default();
        assert_eq!(DriverProperties::from_raw(&raw).direct_path(), None);

        raw.nvfs.dstatusflags = (1 << 4) | (1 << 2);
        raw.nvfs.dcontrolflags = 1 << 1;
        raw.fflags = (1 << 1) | (1 << 3);
        let props = DriverProperties::from_raw(&raw);
        assert_eq!(props.supported_storage, vec!["nfs", "nvme"]);
        assert_eq!(props.control, vec!["allow_compat_mode"]);
        assert_eq!(props.features, vec!["batch_io", "parallel_io"]);
        assert_eq!(props.direct_path(), None);

        raw.fflags |= 1 << 4;
        assert_eq!(
            DriverProperties::from_raw(&raw).direct_path().as_deref(),
            Some("PCI P2PDMA")
        );

        raw.nvfs.major_version = 2;
        raw.nvfs.minor_version = 26;
        assert_eq!(
            DriverProperties::from_raw(&raw).direct_path().as_deref(),
            Some("nvidia-fs 2.26")
        );
    }

    #[test]
    fn without_a_gpu_open_fails_fast_and_never_reaches_cufile() {
        if crate::cuda::probe().is_ok() {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"skipped: without_a_gpu_open_fails_fast: this machine has a CUDA driver\n",
            );
            return;
        }
        match Driver::open() {
            // No libcufile at all is also a typed error.
            Err(Error::Library(_)) | Err(Error::NoCuda(_)) => {}
            other => panic!("expected a typed error before any cuFile call, got {other:?}"),
        }
    }
}
