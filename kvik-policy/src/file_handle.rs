//! `FileHandle`: KvikIO's file handle. Opens a file, decides once how
//! device-memory requests will be served (and keeps why), and runs reads and
//! writes as the [plan](crate::plan) of each request says, each with a
//! [`PathReport`].

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use gds_core::readiness;
use rayon::ThreadPool;

use crate::buffer::{Buf, BufMut, IoBuffer, IoBufferMut};
use crate::error::{Error, Result};
use crate::path_report::{
    CuFileLayer, DirectIoStatus, DirectIoUse, KvikLayer, NotCalledReason, Operation, PathReport,
};
use crate::pending_io::PendingIo;
use crate::plan::{self, Execution, Plan, Request};
use crate::posix::{self, Descriptors};
use crate::routing::{self, Backend, CuFileAvailability, CuFileSetupFailure, FileRouting};
use crate::task_runner::{self, DisjointSlices, Totals};
use crate::{CompatMode, Settings, thread_pool};

/// Device-memory requests: cuFile, or POSIX through pinned bounce buffers.
mod device;

pub(crate) use device::CuFileOnStream;

/// How a file is opened, as KvikIO spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenMode {
    /// `r`: read only; the file must exist.
    Read,
    /// `r+`: read and write; the file must exist.
    ReadWrite,
    /// `w`: write only; created, or truncated.
    Write,
    /// `w+`: read and write; created, or truncated.
    WriteRead,
}

impl OpenMode {
    /// Whether the mode allows reads (all but `w`).
    pub fn readable(self) -> bool {
        !matches!(self, OpenMode::Write)
    }
    /// Whether the mode allows writes (all but `r`).
    pub fn writable(self) -> bool {
        !matches!(self, OpenMode::Read)
    }
    /// Whether opening creates (or truncates) the file.
    pub fn creates(self) -> bool {
        matches!(self, OpenMode::Write | OpenMode::WriteRead)
    }
    fn std_options(self) -> std::fs::OpenOptions {
        let mut o = std::fs::OpenOptions::new();
        o.read(self.readable()).write(self.writable());
        o
    }
}

impl FromStr for OpenMode {
    type Err = Error;
    /// Exactly `r`, `r+`, `w` or `w+`. KvikIO refuses `a` too (appending
    /// does not fit positional writes), and we also refuse what KvikIO
    /// silently ignores (`rb`, `wx`).
    fn from_str(s: &str) -> Result<OpenMode> {
        match s {
            "r" => Ok(OpenMode::Read),
            "r+" => Ok(OpenMode::ReadWrite),
            "w" => Ok(OpenMode::Write),
            "w+" => Ok(OpenMode::WriteRead),
            _ => Err(Error::OpenMode {
                mode: s.to_string(),
            }),
        }
    }
}

impl std::fmt::Display for OpenMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OpenMode::Read => "r",
            OpenMode::ReadWrite => "r+",
            OpenMode::Write => "w",
            OpenMode::WriteRead => "w+",
        })
    }
}

impl serde::Serialize for OpenMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A finished request: the bytes moved and the path they took.
#[derive(Debug, Clone, PartialEq)]
pub struct Transfer {
    /// Bytes moved: all of them, except for a read that met the end of the
    /// file (then the bytes before it).
    pub bytes: usize,
    pub report: PathReport,
}

impl Transfer {
    /// This transfer, or `Error::UnexpectedEof` when a read stopped short.
    pub fn exact(self) -> Result<Transfer> {
        let r = &self.report;
        if self.bytes as u64 == r.requested_bytes {
            return Ok(self);
        }
        Err(Error::UnexpectedEof {
            path: r.path.clone(),
            offset: r.file_offset,
            requested: r.requested_bytes,
            reached: r.file_offset + self.bytes as u64,
        })
    }
}

