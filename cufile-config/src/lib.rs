//! The `cufile.json` model: where cuFile finds its configuration and what it
//! means.
//!
//! This crate builds no FFI and opens no driver: a user who only needs to
//! validate configs depends on it alone.

mod execution;
mod location;

pub use execution::ExecutionConfig;
pub use location::{ConfigLocation, DEFAULT_CONFIG_PATH, ENV_CONFIG_PATH, LocationSource};
