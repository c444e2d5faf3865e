//! Where the bytes of a read land, as they arrive.
//!
//! The ranged GETs of one read run on the runtime's worker threads, each
//! copying its body into its own part of the caller's memory as chunks
//! arrive: one copy, in parallel, and no whole-range buffering.
//!
//! Host memory is written in place; device memory through kvik-policy's
//! [`DeviceUpload`]: each task gathers its chunks into pinned staging
//! buffers and copies them to the device while the next ones arrive, and
//! the task ends only when its bytes are in device memory.

use std::sync::Mutex;

use kvik_policy::DeviceRange;
use kvik_policy::gpu::DeviceUpload;

/// The memory one read fills, shared by the read's workers.
#[derive(Debug)]
pub(crate) struct HostDest {
    ptr: *mut u8,
    len: usize,
    /// Device memory (`ptr` is then its address), with the staging size.
    device: Option<(u32, usize)>,
}

// SAFETY: a HostDest is only written through `TaskDest::put`, each task to
// its own disjoint part (the read's task split), and `HostDest::new`'s
// caller keeps the memory alive and otherwise untouched until every worker
// holding it is gone; so sending it to and sharing it between the workers
// creates no data race.
unsafe impl Send for HostDest {}
// SAFETY: as for Send: concurrent `put`s write disjoint bytes.
unsafe impl Sync for HostDest {}

impl HostDest {
    /// # Safety
    /// `ptr..ptr + len` must be valid for writes, and nothing else may read
    /// or write it, until this `HostDest` and every [`TaskDest`] made from
    /// it are dropped.
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> HostDest {
        HostDest {
            ptr,
            len,
            device: None,
        }
    }

    /// Device memory `range`, staged `staging` bytes at a time.
    ///
    /// # Safety
    /// As [`HostDest::new`], for device memory of the range's GPU.
    pub(crate) unsafe fn device(range: DeviceRange, staging: usize) -> HostDest {
        HostDest {
            ptr: range.ptr as *mut u8,
            len: range.len,
            device: Some((range.ordinal, staging)),
        }
    }

    /// The part `start..start + len` of the memory, for one task. The read
    /// gives each task of its split to exactly one worker, so parts never
    /// overlap.
    ///
    /// # Panics
    /// When the part is not inside the memory.
    pub(crate) fn task(&self, start: u64, len: u64) -> TaskDest<'_> {
        let start = usize::try_from(start).expect("task offset fits in memory");
        let len = usize::try_from(len).expect("task size fits in memory");
        assert!(
            start <= self.len && len <= self.len - start,
            "task {start}+{len} outside a buffer of {}",
            self.len
        );
        let upload = self.device.map(|(ordinal, staging)| {
            let range = DeviceRange {
                ordinal,
                ptr: self.ptr as u64 + start as u64,
                len,
            };
            // SAFETY: a part of device memory `HostDest::device`'s caller
            // vouched for, which no other task writes (disjoint parts).
            Mutex::new(unsafe { DeviceUpload::new(range, staging) })
        });
        TaskDest {
            dest: self,
            start,
            len,
            upload,
        }
    }
}

/// One task's part of the memory.
#[derive(Debug)]
pub(crate) struct TaskDest<'a> {
    dest: &'a HostDest,
    start: usize,
    len: usize,
    /// For device memory: the upload, or why it failed (kept until
    /// [`TaskDest::finish`] reports it).
    upload: Option<Mutex<kvik_policy::Result<DeviceUpload>>>,
}

impl TaskDest<'_> {
    /// Copy `bytes` to offset `at` of this part.
    ///
    /// # Panics
    /// When they do not fit in the part (callers check the length first).
    pub(crate) fn put(&self, at: u64, bytes: &[u8]) {
        let at = usize::try_from(at).expect("offset fits in memory");
        assert!(
            at <= self.len && bytes.len() <= self.len - at,
            "{} bytes at {at} outside a task of {}",
            bytes.len(),
            self.len
        );
        if let Some(upload) = &self.upload {
            let mut upload = upload.lock().unwrap_or_else(|p| p.into_inner());
            if let Ok(u) = upload.as_mut()
                && let Err(e) = u.write(at as u64, bytes)
            {
                *upload = Err(e);
            }
            return;
        }
        // SAFETY: inside this task's part (checked above), which is inside the
        // memory (checked in `task`); the memory is valid for writes and no one
        // else touches this part (`HostDest::new`'s contract, disjoint tasks).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.dest.ptr.add(self.start + at),
                bytes.len(),
            )
        };
    }
}

impl TaskDest<'_> {
    /// The part is complete: for device memory, wait until every byte has
    /// landed (or say why it could not).
    pub(crate) fn finish(self) -> kvik_policy::Result<()> {
        match self.upload {
            None => Ok(()),
            Some(upload) => upload
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())?
                .finish(),
        }
    }
}
