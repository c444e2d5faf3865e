//! The memory a request reads into or writes from.
//!
//! * [`BufMut`] / [`Buf`]: borrowed, for the blocking calls
//!   (`FileHandle::read` / `write`) and for scoped background requests
//!   ([`crate::scope`]). Anything that converts into them works: host slices
//!   and vectors of plain-data types (`&mut [f32]`, `&mut Vec<u16>`: any
//!   `bytemuck::Pod`), cudarc's device memory (`&mut CudaSlice<T>`,
//!   `CudaViewMut<T>` and sub-ranges of either), [`AlignedBuffer`].
//! * [`IoBufferMut`] / [`IoBuffer`]: owned, for `pread` / `pwrite`, which
//!   run in the background and hand the buffer back when they finish (so no
//!   task can outlive the memory it writes to): `Vec<T>`, `Box<[T]>`,
//!   `CudaSlice<T>`, [`AlignedBuffer`].
//! * [`DeviceSliceMut`] / [`DeviceSlice`]: device memory by address, for
//!   memory that cudarc does not own (a Python tensor, another library's
//!   allocation). Making one is `unsafe`: that is where a raw device
//!   address enters, and the caller vouches for it. Nothing else in the
//!   crate takes a raw device address.
//!
//! Device memory from cudarc is ordered after the work queued on its
//! stream: a request waits for that stream (and, where cudarc tracks events
//! across streams, for the other streams that used the memory) before it
//! starts, and the blocking calls return only when every copy has landed.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use bytemuck::{NoUninit, Pod};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use crate::routing::MemoryKind;

/// Memory a read fills.
#[non_exhaustive]
#[derive(Debug)]
pub enum BufMut<'a> {
    /// Host memory, as bytes.
    Host(&'a mut [u8]),
    /// Device memory.
    Device(DeviceSliceMut<'a>),
}

/// Memory a write takes its bytes from.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum Buf<'a> {
    /// Host memory, as bytes.
    Host(&'a [u8]),
    /// Device memory.
    Device(DeviceSlice<'a>),
}

impl BufMut<'_> {
    /// The length in bytes.
    pub fn len(&self) -> usize {
        match self {
            BufMut::Host(s) => s.len(),
            BufMut::Device(d) => d.range.len,
        }
    }
    /// Whether the length is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Host memory, or device memory of which GPU.
    pub fn memory(&self) -> MemoryKind {
        match self {
            BufMut::Host(_) => MemoryKind::Host,
            BufMut::Device(d) => MemoryKind::Device {
                ordinal: d.range.ordinal,
            },
        }
    }
}

impl Buf<'_> {
    /// The length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Buf::Host(s) => s.len(),
            Buf::Device(d) => d.range.len,
        }
    }
    /// Whether the length is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Host memory, or device memory of which GPU.
    pub fn memory(&self) -> MemoryKind {
        match self {
            Buf::Host(_) => MemoryKind::Host,
            Buf::Device(d) => MemoryKind::Device {
                ordinal: d.range.ordinal,
            },
        }
    }
}

impl<'a, T: Pod> From<&'a mut [T]> for BufMut<'a> {
    fn from(s: &'a mut [T]) -> Self {
        BufMut::Host(bytemuck::cast_slice_mut(s))
    }
}
impl<'a, T: Pod, const N: usize> From<&'a mut [T; N]> for BufMut<'a> {
    fn from(s: &'a mut [T; N]) -> Self {
        BufMut::Host(bytemuck::cast_slice_mut(s.as_mut_slice()))
    }
}
impl<'a, T: Pod> From<&'a mut Vec<T>> for BufMut<'a> {
    fn from(s: &'a mut Vec<T>) -> Self {
        BufMut::Host(bytemuck::cast_slice_mut(s.as_mut_slice()))
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
impl<'a, T: Pod> From<&'a mut CudaSlice<T>> for BufMut<'a> {
    fn from(s: &'a mut CudaSlice<T>) -> Self {
        BufMut::Device(DeviceSliceMut::from_cuda(s))
    }
}
impl<'a, T: Pod> From<&'a mut CudaViewMut<'_, T>> for BufMut<'a> {
    fn from(s: &'a mut CudaViewMut<'_, T>) -> Self {
        BufMut::Device(DeviceSliceMut::from_cuda(s))
    }
}
impl<'a, T: Pod> From<CudaViewMut<'a, T>> for BufMut<'a> {
    fn from(mut s: CudaViewMut<'a, T>) -> Self {
        let d = DeviceSliceMut::from_cuda(&mut s);
        // The view only borrows its allocation for 'a; the slice keeps that borrow.
        BufMut::Device(DeviceSliceMut {
            range: d.range,
            after: d.after,
            _memory: PhantomData,
        })
    }
}

