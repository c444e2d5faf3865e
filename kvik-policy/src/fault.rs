//! Fault injection for the POSIX backend, compiled into the crate's own
//! tests only: every system call the backend makes passes through
//! `posix::seam`, which (in test builds) asks this module whether a fault
//! is planned for that file. No `LD_PRELOAD`, no global switch that other
//! tests could trip over: a plan belongs to one file (its device and inode),
//! and ends when its guard drops.
//!
//! ```ignore
//! let faults = fault::inject(&path, vec![Rule::on(&[Syscall::Pread]).at(20_000).fail(libc::EIO)]);
//! let err = file.read(&mut buf, 0).unwrap_err();   // pread at offset 20000: EIO
//! ```
//!
//! The tests below drive `FileHandle` through these faults: EINTR, short
//! transfers, EIO, ENOSPC, writes that move nothing, O_DIRECT refused, and a
//! file truncated while a parallel read is in flight.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::posix::Syscall;

// The integration tests' helpers (settings, random bytes, skip, …), for the
// tests below.
#[path = "../tests/common/mod.rs"]
pub(crate) mod common;

/// What a rule does to a call it matches.
#[derive(Clone)]
pub(crate) enum Action {
    /// Fail with this `errno`.
    Fail(i32),
    /// Move at most this many bytes (a short read or write).
    Short(usize),
    /// Move nothing: 0 bytes (end of file for a read; a stuck write).
    Nothing,
    /// Make the real call (after the rule's `before`, if any).
    Pass,
}

/// One planned fault.
pub(crate) struct Rule {
    syscalls: Vec<Syscall>,
    /// Only calls whose range holds this byte. A `Fail` or `Nothing` there
    /// first moves the bytes before it (as a disk does before a bad sector),
    /// so the failing call starts exactly here.
    at: Option<u64>,
    /// Only calls that start in this range.
    starting_in: Option<std::ops::Range<u64>>,
    /// Only on the O_DIRECT descriptor (`Some(true)`) or the other one.
    direct: Option<bool>,
    /// Run first when the rule fires (a file changed under a request in
    /// flight, a slow disk).
    before: Option<Arc<dyn Fn() + Send + Sync>>,
    /// How many more times it fires (`usize::MAX`: always).
    remaining: AtomicUsize,
    action: Action,
}

impl Rule {
    pub(crate) fn on(syscalls: &[Syscall]) -> Rule {
        Rule {
            syscalls: syscalls.to_vec(),
            at: None,
            starting_in: None,
            direct: None,
            before: None,
            remaining: AtomicUsize::new(usize::MAX),
            action: Action::Pass,
        }
    }
    pub(crate) fn at(mut self, offset: u64) -> Rule {
        self.at = Some(offset);
        self
    }
    pub(crate) fn starting_in(mut self, range: std::ops::Range<u64>) -> Rule {
        self.starting_in = Some(range);
        self
    }
    pub(crate) fn direct(mut self, direct: bool) -> Rule {
        self.direct = Some(direct);
        self
    }
    pub(crate) fn times(self, n: usize) -> Rule {
        self.remaining.store(n, Ordering::SeqCst);
        self
    }
    pub(crate) fn fail(mut self, errno: i32) -> Rule {
        self.action = Action::Fail(errno);
        self
    }
    pub(crate) fn short(mut self, max: usize) -> Rule {
        assert!(max > 0, "a short transfer moves at least one byte");
        self.action = Action::Short(max);
        self
    }
    pub(crate) fn nothing(mut self) -> Rule {
        self.action = Action::Nothing;
        self
    }
    pub(crate) fn before(mut self, f: impl Fn() + Send + Sync + 'static) -> Rule {
        self.before = Some(Arc::new(f));
        self
    }

    /// Take one firing, if any are left.
    fn take(&self) -> bool {
        self.remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                0 => None,
                usize::MAX => Some(usize::MAX),
                n => Some(n - 1),
            })
            .is_ok()
    }
}

