//! KvikIO's policy layer, in Rust: `Settings` (the `KVIKIO_*` environment with
//! KvikIO's semantics), `CompatMode` routing, the task split over a thread
//! pool, the POSIX backend, device buffers, `FileHandle`, and the `PathReport`
//! that says which path every request took and why.
//!
//! This crate is filled by the kvik-policy and device-memory issues; it
//! exports nothing yet.