impl<'a, T: NoUninit> From<&'a [T]> for Buf<'a> {
    fn from(s: &'a [T]) -> Self {
        Buf::Host(bytemuck::cast_slice(s))
    }
}
impl<'a, T: NoUninit, const N: usize> From<&'a [T; N]> for Buf<'a> {
    fn from(s: &'a [T; N]) -> Self {
        Buf::Host(bytemuck::cast_slice(s.as_slice()))
    }
}
impl<'a, T: NoUninit> From<&'a Vec<T>> for Buf<'a> {
    fn from(s: &'a Vec<T>) -> Self {
        Buf::Host(bytemuck::cast_slice(s.as_slice()))
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
impl<'a, T: NoUninit> From<&'a CudaSlice<T>> for Buf<'a> {
    fn from(s: &'a CudaSlice<T>) -> Self {
        Buf::Device(DeviceSlice::from_cuda(s))
    }
}
impl<'a, T: NoUninit> From<&'a CudaView<'_, T>> for Buf<'a> {
    fn from(s: &'a CudaView<'_, T>) -> Self {
        Buf::Device(DeviceSlice::from_cuda(s))
    }
}
impl<'a, T: NoUninit> From<CudaView<'a, T>> for Buf<'a> {
    fn from(s: CudaView<'a, T>) -> Self {
        let d = DeviceSlice::from_cuda(&s);
        Buf::Device(DeviceSlice {
            range: d.range,
            after: d.after,
            _memory: PhantomData,
        })
    }
}
impl<'a, T: NoUninit> From<&'a CudaViewMut<'_, T>> for Buf<'a> {
    fn from(s: &'a CudaViewMut<'_, T>) -> Self {
        Buf::Device(DeviceSlice::from_cuda(s))
    }
}

/// A range of device memory: GPU `ordinal`, a CUDA device address
/// (`CUdeviceptr`) and a length in bytes. A plain description: nothing
/// reads or writes through it, and making one vouches for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct DeviceRange {
    /// The GPU.
    pub ordinal: u32,
    /// The first byte's device address.
    pub ptr: u64,
    /// Bytes.
    pub len: usize,
}

/// Device memory to read into, borrowed for `'a`.
#[derive(Debug)]
pub struct DeviceSliceMut<'a> {
    range: DeviceRange,
    /// The stream whose queued work must finish before the request starts.
    after: Option<Arc<CudaStream>>,
    _memory: PhantomData<&'a mut [u8]>,
}

/// Device memory to write from, borrowed for `'a`.
#[derive(Debug, Clone)]
pub struct DeviceSlice<'a> {
    range: DeviceRange,
    /// The stream whose queued work must finish before the request starts.
    after: Option<Arc<CudaStream>>,
    _memory: PhantomData<&'a [u8]>,
}

impl<'a> DeviceSliceMut<'a> {
    /// Device memory by address: `len` bytes at `ptr` on GPU `ordinal`.
    ///
    /// Requests check what CUDA knows about the range before any I/O (it
    /// must be device memory of that GPU, inside one allocation), but they
    /// cannot check who else uses it.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory on GPU `ordinal` that stays
    /// allocated, and that nobody else reads or writes, for `'a`; work
    /// queued on it must be complete (or ordered with [`Self::after`]).
    pub unsafe fn from_raw(ordinal: u32, ptr: u64, len: usize) -> Self {
        DeviceSliceMut {
            range: DeviceRange { ordinal, ptr, len },
            after: None,
            _memory: PhantomData,
        }
    }