/// One system call as the seam saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub syscall: Syscall,
    pub at: u64,
    /// Bytes asked for.
    pub len: usize,
    pub direct: bool,
    /// Bytes moved, or the errno.
    pub result: Result<usize, i32>,
    /// Whether a rule changed this call.
    pub injected: bool,
}

struct Plan {
    file: (u64, u64),
    rules: Vec<Rule>,
    calls: Mutex<Vec<Call>>,
}

static PLANS: Mutex<Vec<Arc<Plan>>> = Mutex::new(Vec::new());
/// Plans alive, so that files without one skip the `fstat`.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Faults planned for one file, until dropped.
pub(crate) struct Faults {
    plan: Arc<Plan>,
}

/// Plan `rules` for the file at `path` (which must exist): every
/// descriptor of it, opened before or after, meets them. One plan per file
/// at a time.
pub(crate) fn inject(path: &Path, rules: Vec<Rule>) -> Faults {
    let meta = std::fs::metadata(path).expect("the file to inject faults into exists");
    let plan = Arc::new(Plan {
        file: (meta.dev(), meta.ino()),
        rules,
        calls: Mutex::new(Vec::new()),
    });
    let mut plans = PLANS.lock().unwrap();
    assert!(
        plans.iter().all(|p| p.file != plan.file),
        "{} already has a fault plan: drop it first",
        path.display()
    );
    plans.push(plan.clone());
    drop(plans);
    ACTIVE.fetch_add(1, Ordering::SeqCst);
    Faults { plan }
}

impl Faults {
    /// Every call made on the file so far, in order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.plan.calls.lock().unwrap().clone()
    }
    /// How many calls a rule changed.
    pub(crate) fn injected(&self) -> usize {
        self.calls().iter().filter(|c| c.injected).count()
    }
}

impl Drop for Faults {
    fn drop(&mut self) {
        PLANS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| !Arc::ptr_eq(p, &self.plan));
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn plan_for(file: &File) -> Option<Arc<Plan>> {
    if ACTIVE.load(Ordering::SeqCst) == 0 {
        return None;
    }
    let meta = file.metadata().ok()?;
    let id = (meta.dev(), meta.ino());
    PLANS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|p| p.file == id)
        .cloned()
}