/// How to open a [`FileHandle`]: the mode, the permission bits of a new
/// file, and settings for this handle only. Like `std::fs::OpenOptions`.
///
/// ```
/// use kvik_policy::{CompatMode, OpenMode, OpenOptions};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("out.bin");
/// let file = OpenOptions::new(OpenMode::Write)
///     .permissions(0o600)            // a new file is private
///     .compat_mode(CompatMode::On)   // never cuFile for this file
///     .task_size(8 << 20)            // 8 MiB tasks for this handle
///     .open(&path)?;
/// file.write(&[1u32, 2, 3][..], 0)?;
/// assert_eq!(file.nbytes()?, 12);
/// assert_eq!(file.settings()?.task_size(), 8 << 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct OpenOptions {
    mode: OpenMode,
    permissions: u32,
    custom_flags: i32,
    compat_mode: Option<CompatMode>,
    task_size: Option<u64>,
    gds_threshold: Option<u64>,
    num_threads: Option<usize>,
    settings: Option<Settings>,
}

impl OpenOptions {
    /// Options for `mode`; a new file gets permission bits 0o644 (less the
    /// umask), as KvikIO creates files.
    pub fn new(mode: OpenMode) -> OpenOptions {
        OpenOptions {
            mode,
            permissions: 0o644,
            custom_flags: 0,
            compat_mode: None,
            task_size: None,
            gds_threshold: None,
            num_threads: None,
            settings: None,
        }
    }

    /// Permission bits of a file this open creates (the umask applies).
    pub fn permissions(&mut self, bits: u32) -> &mut Self {
        self.permissions = bits;
        self
    }

    /// Extra `open(2)` flags, such as `O_NOFOLLOW` or `O_EXCL`.
    pub fn custom_flags(&mut self, flags: i32) -> &mut Self {
        self.custom_flags = flags;
        self
    }

    /// The compat mode that routes this file (default: the settings').
    pub fn compat_mode(&mut self, mode: CompatMode) -> &mut Self {
        self.compat_mode = Some(mode);
        self
    }

    /// Task size for this handle's requests.
    pub fn task_size(&mut self, bytes: u64) -> &mut Self {
        self.task_size = Some(bytes);
        self
    }

    /// `gds_threshold` for this handle's requests.
    pub fn gds_threshold(&mut self, bytes: u64) -> &mut Self {
        self.gds_threshold = Some(bytes);
        self
    }

    /// Pool threads for this handle's requests.
    pub fn num_threads(&mut self, threads: usize) -> &mut Self {
        self.num_threads = Some(threads);
        self
    }

    /// Fix every setting for the life of the handle (without this, each
    /// request reads the global settings, as KvikIO reads its defaults;
    /// the overrides above apply on top either way).
    pub fn settings(&mut self, settings: Settings) -> &mut Self {
        self.settings = Some(settings);
        self
    }

    /// Open `path`.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<FileHandle> {
        let path = path.as_ref();
        let mut options = self.mode.std_options();
        if self.mode.creates() {
            options.create(true).truncate(true);
        }
        options
            .mode(self.permissions)
            .custom_flags(self.custom_flags);
        let file = options
            .open(path)
            .map_err(|source| open_error(path, self.mode, source))?;
        self.adopt(file, path, path.to_path_buf())
    }

    /// A handle on a file that is already open (with access matching the
    /// mode), named `path` in reports. The file is never reopened by name:
    /// the O_DIRECT descriptor cuFile and O_DIRECT I/O need is a new open of
    /// the same open file (`/proc/self/fd/N`), so a path swapped after the
    /// open cannot redirect it.
    pub fn from_file(&self, file: File, path: impl AsRef<Path>) -> Result<FileHandle> {
        // The file may have no name (O_TMPFILE) or another file may have
        // taken it: the readiness check looks at the file itself.
        let probe = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        self.adopt(file, path.as_ref(), probe)
    }

    fn adopt(&self, file: File, path: &Path, probe: PathBuf) -> Result<FileHandle> {
        let open_error = |source| open_error(path, self.mode, source);
        let meta = file.metadata().map_err(open_error)?;
        if meta.is_dir() {
            return Err(open_error(std::io::Error::from_raw_os_error(libc::EISDIR)));
        }
        let mut settings = self
            .settings
            .clone()
            .map(Ok)
            .unwrap_or_else(Settings::global)?;
        let overrides = Overrides {
            task_size: self.task_size,
            gds_threshold: self.gds_threshold,
            num_threads: self.num_threads,
        };
        overrides.apply(&mut settings)?;
        let compat = self.compat_mode.unwrap_or(settings.compat_mode());
        let mut inner = Inner {
            path: path.to_path_buf(),
            probe,
            mode: self.mode,
            file,
            direct: OnceLock::new(),
            routing: routing::route_file(CompatMode::On, &CuFileAvailability::not_asked())
                .expect("compat mode ON always routes"),
            cufile: None,
            settings: self.settings.clone(),
            overrides,
            tasks_in_flight: AtomicUsize::new(0),
        };
        let (routing, cufile) = inner.route(compat)?;
        inner.routing = routing;
        inner.cufile = cufile;
        // Start the pool now: thread start-up belongs to the open, not to
        // the first request's time.
        thread_pool::get(settings.num_threads())?;
        Ok(FileHandle {
            inner: Arc::new(inner),
        })
    }
}