    /// Device memory by address, on whichever GPU CUDA says it belongs to
    /// (for memory described by another library: `__cuda_array_interface__`,
    /// DLPack). An address CUDA does not know as device memory is an error.
    ///
    /// # Safety
    /// As [`DeviceSliceMut::from_raw`].
    pub unsafe fn locate(ptr: u64, len: usize) -> crate::Result<Self> {
        let ordinal = locate_ordinal(ptr, len)?;
        // SAFETY: the caller vouches for the memory; CUDA named its GPU.
        Ok(unsafe { DeviceSliceMut::from_raw(ordinal, ptr, len) })
    }

    /// Start requests only once the work queued on `stream` now is done.
    pub fn after(mut self, stream: Arc<CudaStream>) -> Self {
        self.after = Some(stream);
        self
    }

    /// cudarc device memory (a whole `CudaSlice` or a view of part of one),
    /// ordered after the work queued on its stream.
    pub fn from_cuda<T: Pod>(memory: &'a mut (impl DevicePtrMut<T> + ?Sized)) -> Self {
        let stream = memory.stream().clone();
        let len = memory.num_bytes();
        let ordinal = stream.context().ordinal() as u32;
        // The stream waits here for other streams that used the memory
        // (where cudarc tracks them); the request waits for the stream.
        let ptr = {
            let (ptr, _recorded) = memory.device_ptr_mut(&stream);
            ptr
        };
        DeviceSliceMut {
            range: DeviceRange { ordinal, ptr, len },
            after: Some(stream),
            _memory: PhantomData,
        }
    }

    /// The range.
    pub fn range(&self) -> DeviceRange {
        self.range
    }

    /// The stream the request waits for first, if any.
    pub fn after_stream(&self) -> Option<&Arc<CudaStream>> {
        self.after.as_ref()
    }

    /// The same memory, with nothing to wait for (ordered otherwise).
    pub(crate) fn without_stream(mut self) -> Self {
        self.after = None;
        self
    }

    /// Block until the work queued on the memory's stream (if it names
    /// one) is done: what a request does before touching the memory.
    pub fn wait_for_stream(&self) -> crate::Result<()> {
        match &self.after {
            Some(stream) => stream
                .synchronize()
                .map_err(|e| crate::gpu::cuda_error("cuStreamSynchronize", e.0 as u32)),
            None => Ok(()),
        }
    }
}

impl<'a> DeviceSlice<'a> {
    /// Device memory by address: `len` bytes at `ptr` on GPU `ordinal`.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be device memory on GPU `ordinal` that stays
    /// allocated, and that nobody writes, for `'a`; work queued on it must
    /// be complete (or ordered with [`Self::after`]).
    pub unsafe fn from_raw(ordinal: u32, ptr: u64, len: usize) -> Self {
        DeviceSlice {
            range: DeviceRange { ordinal, ptr, len },
            after: None,
            _memory: PhantomData,
        }
    }

    /// Device memory by address, on whichever GPU CUDA says it belongs to.
    ///
    /// # Safety
    /// As [`DeviceSlice::from_raw`].
    pub unsafe fn locate(ptr: u64, len: usize) -> crate::Result<Self> {
        let ordinal = locate_ordinal(ptr, len)?;
        // SAFETY: the caller vouches for the memory; CUDA named its GPU.
        Ok(unsafe { DeviceSlice::from_raw(ordinal, ptr, len) })
    }

    /// Start requests only once the work queued on `stream` now is done.
    pub fn after(mut self, stream: Arc<CudaStream>) -> Self {
        self.after = Some(stream);
        self
    }

    /// cudarc device memory, ordered after the work queued on its stream.
    pub fn from_cuda<T: NoUninit>(memory: &'a (impl DevicePtr<T> + ?Sized)) -> Self {
        let stream = memory.stream().clone();
        let len = memory.num_bytes();
        let ordinal = stream.context().ordinal() as u32;
        let ptr = {
            let (ptr, _recorded) = memory.device_ptr(&stream);
            ptr
        };
        DeviceSlice {
            range: DeviceRange { ordinal, ptr, len },
            after: Some(stream),
            _memory: PhantomData,
        }
    }

    /// The range.
    pub fn range(&self) -> DeviceRange {
        self.range
    }

