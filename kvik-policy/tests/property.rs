//! Any (offset, size, task size, threads, O_DIRECT) reads exactly what a
//! plain `std::fs` read of the same range returns — end of file included.

mod common;

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use common::{random_bytes, settings};
use kvik_policy::FileHandle;
use proptest::prelude::*;

const FILE_SIZE: usize = 100 * 1024 + 17;

/// What std reads at `offset` into `size` bytes (stopping at end of file).
fn std_read(path: &Path, offset: u64, size: usize) -> Vec<u8> {
    let mut f = std::fs::File::open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    let mut out = Vec::new();
    f.take(size as u64).read_to_end(&mut out).unwrap();
    out
}

fn fixture() -> &'static (tempfile::TempDir, std::path::PathBuf) {
    static FIXTURE: std::sync::OnceLock<(tempfile::TempDir, std::path::PathBuf)> =
        std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("property");
        std::fs::write(&path, random_bytes(FILE_SIZE, 42)).unwrap();
        (dir, path)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn reads_match_std(
        offset in 0u64..(FILE_SIZE as u64 + 8192),
        size in 0usize..70_000,
        task_size in 1u64..20_000,
        threads in 1usize..6,
        direct in any::<bool>(),
        background in any::<bool>(),
    ) {
        let (_, path) = fixture();
        let mut s = settings(threads, task_size);
        s.set_auto_direct_io_read(direct);
        let f = FileHandle::open_with(path, "r", &s).unwrap();
        let expected = std_read(path, offset, size);
        let (buf, n) = if background {
            let (buf, done) = f.pread(vec![0xAAu8; size], offset).wait().unwrap();
            (buf, done.bytes)
        } else {
            let mut buf = vec![0xAAu8; size];
            let n = f.read(&mut buf, offset).unwrap();
            (buf, n)
        };
        prop_assert_eq!(n, expected.len());
        prop_assert!(buf[..n] == expected[..]);
        // Bytes past the end of the file are left as they were.
        prop_assert!(buf[n..].iter().all(|&b| b == 0xAA));
    }
}