/// Per-handle settings applied on top of the global (or fixed) ones.
#[derive(Debug, Clone, Copy, Default)]
struct Overrides {
    task_size: Option<u64>,
    gds_threshold: Option<u64>,
    num_threads: Option<usize>,
}

impl Overrides {
    fn apply(&self, settings: &mut Settings) -> Result<()> {
        if let Some(bytes) = self.task_size {
            settings.set_task_size(bytes)?;
        }
        if let Some(bytes) = self.gds_threshold {
            settings.set_gds_threshold(bytes);
        }
        if let Some(threads) = self.num_threads {
            settings.set_num_threads(threads)?;
        }
        Ok(())
    }
}

/// An open file, with its routing decided: KvikIO's `FileHandle`.
///
/// ```
/// use kvik_policy::FileHandle;
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("weights.bin");
/// # std::fs::write(&path, vec![7u8; 3 << 20])?;
/// let file = FileHandle::open(&path, "r")?;
/// let mut buf = vec![0u8; 1 << 20];
/// let n = file.read(&mut buf, 0)?;                       // blocking; short at end of file
/// let (buf, done) = file.pread(buf, 1 << 20).wait()?;    // in the background; the buffer comes back
/// assert_eq!((n, done.bytes), (1 << 20, 1 << 20));
/// assert!(buf.iter().all(|&b| b == 7));
/// println!("{}", done.report);                           // which path, and why
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Per request, [`plan::plan`] decides the backend (host memory → POSIX;
/// device memory → cuFile or pinned bounce buffers), where the tasks run
/// and how the request is cut; the tasks run on the pool of `num_threads`,
/// taken in file order; the first failing task stops the others from
/// starting, and the call returns only when none is left running. Clones
/// share the open file.
#[derive(Debug, Clone)]
pub struct FileHandle {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// What the readiness check opens: `path` for a handle opened by path,
    /// the file's own `/proc/self/fd/N` for an adopted one.
    probe: PathBuf,
    mode: OpenMode,
    /// The ordinary descriptor (O_CLOEXEC, as every descriptor std opens).
    file: File,
    /// The O_DIRECT descriptor, opened on first need; or why it could not be.
    direct: OnceLock<std::result::Result<File, CuFileSetupFailure>>,
    routing: FileRouting,
    /// The cuFile registration, when device-memory requests go to cuFile.
    cufile: Option<gds_core::CuFileHandle>,
    /// Settings fixed at open; `None` reads the global settings at every
    /// request, as KvikIO reads its defaults.
    settings: Option<Settings>,
    overrides: Overrides,
    tasks_in_flight: AtomicUsize,
}

impl FileHandle {
    /// Open `path` with mode `r`, `r+`, `w` or `w+`, under the global
    /// settings ([`Settings::global`]): the compat mode decides the routing
    /// now; task size, threads and the rest are read at each request.
    /// [`OpenOptions`] offers more.
    pub fn open(path: impl AsRef<Path>, mode: &str) -> Result<FileHandle> {
        OpenOptions::new(mode.parse()?).open(path)
    }

    /// Open under `settings`, fixed for the life of the handle.
    pub fn open_with(
        path: impl AsRef<Path>,
        mode: &str,
        settings: &Settings,
    ) -> Result<FileHandle> {
        OpenOptions::new(mode.parse()?)
            .settings(settings.clone())
            .open(path)
    }

    /// Options to open a file with: `FileHandle::options(OpenMode::Read)`.
    pub fn options(mode: OpenMode) -> OpenOptions {
        OpenOptions::new(mode)
    }

    /// Use `file`, already open (with access matching `mode`), under
    /// `settings` fixed for the life of the handle. `path` names it in
    /// reports and errors only: nothing is opened by that name (the file
    /// may have none, as an `O_TMPFILE` file has none). See
    /// [`OpenOptions::from_file`].
    pub fn from_file(
        file: File,
        path: impl AsRef<Path>,
        mode: &str,
        settings: &Settings,
    ) -> Result<FileHandle> {
        OpenOptions::new(mode.parse()?)
            .settings(settings.clone())
            .from_file(file, path)
    }

    /// The path the file was opened with (named in reports and errors).
    /// This file again, as a new handle under `options` (its own settings
    /// and routing; `options`' mode must allow no more than this handle's
    /// access): the same open file, never reopened by name, never truncated.
    pub fn reopen_with(&self, options: &OpenOptions) -> Result<FileHandle> {
        let file = self
            .inner
            .file
            .try_clone()
            .map_err(|source| open_error(&self.inner.path, options.mode, source))?;
        options.adopt(file, &self.inner.path, self.inner.probe.clone())
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }
    /// The mode the file was opened with.
    pub fn mode(&self) -> OpenMode {
        self.inner.mode
    }
    /// The per-file decision made at open, with its reasons.
    pub fn routing(&self) -> &FileRouting {
        &self.inner.routing
    }
    /// The settings the next request will use.
    pub fn settings(&self) -> Result<Settings> {
        self.inner.settings()
    }
    /// The file's size in bytes (KvikIO's `nbytes`).
    pub fn nbytes(&self) -> Result<u64> {
        self.inner
            .file
            .metadata()
            .map(|m| m.len())
            .map_err(|source| Error::Io {
                operation: Operation::Read,
                syscall: "fstat",
                path: self.inner.path.clone(),
                offset: 0,
                errno: source.raw_os_error(),
                source,
            })
    }
    /// The ordinary (page-cache) descriptor.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.inner.file.as_raw_fd()
    }
    /// The O_DIRECT descriptor, if one has been opened (for cuFile, or for
    /// opportunistic O_DIRECT by an earlier request).
    pub fn fd_direct(&self) -> Option<std::os::fd::RawFd> {
        match self.inner.direct.get() {
            Some(Ok(file)) => Some(file.as_raw_fd()),
            _ => None,
        }
    }
    /// Tasks of this handle running right now (0 whenever no call is in
    /// progress: a call never returns with its tasks still running).
    pub fn tasks_in_flight(&self) -> usize {
        self.inner.tasks_in_flight.load(Ordering::SeqCst)
    }

    /// The plan a request would run under now, without running it (what
    /// `kvik plan` prints for this file).
    pub fn plan(&self, request: Request) -> Result<Plan> {
        let settings = self.inner.settings()?;
        Ok(plan::plan(request, &settings, &self.inner.routing, None))
    }

    /// Read into `buf` from `offset`; returns the bytes read, fewer than
    /// `buf.len()` only at end of file. `buf`: `&mut [T]` or `&mut Vec<T>`
    /// of plain data, `&mut CudaSlice<T>`, a `CudaViewMut<T>`, …
    pub fn read<'a>(&self, buf: impl Into<BufMut<'a>>, offset: u64) -> Result<usize> {
        self.read_with_report(buf, offset).map(|t| t.bytes)
    }

    /// Fill `buf` from `offset`, or fail with the offset where the file ended.
    pub fn read_exact<'a>(&self, buf: impl Into<BufMut<'a>>, offset: u64) -> Result<()> {
        self.read_with_report(buf, offset)?.exact().map(drop)
    }

    /// [`FileHandle::read`], with the path report.
    pub fn read_with_report<'a>(
        &self,
        buf: impl Into<BufMut<'a>>,
        offset: u64,
    ) -> Result<Transfer> {
        let cancel = AtomicBool::new(false);
        self.inner
            .transfer(Memory::Read(buf.into()), offset, &cancel)
    }

    /// Write all of `buf` at `offset`; returns `buf.len()` in bytes.
    pub fn write<'a>(&self, buf: impl Into<Buf<'a>>, offset: u64) -> Result<usize> {
        self.write_with_report(buf, offset).map(|t| t.bytes)
    }

    /// [`FileHandle::write`], with the path report.
    pub fn write_with_report<'a>(&self, buf: impl Into<Buf<'a>>, offset: u64) -> Result<Transfer> {
        let cancel = AtomicBool::new(false);
        self.inner
            .transfer(Memory::Write(buf.into()), offset, &cancel)
    }

    /// Read into `buf` from `offset` in the background; wait on (or poll, or
    /// `.await`) the result to get the buffer back. For part of a buffer you
    /// keep, see [`crate::scope`].
    pub fn pread<B: IoBufferMut>(&self, mut buf: B, offset: u64) -> PendingIo<B> {
        let inner = self.inner.clone();
        self.spawn(move |cancel| {
            let done = inner.transfer(Memory::Read(buf.as_buf_mut()), offset, cancel)?;
            Ok((buf, done))
        })
    }

    /// Write `buf` at `offset` in the background.
    pub fn pwrite<B: IoBuffer>(&self, buf: B, offset: u64) -> PendingIo<B> {
        let inner = self.inner.clone();
        self.spawn(move |cancel| {
            let done = inner.transfer(Memory::Write(buf.as_buf()), offset, cancel)?;
            Ok((buf, done))
        })
    }

    /// Run `job` on this handle's pool.
    pub(crate) fn spawn<B: Send + 'static>(
        &self,
        job: impl FnOnce(&AtomicBool) -> Result<(B, Transfer)> + Send + 'static,
    ) -> PendingIo<B> {
        match self.inner.pool() {
            Err(e) => PendingIo::ready(Err(e)),
            Ok(pool) => PendingIo::spawn(pool, move || {
                let cancel = AtomicBool::new(false);
                job(&cancel)
            }),
        }
    }

    /// Run a request on the calling thread (the scoped API's jobs).
    pub(crate) fn transfer_read(
        &self,
        buf: BufMut<'_>,
        offset: u64,
        cancel: &AtomicBool,
    ) -> Result<Transfer> {
        self.inner.transfer(Memory::Read(buf), offset, cancel)
    }

    pub(crate) fn transfer_write(
        &self,
        buf: Buf<'_>,
        offset: u64,
        cancel: &AtomicBool,
    ) -> Result<Transfer> {
        self.inner.transfer(Memory::Write(buf), offset, cancel)
    }

    /// Enqueue the request as one cuFile operation on `stream`, where the
    /// file goes to cuFile, the memory is device memory at or above
    /// `gds_threshold`, and libcufile has its stream API; `None` otherwise.
    pub(crate) fn cufile_on_stream(
        &self,
        memory: Memory<'_>,
        offset: u64,
        stream: &Arc<cudarc::driver::CudaStream>,
    ) -> Result<Option<CuFileOnStream>> {
        let request = memory.request(offset);
        let range = match &memory {
            Memory::Read(BufMut::Device(d)) => d.range(),
            Memory::Write(Buf::Device(d)) => d.range(),
            _ => return Ok(None),
        };
        self.inner.check_request(request)?;
        let settings = self.inner.settings()?;
        self.inner
            .cufile_on_stream(&settings, request, range, stream)
    }

    /// The result and report of an operation enqueued by `cufile_on_stream`,
    /// once the stream has run it.
    pub(crate) fn finish_on_stream(&self, op: CuFileOnStream) -> Result<Transfer> {
        self.inner.finish_on_stream(op)
    }

    /// Get ready to move data to and from GPU `ordinal` through bounce
    /// buffers: every pool thread (and the calling thread) allocates its
    /// stream and pinned buffers now. Optional — the first request does it
    /// otherwise, inside its own time (pinned allocation is slow).
    pub fn prepare_device(&self, ordinal: u32) -> Result<()> {
        let settings = self.inner.settings()?;
        let chunk = crate::gpu::staging_chunk(&settings);
        crate::gpu::prepare(ordinal, chunk)?;
        self.inner
            .pool()?
            .broadcast(|_| crate::gpu::prepare(ordinal, chunk))
            .into_iter()
            .collect()
    }

    /// `fdatasync`: written data reaches the storage.
    ///
    /// After a failed sync, written data may be lost even if a later sync
    /// succeeds (the kernel can drop pages it could not write): write it
    /// again.
    pub fn sync_data(&self) -> Result<()> {
        self.inner.sync(true)
    }

    /// `fsync`: written data and all of the file's metadata reach the
    /// storage. (For a new file, its name is durable once its directory
    /// is synced too.)
    pub fn sync_all(&self) -> Result<()> {
        self.inner.sync(false)
    }

    /// [`FileHandle::write_with_report`], then `fdatasync` before returning:
    /// `Ok` means the bytes are on stable storage, not only in the page
    /// cache. A failed sync is an `Error::Io` naming `fdatasync`.
    pub fn write_synced<'a>(&self, buf: impl Into<Buf<'a>>, offset: u64) -> Result<Transfer> {
        let done = self.write_with_report(buf, offset)?;
        self.sync_data()?;
        Ok(done)
    }
}

