//! The cuFile driver: opened once per process while anyone uses it.
//!
//! [`Driver::open`] checks for a CUDA driver with a GPU *before* anything
//! that could open the cuFile driver (without one, `cuFileDriverOpen` spins
//! forever), points cufile.log at a per-process file, sets the statistics
//! level, and opens.
//!
//! Every `Driver` value shares one *session*: one opening of cuFile's
//! driver. The last `Driver` of a session dropped closes it;
//! [`Driver::shutdown`] closes it at once, even while `Driver`s remain. A
//! closed session is never handed out again: the next [`Driver::open`] opens
//! a new one, and every cuFile call through a `Driver` of the closed session
//! (registering, reading, statistics) fails with [`Error::DriverClosed`]
//! instead of reaching cuFile — whose file and buffer handles from before
//! the close mean nothing to the driver opened after it. Handles and
//! buffer registrations of a closed session skip their deregistration when
//! dropped: cuFile dropped them when it closed.
//!
//! The bookkeeping is a small state machine (`Lifecycle`) that knows
//! nothing of cuFile, so its rules are tested without a GPU.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, Weak};

use cufile_sys::bindings::CUfileDrvProps_t;
use cufile_sys::{CuFileLibrary, Feature, LibraryVersion, cufile_fn};

use crate::error::{Error, Result};
use crate::log::{LogLocation, LogMark};
use crate::parameters::Parameters;

mod flags;
pub use flags::{ControlFlags, FeatureFlags, StorageFlags};

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
    session: Arc<Session<Opened>>,
}

/// What an opening of the driver established.
#[derive(Debug, Clone, Copy)]
struct Opened {
    lib: &'static CuFileLibrary,
    log: &'static LogLocation,
    /// The statistics level in force after open (0 = off).
    stats_level: u32,
}

static LIFECYCLE: Mutex<Lifecycle<Opened>> = Mutex::new(Lifecycle::new(|opened| close(opened.lib)));

/// Which session holds cuFile's driver open, if any: the rules behind
/// [`Driver::open`], [`Driver::shutdown`] and the drop of a session's last
/// `Driver`, apart from cuFile (`T` is what an opening established).
///
/// The invariants: cuFile's driver is open exactly while `current` is set;
/// each opening is closed once, by its own session (last drop, or
/// shutdown); a session that is shut down is never current again.
#[derive(Debug)]
pub(crate) struct Lifecycle<T: 'static> {
    current: Option<Current<T>>,
    sessions: u64,
    close: fn(&T),
}

/// The session that owns the open driver.
#[derive(Debug)]
struct Current<T: 'static> {
    id: u64,
    opened: T,
    session: Weak<Session<T>>,
}

/// One opening of the driver, shared by the `Driver`s made from it.
#[derive(Debug)]
pub(crate) struct Session<T: 'static> {
    id: u64,
    opened: T,
    /// `false` once shut down. Every cuFile call through the session holds
    /// it for reading, so a shutdown waits for calls in flight and later
    /// calls see it.
    open: RwLock<bool>,
    lifecycle: &'static Mutex<Lifecycle<T>>,
}