fn is_direct(file: &File) -> bool {
    // SAFETY: F_GETFL on a descriptor we borrow.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}

/// The test build's seam: `real(n)` makes the real call for the first `n`
/// of `len` bytes.
pub(crate) fn seam(
    file: &File,
    syscall: Syscall,
    at: u64,
    len: usize,
    real: impl FnOnce(usize) -> io::Result<usize>,
) -> io::Result<usize> {
    let Some(plan) = plan_for(file) else {
        return real(len);
    };
    let direct = is_direct(file);
    let end = at.saturating_add(len as u64);
    let rule = plan.rules.iter().find(|r| {
        r.syscalls.contains(&syscall)
            && r.direct.is_none_or(|d| d == direct)
            && r.at.is_none_or(|x| at <= x && x < end)
            && r.starting_in
                .as_ref()
                .is_none_or(|range| range.contains(&at))
            && r.remaining.load(Ordering::SeqCst) > 0
    });
    let (result, injected) = match rule {
        None => (real(len), false),
        // The bytes before the faulty one move first.
        Some(r)
            if matches!(r.action, Action::Fail(_) | Action::Nothing)
                && r.at.is_some_and(|x| x > at) =>
        {
            (real((r.at.unwrap() - at) as usize), false)
        }
        Some(r) if r.take() => {
            if let Some(before) = &r.before {
                before();
            }
            let result = match r.action {
                Action::Fail(errno) => Err(io::Error::from_raw_os_error(errno)),
                Action::Nothing => Ok(0),
                Action::Short(max) => real(len.min(max)),
                Action::Pass => real(len),
            };
            (result, true)
        }
        // Another thread took the last firing.
        Some(_) => (real(len), false),
    };
    plan.calls.lock().unwrap().push(Call {
        syscall,
        at,
        len,
        direct,
        result: match &result {
            Ok(n) => Ok(*n),
            Err(e) => Err(e.raw_os_error().unwrap_or(-1)),
        },
        injected,
    });
    result
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::common::{io_error_parts, random_bytes as bytes, settings, skip};
    use super::*;
    use crate::path_report::Operation;
    use crate::{Error, FileHandle};

    const READS: &[Syscall] = &[Syscall::Pread, Syscall::PreadNowait];
    const WRITES: &[Syscall] = &[Syscall::Pwrite];

    /// A file holding `data`, in a directory that lives as long as the guard.
    fn file_with(data: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, data).unwrap();
        (dir, path)
    }

    #[test]
    fn eintr_is_retried_on_every_call() {
        let data = bytes(64 << 10, 1);
        let (_dir, path) = file_with(&[]);
        let offsets = [0u64, 4096, 30_000, 65_535];
        let mut rules = Vec::new();
        for at in offsets {
            rules.push(Rule::on(WRITES).at(at).times(3).fail(libc::EINTR));
            rules.push(Rule::on(READS).at(at).times(3).fail(libc::EINTR));
        }
        let faults = inject(&path, rules);
        let f = FileHandle::open_with(&path, "r+", &settings(4, 4096)).unwrap();
        assert_eq!(f.write(&data, 0).unwrap(), data.len());
        let mut back = vec![0u8; data.len()];
        f.read_exact(&mut back, 0).unwrap();
        assert!(back == data);
        // Each rule fired three times, and each interrupted call was retried.
        let calls = faults.calls();
        let eintr = calls
            .iter()
            .filter(|c| c.result == Err(libc::EINTR))
            .count();
        assert_eq!(eintr, 2 * 3 * offsets.len(), "{calls:#?}");
        assert_eq!(std::fs::read(&path).unwrap(), data);
        assert_eq!(f.tasks_in_flight(), 0);
    }

    #[test]
    fn short_transfers_continue_where_they_stopped() {
        let data = bytes(100_003, 2);
        let (_dir, path) = file_with(&[]);
        let faults = inject(
            &path,
            vec![Rule::on(WRITES).short(999), Rule::on(READS).short(1000)],
        );
        let f = FileHandle::open_with(&path, "r+", &settings(3, 8192)).unwrap();
        let done = f.write_with_report(&data, 0).unwrap();
        assert_eq!(done.bytes, data.len());
        let mut back = vec![0u8; data.len()];
        let read = f.read_with_report(&mut back, 0).unwrap();
        assert_eq!(read.bytes, data.len());
        assert!(back == data);
        assert!(read.report.kvik.tasks.iter().all(|t| t.bytes == t.size));
        assert_eq!(std::fs::read(&path).unwrap(), data);
        let writes = faults
            .calls()
            .iter()
            .filter(|c| c.syscall == Syscall::Pwrite)
            .count();
        assert!(writes >= data.len() / 999, "{writes} pwrite calls");

        // One byte at a time, at an odd offset, in the background too.
        drop(faults);
        let _faults = inject(
            &path,
            vec![Rule::on(WRITES).short(1), Rule::on(READS).short(1)],
        );
        let (_, w) = f.pwrite(data[..300].to_vec(), 77).wait().unwrap();
        assert_eq!(w.bytes, 300);
        let (buf, r) = f.pread(vec![0u8; 300], 77).wait().unwrap();
        assert_eq!(r.bytes, 300);
        assert!(buf[..] == data[..300]);
    }

    #[test]
    fn eio_in_one_task_is_an_error_naming_the_read_path_and_offset() {
        let data = bytes(64 << 10, 3);
        let (_dir, path) = file_with(&data);
        let faults = inject(&path, vec![Rule::on(READS).at(20_000).fail(libc::EIO)]);
        let f = FileHandle::open_with(&path, "r", &settings(4, 4096)).unwrap();
        let mut buf = vec![0u8; data.len()];
        let err = f.read(&mut buf, 0).unwrap_err();
        let text = err.to_string();
        assert_eq!(
            io_error_parts(&err),
            (
                Operation::Read,
                "pread",
                path.as_path(),
                20_000,
                Some(libc::EIO)
            )
        );
        assert!(
            text.contains(path.to_str().unwrap()) && text.contains("offset 20000"),
            "{text}"
        );
        assert_eq!(f.tasks_in_flight(), 0);
        // The same through every entry point: no partial result as success.
        assert!(f.read_exact(&mut buf, 0).is_err());
        assert!(f.read_with_report(&mut buf, 16_384).is_err());
        let err = f.pread(vec![0u8; 8192], 16_384).wait().unwrap_err();
        assert_eq!(err.errno(), Some(libc::EIO));
        assert_eq!(f.tasks_in_flight(), 0);
        // A read that does not touch the bad byte succeeds meanwhile.
        let mut head = vec![0u8; 16_384];
        f.read_exact(&mut head, 0).unwrap();
        assert!(head[..] == data[..16_384]);
        // The disk recovers: the same handle and pool read everything.
        drop(faults);
        f.read_exact(&mut buf, 0).unwrap();
        assert!(buf == data);
    }

    #[test]
    fn enospc_in_one_task_fails_the_write_and_the_pool_stays_usable() {
        let data = bytes(64 << 10, 4);
        let (_dir, path) = file_with(&[]);
        let bad = 3 * 4096 + 100;
        let faults = inject(&path, vec![Rule::on(WRITES).at(bad).fail(libc::ENOSPC)]);
        let f = FileHandle::open_with(&path, "w", &settings(4, 4096)).unwrap();
        let err = f.write(&data, 0).unwrap_err();
        assert_eq!(
            io_error_parts(&err),
            (
                Operation::Write,
                "pwrite",
                path.as_path(),
                bad,
                Some(libc::ENOSPC)
            )
        );
        assert_eq!(f.tasks_in_flight(), 0);
        let err = f.pwrite(data.clone(), 0).wait().unwrap_err();
        assert_eq!(err.errno(), Some(libc::ENOSPC));
        drop(faults);
        assert_eq!(f.write(&data, 0).unwrap(), data.len());
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }

    #[test]
    fn the_first_error_stops_the_tasks_not_yet_started() {
        // One thread runs the tasks in file order: after the fourth fails,
        // none of the twelve behind it may start.
        let (_dir, path) = file_with(&[]);
        let faults = inject(&path, vec![Rule::on(WRITES).at(3 * 4096).fail(libc::EIO)]);
        let f = FileHandle::open_with(&path, "w", &settings(1, 4096)).unwrap();
        let err = f.write(&vec![1u8; 16 * 4096], 0).unwrap_err();
        assert_eq!(err.errno(), Some(libc::EIO));
        let offsets: Vec<u64> = faults.calls().iter().map(|c| c.at).collect();
        assert_eq!(offsets, vec![0, 4096, 2 * 4096, 3 * 4096]);
    }

    #[test]
    fn after_the_first_error_running_tasks_stop_at_their_next_call() {
        // Four tasks on four threads, each of 64 calls; tasks 1-3 are slow
        // (2 ms a call). Task 0 fails at its fifth call: the others must stop
        // at their next call, and all of it before the write returns.
        let (_dir, path) = file_with(&[]);
        let task = 256u64 << 10;
        let faults = inject(
            &path,
            vec![
                Rule::on(WRITES).at(4 * 4096).fail(libc::EIO),
                Rule::on(WRITES)
                    .starting_in(task..4 * task)
                    .short(4096)
                    .before(|| std::thread::sleep(Duration::from_millis(2))),
                Rule::on(WRITES).short(4096),
            ],
        );
        let f = FileHandle::open_with(&path, "w", &settings(4, task)).unwrap();
        let data = vec![2u8; 4 * task as usize];
        let err = f.write(&data, 0).unwrap_err();
        assert_eq!(err.errno(), Some(libc::EIO));
        assert_eq!(f.tasks_in_flight(), 0);
        let at_return = faults.calls().len();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            faults.calls().len(),
            at_return,
            "a task ran on after return"
        );
        let slow_calls = faults.calls().iter().filter(|c| c.at >= task).count();
        assert!(
            slow_calls < 3 * 32,
            "{slow_calls} calls in tasks 1-3: they did not stop at the error"
        );
    }

    #[test]
    fn a_write_that_moves_nothing_is_an_error() {
        let (_dir, path) = file_with(&[]);
        let _faults = inject(&path, vec![Rule::on(WRITES).at(5000).nothing()]);
        let f = FileHandle::open_with(&path, "w", &settings(2, 4096)).unwrap();
        let err = f.write(&[9u8; 10_000][..], 0).unwrap_err();
        let text = err.to_string();
        let (operation, syscall, _, offset, errno) = io_error_parts(&err);
        assert_eq!(
            (operation, syscall, offset, errno),
            (Operation::Write, "pwrite", 5000, None)
        );
        assert!(text.contains("wrote nothing"), "{text}");
    }

    #[test]
    fn a_file_truncated_while_a_parallel_read_is_in_flight() {
        // When the task at 40960 starts, the file is cut there: whatever the
        // other tasks' timing, the bytes before the cut are all there, and
        // the read reports exactly those.
        let data = bytes(256 << 10, 5);
        let (_dir, path) = file_with(&data);
        let cut = 10 * 4096u64;
        let target = path.clone();
        let _faults = inject(
            &path,
            vec![Rule::on(READS).at(cut).times(1).before(move || {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .unwrap();
                f.set_len(cut).unwrap();
            })],
        );
        let f = FileHandle::open_with(&path, "r", &settings(4, 4096)).unwrap();
        let mut buf = vec![0u8; data.len()];
        let done = f.read_with_report(&mut buf, 0).unwrap();
        assert_eq!(done.bytes as u64, cut);
        assert!(buf[..cut as usize] == data[..cut as usize]);
        match done.exact().unwrap_err() {
            Error::UnexpectedEof {
                offset,
                requested,
                reached,
                ..
            } => assert_eq!((offset, requested, reached), (0, data.len() as u64, cut)),
            other => panic!("expected UnexpectedEof, got {other}"),
        }
        assert_eq!(f.tasks_in_flight(), 0);
    }

    #[test]
    fn a_read_that_returns_nothing_mid_file_ends_the_result_there() {
        let data = bytes(50_000, 6);
        let (_dir, path) = file_with(&data);
        let _faults = inject(&path, vec![Rule::on(READS).at(12_345).nothing()]);
        let f = FileHandle::open_with(&path, "r", &settings(3, 4096)).unwrap();
        let mut buf = vec![0u8; data.len()];
        assert_eq!(f.read(&mut buf, 0).unwrap(), 12_345);
        assert!(buf[..12_345] == data[..12_345]);
        let err = f.read_exact(&mut buf, 0).unwrap_err();
        assert!(
            err.to_string().contains("end of file at offset 12345"),
            "{err}"
        );
    }

    #[test]
    fn o_direct_refused_mid_task_goes_on_through_the_page_cache() {
        let data = bytes(256 << 10, 7);
        let (dir, path) = file_with(&data);
        let mut s = settings(2, 64 << 10);
        s.set_auto_direct_io_read(true);
        let f = FileHandle::open_with(&path, "r", &s).unwrap();
        let mut probe = crate::AlignedBuffer::new(4096);
        let first = f.read_with_report(&mut probe[..], 0).unwrap();
        if first.report.kvik.direct_io.bytes == 0 {
            let why = format!("O_DIRECT does not work in {}", dir.path().display());
            return skip("o_direct_refused_mid_task", &why);
        }
        let faults = inject(
            &path,
            vec![Rule::on(&[Syscall::Pread]).direct(true).fail(libc::EINVAL)],
        );
        let mut buf = crate::AlignedBuffer::new(data.len());
        let done = f.read_with_report(&mut buf[..], 0).unwrap();
        assert_eq!(done.bytes, data.len());
        assert!(buf[..] == data[..]);
        assert_eq!(done.report.kvik.direct_io.bytes, 0);
        let status = &done.report.kvik.direct_io.status;
        assert!(status.contains("refused O_DIRECT"), "{status}");
        assert!(faults.injected() >= 1);
    }

    #[test]
    fn a_panicking_task_reaches_the_caller_and_leaves_the_pool_usable() {
        // A bug (a panic) inside one task: the caller sees the panic, no task
        // stays counted as running, and the pool serves the next request.
        let data = bytes(64 << 10, 8);
        let (_dir, path) = file_with(&data);
        let faults = inject(
            &path,
            vec![
                Rule::on(READS)
                    .at(8192)
                    .times(1)
                    .before(|| panic!("injected bug")),
            ],
        );
        let f = FileHandle::open_with(&path, "r", &settings(2, 4096)).unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut buf = vec![0u8; data.len()];
            f.read(&mut buf, 0)
        }));
        assert!(caught.is_err(), "the panic reached the caller");
        assert_eq!(f.tasks_in_flight(), 0);
        drop(faults);
        let (buf, done) = f.pread(vec![0u8; data.len()], 0).wait().unwrap();
        assert_eq!(done.bytes, data.len());
        assert!(buf == data);
    }

    #[test]
    fn a_panicking_background_request_panics_in_wait_not_in_the_pool() {
        // A panic in a pool job with nobody to catch it aborts the process
        // (rayon's default); `pread` hands it to whoever waits instead.
        let data = bytes(16 << 10, 9);
        let (_dir, path) = file_with(&data);
        let faults = inject(
            &path,
            vec![Rule::on(READS).times(1).before(|| panic!("injected bug"))],
        );
        let f = FileHandle::open_with(&path, "r", &settings(1, 4096)).unwrap();
        let pending = f.pread(vec![0u8; data.len()], 0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pending.wait()));
        let payload = caught.expect_err("wait re-raises the task's panic");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"injected bug"));
        assert_eq!(f.tasks_in_flight(), 0);
        drop(faults);
        let (buf, _) = f.pread(vec![0u8; data.len()], 0).wait().unwrap();
        assert!(buf == data);
    }

    #[test]
    fn write_synced_syncs_after_every_write_and_reports_a_failed_sync() {
        let data = bytes(200_000, 10);
        let (_dir, path) = file_with(&[]);
        let faults = inject(&path, vec![]);
        let f = FileHandle::open_with(&path, "w", &settings(4, 16 << 10)).unwrap();
        let done = f.write_synced(&data, 0).unwrap();
        assert_eq!(done.bytes, data.len());
        let calls = faults.calls();
        let last = calls.last().unwrap();
        assert_eq!(last.syscall, Syscall::Fdatasync, "{calls:#?}");
        let writes = &calls[..calls.len() - 1];
        assert!(writes.iter().all(|c| c.syscall == Syscall::Pwrite));
        assert_eq!(
            writes.iter().map(|c| c.result.unwrap()).sum::<usize>(),
            data.len()
        );
        f.sync_all().unwrap();
        assert_eq!(faults.calls().last().unwrap().syscall, Syscall::Fsync);
        drop(faults);

        // EINTR is retried; EIO is not (the pages may be gone), and it is
        // the caller's error, naming the call and the path.
        let faults = inject(
            &path,
            vec![
                Rule::on(&[Syscall::Fdatasync]).times(2).fail(libc::EINTR),
                Rule::on(&[Syscall::Fdatasync]).times(1).fail(libc::EIO),
            ],
        );
        let err = f.write_synced(&data, 0).unwrap_err();
        let text = err.to_string();
        let (operation, syscall, p, _, errno) = io_error_parts(&err);
        assert_eq!(
            (operation, syscall, p, errno),
            (
                Operation::Write,
                "fdatasync",
                path.as_path(),
                Some(libc::EIO)
            )
        );
        assert!(text.contains(path.to_str().unwrap()), "{text}");
        let syncs: Vec<_> = faults
            .calls()
            .into_iter()
            .filter(|c| c.syscall == Syscall::Fdatasync)
            .map(|c| c.result)
            .collect();
        assert_eq!(
            syncs,
            vec![Err(libc::EINTR), Err(libc::EINTR), Err(libc::EIO)]
        );
        drop(faults);
        let fsync = inject(&path, vec![Rule::on(&[Syscall::Fsync]).fail(libc::EIO)]);
        assert_eq!(f.sync_all().unwrap_err().errno(), Some(libc::EIO));
        drop(fsync);
    }
}
