//! Background requests into memory you keep: KvikIO's
//! `f.pread(buf[a:b])`, safely, in the style of `std::thread::scope`.
//!
//! `FileHandle::pread` takes its buffer by value and hands it back, so no
//! request can outlive its memory. To read into parts of a buffer you keep
//! borrowing, open a scope: requests made in it may borrow anything that
//! outlives the scope, and the scope returns only when every request made
//! in it has finished (also when the closure panics, or a request's result
//! was never asked for).

use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Condvar, Mutex};

use cudarc::driver::CudaStream;

use crate::buffer::{Buf, BufMut};
use crate::error::Result;
use crate::file_handle::{FileHandle, Transfer};
use crate::pending_io::PendingIo;
use crate::stream_io::{unordered, unordered_mut};

/// Run `f` with a [`Scope`]; return once every request made in it finished.
///
/// Requests made in the scope ([`Scope::pread`], [`Scope::pwrite`]) run in
/// the background and may borrow anything that outlives the scope — parts
/// of a buffer you keep, as KvikIO's `f.pread(buf[a:b])` — because the
/// scope returns only when every request made in it has finished (also
/// when `f` panics, or a request's result was never asked for).
///
/// ```
/// use kvik_policy::FileHandle;
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("f");
/// # std::fs::write(&path, (0..2048u32).flat_map(u32::to_le_bytes).collect::<Vec<u8>>())?;
/// let file = FileHandle::open(&path, "r")?;
/// let mut values = vec![0u32; 2048];
/// let (head, tail) = values.split_at_mut(1024);
/// kvik_policy::scope(|s| {
///     let a = s.pread(&file, head, 0);
///     let b = s.pread(&file, tail, 4096);
///     a.wait()?;
///     b.wait()?;
///     Ok::<(), kvik_policy::Error>(())
/// })?;
/// assert_eq!(values[2047], 2047);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let scope = Scope {
        outstanding: Arc::new(Outstanding::default()),
        _scope: PhantomData,
        _env: PhantomData,
    };
    let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    scope.outstanding.wait_for_none();
    match result {
        Ok(value) => value,
        Err(panic) => resume_unwind(panic),
    }
}

/// Requests made here may borrow memory for `'scope`.
#[derive(Debug)]
pub struct Scope<'scope, 'env: 'scope> {
    outstanding: Arc<Outstanding>,
    // Invariant lifetimes, as std::thread::Scope has them.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// A request made in a scope.
#[must_use = "a scoped request runs anyway; wait on it to learn how it ended"]
#[derive(Debug)]
pub struct ScopedIo<'scope> {
    pending: PendingIo<()>,
    _scope: PhantomData<&'scope mut &'scope ()>,
}

