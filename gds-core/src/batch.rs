//! cuFile's batch API (`cuFileBatchIOSetUp` / `Submit` / `GetStatus` /
//! `Cancel` / `Destroy`) as an owning type, [`Batch`].
//!
//! Building an entry ([`BatchEntry`]) is safe: it is only numbers and a
//! borrowed file handle. Submitting is `unsafe`, exactly where cuFile starts
//! using the device memory the entries name (io-uring's `push` model): the
//! caller promises that memory stays allocated, and is not touched by anyone
//! else, until the entry has completed or the batch is dropped.
//!
//! Dropping a [`Batch`] with entries still in flight cancels them, then waits
//! until cuFile has reported every one of them, and only then destroys the
//! batch: cuFile never writes memory after its owner is gone. (If cuFile never
//! reports an entry, the drop keeps waiting and says so on stderr every ten
//! seconds: a visible hang, rather than a DMA into freed memory.)
//!
//! One submission is in flight at a time, as KvikIO's `BatchHandle` does: a
//! new [`Batch::submit`] is refused until every entry of the previous one has
//! completed. Entry results keep cuFile's raw numbers: the status
//! ([`EntryStatus`], a newtype, never transmuted) and the `ret` value.
//!
//! A libcufile without the batch functions gives `Error::MissingSymbol` (with
//! `Feature::BatchIo`) from [`Batch::new`], before anything is set up.

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use cufile_sys::bindings::{
    CUfileBatchHandle_t, CUfileError_t, CUfileIOEvents_t, CUfileIOParams_t, CUfileOpcode,
    CUfileStatus_t, cufileBatchMode, timespec,
};
use cufile_sys::stats::{StatsLayout, v1_15, v1_19};
use cufile_sys::{CuFileLibrary, cufile_fn};

use crate::driver::Driver;
use crate::error::{Error, Result};
use crate::handle::CuFileHandle;
use crate::io::IoReturn;

/// Read from the file into device memory, or write from device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchOp {
    Read,
    Write,
}

impl BatchOp {
    fn opcode(self) -> CUfileOpcode {
        match self {
            BatchOp::Read => CUfileOpcode::CUFILE_READ,
            BatchOp::Write => CUfileOpcode::CUFILE_WRITE,
        }
    }
}

impl fmt::Display for BatchOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BatchOp::Read => "read",
            BatchOp::Write => "write",
        })
    }
}

/// The numbers of one batch entry: what moves where. Plain data; nothing
/// touches memory through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct EntryParams {
    pub op: BatchOp,
    /// The device address cuFile knows the buffer by: the base of its
    /// registration (`cuFileBufRegister`) or of its allocation.
    pub device_base: u64,
    /// Where this entry's bytes start, from `device_base`.
    pub buffer_offset: u64,
    pub file_offset: u64,
    pub size: usize,
}

/// One I/O of a batch: a registered file and the [`EntryParams`].
#[derive(Debug, Clone, Copy)]
pub struct BatchEntry<'f> {
    handle: &'f CuFileHandle,
    params: EntryParams,
}

impl<'f> BatchEntry<'f> {
    /// Any entry: a read or a write, as `params` say.
    pub fn new(handle: &'f CuFileHandle, params: EntryParams) -> BatchEntry<'f> {
        BatchEntry { handle, params }
    }

    /// Read `size` bytes at `file_offset` into `device_base + buffer_offset`.
    pub fn read(
        handle: &'f CuFileHandle,
        device_base: u64,
        buffer_offset: u64,
        file_offset: u64,
        size: usize,
    ) -> BatchEntry<'f> {
        let params = EntryParams {
            op: BatchOp::Read,
            device_base,
            buffer_offset,
            file_offset,
            size,
        };
        BatchEntry { handle, params }
    }

    pub fn handle(&self) -> &'f CuFileHandle {
        self.handle
    }

    pub fn params(&self) -> EntryParams {
        self.params
    }
}

/// A batch entry's `CUfileStatus_t`, kept as cuFile's number. Known values
/// have names; a library newer than our header may return others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct EntryStatus(pub u32);

