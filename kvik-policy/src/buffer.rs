//! The memory a request reads into or writes from.
//!
//! * [`BufMut`] / [`Buf`]: borrowed, for the blocking calls
//!   (`FileHandle::read` / `write`): host slices, or device memory.
//! * [`IoBufferMut`] / [`IoBuffer`]: owned, for `pread` / `pwrite`, which
//!   run in the background and hand the buffer back when they finish (so no
//!   task can outlive the memory it writes to).
//! * [`AlignedBuffer`]: page-aligned host memory — what O_DIRECT needs, and
//!   what `kvik read` reads into.
//!
//! Device memory is represented today only by its address ([`DeviceSliceMut`]):
//! requests into it are routed and reported, then refused with
//! `Error::DeviceMemoryUnsupported`. The device-memory issue adds the data
//! path (and owned device buffers implementing [`IoBufferMut`]).

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::routing::MemoryKind;

/// Memory a read fills.
#[non_exhaustive]
#[derive(Debug)]
pub enum BufMut<'a> {
    Host(&'a mut [u8]),
    Device(DeviceSliceMut<'a>),
}

/// Memory a write takes its bytes from.
#[non_exhaustive]
#[derive(Debug, Clone, Copy)]
pub enum Buf<'a> {
    Host(&'a [u8]),
    Device(DeviceSlice<'a>),
}

impl BufMut<'_> {
    pub fn len(&self) -> usize {
        match self {
            BufMut::Host(s) => s.len(),
            BufMut::Device(d) => d.len,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn memory(&self) -> MemoryKind {
        match self {
            BufMut::Host(_) => MemoryKind::Host,
            BufMut::Device(d) => MemoryKind::Device { ordinal: d.ordinal },
        }
    }
}

impl Buf<'_> {
    pub fn len(&self) -> usize {
        match self {
            Buf::Host(s) => s.len(),
            Buf::Device(d) => d.len,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn memory(&self) -> MemoryKind {
        match self {
            Buf::Host(_) => MemoryKind::Host,
            Buf::Device(d) => MemoryKind::Device { ordinal: d.ordinal },
        }
    }
}

impl<'a> From<&'a mut [u8]> for BufMut<'a> {
    fn from(s: &'a mut [u8]) -> Self {
        BufMut::Host(s)
    }
}
impl<'a, const N: usize> From<&'a mut [u8; N]> for BufMut<'a> {
    fn from(s: &'a mut [u8; N]) -> Self {
        BufMut::Host(s)
    }
}
impl<'a> From<&'a mut Vec<u8>> for BufMut<'a> {
    fn from(s: &'a mut Vec<u8>) -> Self {
        BufMut::Host(s)
    }
}
impl<'a> From<&'a mut AlignedBuffer> for BufMut<'a> {
    fn from(s: &'a mut AlignedBuffer) -> Self {
        BufMut::Host(s)
    }
}
impl<'a> From<DeviceSliceMut<'a>> for BufMut<'a> {
    fn from(d: DeviceSliceMut<'a>) -> Self {
        BufMut::Device(d)
    }
}
impl<'a> From<&'a [u8]> for Buf<'a> {
    fn from(s: &'a [u8]) -> Self {
        Buf::Host(s)
    }
}
impl<'a, const N: usize> From<&'a [u8; N]> for Buf<'a> {
    fn from(s: &'a [u8; N]) -> Self {
        Buf::Host(s)
    }
}
impl<'a> From<&'a Vec<u8>> for Buf<'a> {
    fn from(s: &'a Vec<u8>) -> Self {
        Buf::Host(s)
    }
}
impl<'a> From<&'a AlignedBuffer> for Buf<'a> {
    fn from(s: &'a AlignedBuffer) -> Self {
        Buf::Host(s)
    }
}
impl<'a> From<DeviceSlice<'a>> for Buf<'a> {
    fn from(d: DeviceSlice<'a>) -> Self {
        Buf::Device(d)
    }
}

/// A range of device memory: GPU `ordinal`, a CUDA device address
/// (`CUdeviceptr`) and a length. Nothing here dereferences it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRange {
    pub ordinal: u32,
    pub ptr: u64,
    pub len: usize,
}

/// Device memory to read into, borrowed for `'a`.
#[derive(Debug)]
pub struct DeviceSliceMut<'a> {
    range: DeviceRange,
    _memory: PhantomData<&'a mut [u8]>,
}

/// Device memory to write from, borrowed for `'a`.
#[derive(Debug, Clone, Copy)]
pub struct DeviceSlice<'a> {
    range: DeviceRange,
    _memory: PhantomData<&'a [u8]>,
}

impl DeviceSliceMut<'_> {
    /// # Safety
    /// `ptr..ptr + len` must be device memory on GPU `ordinal` that stays
    /// allocated, and is not accessed by anyone else, for the lifetime.
    pub unsafe fn from_raw(ordinal: u32, ptr: u64, len: usize) -> Self {
        let range = DeviceRange { ordinal, ptr, len };
        DeviceSliceMut {
            range,
            _memory: PhantomData,
        }
    }
}

