//! `FileHandle`: KvikIO's file handle. Opens a file, decides once how
//! device-memory requests will be served (and keeps why), and runs reads and
//! writes as tasks on the I/O pool, each with a [`PathReport`].
//!
//! ```no_run
//! use kvik_policy::FileHandle;
//! let file = FileHandle::open("/data/weights.bin", "r")?;
//! let mut buf = vec![0u8; 1 << 20];
//! let n = file.read(&mut buf, 0)?;                    // blocking; short at end of file
//! let (buf, done) = file.pread(buf, 4096).wait()?;    // in the background; buffer comes back
//! println!("{n} then {} bytes\n{}", done.bytes, done.report);
//! # Ok::<(), kvik_policy::Error>(())
//! ```
//!
//! Per request: the memory kind picks the backend ([`routing::route_request`]:
//! host memory → POSIX); the request is cut into tasks ([`task::split`]) that
//! run on the pool of `num_threads`; the first failing task stops the others
//! from starting, and the call returns only when none is left running.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use gds_core::readiness;
use rayon::ThreadPool;

use crate::buffer::{Buf, BufMut, IoBuffer, IoBufferMut};
use crate::error::{Error, Result};
use crate::path_report::{CuFileLayer, DirectIoUse, KvikLayer, Operation, PathReport, TaskReport};
use crate::pending_io::PendingIo;
use crate::posix::{self, Descriptors, TaskOutcome};
use crate::routing::{self, Backend, CuFileAvailability, FileRouting, MemoryKind, RequestRoute};
use crate::task::{self, Task};
use crate::{CompatMode, Settings, thread_pool};

