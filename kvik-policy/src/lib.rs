//! KvikIO's policy layer, in Rust.
//!
//! * [`CompatMode`] — ON / OFF / AUTO, parsed as KvikIO parses it.
//! * [`task`] — the task split: how one request is cut for the thread pool.
//! * [`routing`] — which backend serves a file and a request, and why.
//! * [`size`] — byte sizes as users write them (`4MiB`), strictly parsed.
//!
//! Settings (the `KVIKIO_*` environment), the thread pool, the POSIX backend,
//! `FileHandle` and the `PathReport` land with the kvik-policy issue; device
//! buffers with the device-memory issue.

mod compat;
pub mod gpu;
pub mod routing;
pub mod size;
pub mod task;

pub use compat::{CompatMode, ParseCompatModeError};
pub use routing::{Backend, CuFileAvailability, FileRouting, MemoryKind, RequestRoute};
pub use size::{ParseSizeError, Size, parse_size};
