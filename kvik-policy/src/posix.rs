//! The POSIX backend for host memory: `pread`/`pwrite` loops for one task.
//!
//! * `EINTR` is retried; short transfers continue where they stopped.
//! * A read first asks the page cache without blocking (`RWF_NOWAIT`); on a
//!   miss it asks the kernel to fetch ahead (`POSIX_FADV_WILLNEED`) before
//!   reading, so parallel tasks on a cold file keep the device busy.
//! * A read stops at end of file and returns what it got (KvikIO fails with
//!   "EOF"; we return the short count, and `read_exact` says where).
//! * Opportunistic O_DIRECT (KvikIO's `auto_direct_io_read/write`): when the
//!   file has an O_DIRECT descriptor, the page-aligned middle of the range
//!   goes through it — straight from/to the caller's memory when that is
//!   page-aligned, else through a page-aligned bounce buffer — while the
//!   unaligned head and tail use the ordinary descriptor. A filesystem that
//!   then refuses O_DIRECT I/O (`EINVAL`) gets buffered I/O for the rest of
//!   the task, and the report says so.
//! * Every system call goes through one seam ([`pread`], [`pwrite`],
//!   [`pread_nowait`]): the crate's tests inject faults there (`EINTR`,
//!   short transfers, `EIO`, `ENOSPC`, a file truncated mid-request) without
//!   `LD_PRELOAD`; in other builds the seam is a plain call.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::buffer::BounceBuffer;
use crate::error::{Error, Result};
use crate::path_report::Operation;
use crate::residency::{self, ColdReadPolicy, ReadPath, ReadPathDecision};
use crate::task::page_size;
use crate::task_runner::TaskOutcome;

/// The descriptors a task may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Descriptors<'a> {
    pub path: &'a Path,
    pub buffered: &'a File,
    /// Present when this request may use O_DIRECT.
    pub direct: Option<&'a File>,
    /// Present when cold tasks of a read may switch to O_DIRECT.
    pub cold_direct: Option<&'a File>,
    /// Bounce buffer size for unaligned memory (rounded down to pages).
    pub bounce_size: u64,
}

/// One system call's worth of a task: which descriptor, how many bytes.
#[derive(Debug, Clone, Copy)]
enum Step<'f> {
    Buffered(usize),
    /// O_DIRECT on the caller's (page-aligned) memory.
    Direct(&'f File, usize),
    /// O_DIRECT through a bounce buffer.
    Bounced(&'f File, usize),
}

fn plan_step<'f>(
    file_offset: u64,
    memory: *const u8,
    remaining: usize,
    direct: Option<&'f File>,
) -> Step<'f> {
    let page = page_size();
    let Some(direct) = direct else {
        return Step::Buffered(remaining);
    };
    if file_offset % page != 0 {
        // Buffered up to the next page boundary.
        let to_boundary = (page - file_offset % page) as usize;
        return Step::Buffered(remaining.min(to_boundary));
    }
    let aligned = remaining - remaining % page as usize;
    if aligned == 0 {
        return Step::Buffered(remaining);
    }
    if (memory as usize) % page as usize == 0 {
        Step::Direct(direct, aligned)
    } else {
        Step::Bounced(direct, aligned)
    }
}