/// A failed open (of the ordinary descriptor) of `path`.
fn open_error(path: &Path, mode: OpenMode, source: std::io::Error) -> Error {
    Error::Open {
        path: path.to_path_buf(),
        mode,
        direct: false,
        source,
    }
}

/// For sibling modules that run their own requests on this file (batch reads).
impl FileHandle {
    pub(crate) fn buffered_file(&self) -> &File {
        &self.inner.file
    }
    pub(crate) fn direct_file(&self) -> std::result::Result<&File, String> {
        self.inner.direct_descriptor().map_err(ToString::to_string)
    }
    pub(crate) fn in_flight_counter(&self) -> &AtomicUsize {
        &self.inner.tasks_in_flight
    }
}

/// The memory of one request.
pub(crate) enum Memory<'a> {
    Read(BufMut<'a>),
    Write(Buf<'a>),
}

impl Memory<'_> {
    fn request(&self, offset: u64) -> Request {
        match self {
            Memory::Read(b) => Request::read(offset, b.len() as u64, b.memory()),
            Memory::Write(b) => Request::write(offset, b.len() as u64, b.memory()),
        }
    }
}

impl Inner {
    fn sync(&self, data_only: bool) -> Result<()> {
        posix::sync(&self.file, data_only).map_err(|source| Error::Io {
            operation: Operation::Write,
            syscall: if data_only { "fdatasync" } else { "fsync" },
            path: self.path.clone(),
            offset: 0,
            errno: source.raw_os_error(),
            source,
        })
    }