impl EntryStatus {
    pub const WAITING: EntryStatus = EntryStatus(CUfileStatus_t::CUFILE_WAITING.0);
    pub const PENDING: EntryStatus = EntryStatus(CUfileStatus_t::CUFILE_PENDING.0);
    pub const INVALID: EntryStatus = EntryStatus(CUfileStatus_t::CUFILE_INVALID.0);
    pub const CANCELED: EntryStatus = EntryStatus(CUfileStatus_t::CUFILE_CANCELED.0);
    pub const COMPLETE: EntryStatus = EntryStatus(CUfileStatus_t::CUFILE_COMPLETE.0);
    pub const TIMEOUT: EntryStatus = EntryStatus(CUfileStatus_t::CUFILE_TIMEOUT.0);
    pub const FAILED: EntryStatus = EntryStatus(CUfileStatus_t::CUFILE_FAILED.0);

    /// The header's name (`CUFILE_COMPLETE`), if it has one.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            EntryStatus::WAITING => "CUFILE_WAITING",
            EntryStatus::PENDING => "CUFILE_PENDING",
            EntryStatus::INVALID => "CUFILE_INVALID",
            EntryStatus::CANCELED => "CUFILE_CANCELED",
            EntryStatus::COMPLETE => "CUFILE_COMPLETE",
            EntryStatus::TIMEOUT => "CUFILE_TIMEOUT",
            EntryStatus::FAILED => "CUFILE_FAILED",
            _ => return None,
        })
    }

    /// Whether cuFile is done with the entry (and its memory). Waiting and
    /// pending entries are not; neither is a status we do not know (it is
    /// safer to keep waiting than to hand memory back too early).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            EntryStatus::INVALID
                | EntryStatus::CANCELED
                | EntryStatus::COMPLETE
                | EntryStatus::TIMEOUT
                | EntryStatus::FAILED
        )
    }
}

impl fmt::Display for EntryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{} {name}", self.0),
            None => write!(f, "{} (unknown batch status)", self.0),
        }
    }
}

/// How one entry ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum EntryResult {
    /// cuFile completed it: the bytes moved (a read is short at end of file).
    Complete { bytes: usize },
    /// cuFile ended it otherwise (failed, canceled, timed out, invalid, or a
    /// status we do not know): its status and its raw `ret` value.
    Ended { status: EntryStatus, ret: u64 },
}

impl EntryResult {
    fn from_event(status: EntryStatus, ret: usize) -> EntryResult {
        if status == EntryStatus::COMPLETE {
            EntryResult::Complete { bytes: ret }
        } else {
            EntryResult::Ended {
                status,
                ret: ret as u64,
            }
        }
    }

    /// The bytes moved, for a completed entry.
    pub fn bytes(&self) -> Option<usize> {
        match self {
            EntryResult::Complete { bytes } => Some(*bytes),
            EntryResult::Ended { .. } => None,
        }
    }

    /// What `ret` says about an entry that did not complete, read as a
    /// `cuFileRead` return value (`-errno`, or a negated cuFile status).
    pub fn error(&self) -> Option<IoReturn> {
        match self {
            EntryResult::Complete { .. } => None,
            EntryResult::Ended { ret, .. } => Some(IoReturn::classify(*ret as i64 as isize)),
        }
    }
}

impl fmt::Display for EntryResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryResult::Complete { bytes } => write!(f, "complete, {bytes} bytes"),
            EntryResult::Ended { status, ret } => {
                write!(f, "{status}, ret {}", *ret as i64)?;
                match self.error() {
                    Some(IoReturn::CuFile(code)) => write!(f, " ({code})"),
                    Some(IoReturn::NegatedErrno(errno)) => {
                        write!(f, " ({})", std::io::Error::from_raw_os_error(errno))
                    }
                    _ => Ok(()),
                }
            }
        }
    }
}

/// One finished entry: its index in the submission, and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Completion {
    pub index: usize,
    pub result: EntryResult,
}