    /// The stream the request waits for first, if any.
    pub fn after_stream(&self) -> Option<&Arc<CudaStream>> {
        self.after.as_ref()
    }

    /// The same memory, with nothing to wait for (ordered otherwise).
    pub(crate) fn without_stream(mut self) -> Self {
        self.after = None;
        self
    }
}

/// The GPU CUDA says `ptr` belongs to; an error when CUDA does not know it
/// as device memory (or without a CUDA driver).
fn locate_ordinal(ptr: u64, len: usize) -> crate::Result<u32> {
    gds_core::cuda::probe()?;
    match crate::gpu::pointer_info(ptr)?.memory {
        MemoryKind::Device { ordinal } => Ok(ordinal),
        MemoryKind::Host => Err(crate::Error::DeviceBuffer {
            operation: crate::Operation::Read,
            path: std::path::PathBuf::new(),
            offset: 0,
            ordinal: 0,
            ptr,
            len,
            problem: "CUDA does not know this address as device memory".into(),
        }),
    }
}

/// An owned buffer a background read (`FileHandle::pread`) fills and hands back.
pub trait IoBufferMut: Send + 'static {
    /// The memory to fill.
    fn as_buf_mut(&mut self) -> BufMut<'_>;
}

/// An owned buffer a background write (`FileHandle::pwrite`) takes its bytes from.
pub trait IoBuffer: Send + 'static {
    /// The memory to write from.
    fn as_buf(&self) -> Buf<'_>;
}

impl<T: Pod + Send> IoBufferMut for Vec<T> {
    fn as_buf_mut(&mut self) -> BufMut<'_> {
        BufMut::from(self)
    }
}
impl<T: Pod + Send> IoBufferMut for Box<[T]> {
    fn as_buf_mut(&mut self) -> BufMut<'_> {
        BufMut::from(&mut self[..])
    }
}
impl IoBufferMut for AlignedBuffer {
    fn as_buf_mut(&mut self) -> BufMut<'_> {
        BufMut::Host(self)
    }
}
impl<T: Pod> IoBufferMut for CudaSlice<T> {
    fn as_buf_mut(&mut self) -> BufMut<'_> {
        BufMut::from(self)
    }
}
impl<T: NoUninit + Send> IoBuffer for Vec<T> {
    fn as_buf(&self) -> Buf<'_> {
        Buf::from(self)
    }
}
impl<T: NoUninit + Send> IoBuffer for Box<[T]> {
    fn as_buf(&self) -> Buf<'_> {
        Buf::from(&self[..])
    }
}
impl<T: NoUninit + Send + Sync> IoBuffer for Arc<[T]> {
    fn as_buf(&self) -> Buf<'_> {
        Buf::from(&self[..])
    }
}
impl<T: NoUninit + Sync> IoBuffer for &'static [T] {
    fn as_buf(&self) -> Buf<'_> {
        Buf::from(*self)
    }
}
impl IoBuffer for AlignedBuffer {
    fn as_buf(&self) -> Buf<'_> {
        Buf::Host(self)
    }
}
impl<T: NoUninit> IoBuffer for CudaSlice<T> {
    fn as_buf(&self) -> Buf<'_> {
        Buf::from(self)
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
/// memory, allocated once and reused: allocating them in the hot path (a
/// fresh mapping, faulted in page by page, per task) cost a staged pipeline
/// more than half its throughput where it was measured.
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
    fn buffers_know_their_memory_and_count_bytes() {
        let mut v = vec![0u8; 10];
        assert_eq!(BufMut::from(&mut v).memory(), MemoryKind::Host);
        let mut floats = vec![0f32; 10];
        assert_eq!(BufMut::from(&mut floats).len(), 40);
        assert_eq!(BufMut::from(&mut floats[2..5]).len(), 12);
        let words = [7u64; 3];
        assert_eq!(Buf::from(&words).len(), 24);
        // SAFETY: never dereferenced.
        let d = unsafe { DeviceSliceMut::from_raw(1, 0x1000, 64) };
        let b = BufMut::from(d);
        assert_eq!(
            (b.memory(), b.len()),
            (MemoryKind::Device { ordinal: 1 }, 64)
        );
    }
}