fn lock<T>(lifecycle: &'static Mutex<Lifecycle<T>>) -> MutexGuard<'static, Lifecycle<T>> {
    // A poisoned lock only means a thread panicked while holding it; every
    // change to the state is a single assignment.
    lifecycle.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T: Clone> Lifecycle<T> {
    pub(crate) const fn new(close: fn(&T)) -> Lifecycle<T> {
        Lifecycle {
            current: None,
            sessions: 0,
            close,
        }
    }

    /// The current session, or a new one: `open` runs (under the lock) only
    /// when the driver is closed.
    pub(crate) fn session(
        lifecycle: &'static Mutex<Lifecycle<T>>,
        open: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<Session<T>>> {
        let mut state = lock(lifecycle);
        let opened = match &state.current {
            Some(current) => {
                if let Some(session) = current.session.upgrade() {
                    return Ok(session);
                }
                // The current session's last `Driver` is being dropped right
                // now (its drop waits for this lock): the driver is still
                // open. A new session takes the opening over, and the old
                // one, no longer current, closes nothing.
                current.opened.clone()
            }
            None => open()?,
        };
        state.sessions += 1;
        let session = Arc::new(Session {
            id: state.sessions,
            opened: opened.clone(),
            open: RwLock::new(true),
            lifecycle,
        });
        state.current = Some(Current {
            id: session.id,
            opened,
            session: Arc::downgrade(&session),
        });
        Ok(session)
    }
}

impl<T> Lifecycle<T> {
    /// Close the driver if session `id` owns it.
    fn close_if_current(&mut self, id: u64) {
        if self.current.as_ref().is_some_and(|c| c.id == id) {
            let current = self.current.take().expect("checked above");
            (self.close)(&current.opened);
        }
    }
}

impl<T: Clone> Session<T> {
    /// Close this session now (a no-op if it was already).
    pub(crate) fn shutdown(&self) {
        let mut state = lock(self.lifecycle);
        let mut open = self.open.write().unwrap_or_else(|p| p.into_inner());
        if std::mem::replace(&mut *open, false) {
            state.close_if_current(self.id);
        }
    }

    /// Hold the session open for one cuFile call, or say it is closed.
    pub(crate) fn enter(&self, operation: &'static str) -> Result<RwLockReadGuard<'_, bool>> {
        let open = self.open.read().unwrap_or_else(|p| p.into_inner());
        if !*open {
            return Err(Error::DriverClosed { operation });
        }
        Ok(open)
    }

    pub(crate) fn is_open(&self) -> bool {
        *self.open.read().unwrap_or_else(|p| p.into_inner())
    }
}

impl<T> Drop for Session<T> {
    fn drop(&mut self) {
        lock(self.lifecycle).close_if_current(self.id);
    }
}

/// Proof that the driver stays open while one cuFile call runs; taken with
/// [`Driver::enter`].
#[derive(Debug)]
pub(crate) struct DriverOpen<'a> {
    _held: RwLockReadGuard<'a, bool>,
}

/// The cufile.json cuFile will open (`CUFILE_ENV_PATH_JSON`, else
/// `/etc/cufile.json`) is a regular file of at most
/// [`cufile_config::MAX_FILE_BYTES`], a directory (whose read fails at
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
        None if meta.len() > cufile_config::MAX_FILE_BYTES => Err(Error::ConfigTooLarge {
            path,
            found_by,
            size: meta.len(),
            limit: cufile_config::MAX_FILE_BYTES,
        }),
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

    /// Open (or join) the driver. Joining an open driver ignores `options`.
    pub fn open_with(options: DriverOptions) -> Result<Driver> {
        let lib = match options.library {
            Some(lib) => lib,
            None => CuFileLibrary::load()?,
        };
        let session = Lifecycle::session(&LIFECYCLE, || open_driver(lib, options))?;
        Ok(Driver { session })
    }

    /// Close the driver now, even though `Driver`s (and handles made with
    /// them) remain — for process exit, where libcufile's own teardown must
    /// not find it open (seen: a crash at exit after
    /// `CUFILE_FORCE_COMPAT_MODE=true` reads, or after a failed
    /// registration, when the driver was left open). Waits for cuFile calls
    /// in flight through this session. Idempotent. Afterwards every cuFile
    /// call through this session's `Driver`s is [`Error::DriverClosed`], and
    /// the next [`Driver::open`] opens the driver anew.
    pub fn shutdown(&self) {
        self.session.shutdown();
    }

    /// Whether this session is still open (not shut down).
    pub fn is_open(&self) -> bool {
        self.session.is_open()
    }

    /// Hold the session open for one cuFile call, or
    /// [`Error::DriverClosed`] naming `operation`.
    pub(crate) fn enter(&self, operation: &'static str) -> Result<DriverOpen<'_>> {
        let held = self.session.enter(operation)?;
        Ok(DriverOpen { _held: held })
    }

    pub fn library(&self) -> &'static CuFileLibrary {
        self.session.opened.lib
    }

    pub fn version(&self) -> Option<LibraryVersion> {
        self.session.opened.lib.version().ok()
    }

    /// Where this process's cufile.log goes.
    pub fn log(&self) -> &'static LogLocation {
        self.session.opened.log
    }

    /// The statistics level in force (0 = statistics off).
    pub fn stats_level(&self) -> u32 {
        self.session.opened.stats_level
    }

    pub fn parameters(&self) -> Parameters {
        Parameters::new(self.session.opened.lib)
    }

    /// `cuFileDriverGetProperties`, decoded.
    pub fn properties(&self) -> Result<DriverProperties> {
        let get = cufile_fn!(self.library(), cuFileDriverGetProperties)?;
        let _open = self.enter("cuFileDriverGetProperties")?;
        let mut raw = CUfileDrvProps_t::default();
        // SAFETY: the driver is open (held by `_open`); fills one struct of
        // the header's layout (unchanged between 1.15 and 1.20).
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

/// Open cuFile's driver: the hazard guard, cufile.log, statistics.
fn open_driver(lib: &'static CuFileLibrary, options: DriverOptions) -> Result<Opened> {
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
    Ok(Opened {
        lib,
        log,
        stats_level,
    })
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
        // SAFETY: pairs the successful cuFileDriverOpen of the closing
        // session, once (the lifecycle closes each opening once). A failure
        // here cannot be acted on.
        let _ = unsafe { close() };
    }
}

/// `CUfileDrvProps_t`, decoded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DriverProperties {
    /// nvidia-fs version as the driver sees it; `None` when nvidia-fs is not loaded.
    pub nvfs_version: Option<(u32, u32)>,
    pub poll_threshold_size: usize,
    pub max_direct_io_size: usize,
    /// Storage cuFile can serve directly (`dstatusflags`).
    pub supported_storage: StorageFlags,
    /// How the driver runs (`dcontrolflags`): poll mode, compat mode allowed, …
    pub control: ControlFlags,
    /// What it supports (`fflags`): batch I/O, streams, parallel I/O, P2P, …
    pub features: FeatureFlags,
    pub max_device_cache_size: u32,
    pub per_buffer_cache_size: u32,
    pub max_device_pinned_mem_size: u32,
    pub max_batch_io_size: u32,
    pub max_batch_io_timeout_msecs: u32,
}

/// What gives cuFile a direct path (storage to GPU memory without staging
/// through the host), as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DirectPath {
    /// The nvidia-fs kernel module, at this version.
    NvidiaFs { major: u32, minor: u32 },
    /// PCI P2PDMA: the `p2p` feature flag (libcufile 1.19+) or the
    /// `nvme_p2p` storage flag (1.15).
    PciP2pDma,
}