/// Why a batch call was refused before cuFile saw it.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum BatchProblem {
    /// `Batch::new` with a capacity of 0.
    #[error("a batch must hold at least one entry")]
    ZeroCapacity,
    /// A submission with no entries.
    #[error("nothing to submit")]
    Empty,
    /// More entries than the batch was set up for.
    #[error("{entries} entries do not fit a batch set up for {capacity}")]
    TooMany { entries: usize, capacity: u32 },
    /// The previous submission has entries in flight.
    #[error("{in_flight} entries of the previous submission are still in flight")]
    Busy { in_flight: usize },
    /// An entry's offsets do not fit `off_t`, or its range ends past the
    /// largest file offset.
    #[error(
        "entry {index} ({size} bytes at file offset {file_offset}, buffer offset \
         {buffer_offset}) reaches past what off_t holds"
    )]
    OffsetRange {
        index: usize,
        file_offset: u64,
        buffer_offset: u64,
        size: usize,
    },
    /// An entry with a null device base.
    #[error("entry {index} names device address 0")]
    NullBase { index: usize },
    /// `wait_all` gave up with entries still in flight.
    #[error("{in_flight} entries still in flight after {waited_ms} ms")]
    Timeout { in_flight: usize, waited_ms: u64 },
}

/// The five batch functions, resolved together so a batch that was set up
/// can always be cancelled, polled and destroyed.
#[derive(Clone, Copy)]
struct BatchApi {
    set_up: unsafe extern "C" fn(*mut CUfileBatchHandle_t, u32) -> CUfileError_t,
    submit:
        unsafe extern "C" fn(CUfileBatchHandle_t, u32, *mut CUfileIOParams_t, u32) -> CUfileError_t,
    get_status: unsafe extern "C" fn(
        CUfileBatchHandle_t,
        u32,
        *mut u32,
        *mut CUfileIOEvents_t,
        *mut timespec,
    ) -> CUfileError_t,
    cancel: unsafe extern "C" fn(CUfileBatchHandle_t) -> CUfileError_t,
    destroy: unsafe extern "C" fn(CUfileBatchHandle_t),
}

impl BatchApi {
    fn resolve(lib: &CuFileLibrary) -> Result<BatchApi> {
        Ok(BatchApi {
            set_up: cufile_fn!(lib, cuFileBatchIOSetUp)?,
            submit: cufile_fn!(lib, cuFileBatchIOSubmit)?,
            get_status: cufile_fn!(lib, cuFileBatchIOGetStatus)?,
            cancel: cufile_fn!(lib, cuFileBatchIOCancel)?,
            destroy: cufile_fn!(lib, cuFileBatchIODestroy)?,
        })
    }
}

/// Check whether `lib` has all five batch functions, without opening the
/// driver: `Err(MissingSymbol)` names the first one missing.
pub fn check_library(lib: &CuFileLibrary) -> Result<()> {
    BatchApi::resolve(lib).map(drop)
}

/// The opaque `CUfileBatchHandle_t`, only ever passed back to cuFile.
struct RawBatch(CUfileBatchHandle_t);

// SAFETY: cuFile's APIs are documented as thread-safe; the pointer is never
// dereferenced here, and `Batch` needs `&mut self` for every call on it.
unsafe impl Send for RawBatch {}

/// Which entries of the current submission are still in flight, and how
/// the others ended. Pure bookkeeping (no cuFile), so it is tested alone.
#[derive(Debug, Default)]
struct Ledger {
    results: Vec<Option<EntryResult>>,
    in_flight: usize,
}

impl Ledger {
    /// Start a submission of `n` entries (the previous one must be done).
    fn begin(&mut self, n: usize) {
        debug_assert_eq!(self.in_flight, 0);
        self.results.clear();
        self.results.resize(n, None);
        self.in_flight = n;
    }

    /// cuFile refused the submission: nothing of it is in flight.
    fn abandon(&mut self) {
        self.results.clear();
        self.in_flight = 0;
    }

    /// The cookie carried by entry `index` (never null).
    fn cookie(index: usize) -> *mut std::ffi::c_void {
        (index + 1) as *mut std::ffi::c_void
    }

    /// Record one event; the completion it finishes, if any. Events for
    /// entries not in flight (unknown cookies, repeats) and events that are
    /// not final change nothing.
    fn record(&mut self, cookie: usize, status: EntryStatus, ret: usize) -> Option<Completion> {
        if !status.is_final() {
            return None;
        }
        let index = cookie.checked_sub(1)?;
        let slot = self.results.get_mut(index)?;
        if slot.is_some() {
            return None;
        }
        let result = EntryResult::from_event(status, ret);
        *slot = Some(result);
        self.in_flight -= 1;
        Some(Completion { index, result })
    }
}

