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
//!
//! Nothing here opens the cuFile driver before [`cuda::probe`] found a GPU
//! ([`Driver::open`] asks it first): on a machine without one, libcufile's
//! `cuFileDriverOpen` never returns.
//!
//! # Is there a GPU?
//!
//! ```
//! match gds_core::cuda::probe() {
//!     Ok(driver) => println!("CUDA {}: {:?}", driver.version_string(), driver.devices),
//!     Err(why) => println!("no GPU, so no cuFile: {why}"),
//! }
//! ```
//!
//! # A raw cuFile read
//!
//! Into cudarc device memory, with the device address and its lifetime
//! vouched for by the caller (`unsafe`): this is the layer kvik-policy's
//! typed buffers are built on.
//!
//! ```
//! use cudarc::driver::{CudaContext, DevicePtr};
//! use gds_core::{CuFileHandle, Driver, OpenFlags, io};
//! # let file = kvik_test_support::TestFile::new("gds-core-doc-read", &vec![7u8; 1 << 20]);
//! # let path = file.path();
//! if let Err(why) = gds_core::cuda::probe() {
//!     eprintln!("skipped: no GPU here ({why})");
//!     return Ok(());
//! }
//! let driver = Driver::open()?;
//! let handle = CuFileHandle::open(&driver, path, OpenFlags::READ)?;
//! let stream = CudaContext::new(0)?.default_stream();
//! let buffer = stream.alloc_zeros::<u8>(1 << 20)?;
//! let (ptr, _in_use) = buffer.device_ptr(&stream);
//! stream.synchronize()?;
//! // SAFETY: `buffer` is 1 MiB of device memory that outlives the call.
//! let n = unsafe { io::read(&handle, ptr, 1 << 20, 0, 0) }?;
//! assert_eq!(n, 1 << 20);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How cuFile will split a request
//!
//! See [`schedule`]: NVIDIA's worked example, a 1 GiB read under the stock
//! `cufile.json`, is 4 work units of 256 MiB.

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
pub mod stream;

pub use buffer::BufferRegistration;
pub use driver::{Driver, DriverOptions, DriverProperties};
pub use error::{Error, Result};
pub use handle::{CuFileHandle, OpenFlags};
pub use stats::{StatsDelta, StatsSnapshot};
