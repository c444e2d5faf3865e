//! KvikIO's policy layer, in Rust: read and write files into host or GPU
//! memory, through cuFile (GPUDirect Storage) where it has a direct path
//! and through a fast CPU-staged path elsewhere, and say which path every
//! request took, and why.
//!
//! * [`FileHandle`] — open a file ([`FileHandle::open`] with `"r"`, `"r+"`,
//!   `"w"`, `"w+"`, or [`OpenOptions`]); its routing is decided once, at
//!   open. Then `read` / `write` (blocking), `pread` / `pwrite` (in the
//!   background: wait, poll or `.await` the [`PendingIo`]), and [`scope`]
//!   for background requests into memory you keep. Every request returns a
//!   [`Transfer`]: the bytes moved and a [`PathReport`].
//! * Memory ([`buffer`]): host slices and vectors of any plain-data type
//!   (`&mut [f32]`, `Vec<u16>`: `bytemuck::Pod`), and cudarc device memory
//!   (`CudaSlice<T>`, `CudaView(Mut)<T>`, sub-ranges of either), all
//!   without `unsafe`. Device memory not owned by cudarc enters through
//!   `unsafe` [`DeviceSliceMut::from_raw`]: nothing safe takes a raw device
//!   address.
//! * [`Settings`] — the `KVIKIO_*` environment with KvikIO's semantics
//!   (plus unit suffixes and strict errors), API overrides, scoped
//!   overrides; [`CompatMode`] ON / OFF / AUTO.
//! * [`plan`] — the one function that decides how a request runs (backend
//!   and why, calling thread or pool, the task split, cuFile's work units):
//!   `FileHandle` executes it, `kvik plan` prints it.
//! * [`batch`] — many reads in one call (`FileHandle::read_batch`,
//!   `read_batch_into`): per-entry results, one report.
//! * [`residency`] — how much of a range is in the page cache (`cachestat`,
//!   `mincore`), and the page-cache-or-O_DIRECT decision for cold reads.
//! * [`routing`] — the per-file and per-request decisions and their typed
//!   reasons; [`task`] — the task split; [`thread_pool`] — the pools tasks
//!   run on; [`size`] — byte sizes as people write them (`4MiB`).
//! * [`gpu`] — CUDA contexts, and [`gpu::prepare`] to allocate a thread's
//!   pinned bounce buffers ahead of time.
//! * [`Error`] — every failure, with the operation, path, offset and errno.
//!
//! Host memory works everywhere, without CUDA: nothing here loads
//! `libcuda` or `libcufile` until device memory or compat mode OFF / AUTO
//! asks for them, and no call panics on a machine without a GPU.
//!
//! # Reading into host memory
//!
//! ```
//! use kvik_policy::FileHandle;
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("weights.bin");
//! # std::fs::write(&path, (0..1u32 << 20).flat_map(|i| (i as f32).to_le_bytes()).collect::<Vec<u8>>())?;
//! let file = FileHandle::open(&path, "r")?;
//! let mut weights = vec![0f32; 1 << 20];           // any plain-data type
//! let done = file.read_with_report(&mut weights, 0)?;
//! assert_eq!(done.bytes, 4 << 20);
//! assert_eq!(weights[12345], 12345.0);
//! assert_eq!(done.report.kvik.route.backend, kvik_policy::Backend::Posix);
//! println!("{}", done.report);                       // which path, and why
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Reading into GPU memory
//!
//! A cudarc `CudaSlice<f32>` (or a view of part of one) is read into as it
//! is; the read starts after the work already queued on the slice's stream
//! and returns when every byte has landed. Where cuFile has no direct path
//! (compat mode AUTO decides), the bytes go through pinned bounce buffers.
//!
//! ```
//! use kvik_policy::{FileHandle, gpu};
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("weights.bin");
//! # std::fs::write(&path, (0..1u32 << 20).flat_map(|i| (i as f32).to_le_bytes()).collect::<Vec<u8>>())?;
//! let stream = match gpu::context(0) {
//!     Ok(ctx) => ctx.default_stream(),
//!     Err(why) => {
//!         eprintln!("skipped: no GPU here ({why})");
//!         return Ok(());
//!     }
//! };
//! let file = FileHandle::open(&path, "r")?;
//! let mut weights = stream.alloc_zeros::<f32>(1 << 20)?;
//! let done = file.read_with_report(&mut weights, 0)?;
//! assert_eq!(done.bytes, 4 << 20);
//! // Half of it, into the second half of the allocation: a sub-range view.
//! file.read_exact(weights.slice_mut(1 << 19..), 0)?;
//! let back = stream.clone_dtoh(&weights)?;
//! assert_eq!((back[1], back[(1 << 19) + 1]), (1.0, 1.0));
//! println!("{}", done.report);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # In the background, and `.await`
//!
//! `pread` / `pwrite` take the buffer by value and hand it back, so no
//! request outlives its memory. The [`PendingIo`] they return is a
//! `Future` as well (any executor drives it; its waker is woken from the
//! pool):
//!
//! ```
//! use kvik_policy::FileHandle;
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("data.bin");
//! # std::fs::write(&path, vec![7u8; 3 << 20])?;
//! async fn load(file: &FileHandle) -> kvik_policy::Result<Vec<u8>> {
//!     let (buf, done) = file.pread(vec![0u8; 1 << 20], 1 << 20).await?;
//!     assert_eq!(done.bytes, 1 << 20);
//!     Ok(buf)
//! }
//! let file = FileHandle::open(&path, "r")?;
//! let buf = block_on(load(&file))?;
//! assert!(buf.iter().all(|&b| b == 7));
//! // Without async: wait.
//! let (buf, _done) = file.pread(buf, 0).wait()?;
//! # assert_eq!(buf.len(), 1 << 20);
//!
//! // A minimal executor: poll, and park until the waker unparks us.
//! fn block_on<F: std::future::Future>(future: F) -> F::Output {
//!     struct Unpark(std::thread::Thread);
//!     impl std::task::Wake for Unpark {
//!         fn wake(self: std::sync::Arc<Self>) {
//!             self.0.unpark();
//!         }
//!     }
//!     let waker = std::sync::Arc::new(Unpark(std::thread::current())).into();
//!     let mut cx = std::task::Context::from_waker(&waker);
//!     let mut future = std::pin::pin!(future);
//!     loop {
//!         match future.as_mut().poll(&mut cx) {
//!             std::task::Poll::Ready(output) => return output,
//!             std::task::Poll::Pending => std::thread::park(),
//!         }
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Into parts of a buffer you keep borrowing (KvikIO's
//! `f.pread(buf[a:b])`): [`scope`].
//!
//! # Stream-ordered reads
//!
//! [`FileHandle::read_async`] / [`FileHandle::write_async`] (KvikIO's
//! `read_async`): the call returns at once; the request starts after the
//! work already queued on the stream, and work queued on the stream
//! afterwards waits for it ([`stream_io`] says exactly how).
//!
//! ```
//! use kvik_policy::{FileHandle, gpu};
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("weights.bin");
//! # std::fs::write(&path, (0..1u32 << 20).flat_map(|i| (i as f32).to_le_bytes()).collect::<Vec<u8>>())?;
//! let stream = match gpu::context(0) {
//!     Ok(ctx) => ctx.new_stream()?,
//!     Err(why) => {
//!         eprintln!("skipped: no GPU here ({why})");
//!         return Ok(());
//!     }
//! };
//! let file = FileHandle::open(&path, "r")?;
//! let mut weights = stream.alloc_zeros::<f32>(1 << 20)?;
//! stream.memset_zeros(&mut weights)?;              // queued before: runs first
//! let pending = file.read_async(weights, 0, &stream);
//! // Kernels launched on `stream` here would see the file's bytes.
//! let (weights, done) = pending.wait()?;
//! assert_eq!(done.bytes, 4 << 20);
//! assert_eq!(stream.clone_dtoh(&weights)?[7], 7.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Settings
//!
//! Read from the environment once ([`Settings::global`]), or built by hand
//! with the same rules:
//!
//! ```
//! use kvik_policy::{CompatMode, Settings};
//!
//! let vars = |name: &str| match name {
//!     "KVIKIO_COMPAT_MODE" => Some("on".into()),
//!     "KVIKIO_TASK_SIZE" => Some("8MiB".into()),   // KvikIO itself would read 8 bytes
//!     _ => None,
//! };
//! let settings = Settings::from_vars(vars)?;
//! assert_eq!(settings.compat_mode(), CompatMode::On);
//! assert_eq!(settings.task_size(), 8 << 20);
//!
//! let bad = Settings::from_vars(|name| (name == "KVIKIO_NTHREADS").then(|| "lots".into()));
//! assert!(bad.unwrap_err().to_string().contains("KVIKIO_NTHREADS"));
//! # Ok::<(), kvik_policy::Error>(())
//! ```

pub mod batch;
pub mod buffer;
mod compat;
mod cufile;
mod error;
#[cfg(test)]
mod fault;
// The crate's own tests share `tests/common` with the integration tests,
// which name the crate `kvik_policy`.
#[cfg(test)]
extern crate self as kvik_policy;
mod file_handle;
pub mod gpu;
pub mod path_report;
pub mod path_serde;
mod pending_io;
pub mod plan;
mod posix;
pub mod residency;
pub mod routing;
mod scope;
pub mod settings;
pub mod size;
pub mod stream_io;
pub mod task;
mod task_runner;
pub mod thread_pool;

pub use batch::{BatchRead, BatchReport, ReadInto, ReadRange};
pub use buffer::{
    AlignedBuffer, Buf, BufMut, DeviceRange, DeviceSlice, DeviceSliceMut, IoBuffer, IoBufferMut,
};
pub use compat::{CompatMode, ParseCompatModeError};
pub use error::{Error, Result};
pub use file_handle::{FileHandle, OpenMode, OpenOptions, Transfer};
pub use path_report::{CuFileLayer, Operation, PathReport};
pub use pending_io::PendingIo;
pub use plan::Plan;
pub use routing::{Backend, CuFileAvailability, FileRouting, MemoryKind, RequestRoute};
pub use scope::{Scope, ScopedIo, scope};
pub use settings::{Settings, Source};
pub use size::{ParseSizeError, Size, parse_size};
pub use stream_io::StreamIo;