/// Check a submission before cuFile sees it; cuFile's parameter structures.
fn prepare(
    capacity: u32,
    in_flight: usize,
    entries: impl ExactSizeIterator<Item = (EntryParams, *mut std::ffi::c_void)>,
) -> Result<Vec<CUfileIOParams_t>, BatchProblem> {
    if in_flight > 0 {
        return Err(BatchProblem::Busy { in_flight });
    }
    let n = entries.len();
    if n == 0 {
        return Err(BatchProblem::Empty);
    }
    if n > capacity as usize {
        return Err(BatchProblem::TooMany {
            entries: n,
            capacity,
        });
    }
    let mut params = Vec::with_capacity(n);
    for (index, (p, fh)) in entries.enumerate() {
        let range = || BatchProblem::OffsetRange {
            index,
            file_offset: p.file_offset,
            buffer_offset: p.buffer_offset,
            size: p.size,
        };
        let size = i64::try_from(p.size).map_err(|_| range())?;
        let file_offset = i64::try_from(p.file_offset).map_err(|_| range())?;
        let buffer_offset = i64::try_from(p.buffer_offset).map_err(|_| range())?;
        file_offset.checked_add(size).ok_or_else(range)?;
        buffer_offset.checked_add(size).ok_or_else(range)?;
        if p.device_base == 0 {
            return Err(BatchProblem::NullBase { index });
        }
        let mut io = CUfileIOParams_t {
            mode: cufileBatchMode::CUFILE_BATCH,
            fh,
            opcode: p.op.opcode(),
            cookie: Ledger::cookie(index),
            ..Default::default()
        };
        io.u.batch.devPtr_base = p.device_base as *mut std::ffi::c_void;
        io.u.batch.file_offset = file_offset;
        io.u.batch.devPtr_offset = buffer_offset;
        io.u.batch.size = p.size;
        params.push(io);
    }
    Ok(params)
}

fn timespec_of(d: Duration) -> timespec {
    timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// A cuFile batch: set up for `capacity` entries, destroyed on drop (after
/// every entry in flight was cancelled and reported). `'f` is the lifetime
/// of the file handles its entries name.
pub struct Batch<'f> {
    raw: RawBatch,
    api: BatchApi,
    driver: Driver,
    capacity: u32,
    ledger: Ledger,
    /// cuFile's event buffer, one per entry the batch can hold.
    events: Vec<CUfileIOEvents_t>,
    _files: PhantomData<&'f CuFileHandle>,
}

impl fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("capacity", &self.capacity)
            .field("in_flight", &self.ledger.in_flight)
            .finish_non_exhaustive()
    }
}