impl std::fmt::Display for DirectPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirectPath::NvidiaFs { major, minor } => write!(f, "nvidia-fs {major}.{minor}"),
            DirectPath::PciP2pDma => f.write_str("PCI P2PDMA"),
        }
    }
}

impl DriverProperties {
    pub fn from_raw(raw: &CUfileDrvProps_t) -> DriverProperties {
        let nvfs = (raw.nvfs.major_version, raw.nvfs.minor_version);
        DriverProperties {
            nvfs_version: (nvfs != (0, 0)).then_some(nvfs),
            poll_threshold_size: raw.nvfs.poll_thresh_size,
            max_direct_io_size: raw.nvfs.max_direct_io_size,
            supported_storage: StorageFlags::from_bits_retain(raw.nvfs.dstatusflags),
            control: ControlFlags::from_bits_retain(raw.nvfs.dcontrolflags),
            features: FeatureFlags::from_bits_retain(raw.fflags),
            max_device_cache_size: raw.max_device_cache_size,
            per_buffer_cache_size: raw.per_buffer_cache_size,
            max_device_pinned_mem_size: raw.max_device_pinned_mem_size,
            max_batch_io_size: raw.max_batch_io_size,
            max_batch_io_timeout_msecs: raw.max_batch_io_timeout_msecs,
        }
    }

    /// What gives cuFile a direct path here, if anything: nvidia-fs, or PCI
    /// P2PDMA.
    pub fn direct_path(&self) -> Option<DirectPath> {
        if let Some((major, minor)) = self.nvfs_version {
            return Some(DirectPath::NvidiaFs { major, minor });
        }
        if self.features.contains(FeatureFlags::P2P)
            || self.supported_storage.contains(StorageFlags::NVME_P2P)
        {
            return Some(DirectPath::PciP2pDma);
        }
        None
    }