impl<'a> DeviceSliceMut<'a> {
    /// All of a cudarc allocation. Work queued on its stream is waited for
    /// first, so the read cannot race it.
    pub fn from_cuda(
        slice: &'a mut cudarc::driver::CudaSlice<u8>,
    ) -> crate::Result<DeviceSliceMut<'a>> {
        use cudarc::driver::DevicePtrMut;
        let stream = slice.stream().clone();
        stream
            .synchronize()
            .map_err(|e| cuda_error("cuStreamSynchronize", e))?;
        let ordinal = slice.ordinal() as u32;
        let len = slice.len();
        let (ptr, _recorded) = slice.device_ptr_mut(&stream);
        // SAFETY: `ptr..ptr+len` is the allocation `slice` owns, borrowed
        // mutably for 'a.
        Ok(unsafe { DeviceSliceMut::from_raw(ordinal, ptr, len) })
    }
}

impl<'a> DeviceSlice<'a> {
    /// All of a cudarc allocation, once the work queued on its stream is done.
    pub fn from_cuda(slice: &'a cudarc::driver::CudaSlice<u8>) -> crate::Result<DeviceSlice<'a>> {
        use cudarc::driver::DevicePtr;
        let stream = slice.stream().clone();
        stream
            .synchronize()
            .map_err(|e| cuda_error("cuStreamSynchronize", e))?;
        let (ptr, _recorded) = slice.device_ptr(&stream);
        // SAFETY: `ptr..ptr+len` is the allocation `slice` owns, borrowed for 'a.
        Ok(unsafe { DeviceSlice::from_raw(slice.ordinal() as u32, ptr, slice.len()) })
    }
}

fn cuda_error(call: &'static str, e: cudarc::driver::DriverError) -> crate::Error {
    crate::Error::Cuda {
        call,
        code: gds_core::cuda::CudaResult(e.0 as u32),
        path: None,
        offset: None,
    }
}

impl DeviceSlice<'_> {
    /// # Safety
    /// `ptr..ptr + len` must be device memory on GPU `ordinal` that stays
    /// allocated, and is not written by anyone else, for the lifetime.
    pub unsafe fn from_raw(ordinal: u32, ptr: u64, len: usize) -> Self {
        let range = DeviceRange { ordinal, ptr, len };
        DeviceSlice {
            range,
            _memory: PhantomData,
        }
    }
}

impl std::ops::Deref for DeviceSliceMut<'_> {
    type Target = DeviceRange;
    fn deref(&self) -> &DeviceRange {
        &self.range
    }
}

impl std::ops::Deref for DeviceSlice<'_> {
    type Target = DeviceRange;
    fn deref(&self) -> &DeviceRange {
        &self.range
    }
}

/// An owned buffer a background read (`FileHandle::pread`) fills and hands back.
pub trait IoBufferMut: Send + 'static {
    fn as_buf_mut(&mut self) -> BufMut<'_>;
}

/// An owned buffer a background write (`FileHandle::pwrite`) takes its bytes from.
pub trait IoBuffer: Send + 'static {
    fn as_buf(&self) -> Buf<'_>;
}

impl IoBufferMut for Vec<u8> {
    fn as_buf_mut(&mut self) -> BufMut<'_> {
        BufMut::Host(self)
    }
}
impl IoBufferMut for Box<[u8]> {
    fn as_buf_mut(&mut self) -> BufMut<'_> {
        BufMut::Host(self)
    }
}
impl IoBufferMut for AlignedBuffer {
    fn as_buf_mut(&mut self) -> BufMut<'_> {
        BufMut::Host(self)
    }
}
impl IoBuffer for Vec<u8> {
    fn as_buf(&self) -> Buf<'_> {
        Buf::Host(self)
    }
}
impl IoBuffer for Box<[u8]> {
    fn as_buf(&self) -> Buf<'_> {
        Buf::Host(self)
    }
}
impl IoBuffer for std::sync::Arc<[u8]> {
    fn as_buf(&self) -> Buf<'_> {
        Buf::Host(self)
    }
}
impl IoBuffer for &'static [u8] {
    fn as_buf(&self) -> Buf<'_> {
        Buf::Host(self)
    }
}
impl IoBuffer for AlignedBuffer {
    fn as_buf(&self) -> Buf<'_> {
        Buf::Host(self)
    }
}

/// Page-aligned, zero-initialised host memory, mapped straight from the
/// kernel (`mmap`).
///
/// The kernel hands out zero pages that are only materialised when first
/// touched; [`AlignedBuffer::prefault`] materialises them up front (as
/// transparent huge pages where the system allows), so a timed read
/// measures the read, not page faults. (`std::alloc::alloc_zeroed` with
/// page alignment would `memset` every byte instead, faulting 4 KiB pages
/// one at a time before huge pages could be asked for.)
pub struct AlignedBuffer {
    ptr: NonNull<u8>,
    len: usize,
    /// The mapped length (at least one page).
    mapped: usize,
}