impl<'f> Batch<'f> {
    /// `cuFileBatchIOSetUp` for up to `capacity` entries per submission.
    /// cuFile caps the capacity itself (`max_batch_io_size` in the driver's
    /// properties; 128 in the stock configuration) and refuses more.
    pub fn new(driver: &Driver, capacity: u32) -> Result<Batch<'f>> {
        let api = BatchApi::resolve(driver.library())?;
        if capacity == 0 {
            return Err(Error::Batch {
                problem: BatchProblem::ZeroCapacity,
            });
        }
        let mut raw: CUfileBatchHandle_t = std::ptr::null_mut();
        // SAFETY: the driver is open (Driver exists); cuFile writes one handle.
        let status = unsafe { (api.set_up)(&mut raw, capacity) };
        if !status.is_success() {
            return Err(cufile_error("cuFileBatchIOSetUp", status));
        }
        Ok(Batch {
            raw: RawBatch(raw),
            api,
            driver: driver.clone(),
            capacity,
            ledger: Ledger::default(),
            events: vec![CUfileIOEvents_t::default(); capacity as usize],
            _files: PhantomData,
        })
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Entries of the current submission cuFile has not reported yet.
    pub fn in_flight(&self) -> usize {
        self.ledger.in_flight
    }

    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// `cuFileBatchIOSubmit`: start every entry. Refused (before cuFile sees
    /// it) while a previous submission has entries in flight, when empty,
    /// beyond the capacity, or for offsets `off_t` cannot hold. Completions
    /// are reported by index into `entries`.
    ///
    /// # Safety
    /// For every entry, `device_base + buffer_offset .. + size` must be device
    /// memory (writable for reads) that stays allocated and that nothing else
    /// reads or writes until cuFile has reported that entry (through
    /// [`Batch::poll`], [`Batch::wait`] or [`Batch::wait_all`]) or until this
    /// batch has been dropped (the drop waits for every entry). Leaking the
    /// batch (`mem::forget`) leaves that memory to cuFile for good.
    pub unsafe fn submit(&mut self, entries: &[BatchEntry<'f>]) -> Result<()> {
        let mut params = prepare(
            self.capacity,
            self.ledger.in_flight,
            entries.iter().map(|e| (e.params, e.handle.raw())),
        )
        .map_err(|problem| Error::Batch { problem })?;
        self.ledger.begin(params.len());
        // SAFETY: the batch is set up; `params` holds `len` entries naming
        // registered handles that outlive the batch ('f); the caller
        // guarantees the device memory.
        let status =
            unsafe { (self.api.submit)(self.raw.0, params.len() as u32, params.as_mut_ptr(), 0) };
        if !status.is_success() {
            // A refused submission queues nothing; cancel anyway, in case a
            // library queued part of it before failing.
            // SAFETY: cancelling our own batch.
            let _ = unsafe { (self.api.cancel)(self.raw.0) };
            self.ledger.abandon();
            return Err(cufile_error("cuFileBatchIOSubmit", status));
        }
        Ok(())
    }

    /// The entries that finished since the last call, without waiting.
    pub fn poll(&mut self) -> Result<Vec<Completion>> {
        self.get_status(0, Duration::ZERO)
    }

    /// Wait until at least `min` more entries finished (all in flight, if
    /// fewer), or `timeout` passed; the entries that finished.
    pub fn wait(&mut self, min: usize, timeout: Duration) -> Result<Vec<Completion>> {
        let min = min.min(self.ledger.in_flight);
        self.get_status(min, timeout)
    }

    /// Wait for every entry of the submission, at most `timeout`; the
    /// results in submission order. On timeout the entries stay in flight
    /// (wait again, cancel, or drop the batch).
    pub fn wait_all(&mut self, timeout: Duration) -> Result<Vec<EntryResult>> {
        let start = Instant::now();
        while self.ledger.in_flight > 0 {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(Error::Batch {
                    problem: BatchProblem::Timeout {
                        in_flight: self.ledger.in_flight,
                        waited_ms: start.elapsed().as_millis() as u64,
                    },
                });
            }
            self.wait(self.ledger.in_flight, left.min(Duration::from_secs(1)))?;
        }
        Ok(self
            .ledger
            .results
            .iter()
            .map(|r| r.expect("every entry reported"))
            .collect())
    }

    /// `cuFileBatchIOCancel`: ask cuFile to stop the entries in flight. They
    /// are still reported (as cancelled, or as whatever they reached): wait
    /// for them before reusing their memory.
    pub fn cancel(&mut self) -> Result<()> {
        // SAFETY: cancelling our own, set-up batch.
        let status = unsafe { (self.api.cancel)(self.raw.0) };
        if status.is_success() {
            Ok(())
        } else {
            Err(cufile_error("cuFileBatchIOCancel", status))
        }
    }