    /// Whether cuFile may run its own compatibility mode
    /// (`properties.allow_compat_mode`).
    pub fn compat_mode_allowed(&self) -> bool {
        self.control.contains(ControlFlags::ALLOW_COMPAT_MODE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_that_is_a_fifo_a_device_or_too_large_stops_the_driver_open() {
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
        // A regular file: read by cuFile up to the size of any cufile.json.
        let json = dir.join("large.json");
        let file = std::fs::File::create(&json).unwrap();
        file.set_len(cufile_config::MAX_FILE_BYTES).unwrap();
        assert!(config_is_readable_at(Some(json.clone().into_os_string()), &missing).is_ok());
        file.set_len(cufile_config::MAX_FILE_BYTES + 1).unwrap();
        let result = config_is_readable_at(None, &json);
        assert!(
            matches!(result, Err(Error::ConfigTooLarge { size, .. }) if size == cufile_config::MAX_FILE_BYTES + 1),
            "{result:?}"
        );
        assert!(result.unwrap_err().to_string().contains("1048577 bytes"));
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
        assert_eq!(
            props.supported_storage,
            StorageFlags::NFS | StorageFlags::NVME
        );
        assert_eq!(props.control, ControlFlags::ALLOW_COMPAT_MODE);
        assert!(props.compat_mode_allowed());
        assert_eq!(
            props.features,
            FeatureFlags::BATCH_IO | FeatureFlags::PARALLEL_IO
        );
        assert_eq!(props.direct_path(), None);

        raw.fflags |= 1 << 4;
        assert_eq!(
            DriverProperties::from_raw(&raw).direct_path(),
            Some(DirectPath::PciP2pDma)
        );
        // 1.15 says P2PDMA with a storage flag instead.
        let mut v1_15 = CUfileDrvProps_t::default();
        v1_15.nvfs.dstatusflags = 1 << 11;
        assert_eq!(
            DriverProperties::from_raw(&v1_15).direct_path(),
            Some(DirectPath::PciP2pDma)
        );

        raw.nvfs.major_version = 2;
        raw.nvfs.minor_version = 26;
        let props = DriverProperties::from_raw(&raw);
        assert_eq!(
            props.direct_path(),
            Some(DirectPath::NvidiaFs {
                major: 2,
                minor: 26
            })
        );
        assert_eq!(props.direct_path().unwrap().to_string(), "nvidia-fs 2.26");
        let json = serde_json::to_value(&props).unwrap();
        assert_eq!(
            json["supported_storage"],
            serde_json::json!(["nfs", "nvme"])
        );
        assert_eq!(
            serde_json::to_value(props.direct_path()).unwrap(),
            serde_json::json!({"kind": "nvidia_fs", "major": 2, "minor": 26})
        );
    }

    /// A stand-in for cuFile: each opening numbered, every open and close
    /// logged.
    #[derive(Debug, Clone)]
    struct Fake {
        opening: u32,
        log: &'static Mutex<Vec<Event>>,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Event {
        Open(u32),
        Close(u32),
    }

    type FakeLifecycle = &'static Mutex<Lifecycle<Fake>>;

    fn fake() -> (FakeLifecycle, &'static Mutex<Vec<Event>>) {
        let log: &'static Mutex<Vec<Event>> = Box::leak(Box::default());
        let lifecycle = Box::leak(Box::new(Mutex::new(Lifecycle::new(|fake: &Fake| {
            fake.log.lock().unwrap().push(Event::Close(fake.opening))
        }))));
        (lifecycle, log)
    }

    /// Open (or join) through `lifecycle`, as `Driver::open_with` does.
    fn open(lifecycle: FakeLifecycle, log: &'static Mutex<Vec<Event>>) -> Arc<Session<Fake>> {
        Lifecycle::session(lifecycle, || {
            let mut events = log.lock().unwrap();
            let opening = events
                .iter()
                .filter(|e| matches!(e, Event::Open(_)))
                .count() as u32;
            events.push(Event::Open(opening));
            Ok(Fake { opening, log })
        })
        .unwrap()
    }

    fn events(log: &Mutex<Vec<Event>>) -> Vec<Event> {
        log.lock().unwrap().clone()
    }

    #[test]
    fn sessions_share_one_opening_and_the_last_drop_closes_it() {
        let (lifecycle, log) = fake();
        let a = open(lifecycle, log);
        let b = open(lifecycle, log);
        assert!(Arc::ptr_eq(&a, &b));
        drop(a);
        assert_eq!(events(log), [Event::Open(0)]);
        drop(b);
        assert_eq!(events(log), [Event::Open(0), Event::Close(0)]);
        assert!(lock(lifecycle).current.is_none());
    }

    #[test]
    fn after_shutdown_the_next_open_opens_anew_and_old_handles_are_refused() {
        let (lifecycle, log) = fake();
        let old = open(lifecycle, log);
        let old_clone = old.clone();
        old.shutdown();
        assert_eq!(events(log), [Event::Open(0), Event::Close(0)]);
        assert!(!old_clone.is_open());
        assert!(matches!(
            old_clone.enter("cuFileRead"),
            Err(Error::DriverClosed {
                operation: "cuFileRead"
            })
        ));

        // The closed session is never handed out again.
        let new = open(lifecycle, log);
        assert!(!Arc::ptr_eq(&old, &new));
        assert!(new.is_open() && new.enter("cuFileRead").is_ok());
        assert_eq!(new.opened.opening, 1);

        // Shutting down again, or dropping the old session, closes nothing.
        old_clone.shutdown();
        drop(old);
        drop(old_clone);
        assert_eq!(
            events(log),
            [Event::Open(0), Event::Close(0), Event::Open(1)]
        );
        assert!(new.enter("cuFileRead").is_ok());
        drop(new);
        assert_eq!(events(log).last(), Some(&Event::Close(1)));
    }

    #[test]
    fn an_open_racing_the_last_drop_takes_the_opening_over() {
        let (lifecycle, log) = fake();
        let dying = open(lifecycle, log);
        let dying_id = dying.id;
        // The moment between the last `Arc` going and `Session::drop`
        // taking the lock: the weak reference is dead, the driver open.
        let opened = dying.opened.clone();
        std::mem::forget(dying);
        lock(lifecycle).current = Some(Current {
            id: dying_id,
            opened,
            session: Weak::new(),
        });
        let taker = open(lifecycle, log);
        assert_eq!(events(log), [Event::Open(0)], "no second cuFileDriverOpen");
        assert_ne!(taker.id, dying_id);
        // The old session's drop now runs: it no longer owns the opening.
        lock(lifecycle).close_if_current(dying_id);
        assert_eq!(events(log), [Event::Open(0)]);
        assert!(taker.enter("cuFileRead").is_ok());
        drop(taker);
        assert_eq!(events(log), [Event::Open(0), Event::Close(0)]);
    }

    #[test]
    fn a_failed_open_leaves_the_driver_closed_and_the_next_open_tries_again() {
        let (lifecycle, log) = fake();
        let failed = Lifecycle::session(lifecycle, || {
            Err(Error::StatsUnavailable {
                reason: "test".into(),
            })
        });
        assert!(failed.is_err());
        assert!(lock(lifecycle).current.is_none());
        let session = open(lifecycle, log);
        assert!(session.is_open());
    }

    /// Random sequences of open, drop, shutdown and calls on any session
    /// held: cuFile is open exactly while a session is current, each opening
    /// is closed once, an open session is always the latest opening, and
    /// nothing stays open once every session is gone.
    #[test]
    fn every_sequence_keeps_the_invariants() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..500 {
            let (lifecycle, log) = fake();
            let mut held: Vec<Arc<Session<Fake>>> = Vec::new();
            for _ in 0..12 {
                match next(4) {
                    0 => {
                        let session = open(lifecycle, log);
                        assert!(session.is_open(), "open never hands out a closed session");
                        held.push(session);
                    }
                    1 if !held.is_empty() => drop(held.swap_remove(next(held.len()))),
                    2 if !held.is_empty() => held[next(held.len())].shutdown(),
                    _ if !held.is_empty() => {
                        let session = &held[next(held.len())];
                        let entered = session.enter("cuFileRead").is_ok();
                        assert_eq!(entered, session.is_open());
                    }
                    _ => {}
                }
                let events = events(log);
                let opens = events
                    .iter()
                    .filter(|e| matches!(e, Event::Open(_)))
                    .count();
                let closes: Vec<u32> = events
                    .iter()
                    .filter_map(|e| match e {
                        Event::Close(n) => Some(*n),
                        _ => None,
                    })
                    .collect();
                let mut unique = closes.clone();
                unique.sort_unstable();
                unique.dedup();
                assert_eq!(
                    unique.len(),
                    closes.len(),
                    "an opening closed twice: {events:?}"
                );
                let cufile_open = opens == closes.len() + 1;
                assert!(cufile_open || opens == closes.len(), "{events:?}");
                assert_eq!(cufile_open, lock(lifecycle).current.is_some());
                for session in &held {
                    if session.is_open() {
                        assert!(cufile_open, "an open session on a closed driver");
                        assert_eq!(session.opened.opening as usize, opens - 1);
                    }
                }
                if held.is_empty() {
                    assert!(!cufile_open, "no session left, driver still open");
                }
            }
        }
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