impl ScopedIo<'_> {
    /// Block until the request finishes.
    pub fn wait(self) -> Result<Transfer> {
        self.pending.wait().map(|((), transfer)| transfer)
    }

    /// Whether the request has finished.
    pub fn is_finished(&self) -> bool {
        self.pending.is_finished()
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Read into `buf` (borrowed for the scope) from `offset` in the background.
    pub fn pread(
        &'scope self,
        file: &FileHandle,
        buf: impl Into<BufMut<'scope>>,
        offset: u64,
    ) -> ScopedIo<'scope> {
        // SAFETY: only the lifetime changes; `scope` waits for this request
        // to finish before 'scope ends, so the memory outlives every use.
        let buf: BufMut<'static> = unsafe { std::mem::transmute(buf.into()) };
        let handle = file.clone();
        let guard = self.outstanding.start();
        self.spawned(file.spawn(move |cancel| {
            let _guard = guard;
            handle.transfer_read(buf, offset, cancel).map(|t| ((), t))
        }))
    }

    /// Write `buf` (borrowed for the scope) at `offset` in the background.
    pub fn pwrite(
        &'scope self,
        file: &FileHandle,
        buf: impl Into<Buf<'scope>>,
        offset: u64,
    ) -> ScopedIo<'scope> {
        // SAFETY: as in `pread`.
        let buf: Buf<'static> = unsafe { std::mem::transmute(buf.into()) };
        let handle = file.clone();
        let guard = self.outstanding.start();
        self.spawned(file.spawn(move |cancel| {
            let _guard = guard;
            handle.transfer_write(buf, offset, cancel).map(|t| ((), t))
        }))
    }

    /// Read into `buf` from `offset`, ordered on `stream` as
    /// [`FileHandle::read_async`] is (always through the gated path here:
    /// the scope must know when the memory is free again).
    pub fn read_async(
        &'scope self,
        file: &FileHandle,
        buf: impl Into<BufMut<'scope>>,
        offset: u64,
        stream: &Arc<CudaStream>,
    ) -> ScopedIo<'scope> {
        let buf = buf.into();
        let own = match &buf {
            BufMut::Device(d) => d.after_stream().cloned(),
            BufMut::Host(_) => None,
        };
        // SAFETY: as in `pread`.
        let buf: BufMut<'static> = unsafe { std::mem::transmute(unordered_mut(buf)) };
        let handle = file.clone();
        let guard = self.outstanding.start();
        self.spawned(file.spawn_ordered(stream, own, move |cancel| {
            let _guard = guard;
            handle.transfer_read(buf, offset, cancel).map(|t| ((), t))
        }))
    }

    /// Write `buf` at `offset`, ordered on `stream`.
    pub fn write_async(
        &'scope self,
        file: &FileHandle,
        buf: impl Into<Buf<'scope>>,
        offset: u64,
        stream: &Arc<CudaStream>,
    ) -> ScopedIo<'scope> {
        let buf = buf.into();
        let own = match &buf {
            Buf::Device(d) => d.after_stream().cloned(),
            Buf::Host(_) => None,
        };
        // SAFETY: as in `pread`.
        let buf: Buf<'static> = unsafe { std::mem::transmute(unordered(buf)) };
        let handle = file.clone();
        let guard = self.outstanding.start();
        self.spawned(file.spawn_ordered(stream, own, move |cancel| {
            let _guard = guard;
            handle.transfer_write(buf, offset, cancel).map(|t| ((), t))
        }))
    }

    fn spawned(&'scope self, pending: PendingIo<()>) -> ScopedIo<'scope> {
        ScopedIo {
            pending,
            _scope: PhantomData,
        }
    }
}

/// The requests of a scope still running.
#[derive(Debug, Default)]
struct Outstanding {
    count: Mutex<usize>,
    none_left: Condvar,
}

/// One running request; counted until dropped (also when it panics, or
/// when it never started because the pool could not be made).
struct Running(Arc<Outstanding>);

impl Outstanding {
    fn start(self: &Arc<Self>) -> Running {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Running(self.clone())
    }

    /// Block until no request is left. On a pool thread (a scope opened
    /// inside a request), run pending pool work meanwhile: the requests may
    /// be queued behind us on this very pool.
    fn wait_for_none(&self) {
        loop {
            let count = self.count.lock().unwrap_or_else(|e| e.into_inner());
            if *count == 0 {
                return;
            }
            if rayon::current_thread_index().is_none() {
                let _unused = self
                    .none_left
                    .wait(count)
                    .unwrap_or_else(|e| e.into_inner());
                continue;
            }
            drop(count);
            if !matches!(rayon::yield_now(), Some(rayon::Yield::Executed)) {
                let count = self.count.lock().unwrap_or_else(|e| e.into_inner());
                let _unused = self
                    .none_left
                    .wait_timeout(count, std::time::Duration::from_millis(1))
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut count = self.0.count.lock().unwrap_or_else(|e| e.into_inner());
        *count -= 1;
        if *count == 0 {
            self.0.none_left.notify_all();
        }
    }
}