/// Retry on EINTR.
pub(crate) fn retry<T>(mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

pub(crate) fn io_error(
    operation: Operation,
    syscall: &'static str,
    path: &Path,
    offset: u64,
    source: io::Error,
) -> Error {
    Error::Io {
        operation,
        syscall,
        path: path.to_path_buf(),
        offset,
        errno: source.raw_os_error(),
        source,
    }
}

/// Read `buf.len()` bytes at `offset` (fewer at end of file).
///
/// A cold task (its first page is not in the page cache, and the page
/// cache holds at most a quarter of its range: [`residency`]) of at least
/// 1 MiB reads with O_DIRECT when the handle offers a descriptor for that
/// (`Descriptors::cold_direct`): parallel O_DIRECT reads keep the disk
/// busier than the page cache's readahead. A hot task never pays more than
/// one non-blocking read of a page to find out.
pub(crate) fn read(
    mut fds: Descriptors<'_>,
    buf: &mut [u8],
    offset: u64,
    cancel: &AtomicBool,
) -> Result<TaskOutcome> {
    let mut cold = None;
    if fds.direct.is_none() {
        let (direct, decision) = cold_read(fds.buffered, fds.cold_direct, offset, buf.len());
        fds.direct = direct;
        cold = decision;
    }
    let mut outcome = read_with(fds, buf, offset, cancel)?;
    outcome.cold = cold;
    Ok(outcome)
}

/// Whether a read of `len` bytes at `offset` is cold enough to go around
/// the page cache through `cold_direct`: the descriptor to read with (when
/// so), and the judgement (when the range was judged: a task of at least
/// 1 MiB whose first page is not cached).
pub(crate) fn cold_read<'f>(
    buffered: &File,
    cold_direct: Option<&'f File>,
    offset: u64,
    len: usize,
) -> (Option<&'f File>, Option<ReadPathDecision>) {
    let Some(direct) = cold_direct else {
        return (None, None);
    };
    if (len as u64) < ColdReadPolicy::DEFAULT.min_direct_bytes
        || first_page_cached(buffered, offset)
    {
        return (None, None);
    }
    let decision = residency::decide_for(buffered, offset, len as u64, &ColdReadPolicy::DEFAULT);
    let direct = (decision.path == ReadPath::Direct).then_some(direct);
    (direct, Some(decision))
}

/// Whether the page at `offset` is in the page cache (a non-blocking read
/// of it says; end of file counts as cached: there is nothing to fetch).
fn first_page_cached(file: &File, offset: u64) -> bool {
    let mut page = [0u8; 4096];
    let len = (page_size() as usize).min(page.len());
    read_cached(file, &mut page[..len], offset).is_some()
}

fn read_with(
    fds: Descriptors<'_>,
    buf: &mut [u8],
    offset: u64,
    cancel: &AtomicBool,
) -> Result<TaskOutcome> {
    let memory = buf.as_ptr();
    let len = buf.len();
    let mut cache_missed = false;
    // The file's size when the task started, read on first need (see Direct below).
    let mut file_len: Option<u64> = None;
    run(
        fds,
        Operation::Read,
        memory,
        len,
        offset,
        cancel,
        |step, done, bounce| {
            let at = offset + done as u64;
            let rest = &mut buf[done..];
            match step {
                Step::Buffered(n) if cache_missed => {
                    retry(|| pread(fds.buffered, &mut rest[..n], at))
                }
                Step::Buffered(n) => match read_cached(fds.buffered, &mut rest[..n], at) {
                    Some(got) => Ok(got),
                    None => {
                        // Not in the page cache: ask for the rest of this
                        // task and up to three times as much beyond it in one
                        // go, so the tasks (in file order on every thread)
                        // keep the device busy, not one synchronous read each.
                        cache_missed = true;
                        let rest_of_task = (len - done) as u64;
                        prefetch(
                            fds.buffered,
                            at,
                            rest_of_task + (3 * rest_of_task).min(32 << 20),
                        );
                        retry(|| pread(fds.buffered, &mut rest[..n], at))
                    }
                },
                // O_DIRECT moves whole blocks: a read that crosses the end of
                // the file may write zeros past the count it returns, into
                // the caller's memory. Only ranges inside the file go
                // straight to the caller; the last pages go through the
                // bounce buffer, which copies exactly what was read.
                Step::Direct(d, n)
                    if at + n as u64
                        <= *file_len.get_or_insert_with(|| {
                            fds.buffered.metadata().map(|m| m.len()).unwrap_or(0)
                        }) =>
                {
                    retry(|| pread(d, &mut rest[..n], at))
                }
                Step::Direct(d, n) | Step::Bounced(d, n) => {
                    let b = bounce.get(n)?;
                    let n = n.min(b.len());
                    let got = retry(|| pread(d, &mut b[..n], at))?;
                    rest[..got].copy_from_slice(&b[..got]);
                    Ok(got)
                }
            }
        },
    )
}

