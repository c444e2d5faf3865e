//! Safe access to NVIDIA cuFile, and what a machine can do with it.
//!
//! * [`cuda`]: is there a CUDA driver with a GPU? Asked before anything that
//!   may open the cuFile driver (without one, `cuFileDriverOpen` never returns).
//! * [`platform`]: nvidia-fs, udev, WSL, filesystem type, O_DIRECT support.
//! * [`readiness`]: all of the above and libcufile, with a verdict — what
//!   `kvik check` prints.
//!
//! The driver, file handles, buffer registration, reads and writes,
//! statistics and the scheduling model land here with the gds-core issue.

pub mod cuda;
pub mod platform;
pub mod readiness;
