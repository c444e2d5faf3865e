//! Shared helpers for kvik-remote's integration tests: the scriptable HTTP
//! server and moto (a real S3 endpoint), both from kvik-test-support (the
//! CLI's tests use them too); object contents, settings.
#![allow(dead_code)]

// Each test binary (and the benchmark example) uses its own share.
#[allow(unused_imports)]
pub use kvik_test_support::{http_server as server, moto};

use std::sync::Arc;
use std::time::Duration;

use kvik_remote::{RemoteOptions, RemoteSettings};

/// `len` bytes that differ from offset to offset (xorshift64*), so a byte
/// read from the wrong place shows.
pub fn object(len: usize, seed: u64) -> Arc<[u8]> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// A short retry policy, so fault tests stay fast: `attempts` attempts,
/// `timeout_ms` each, retrying 503 and 429.
pub fn quick(attempts: u32, timeout_ms: u64) -> RemoteSettings {
    let mut s = RemoteSettings::default();
    s.set_http_max_attempts(attempts)
        .unwrap()
        .set_http_timeout(Duration::from_millis(timeout_ms))
        .unwrap()
        .set_http_status_codes(vec![429, 503])
        .unwrap();
    s
}

/// Options with a retry policy, small tasks (many ranges per read) and a
/// few ranges in flight.
pub fn options(settings: RemoteSettings, task_size: u64) -> RemoteOptions {
    let mut options = RemoteOptions::new();
    options
        .settings(settings)
        .task_size(task_size)
        .max_in_flight(4);
    options
}

/// Byte ranges worth reading from an object of `len` bytes: whole, first
/// and last byte, unaligned heads and tails, across task boundaries.
pub fn ranges(len: u64, task_size: u64) -> Vec<(u64, u64)> {
    let mut ranges = vec![(0, len)];
    if len == 0 {
        return ranges;
    }
    ranges.extend([(0, 1), (len - 1, 1), (len / 2, len - len / 2)]);
    if len > 4099 {
        ranges.extend([(1, 4097), (4095, 2), (3, len - 7)]);
    }
    if len > task_size + 2 {
        ranges.extend([(task_size - 1, 2), (task_size + 1, len - task_size - 1)]);
    }
    ranges
}