/// Read what the page cache already holds, without blocking: `Some(bytes)`
/// (0 at end of file), or `None` when the data must come from storage (or
/// the kernel cannot tell; the caller then just reads).
fn read_cached(file: &File, buf: &mut [u8], at: u64) -> Option<usize> {
    // EAGAIN: not cached; anything else: the caller reads normally and
    // meets the error (if it persists) there, with its context.
    retry(|| pread_nowait(file, buf, at)).ok()
}

/// Ask the kernel to start reading `len` bytes at `at` into the page cache.
fn prefetch(file: &File, at: u64, len: u64) {
    // SAFETY: advice on our own descriptor; failure only costs speed.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            at as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_WILLNEED,
        )
    };
}

/// Write all of `buf` at `offset`.
pub(crate) fn write(
    fds: Descriptors<'_>,
    buf: &[u8],
    offset: u64,
    cancel: &AtomicBool,
) -> Result<TaskOutcome> {
    run(
        fds,
        Operation::Write,
        buf.as_ptr(),
        buf.len(),
        offset,
        cancel,
        |step, done, bounce| {
            let at = offset + done as u64;
            let rest = &buf[done..];
            match step {
                Step::Buffered(n) => retry(|| pwrite(fds.buffered, &rest[..n], at)),
                Step::Direct(d, n) => retry(|| pwrite(d, &rest[..n], at)),
                Step::Bounced(d, n) => {
                    let b = bounce.get(n)?;
                    let n = n.min(b.len());
                    b[..n].copy_from_slice(&rest[..n]);
                    retry(|| pwrite(d, &b[..n], at))
                }
            }
        },
    )
}

/// A task's bounce buffer, allocated on first need (see [`bounce_len`]).
struct Bounce {
    configured: u64,
    buffer: Option<BounceBuffer>,
    /// The system refused the memory: the error is the allocation's.
    refused: bool,
}

impl Bounce {
    fn get(&mut self, step: usize) -> io::Result<&mut BounceBuffer> {
        if self.buffer.is_none() {
            match BounceBuffer::try_get(bounce_len(self.configured, step)) {
                Ok(b) => self.buffer = Some(b),
                Err(e) => {
                    self.refused = true;
                    return Err(e);
                }
            }
        }
        Ok(self.buffer.as_mut().expect("filled above"))
    }
}

/// The loop both directions share: plan a step, do it (`io` gets the step,
/// the bytes done so far and the task's bounce buffer), account for it,
/// until the range is done, the file ends (reads) or another task failed.
fn run<'f>(
    fds: Descriptors<'f>,
    operation: Operation,
    memory: *const u8,
    len: usize,
    offset: u64,
    cancel: &AtomicBool,
    mut io: impl FnMut(Step<'f>, usize, &mut Bounce) -> io::Result<usize>,
) -> Result<TaskOutcome> {
    let syscall = match operation {
        Operation::Read => "pread",
        Operation::Write => "pwrite",
    };
    let mut outcome = TaskOutcome::default();
    let mut direct = fds.direct;
    let mut bounce = Bounce {
        configured: fds.bounce_size,
        buffer: None,
        refused: false,
    };
    let mut done = 0usize;
    while done < len && !cancel.load(Ordering::Relaxed) {
        let at = offset + done as u64;
        let step = plan_step(at, memory.wrapping_add(done), len - done, direct);
        let used_direct = !matches!(step, Step::Buffered(_));
        match io(step, done, &mut bounce) {
            Ok(0) if operation == Operation::Read => break, // end of file
            Ok(0) => {
                let nothing = io::Error::new(io::ErrorKind::WriteZero, "pwrite wrote nothing");
                return Err(io_error(operation, syscall, fds.path, at, nothing));
            }
            Ok(n) => {
                done += n;
                if used_direct {
                    outcome.direct_bytes += n as u64;
                }
            }
            Err(e) if used_direct && e.raw_os_error() == Some(libc::EINVAL) => {
                outcome.direct_refused = Some(e.to_string());
                direct = None;
            }
            // A system that refuses the memory is an error, not a panic.
            Err(e) if bounce.refused => return Err(io_error(operation, "mmap", fds.path, at, e)),
            Err(e) => return Err(io_error(operation, syscall, fds.path, at, e)),
        }
    }
    outcome.bytes = done as u64;
    Ok(outcome)
}

