//! O_DIRECT reads move whole blocks: one that crosses the end of the file
//! zeroes the caller's memory past the count it returns. The POSIX backend
//! must leave memory past the returned count untouched, whatever the
//! buffer's alignment (found by the property test, which failed only when
//! the allocator happened to return a page-aligned Vec).

mod common;

use common::{direct_io_works, random_bytes, settings};
use kvik_policy::{AlignedBuffer, FileHandle};

#[test]
fn a_direct_read_across_the_end_of_the_file_touches_nothing_past_it() {
    let dir = tempfile::tempdir().unwrap();
    if !direct_io_works(dir.path()) {
        common::skip(
            "a_direct_read_across_the_end_of_the_file",
            "O_DIRECT does not work in the temp directory",
        );
        return;
    }
    let page = kvik_policy::task::page_size() as usize;
    let len = 3 * page + 17;
    let path = dir.path().join("eof");
    let data = random_bytes(len, 7);
    std::fs::write(&path, &data).unwrap();
    let mut s = settings(1, 1 << 20);
    s.set_auto_direct_io_read(true);
    let f = FileHandle::open_with(&path, "r", &s).unwrap();
    // Page-aligned memory and offset: the case that used to read straight
    // into the caller's buffer.
    let mut buf = AlignedBuffer::new(4 * page);
    buf.fill(0xAA);
    let done = f.read_with_report(&mut buf[..], 0).unwrap();
    assert_eq!(done.bytes, len);
    assert!(
        done.report.kvik.direct_io.bytes > 0,
        "O_DIRECT was used: {:?}",
        done.report.kvik.direct_io
    );
    assert!(buf[..len] == data[..]);
    assert!(
        buf[len..].iter().all(|&b| b == 0xAA),
        "bytes past the end of the file were overwritten"
    );
}