    fn settings(&self) -> Result<Settings> {
        let mut settings = match &self.settings {
            Some(s) => s.clone(),
            None => Settings::global()?,
        };
        self.overrides.apply(&mut settings)?;
        Ok(settings)
    }

    fn pool(&self) -> Result<Arc<ThreadPool>> {
        thread_pool::get(self.settings()?.num_threads())
    }

    /// The per-file routing. Compat mode ON never looks at cuFile (libcufile
    /// is not even loaded); AUTO and OFF ask gds-core's readiness check about
    /// this file (with the process's cuFile driver, opened once where a GPU
    /// exists), and register the file when cuFile is chosen.
    fn route(&self, compat: CompatMode) -> Result<(FileRouting, Option<gds_core::CuFileHandle>)> {
        let cufile = match compat {
            CompatMode::On => CuFileAvailability::not_asked(),
            CompatMode::Auto | CompatMode::Off => {
                let driver = crate::cufile::driver().ok();
                CuFileAvailability::from_readiness(&readiness::check_with(
                    Some(&self.probe),
                    driver,
                ))
            }
        };
        let required = |source| Error::CuFileRequired {
            path: self.path.clone(),
            source,
        };
        let mut file = routing::route_file(compat, &cufile).map_err(required)?;
        if file.device_backend != Backend::Cufile {
            return Ok((file, None));
        }
        // cuFile registers the file through an O_DIRECT descriptor.
        let registered = self
            .direct_descriptor()
            .map_err(Clone::clone)
            .and_then(|direct| crate::cufile::register(direct, &self.path));
        match registered {
            Ok(handle) => Ok((file, Some(handle))),
            Err(failure) if compat == CompatMode::Off => {
                Err(required(routing::CuFileRequired::SetupFailed { failure }))
            }
            Err(failure) => {
                file.fall_back(failure);
                Ok((file, None))
            }
        }
    }

