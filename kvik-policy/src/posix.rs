//! The POSIX backend for host memory: `pread`/`pwrite` loops for one task.
//!
//! * `EINTR` is retried; short transfers continue where they stopped.
//! * A read stops at end of file and returns what it got (KvikIO fails with
//!   "EOF"; SPEC §5 wants the short count, and `read_exact` to say where).
//! * Opportunistic O_DIRECT (KvikIO's `auto_direct_io_read/write`): when the
//!   file has an O_DIRECT descriptor, the page-aligned middle of the range
//!   goes through it — straight from/to the caller's memory when that is
//!   page-aligned, else through a page-aligned bounce buffer — while the
//!   unaligned head and tail use the ordinary descriptor. A filesystem that
//!   then refuses O_DIRECT I/O (`EINVAL`) gets buffered I/O for the rest of
//!   the task, and the report says so.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::buffer::BounceBuffer;
use crate::error::{Error, Result};
use crate::path_report::Operation;
use crate::task::page_size;

/// The descriptors a task may use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Descriptors<'a> {
    pub path: &'a Path,
    pub buffered: &'a File,
    /// Present when this request may use O_DIRECT.
    pub direct: Option<&'a File>,
    /// Bounce buffer size for unaligned memory (rounded down to pages).
    pub bounce_size: u64,
}

/// What one task did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TaskOutcome {
    pub bytes: u64,
    pub direct_bytes: u64,
    /// O_DIRECT was refused mid-task (the OS error), so the rest went buffered.
    pub direct_refused: Option<String>,
}

/// One system call's worth of a task: which descriptor, which part.
#[derive(Debug, Clone, Copy)]
enum Step {
    Buffered(usize),
    /// O_DIRECT on the caller's (page-aligned) memory.
    Direct(usize),
    /// O_DIRECT through a bounce buffer.
    Bounced(usize),
}

fn plan_step(file_offset: u64, memory: *const u8, remaining: usize, direct: bool) -> Step {
    let page = page_size();
    if !direct {
        return Step::Buffered(remaining);
    }
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
        Step::Direct(aligned)
    } else {
        Step::Bounced(aligned)
    }
}

/// Retry on EINTR.
fn retry<T>(mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

fn io_error(
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
pub(crate) fn read(
    fds: Descriptors<'_>,
    buf: &mut [u8],
    offset: u64,
    cancel: &AtomicBool,
) -> Result<TaskOutcome> {
    let mut outcome = TaskOutcome::default();
    let mut direct = fds.direct;
    let mut bounce: Option<BounceBuffer> = None;
    let mut done = 0usize;
    while done < buf.len() {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        let at = offset + done as u64;
        let rest = &mut buf[done..];
        let step = plan_step(at, rest.as_ptr(), rest.len(), direct.is_some());
        let result = match (step, direct) {
            (Step::Buffered(n), _) => retry(|| fds.buffered.read_at(&mut rest[..n], at)),
            (Step::Direct(n), Some(d)) => retry(|| d.read_at(&mut rest[..n], at)),
            (Step::Bounced(n), Some(d)) => {
                let b = bounce.get_or_insert_with(|| BounceBuffer::get(bounce_len(fds)));
                let n = n.min(b.len());
                retry(|| d.read_at(&mut b[..n], at)).inspect(|&got| {
                    rest[..got].copy_from_slice(&b[..got]);
                })
            }
            (Step::Direct(_) | Step::Bounced(_), None) => unreachable!("planned without O_DIRECT"),
        };
        let used_direct = matches!(step, Step::Direct(_) | Step::Bounced(_));
        match result {
            Ok(0) => break, // end of file
            Ok(got) => {
                done += got;
                if used_direct {
                    outcome.direct_bytes += got as u64;
                }
            }
            Err(e) if used_direct && e.raw_os_error() == Some(libc::EINVAL) => {
                outcome.direct_refused = Some(e.to_string());
                direct = None;
            }
            Err(e) => return Err(io_error(Operation::Read, "pread", fds.path, at, e)),
        }
    }
    outcome.bytes = done as u64;
    Ok(outcome)
}

/// Write all of `buf` at `offset`.
pub(crate) fn write(
    fds: Descriptors<'_>,
    buf: &[u8],
    offset: u64,
    cancel: &AtomicBool,
) -> Result<TaskOutcome> {
    let mut outcome = TaskOutcome::default();
    let mut direct = fds.direct;
    let mut bounce: Option<BounceBuffer> = None;
    let mut done = 0usize;
    while done < buf.len() {
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        let at = offset + done as u64;
        let rest = &buf[done..];
        let step = plan_step(at, rest.as_ptr(), rest.len(), direct.is_some());
        let result = match (step, direct) {
            (Step::Buffered(n), _) => retry(|| fds.buffered.write_at(&rest[..n], at)),
            (Step::Direct(n), Some(d)) => retry(|| d.write_at(&rest[..n], at)),
            (Step::Bounced(n), Some(d)) => {
                let b = bounce.get_or_insert_with(|| BounceBuffer::get(bounce_len(fds)));
                let n = n.min(b.len());
                b[..n].copy_from_slice(&rest[..n]);
                retry(|| d.write_at(&b[..n], at))
            }
            (Step::Direct(_) | Step::Bounced(_), None) => unreachable!("planned without O_DIRECT"),
        };
        let used_direct = matches!(step, Step::Direct(_) | Step::Bounced(_));
        match result {
            Ok(0) => {
                return Err(io_error(
                    Operation::Write,
                    "pwrite",
                    fds.path,
                    at,
                    io::Error::new(io::ErrorKind::WriteZero, "pwrite wrote nothing"),
                ));
            }
            Ok(put) => {
                done += put;
                if used_direct {
                    outcome.direct_bytes += put as u64;
                }
            }
            Err(e) if used_direct && e.raw_os_error() == Some(libc::EINVAL) => {
                outcome.direct_refused = Some(e.to_string());
                direct = None;
            }
            Err(e) => return Err(io_error(Operation::Write, "pwrite", fds.path, at, e)),
        }
    }
    outcome.bytes = done as u64;
    Ok(outcome)
}

/// The bounce buffer's size: `bounce_buffer_size` rounded down to whole
/// pages (O_DIRECT moves whole pages), at least one page.
fn bounce_len(fds: Descriptors<'_>) -> usize {
    let page = page_size();
    (fds.bounce_size - fds.bounce_size % page).max(page) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_split_head_middle_and_tail() {
        let page = page_size();
        let aligned = page as usize as *const u8;
        let unaligned = (page as usize + 1) as *const u8;
        // Without O_DIRECT: one buffered step for everything.
        assert!(matches!(
            plan_step(3, aligned, 100, false),
            Step::Buffered(100)
        ));
        // Unaligned file offset: buffered up to the page boundary.
        assert!(matches!(
            plan_step(page - 10, aligned, 5 * page as usize, true),
            Step::Buffered(10)
        ));
        // Aligned offset: whole pages direct (or bounced), the tail buffered.
        assert!(matches!(
            plan_step(page, aligned, 3 * page as usize + 7, true),
            Step::Direct(n) if n == 3 * page as usize
        ));
        assert!(matches!(
            plan_step(page, unaligned, 3 * page as usize + 7, true),
            Step::Bounced(n) if n == 3 * page as usize
        ));
        assert!(matches!(plan_step(0, aligned, 7, true), Step::Buffered(7)));
    }
}