    fn get_status(&mut self, min: usize, timeout: Duration) -> Result<Vec<Completion>> {
        if self.ledger.in_flight == 0 {
            return Ok(vec![]);
        }
        let mut nr = self.ledger.in_flight.min(self.events.len()) as u32;
        let mut wait = timespec_of(timeout);
        // SAFETY: `events` holds at least `nr` entries for cuFile to fill;
        // `wait` is a valid timespec.
        let status = unsafe {
            (self.api.get_status)(
                self.raw.0,
                min as u32,
                &mut nr,
                self.events.as_mut_ptr(),
                &mut wait,
            )
        };
        if !status.is_success() {
            return Err(cufile_error("cuFileBatchIOGetStatus", status));
        }
        let returned = (nr as usize).min(self.events.len());
        Ok(self.events[..returned]
            .iter()
            .filter_map(|e| {
                self.ledger
                    .record(e.cookie as usize, EntryStatus(e.status.0), e.ret)
            })
            .collect())
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if self.ledger.in_flight > 0 {
            let _ = self.cancel();
            let start = Instant::now();
            let mut said = Duration::ZERO;
            while self.ledger.in_flight > 0 {
                if self
                    .wait(self.ledger.in_flight, Duration::from_secs(1))
                    .is_err()
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let waited = start.elapsed();
                if waited >= said + Duration::from_secs(10) {
                    said = waited;
                    eprintln!(
                        "kvik: dropping a cuFile batch: {} entries still in flight after {}s; \
                         waiting (their device memory may still be written)",
                        self.ledger.in_flight,
                        waited.as_secs()
                    );
                }
            }
        }
        // SAFETY: nothing of this batch is in flight; destroyed once.
        unsafe { (self.api.destroy)(self.raw.0) };
    }
}

fn cufile_error(operation: &'static str, status: CUfileError_t) -> Error {
    Error::CuFile {
        operation,
        status,
        path: None,
        log: None,
    }
}

/// cuFile's process-wide batch counters (statistics level 1 and up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BatchCounters {
    pub setup_ok: u64,
    pub submit_ok: u64,
    pub submit_err: u64,
    pub complete_ok: u64,
    pub complete_err: u64,
    pub cancel_ok: u64,
    pub destroy_ok: u64,
    /// Entries queued, and of them to cuFile's POSIX (compatibility) path.
    pub enqueued: u64,
    pub posix_enqueued: u64,
    /// Entries processed, and of them through the POSIX path.
    pub processed: u64,
    pub posix_processed: u64,
    /// Submissions through nvidia-fs, P2P, Linux AIO, io_uring, mixed.
    pub nvfs_submit: u64,
    pub p2p_submit: u64,
    pub aio_submit: u64,
    pub iouring_submit: u64,
    pub mixed_submit: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl BatchCounters {
    /// Read them from the open driver, in the loaded version's layout.
    pub fn read(driver: &Driver) -> Result<BatchCounters> {
        if driver.stats_level() == 0 {
            return Err(Error::StatsUnavailable {
                reason: "statistics are off (level 0)".into(),
            });
        }
        let lib = driver.library();
        match crate::stats::layout_of(lib)? {
            StatsLayout::V1_15 => read_level1::<v1_15::CUfileStatsLevel1_t>(lib),
            StatsLayout::V1_19 => read_level1::<v1_19::CUfileStatsLevel1_t>(lib),
        }
    }

    /// `self - before`, counter by counter.
    pub fn delta_since(&self, before: &BatchCounters) -> BatchCounters {
        macro_rules! sub {
            ($($f:ident),*) => { BatchCounters { $($f: self.$f.saturating_sub(before.$f)),* } };
        }
        sub!(
            setup_ok,
            submit_ok,
            submit_err,
            complete_ok,
            complete_err,
            cancel_ok,
            destroy_ok,
            enqueued,
            posix_enqueued,
            processed,
            posix_processed,
            nvfs_submit,
            p2p_submit,
            aio_submit,
            iouring_submit,
            mixed_submit,
            read_bytes,
            write_bytes
        )
    }
}

/// Both level-1 layouts share these field names.
trait Level1: Default {
    fn batch(&self) -> BatchCounters;
}

