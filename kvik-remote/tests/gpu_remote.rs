//! Remote reads into GPU memory on a real GPU: whole objects and unaligned
//! ranges into a cudarc `CudaSlice` (and a view of part of one), blocking
//! and in the background, byte for byte against the object. Says
//! "skipped: …" without a CUDA driver (`KVIK_REQUIRE_GPU=1`: a failure).

mod common;

use common::object;
use common::server::{Server, serve_all};
use kvik_policy::MemoryKind;
use kvik_remote::{RemoteOptions, RemoteSettings};

#[test]
fn remote_reads_land_in_gpu_memory_byte_for_byte() {
    if kvik_test_support::gpu_or_skip("remote_reads_land_in_gpu_memory").is_none() {
        return;
    }
    let len = 64 << 20 | 12345;
    let bytes = object(len, 21);
    let server = Server::start(vec![("/data.bin", bytes.clone())], serve_all());
    let file = RemoteOptions::new()
        .settings(RemoteSettings::default())
        .task_size(4 << 20)
        .max_in_flight(8)
        .open_http(&server.url("/data.bin"))
        .unwrap();
    let stream = kvik_policy::gpu::context(0).unwrap().new_stream().unwrap();

    // Whole object, blocking.
    let mut device = stream.alloc_zeros::<u8>(len).unwrap();
    let done = file.read_with_report(&mut device, 0).unwrap();
    assert_eq!(done.bytes, len);
    assert_eq!(done.report.memory, MemoryKind::Device { ordinal: 0 });
    assert!(
        stream.clone_dtoh(&device).unwrap()[..] == bytes[..],
        "whole object"
    );

    // An unaligned range into the middle of the allocation (a view).
    let (at, offset, size) = (4097, 1_000_003u64, 9 << 20 | 7);
    file.read(device.slice_mut(at..at + size), offset).unwrap();
    let back = stream.clone_dtoh(&device.slice(at..at + size)).unwrap();
    assert!(
        back[..] == bytes[offset as usize..offset as usize + size],
        "range"
    );

    // In the background, into an owned allocation that comes back.
    let owned = stream.alloc_zeros::<u8>(1 << 20).unwrap();
    let (owned, done) = file.pread(owned, 3).wait().unwrap();
    assert_eq!(done.bytes, 1 << 20);
    assert!(stream.clone_dtoh(&owned).unwrap()[..] == bytes[3..3 + (1 << 20)]);
    eprintln!("{}", done.report);
}