/// Device-memory requests: cuFile, or POSIX through pinned bounce buffers.
mod device;

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
    pub fn readable(self) -> bool {
        !matches!(self, OpenMode::Write)
    }
    pub fn writable(self) -> bool {
        !matches!(self, OpenMode::Read)
    }
    fn creates(self) -> bool {
        matches!(self, OpenMode::Write | OpenMode::WriteRead)
    }
    fn options(self) -> OpenOptions {
        let mut o = OpenOptions::new();
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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// An open file, with its routing decided.
#[derive(Debug, Clone)]
pub struct FileHandle {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    mode: OpenMode,
    /// The ordinary descriptor (O_CLOEXEC, as every descriptor std opens).
    file: File,
    /// The O_DIRECT descriptor, opened on first need; or why it could not be.
    direct: OnceLock<std::result::Result<File, String>>,
    routing: FileRouting,
    /// The cuFile registration, when device-memory requests go to cuFile.
    cufile: Option<gds_core::CuFileHandle>,
    /// Settings fixed at open ([`FileHandle::open_with`]); `None` reads the
    /// global settings at every request, as KvikIO reads its defaults.
    settings: Option<Settings>,
    tasks_in_flight: AtomicUsize,
}

impl FileHandle {
    /// Open `path` with mode `r`, `r+`, `w` or `w+`, under the global
    /// settings ([`Settings::global`]): the compat mode decides the routing
    /// now; task size, threads and the rest are read at each request.
    pub fn open(path: impl AsRef<Path>, mode: &str) -> Result<FileHandle> {
        let settings = Settings::global()?;
        FileHandle::open_inner(path.as_ref(), mode.parse()?, &settings, None)
    }

    /// Open under `settings`, fixed for the life of the handle.
    pub fn open_with(
        path: impl AsRef<Path>,
        mode: &str,
        settings: &Settings,
    ) -> Result<FileHandle> {
        FileHandle::open_inner(
            path.as_ref(),
            mode.parse()?,
            settings,
            Some(settings.clone()),
        )
    }

    fn open_inner(
        path: &Path,
        mode: OpenMode,
        settings: &Settings,
        pinned: Option<Settings>,
    ) -> Result<FileHandle> {
        let open_error = |direct, source| Error::Open {
            path: path.to_path_buf(),
            mode,
            direct,
            source,
        };
        let mut options = mode.options();
        if mode.creates() {
            options.create(true).truncate(true);
        }
        let file = options.open(path).map_err(|e| open_error(false, e))?;
        let meta = file.metadata().map_err(|e| open_error(false, e))?;
        if meta.is_dir() {
            return Err(open_error(
                false,
                std::io::Error::from_raw_os_error(libc::EISDIR),
            ));
        }
        let mut inner = Inner {
            path: path.to_path_buf(),
            mode,
            file,
            direct: OnceLock::new(),
            routing: FileRouting {
                requested: settings.compat_mode(),
                effective: CompatMode::On,
                device_backend: Backend::Posix,
                reasons: vec![],
            },
            cufile: None,
            settings: pinned,
            tasks_in_flight: AtomicUsize::new(0),
        };
        let (routing, cufile) = inner.route(settings.compat_mode())?;
        inner.routing = routing;
        inner.cufile = cufile;
        // Start the pool now: thread start-up belongs to the open, not to
        // the first request's time.
        thread_pool::get(settings.num_threads())?;
        Ok(FileHandle {
            inner: Arc::new(inner),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }
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
        use std::os::fd::AsRawFd;
        self.inner.file.as_raw_fd()
    }
    /// The O_DIRECT descriptor, if one has been opened (for cuFile, or for
    /// opportunistic O_DIRECT by an earlier request).
    pub fn fd_direct(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
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

    /// Read into `buf` from `offset`; returns the bytes read, fewer than
    /// `buf.len()` only at end of file.
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
            .transfer(Memory::Read(buf.into()), offset, &cancel, true)
    }

    /// Write all of `buf` at `offset`; returns `buf.len()`.
    pub fn write<'a>(&self, buf: impl Into<Buf<'a>>, offset: u64) -> Result<usize> {
        self.write_with_report(buf, offset).map(|t| t.bytes)
    }

    /// [`FileHandle::write`], with the path report.
    pub fn write_with_report<'a>(&self, buf: impl Into<Buf<'a>>, offset: u64) -> Result<Transfer> {
        let cancel = AtomicBool::new(false);
        self.inner
            .transfer(Memory::Write(buf.into()), offset, &cancel, true)
    }

    /// Read into `buf` from `offset` in the background; wait on (or poll, or
    /// `.await`) the result to get the buffer back.
    pub fn pread<B: IoBufferMut>(&self, mut buf: B, offset: u64) -> PendingIo<B> {
        let inner = self.inner.clone();
        match inner.pool() {
            Err(e) => PendingIo::ready(Err(e)),
            Ok(pool) => PendingIo::spawn(pool, move || {
                let cancel = AtomicBool::new(false);
                let done =
                    inner.transfer(Memory::Read(buf.as_buf_mut()), offset, &cancel, false)?;
                Ok((buf, done))
            }),
        }
    }

    /// Write `buf` at `offset` in the background.
    pub fn pwrite<B: IoBuffer>(&self, buf: B, offset: u64) -> PendingIo<B> {
        let inner = self.inner.clone();
        match inner.pool() {
            Err(e) => PendingIo::ready(Err(e)),
            Ok(pool) => PendingIo::spawn(pool, move || {
                let cancel = AtomicBool::new(false);
                let done = inner.transfer(Memory::Write(buf.as_buf()), offset, &cancel, false)?;
                Ok((buf, done))
            }),
        }
    }

    /// Get ready to move data to and from GPU `ordinal` through bounce
    /// buffers: every pool thread (and the calling thread) allocates its
    /// stream and pinned buffers now. Optional — the first request does it
    /// otherwise, inside its own time (pinned allocation is slow).
    pub fn prepare_device(&self, ordinal: u32) -> Result<()> {
        let settings = self.inner.settings()?;
        let chunk = settings
            .bounce_buffer_size()
            .min(settings.task_size())
            .max(1) as usize;
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

/// For sibling modules that run their own requests on this file (batch reads).
impl FileHandle {
    pub(crate) fn buffered_file(&self) -> &File {
        &self.inner.file
    }
    pub(crate) fn direct_file(&self) -> std::result::Result<&File, String> {
        self.inner.direct_descriptor()
    }
    pub(crate) fn in_flight_counter(&self) -> &AtomicUsize {
        &self.inner.tasks_in_flight
    }
}

/// The memory of one request.
enum Memory<'a> {
    Read(BufMut<'a>),
    Write(Buf<'a>),
}

impl Memory<'_> {
    fn operation(&self) -> Operation {
        match self {
            Memory::Read(_) => Operation::Read,
            Memory::Write(_) => Operation::Write,
        }
    }
    fn len(&self) -> usize {
        match self {
            Memory::Read(b) => b.len(),
            Memory::Write(b) => b.len(),
        }
    }
    fn kind(&self) -> MemoryKind {
        match self {
            Memory::Read(b) => b.memory(),
            Memory::Write(b) => b.memory(),
        }
    }
}

/// One task's memory: where the backend of that task moves its bytes.
/// (The device-memory issue adds device ranges here.)
enum TaskMemory<'a> {
    HostRead(&'a mut [u8]),
    HostWrite(&'a [u8]),
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
        match &self.settings {
            Some(s) => Ok(s.clone()),
            None => Settings::global(),
        }
    }

    fn pool(&self) -> Result<Arc<ThreadPool>> {
        thread_pool::get(self.settings()?.num_threads())
    }

    /// The per-file routing of SPEC §5. Compat mode ON never looks at cuFile
    /// (libcufile is not even loaded); AUTO and OFF ask gds-core's readiness
    /// check about this file (with the process's cuFile driver, opened once
    /// where a GPU exists), and register the file when cuFile is chosen.
    fn route(&self, compat: CompatMode) -> Result<(FileRouting, Option<gds_core::CuFileHandle>)> {
        let cufile = match compat {
            CompatMode::On => CuFileAvailability {
                usable: false,
                direct_path: false,
                reasons: vec![],
            },
            CompatMode::Auto | CompatMode::Off => {
                let driver = crate::cufile::driver().ok();
                CuFileAvailability::from_readiness(&readiness::check_with(Some(&self.path), driver))
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
            .map_err(|why| format!("cannot open the O_DIRECT descriptor cuFile needs: {why}"))
            .and_then(|direct| crate::cufile::register(direct, &self.path));
        match registered {
            Ok(handle) => Ok((file, Some(handle))),
            Err(reason) if compat == CompatMode::Off => Err(required(routing::CuFileRequired {
                reasons: vec![reason],
            })),
            Err(reason) => {
                file.fall_back(format!("falling back to POSIX: {reason}"));
                Ok((file, None))
            }
        }
    }

    /// The O_DIRECT descriptor, opened once on first need.
    fn direct_descriptor(&self) -> std::result::Result<&File, String> {
        self.direct
            .get_or_init(|| {
                self.mode
                    .options()
                    .custom_flags(libc::O_DIRECT)
                    .open(&self.path)
                    .map_err(|e| match e.raw_os_error() {
                        Some(libc::EINVAL) => {
                            format!("the filesystem does not support O_DIRECT ({e})")
                        }
                        _ => e.to_string(),
                    })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Run one request: route it, split it, run the tasks, report.
    /// `inline` lets a single-task request run on the calling thread.
    fn transfer(
        &self,
        memory: Memory<'_>,
        offset: u64,
        cancel: &AtomicBool,
        inline: bool,
    ) -> Result<Transfer> {
        let operation = memory.operation();
        let len = memory.len() as u64;
        let allowed = match operation {
            Operation::Read => self.mode.readable(),
            Operation::Write => self.mode.writable(),
        };
        if !allowed {
            return Err(Error::ModeForbids {
                operation,
                path: self.path.clone(),
                mode: self.mode,
            });
        }
        if offset
            .checked_add(len)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err(Error::InvalidRequest {
                operation,
                path: self.path.clone(),
                offset,
                size: len,
                problem: "the request ends beyond the largest file offset (2^63 - 1)",
            });
        }
        let settings = self.settings()?;
        let route =
            routing::route_request(&self.routing, memory.kind(), len, settings.gds_threshold());
        // The per-request backend dispatch: host memory is always POSIX;
        // device memory goes to cuFile or through pinned bounce buffers
        // (file_handle/device.rs).
        match memory {
            Memory::Read(BufMut::Host(buf)) => self.host_transfer(
                &settings,
                route,
                TaskMemory::HostRead(buf),
                offset,
                cancel,
                inline,
            ),
            Memory::Write(Buf::Host(buf)) => self.host_transfer(
                &settings,
                route,
                TaskMemory::HostWrite(buf),
                offset,
                cancel,
                inline,
            ),
            Memory::Read(BufMut::Device(d)) => {
                self.device_transfer(&settings, route, operation, *d, offset, cancel, inline)
            }
            Memory::Write(Buf::Device(d)) => {
                self.device_transfer(&settings, route, operation, *d, offset, cancel, inline)
            }
        }
    }

    fn host_transfer(
        &self,
        settings: &Settings,
        route: RequestRoute,
        memory: TaskMemory<'_>,
        offset: u64,
        cancel: &AtomicBool,
        inline: bool,
    ) -> Result<Transfer> {
        let operation = match memory {
            TaskMemory::HostRead(_) => Operation::Read,
            TaskMemory::HostWrite(_) => Operation::Write,
        };
        let len = match &memory {
            TaskMemory::HostRead(b) => b.len(),
            TaskMemory::HostWrite(b) => b.len(),
        } as u64;

        // Opportunistic O_DIRECT for the page-aligned middle.
        let wants_direct = match operation {
            Operation::Read => settings.auto_direct_io_read(),
            Operation::Write => settings.auto_direct_io_write(),
        };
        let setting_name = match operation {
            Operation::Read => "auto_direct_io_read",
            Operation::Write => "auto_direct_io_write",
        };
        let (direct, mut direct_status) = if !wants_direct {
            (None, format!("not used ({setting_name} is off)"))
        } else {
            match self.direct_descriptor() {
                Ok(fd) => (
                    Some(fd),
                    format!(
                        "{setting_name} is on: page-aligned middle of each task with O_DIRECT, \
                         unaligned head and tail through the page cache"
                    ),
                ),
                Err(why) => (None, format!("{setting_name} is on, but {why}: not used")),
            }
        };
        let fds = Descriptors {
            path: &self.path,
            buffered: &self.file,
            direct,
            bounce_size: settings.bounce_buffer_size(),
        };

        let tasks: Vec<Task> = task::split(offset, len, settings.task_size()).collect();
        let mut work = Vec::with_capacity(tasks.len());
        match memory {
            TaskMemory::HostRead(mut rest) => {
                for t in &tasks {
                    let (mine, more) = std::mem::take(&mut rest).split_at_mut(t.size as usize);
                    work.push((*t, TaskMemory::HostRead(mine)));
                    rest = more;
                }
            }
            TaskMemory::HostWrite(mut rest) => {
                for t in &tasks {
                    let (mine, more) = rest.split_at(t.size as usize);
                    work.push((*t, TaskMemory::HostWrite(mine)));
                    rest = more;
                }
            }
        }
        let run = |task: Task, memory: TaskMemory<'_>| match memory {
            TaskMemory::HostRead(buf) => posix::read(fds, buf, task.file_offset, cancel),
            TaskMemory::HostWrite(buf) => posix::write(fds, buf, task.file_offset, cancel),
        };
        let outcomes = self.run_tasks(settings.num_threads(), work, cancel, inline, &run)?;

        let bytes = contiguous_bytes(&tasks, &outcomes);
        if let Some(refused) = outcomes.iter().find_map(|o| o.direct_refused.as_ref()) {
            direct_status = format!(
                "{setting_name} is on, but the filesystem refused O_DIRECT I/O ({refused}): \
                 the rest went through the page cache"
            );
        }
        let report = PathReport {
            operation,
            path: self.path.clone(),
            file_offset: offset,
            requested_bytes: len,
            bytes,
            memory: MemoryKind::Host,
            kvik: KvikLayer {
                requested_compat_mode: self.routing.requested,
                effective_compat_mode: self.routing.effective,
                backend: route.backend,
                reason: route.reason,
                file_reasons: self.routing.reasons.clone(),
                threads: settings.num_threads(),
                task_size: settings.task_size(),
                direct_io: DirectIoUse {
                    requested: wants_direct,
                    status: direct_status,
                    bytes: outcomes.iter().map(|o| o.direct_bytes).sum(),
                },
                tasks: tasks
                    .iter()
                    .zip(&outcomes)
                    .map(|(t, o)| TaskReport {
                        file_offset: t.file_offset,
                        size: t.size,
                        backend: Backend::Posix,
                        bytes: o.bytes,
                        direct_io_bytes: o.direct_bytes,
                    })
                    .collect(),
            },
            cufile: CuFileLayer::not_called("host memory never goes to cuFile"),
        };
        Ok(Transfer {
            bytes: bytes as usize,
            report,
        })
    }

    /// Run every task; the first error cancels the tasks not yet started
    /// (and stops running ones at their next system call), and this returns
    /// only when no task is left running.
    fn run_tasks<M: Send>(
        &self,
        threads: usize,
        work: Vec<(Task, M)>,
        cancel: &AtomicBool,
        inline: bool,
        run: &(dyn Fn(Task, M) -> Result<TaskOutcome> + Sync),
    ) -> Result<Vec<TaskOutcome>> {
        let mut outcomes = vec![TaskOutcome::default(); work.len()];
        let first_error: Mutex<Option<Error>> = Mutex::new(None);
        let in_flight = &self.tasks_in_flight;
        let one = |task: Task, memory: M, slot: &mut TaskOutcome| {
            if cancel.load(Ordering::Relaxed) {
                return;
            }
            let running = Running::start(in_flight);
            let result = run(task, memory);
            drop(running);
            match result {
                Ok(outcome) => *slot = outcome,
                Err(e) => {
                    cancel.store(true, Ordering::Relaxed);
                    first_error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                }
            }
        };
        if work.len() <= 1 && inline {
            for ((task, memory), slot) in work.into_iter().zip(outcomes.iter_mut()) {
                one(task, memory, slot);
            }
        } else {
            let one = &one;
            // FIFO: every thread takes tasks in file order, so the kernel's
            // readahead sees one forward stream (rayon's default LIFO has the
            // owner read backwards from the end while thieves read forwards,
            // which halves cold-file throughput).
            thread_pool::get(threads)?.scope_fifo(|s| {
                for ((task, memory), slot) in work.into_iter().zip(outcomes.iter_mut()) {
                    s.spawn_fifo(move |_| one(task, memory, slot));
                }
            });
        }
        match first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(outcomes),
        }
    }
}

/// One task counted in `tasks_in_flight` until dropped — also when the
/// task panics, so a bug in one request cannot leave the count wrong.
pub(crate) struct Running<'a>(&'a AtomicUsize);

impl<'a> Running<'a> {
    pub(crate) fn start(count: &'a AtomicUsize) -> Running<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Running(count)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A request's result: the bytes up to the first task that came up short
/// (met the end of the file); anything after it would not be contiguous.
fn contiguous_bytes(tasks: &[Task], outcomes: &[TaskOutcome]) -> u64 {
    let mut bytes = 0u64;
    for (t, o) in tasks.iter().zip(outcomes) {
        bytes += o.bytes;
        if o.bytes < t.size {
            break;
        }
    }
    bytes
}