macro_rules! impl_level1 {
    ($module:ident) => {
        impl Level1 for $module::CUfileStatsLevel1_t {
            fn batch(&self) -> BatchCounters {
                BatchCounters {
                    setup_ok: self.batch_setup_ops.ok,
                    submit_ok: self.batch_submit_ops.ok,
                    submit_err: self.batch_submit_ops.err,
                    complete_ok: self.batch_complete_ops.ok,
                    complete_err: self.batch_complete_ops.err,
                    cancel_ok: self.batch_cancel_ops.ok,
                    destroy_ok: self.batch_destroy_ops.ok,
                    enqueued: self.batch_enqueued_ops.ok,
                    posix_enqueued: self.batch_posix_enqueued_ops.ok,
                    processed: self.batch_processed_ops.ok,
                    posix_processed: self.batch_posix_processed_ops.ok,
                    nvfs_submit: self.batch_nvfs_submit_ops.ok,
                    p2p_submit: self.batch_p2p_submit_ops.ok,
                    aio_submit: self.batch_aio_submit_ops.ok,
                    iouring_submit: self.batch_iouring_submit_ops.ok,
                    mixed_submit: self.batch_mixed_io_submit_ops.ok,
                    read_bytes: self.batch_read_bytes,
                    write_bytes: self.batch_write_bytes,
                }
            }
        }
    };
}
impl_level1!(v1_15);
impl_level1!(v1_19);

