//! KvikIO's policy layer, in Rust.
//!
//! * [`Settings`] — the `KVIKIO_*` environment with KvikIO's semantics (and
//!   unit suffixes, and strict errors), API overrides, scoped overrides.
//! * [`FileHandle`] — open (`r`, `r+`, `w`, `w+`), route once, then
//!   `read`/`write` (blocking) and `pread`/`pwrite` ([`PendingIo`]), each
//!   request with a [`PathReport`].
//! * [`batch`] — many reads in one call (`FileHandle::read_batch`,
//!   `read_batch_into`): per-entry results, one report.
//! * [`residency`] — how much of a range is in the page cache (`cachestat`,
//!   `mincore`), and the page-cache-or-O_DIRECT decision for cold reads.
//! * [`CompatMode`] — ON / OFF / AUTO, parsed as KvikIO parses it.
//! * [`routing`] — which backend serves a file and a request, and why.
//! * [`task`] — the task split: how one request is cut for the thread pool.
//! * [`thread_pool`] — the rayon pools the tasks run on.
//! * [`buffer`] — the memory a request moves: host slices, device memory,
//!   owned buffers for background requests, page-aligned buffers.
//! * [`size`] — byte sizes as users write them (`4MiB`), strictly parsed.
//! * [`Error`] — every failure, with the path, offset and errno.
//! * [`gpu`] — CUDA contexts, pointer classification and the pipelined
//!   bounce-buffer path for device memory.
//!
//! Host memory works everywhere, without CUDA. Through `FileHandle`, device
//! memory is routed and reported, and refused until the device-memory issue
//! wires its data path (`gpu`, cuFile) into the per-request dispatch.

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
mod pending_io;
mod posix;
pub mod residency;
pub mod routing;
pub mod settings;
pub mod size;
pub mod task;
pub mod thread_pool;

pub use batch::{BatchRead, BatchReport, ReadInto, ReadRange};
pub use buffer::{
    AlignedBuffer, Buf, BufMut, DeviceRange, DeviceSlice, DeviceSliceMut, IoBuffer, IoBufferMut,
};
pub use compat::{CompatMode, ParseCompatModeError};
pub use error::{Error, Result};
pub use file_handle::{FileHandle, OpenMode, Transfer};
pub use path_report::{CuFileLayer, Operation, PathReport};
pub use pending_io::PendingIo;
pub use routing::{Backend, CuFileAvailability, FileRouting, MemoryKind, RequestRoute};
pub use settings::{Settings, Source};
pub use size::{ParseSizeError, Size, parse_size};
