//! Safe access to NVIDIA cuFile, and what a machine can do with it.
//!
//! * [`cuda`]: is there a CUDA driver with a GPU? Asked before anything that
//!   may open the cuFile driver (without one, `cuFileDriverOpen` never returns).
//! * [`Driver`]: the process's cuFile driver (reference counted), its
//!   properties ([`DriverProperties::direct_path`]) and [`parameters`].
//! * [`CuFileHandle`]: a file opened with O_DIRECT and registered; registration
//!   failures quote cufile.log ([`log`]).
//! * [`BufferRegistration`]: a registered device range (RAII).
//! * [`batch`]: cuFile's batch API as an owning type (cancel and wait on drop).
//! * [`io`]: `cuFileRead` / `cuFileWrite`, short counts kept, errors typed.
//! * [`stats`]: snapshots of cuFile's counters in the loaded version's layout,
//!   and deltas — the in-process `gds_stats`.
//! * [`platform`] and [`readiness`]: nvidia-fs, udev, WSL, filesystem,
//!   O_DIRECT, and the verdict `kvik check` prints.
//! * [`schedule`]: how cuFile splits one request into work units (pure model).

pub mod batch;
pub mod buffer;
pub mod cuda;
pub mod driver;
mod error;
pub mod handle;
pub mod io;
pub mod log;
pub mod parameters;
pub mod platform;
pub mod readiness;
pub mod schedule;
pub mod stats;

pub use buffer::BufferRegistration;
pub use driver::{Driver, DriverOptions, DriverProperties};
pub use error::{Error, Result};
pub use handle::{CuFileHandle, OpenFlags};
pub use stats::{StatsDelta, StatsSnapshot};