fn read_level1<L: Level1>(lib: &CuFileLibrary) -> Result<BatchCounters> {
    let get = cufile_fn!(lib, cuFileGetStatsL1)?;
    let mut stats = Box::<L>::default();
    // SAFETY: `stats` has the loaded version's level-1 layout (chosen from
    // its version), so the library writes inside it.
    let status = unsafe { get((&mut *stats as *mut L).cast()) };
    if !status.is_success() {
        return Err(cufile_error("cuFileGetStatsL1", status));
    }
    Ok(stats.batch())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(file_offset: u64, size: usize) -> EntryParams {
        EntryParams {
            op: BatchOp::Read,
            device_base: 0x7f00_0000_0000,
            buffer_offset: file_offset,
            file_offset,
            size,
        }
    }

    fn with_handles(
        entries: &[EntryParams],
    ) -> impl ExactSizeIterator<Item = (EntryParams, *mut std::ffi::c_void)> + '_ {
        entries
            .iter()
            .map(|p| (*p, 0x1234 as *mut std::ffi::c_void))
    }

    fn refused(r: Result<Vec<CUfileIOParams_t>, BatchProblem>) -> BatchProblem {
        match r {
            Err(problem) => problem,
            Ok(params) => panic!("accepted {} entries", params.len()),
        }
    }

    #[test]
    fn submissions_are_checked_before_cufile_sees_them() {
        let two = [entry(0, 4096), entry(8192, 100)];
        let params = prepare(4, 0, with_handles(&two)).unwrap();
        assert_eq!(params.len(), 2);
        assert_eq!(params[1].mode, cufileBatchMode::CUFILE_BATCH);
        assert_eq!(params[1].opcode, CUfileOpcode::CUFILE_READ);
        assert_eq!(params[1].fh as usize, 0x1234);
        // SAFETY: reading the union member `prepare` wrote.
        let batch = unsafe { params[1].u.batch };
        assert_eq!(
            (batch.file_offset, batch.devPtr_offset, batch.size),
            (8192, 8192, 100)
        );
        assert_eq!(batch.devPtr_base as u64, 0x7f00_0000_0000);
        // Cookies are 1-based entry indices (never null).
        assert_eq!(params[0].cookie as usize, 1);
        assert_eq!(params[1].cookie as usize, 2);

        assert_eq!(
            refused(prepare(4, 3, with_handles(&two))),
            BatchProblem::Busy { in_flight: 3 }
        );
        assert_eq!(
            refused(prepare(4, 0, with_handles(&[]))),
            BatchProblem::Empty
        );
        assert_eq!(
            refused(prepare(1, 0, with_handles(&two))),
            BatchProblem::TooMany {
                entries: 2,
                capacity: 1
            }
        );
        let far = [entry(0, 1), entry(i64::MAX as u64, 1)];
        assert!(matches!(
            refused(prepare(4, 0, with_handles(&far))),
            BatchProblem::OffsetRange { index: 1, .. }
        ));
        let huge = [entry(u64::MAX, 1)];
        assert!(matches!(
            refused(prepare(4, 0, with_handles(&huge))),
            BatchProblem::OffsetRange { index: 0, .. }
        ));
        let mut null = entry(0, 1);
        null.device_base = 0;
        assert_eq!(
            refused(prepare(4, 0, with_handles(&[null]))),
            BatchProblem::NullBase { index: 0 }
        );
        let mut write = entry(0, 1);
        write.op = BatchOp::Write;
        let params = prepare(4, 0, with_handles(&[write])).unwrap();
        assert_eq!(params[0].opcode, CUfileOpcode::CUFILE_WRITE);
    }

    #[test]
    fn the_ledger_counts_each_entry_once_and_only_final_statuses() {
        let mut ledger = Ledger::default();
        ledger.begin(3);
        assert_eq!(ledger.in_flight, 3);
        // Not final: nothing changes.
        assert_eq!(ledger.record(1, EntryStatus::PENDING, 0), None);
        assert_eq!(
            ledger.record(1, EntryStatus(4096), 0),
            None,
            "unknown status"
        );
        // Unknown cookies (0, beyond the submission) change nothing.
        assert_eq!(ledger.record(0, EntryStatus::COMPLETE, 1), None);
        assert_eq!(ledger.record(4, EntryStatus::COMPLETE, 1), None);
        assert_eq!(ledger.in_flight, 3);

        let done = ledger.record(2, EntryStatus::COMPLETE, 4096).unwrap();
        assert_eq!(
            done,
            Completion {
                index: 1,
                result: EntryResult::Complete { bytes: 4096 }
            }
        );
        // A repeated event for a finished entry is ignored.
        assert_eq!(ledger.record(2, EntryStatus::FAILED, 0), None);
        let failed = ledger
            .record(1, EntryStatus::FAILED, (-5i64) as usize)
            .unwrap();
        assert_eq!(failed.index, 0);
        assert_eq!(
            failed.result.error(),
            Some(IoReturn::NegatedErrno(libc::EIO))
        );
        assert_eq!(failed.result.bytes(), None);
        let cancelled = ledger.record(3, EntryStatus::CANCELED, 0).unwrap();
        assert_eq!(cancelled.index, 2);
        assert_eq!(ledger.in_flight, 0);

        ledger.begin(1);
        assert_eq!(ledger.results, vec![None]);
        ledger.abandon();
        assert_eq!(ledger.in_flight, 0);
    }

    #[test]
    fn statuses_stay_numbers_and_results_print_their_codes() {
        assert_eq!(EntryStatus(16).to_string(), "16 CUFILE_COMPLETE");
        assert_eq!(EntryStatus(3).to_string(), "3 (unknown batch status)");
        assert!(!EntryStatus(3).is_final());
        assert!(EntryStatus::TIMEOUT.is_final());
        let ended = EntryResult::Ended {
            status: EntryStatus::FAILED,
            ret: (-5022i64) as u64,
        };
        assert_eq!(
            ended.to_string(),
            "64 CUFILE_FAILED, ret -5022 (5022 CU_FILE_INVALID_VALUE (invalid arguments))"
        );
        let json = serde_json::to_value(ended).unwrap();
        assert_eq!(json["result"], "ended");
        assert_eq!(json["status"], 64);
        assert_eq!(
            EntryResult::Complete { bytes: 7 }.to_string(),
            "complete, 7 bytes"
        );
    }

    #[test]
    fn timeouts_become_timespecs() {
        let t = timespec_of(Duration::from_millis(1500));
        assert_eq!((t.tv_sec, t.tv_nsec), (1, 500_000_000));
        let zero = timespec_of(Duration::ZERO);
        assert_eq!((zero.tv_sec, zero.tv_nsec), (0, 0));
    }

    #[test]
    fn level1_batch_counters_convert_in_both_layouts() {
        let mut old = v1_15::CUfileStatsLevel1_t::default();
        old.batch_submit_ops.ok = 2;
        old.batch_posix_processed_ops.ok = 7;
        old.batch_read_bytes = 1 << 20;
        let b = old.batch();
        assert_eq!(
            (b.submit_ok, b.posix_processed, b.read_bytes),
            (2, 7, 1 << 20)
        );
        let mut new = v1_19::CUfileStatsLevel1_t::default();
        new.batch_processed_ops.ok = 3;
        let later = new.batch();
        assert_eq!(later.processed, 3);
        assert_eq!(later.delta_since(&b).processed, 3);
        assert_eq!(b.delta_since(&later).submit_ok, 2);
    }
}