// SAFETY: AlignedBuffer owns its mapping exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuffer {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    /// `len` zero bytes at a page boundary.
    ///
    /// # Panics
    /// When the system refuses the memory (as `Vec` aborts).
    pub fn new(len: usize) -> AlignedBuffer {
        AlignedBuffer::try_new(len)
            .unwrap_or_else(|e| panic!("cannot map {len} bytes of host memory: {e}"))
    }

    /// `len` zero bytes at a page boundary, or the system's refusal
    /// (`ENOMEM`) as an error.
    pub fn try_new(len: usize) -> std::io::Result<AlignedBuffer> {
        let mapped = len.max(1);
        // SAFETY: an anonymous private mapping; no file, no fixed address.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = NonNull::new(raw.cast::<u8>()).expect("mmap never returns null on success");
        Ok(AlignedBuffer { ptr, len, mapped })
    }

    /// Materialise every page now, as transparent huge pages where the
    /// system allows (they make both the faults and later copies cheaper).
    pub fn prefault(&mut self) {
        if self.len == 0 {
            return;
        }
        let addr = self.ptr.as_ptr().cast::<libc::c_void>();
        // SAFETY: advice on our own mapping; failures only cost speed.
        let populated = unsafe {
            libc::madvise(addr, self.mapped, libc::MADV_HUGEPAGE);
            libc::madvise(addr, self.mapped, libc::MADV_POPULATE_WRITE) == 0
        };
        if populated {
            return;
        }
        // Kernels before 5.14: touch each page.
        let page = crate::task::page_size() as usize;
        let bytes: &mut [u8] = self;
        for i in (0..bytes.len()).step_by(page) {
            // A volatile write of the zero already there: the page becomes
            // resident without the compiler dropping the store.
            // SAFETY: i is in bounds.
            unsafe { std::ptr::write_volatile(bytes.as_mut_ptr().add(i), 0) };
        }
    }
}

impl std::ops::Deref for AlignedBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and we hold the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
    }
}

impl std::fmt::Debug for AlignedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuffer")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Page-aligned bounce buffers for O_DIRECT from and to unaligned host
/// memory, allocated once and reused (allocating in the hot path halves
/// throughput, SPEC §7).
static BOUNCE_BUFFERS: Mutex<Vec<AlignedBuffer>> = Mutex::new(Vec::new());
/// More than any pool keeps busy at once; the rest are freed.
const MAX_IDLE_BOUNCE_BUFFERS: usize = 32;

/// A bounce buffer on loan from the pool; it goes back when dropped.
pub(crate) struct BounceBuffer(Option<AlignedBuffer>);

impl BounceBuffer {
    #[cfg(test)]
    pub(crate) fn get(size: usize) -> BounceBuffer {
        BounceBuffer::try_get(size).expect("test bounce buffers fit in memory")
    }

    /// An idle buffer of exactly `size` bytes, or a new one (an error when
    /// the system refuses the memory).
    pub(crate) fn try_get(size: usize) -> std::io::Result<BounceBuffer> {
        let reused = {
            let mut pool = BOUNCE_BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
            pool.iter()
                .rposition(|b| b.len() == size)
                .map(|i| pool.swap_remove(i))
        };
        let buffer = match reused {
            Some(b) => b,
            None => AlignedBuffer::try_new(size)?,
        };
        Ok(BounceBuffer(Some(buffer)))
    }
}

impl std::ops::Deref for BounceBuffer {
    type Target = AlignedBuffer;
    fn deref(&self) -> &AlignedBuffer {
        self.0.as_ref().expect("present until drop")
    }
}

impl std::ops::DerefMut for BounceBuffer {
    fn deref_mut(&mut self) -> &mut AlignedBuffer {
        self.0.as_mut().expect("present until drop")
    }
}

impl Drop for BounceBuffer {
    fn drop(&mut self) {
        if let Some(buffer) = self.0.take() {
            let mut pool = BOUNCE_BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
            // Buffers of a size nobody asks for any more (bounce_buffer_size
            // set anew) age out first.
            if pool.len() >= MAX_IDLE_BOUNCE_BUFFERS {
                pool.remove(0);
            }
            pool.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_are_page_aligned_and_zeroed() {
        let page = crate::task::page_size() as usize;
        for len in [0, 1, 4095, 4096, 1 << 20] {
            let mut b = AlignedBuffer::new(len);
            assert_eq!(b.as_ptr() as usize % page, 0);
            assert_eq!(b.len(), len);
            b.prefault();
            assert!(b.iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn bounce_buffers_are_reused() {
        let size = 3 * 4096 + 4096 * 7; // a size no other test uses
        let first = BounceBuffer::get(size).as_ptr() as usize;
        let again = BounceBuffer::get(size);
        assert_eq!(again.as_ptr() as usize, first);
        assert_eq!(again.len(), size);
    }

    #[test]
    fn buffers_know_their_memory() {
        let mut v = vec![0u8; 10];
        assert_eq!(BufMut::from(&mut v).memory(), MemoryKind::Host);
        // SAFETY: never dereferenced.
        let d = unsafe { DeviceSliceMut::from_raw(1, 0x1000, 64) };
        let b = BufMut::from(d);
        assert_eq!(
            (b.memory(), b.len()),
            (MemoryKind::Device { ordinal: 1 }, 64)
        );
    }
}