/// The bounce buffer's size: `bounce_buffer_size` rounded down to whole
/// pages (O_DIRECT moves whole pages), at least one page, and never more
/// than the step needs (`step` is whole pages; rounded up to a power of
/// two so that tasks of similar size reuse each other's buffers) — so a huge
/// `KVIKIO_BOUNCE_BUFFER_SIZE` costs no more memory than the request itself.
fn bounce_len(bounce_size: u64, step: usize) -> usize {
    let page = page_size();
    let configured = (bounce_size - bounce_size % page).max(page);
    configured.min((step as u64).next_power_of_two()).max(page) as usize
}

/// The system calls of this backend, by name (the name goes into errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syscall {
    Pread,
    /// `preadv2(RWF_NOWAIT)`: what the page cache holds, without blocking.
    PreadNowait,
    Pwrite,
    Fdatasync,
    Fsync,
}

/// `pread(2)` of `buf.len()` bytes at `at`.
pub(crate) fn pread(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    seam(file, Syscall::Pread, at, buf.len(), |n| {
        file.read_at(&mut buf[..n], at)
    })
}

/// `pwrite(2)` of `buf` at `at`.
fn pwrite(file: &File, buf: &[u8], at: u64) -> io::Result<usize> {
    seam(file, Syscall::Pwrite, at, buf.len(), |n| {
        file.write_at(&buf[..n], at)
    })
}

/// `fdatasync(2)` (`data_only`: the data and what finding it needs, such as
/// the size) or `fsync(2)` (all metadata too). `EINTR` is retried; nothing
/// else is: after a failed sync the kernel may have dropped the dirty pages,
/// so a retry could report success for data that never reached the disk.
pub(crate) fn sync(file: &File, data_only: bool) -> io::Result<()> {
    let syscall = if data_only {
        Syscall::Fdatasync
    } else {
        Syscall::Fsync
    };
    retry(|| {
        seam(file, syscall, 0, 0, |_| {
            if data_only {
                file.sync_data().map(|()| 0)
            } else {
                file.sync_all().map(|()| 0)
            }
        })
    })
    .map(drop)
}

/// `preadv2(2)` with `RWF_NOWAIT`: `EAGAIN` when the data is not cached.
fn pread_nowait(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    seam(file, Syscall::PreadNowait, at, buf.len(), |n| {
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: n,
        };
        // SAFETY: one iovec over the first `n` bytes of `buf` (n <= len),
        // which we borrow mutably.
        let got = unsafe {
            libc::preadv2(
                file.as_raw_fd(),
                &iov,
                1,
                at as libc::off_t,
                libc::RWF_NOWAIT,
            )
        };
        if got < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(got as usize)
        }
    })
}

/// Every system call passes here: `real(n)` makes the call for the first
/// `n` of `len` bytes. Outside tests, it is exactly `real(len)`.
#[cfg(not(test))]
#[inline(always)]
fn seam(
    _file: &File,
    _syscall: Syscall,
    _at: u64,
    len: usize,
    real: impl FnOnce(usize) -> io::Result<usize>,
) -> io::Result<usize> {
    real(len)
}

#[cfg(test)]
use crate::fault::seam;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_split_head_middle_and_tail() {
        let page = page_size();
        let p = page as usize;
        let file = File::open("/proc/self/status").unwrap();
        let d = Some(&file);
        let aligned = p as *const u8;
        let unaligned = (p + 1) as *const u8;
        // Without O_DIRECT: one buffered step for everything.
        assert!(matches!(
            plan_step(3, aligned, 100, None),
            Step::Buffered(100)
        ));
        // Unaligned file offset: buffered up to the page boundary.
        assert!(matches!(
            plan_step(page - 10, aligned, 5 * p, d),
            Step::Buffered(10)
        ));
        // Aligned offset: whole pages direct (or bounced), the tail buffered.
        assert!(matches!(plan_step(page, aligned, 3 * p + 7, d), Step::Direct(_, n) if n == 3 * p));
        assert!(
            matches!(plan_step(page, unaligned, 3 * p + 7, d), Step::Bounced(_, n) if n == 3 * p)
        );
        assert!(matches!(plan_step(0, aligned, 7, d), Step::Buffered(7)));
    }
}
