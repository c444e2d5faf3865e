//! kvik-rs's cross-crate tests live in `tests/` beside this file; this
//! library is empty. The helpers tests share (the `skipped: …` line, GPU and
//! libcufile detection, test data and files) are in `kvik-test-support`.