    /// The O_DIRECT descriptor, opened once on first need: a new open of the
    /// same open file through `/proc/self/fd/N` (its own file status flags,
    /// the same inode whatever happened to the path since). Without /proc,
    /// the path is opened and must still name the same file.
    fn direct_descriptor(&self) -> std::result::Result<&File, &CuFileSetupFailure> {
        self.direct
            .get_or_init(|| {
                let failure = |e: std::io::Error| CuFileSetupFailure::DirectDescriptor {
                    errno: e.raw_os_error(),
                    message: match e.raw_os_error() {
                        Some(libc::EINVAL) => {
                            format!("the filesystem does not support O_DIRECT ({e})")
                        }
                        _ => e.to_string(),
                    },
                };
                let mut options = self.mode.std_options();
                options.custom_flags(libc::O_DIRECT);
                // Reopening must not truncate or create: those happened at open.
                let through_proc = format!("/proc/self/fd/{}", self.file.as_raw_fd());
                let direct = match options.open(&through_proc) {
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                        options.open(&self.path).map_err(failure)?
                    }
                    other => other.map_err(failure)?,
                };
                let same = |f: &File| f.metadata().map(|m| (m.dev(), m.ino()));
                if same(&direct).ok() != same(&self.file).ok() {
                    return Err(CuFileSetupFailure::DirectDescriptor {
                        errno: None,
                        message: format!(
                            "{} names another file than the one opened",
                            self.path.display()
                        ),
                    });
                }
                Ok(direct)
            })
            .as_ref()
    }

    /// Refuse what this handle cannot do: the wrong direction for its mode,
    /// or a range past the largest file offset.
    fn check_request(&self, request: Request) -> Result<()> {
        let allowed = match request.operation {
            Operation::Read => self.mode.readable(),
            Operation::Write => self.mode.writable(),
        };
        if !allowed {
            return Err(Error::ModeForbids {
                operation: request.operation,
                path: self.path.clone(),
                mode: self.mode,
            });
        }
        if request
            .file_offset
            .checked_add(request.size)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err(Error::InvalidRequest {
                operation: request.operation,
                path: self.path.clone(),
                offset: request.file_offset,
                size: request.size,
                problem: "the request ends beyond the largest file offset (2^63 - 1)",
            });
        }
        Ok(())
    }

    /// Run one request: check it, plan it, run it, report.
    fn transfer(&self, memory: Memory<'_>, offset: u64, cancel: &AtomicBool) -> Result<Transfer> {
        let request = memory.request(offset);
        self.check_request(request)?;
        let settings = self.settings()?;
        match memory {
            Memory::Read(BufMut::Host(buf)) => {
                let pieces = DisjointSlices::new(buf);
                self.host_transfer(&settings, request, cancel, &|fds, task, cancel| {
                    // SAFETY: one piece per task of this request's split.
                    let piece = unsafe { pieces.piece(&task) };
                    posix::read(fds, piece, task.file_offset, cancel)
                })
            }
            Memory::Write(Buf::Host(buf)) => {
                self.host_transfer(&settings, request, cancel, &|fds, task, cancel| {
                    let piece = &buf[task.buffer_offset as usize..][..task.size as usize];
                    posix::write(fds, piece, task.file_offset, cancel)
                })
            }
            Memory::Read(BufMut::Device(d)) => {
                self.device_transfer(&settings, request, d.range(), d.after_stream(), cancel)
            }
            Memory::Write(Buf::Device(d)) => {
                self.device_transfer(&settings, request, d.range(), d.after_stream(), cancel)
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn host_transfer(
        &self,
        settings: &Settings,
        request: Request,
        cancel: &AtomicBool,
        run: &(
             dyn Fn(
            Descriptors<'_>,
            crate::task::Task,
            &AtomicBool,
        ) -> Result<task_runner::TaskOutcome>
                 + Sync
         ),
    ) -> Result<Transfer> {
        let plan = plan::plan(request, settings, &self.routing, None);
        // Opportunistic O_DIRECT for the page-aligned middle.
        let (wants_direct, setting) = match request.operation {
            Operation::Read => (settings.auto_direct_io_read(), "auto_direct_io_read"),
            Operation::Write => (settings.auto_direct_io_write(), "auto_direct_io_write"),
        };
        let (direct, status) = if !wants_direct {
            (None, DirectIoStatus::Off { setting })
        } else {
            match self.direct_descriptor() {
                Ok(fd) => (Some(fd), DirectIoStatus::On { setting }),
                Err(why) => (
                    None,
                    DirectIoStatus::Unavailable {
                        setting,
                        reason: why.to_string(),
                    },
                ),
            }
        };
        // Cold tasks of a read may go around the page cache.
        let cold_direct = match request.operation {
            Operation::Read if direct.is_none() && settings.cold_reads_direct() => {
                self.direct_descriptor().ok()
            }
            _ => None,
        };
        let fds = Descriptors {
            path: &self.path,
            buffered: &self.file,
            direct,
            cold_direct,
            bounce_size: settings.bounce_buffer_size(),
        };
        let totals = self.run(&plan, cancel, &|task| run(fds, task, cancel))?;
        let status = match (&totals.direct_refused, &totals.cold) {
            (Some(error), _) => DirectIoStatus::Refused {
                setting,
                error: error.clone(),
            },
            (None, Some(first)) => DirectIoStatus::ColdReads {
                direct_tasks: totals.cold_direct_tasks,
                first: first.clone(),
            },
            (None, None) => status,
        };
        let direct_io = DirectIoUse {
            status,
            bytes: totals.direct_bytes,
        };
        let cufile = CuFileLayer::NotCalled {
            reason: NotCalledReason::HostMemory,
        };
        Ok(self.report(&plan, &totals, direct_io, cufile))
    }

    /// Run the plan's tasks where it says.
    fn run(
        &self,
        plan: &Plan,
        cancel: &AtomicBool,
        run: &(dyn Fn(crate::task::Task) -> Result<task_runner::TaskOutcome> + Sync),
    ) -> Result<Totals> {
        let pool = match plan.execution {
            Execution::Pool { threads } => Some(thread_pool::get(threads)?),
            Execution::CallingThread | Execution::CudaStream => None,
        };
        task_runner::run_tasks(
            &plan.tasks(),
            plan.execution,
            pool.as_deref(),
            cancel,
            &self.tasks_in_flight,
            run,
        )
    }

    /// The report of a finished request.
    fn report(
        &self,
        plan: &Plan,
        totals: &Totals,
        direct_io: DirectIoUse,
        cufile: CuFileLayer,
    ) -> Transfer {
        let request = plan.request;
        let report = PathReport {
            operation: request.operation,
            path: self.path.clone(),
            file_offset: request.file_offset,
            requested_bytes: request.size,
            bytes: totals.bytes,
            memory: request.memory,
            kvik: KvikLayer {
                file: self.routing.clone(),
                route: plan.route,
                other_routes: Vec::new(),
                execution: plan.execution,
                task_size: plan.task_size,
                tasks: plan.tasks().runs(),
                direct_io,
            },
            cufile,
        };
        Transfer {
            bytes: totals.bytes as usize,
            report,
        }
    }
}
