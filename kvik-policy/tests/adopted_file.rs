//! `FileHandle::from_file`: a handle on a file that is already open uses
//! that open file only — the O_DIRECT descriptor too — whatever its path
//! names by then, and reports the name it was given.

use std::os::unix::fs::OpenOptionsExt as _;

use kvik_policy::{CompatMode, FileHandle, Settings};

/// A new file at `path`, open for reading and writing.
fn new_file(path: &std::path::Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap()
}

fn settings() -> Settings {
    let mut s = Settings::global().unwrap();
    s.set_compat_mode(CompatMode::On)
        .set_auto_direct_io_write(true)
        .set_auto_direct_io_read(true);
    s
}

#[test]
fn an_adopted_file_is_written_through_its_own_descriptors_even_after_its_path_moves() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.bin");
    let file = new_file(&path);
    let handle = FileHandle::from_file(file, "/reported/name.bin", "w+", &settings()).unwrap();
    // Another file takes the path: nothing may reach it.
    std::fs::rename(&path, dir.path().join("moved.bin")).unwrap();
    std::fs::write(&path, b"someone else's").unwrap();

    let page = 4096;
    let data: Vec<u8> = (0..4 * page).map(|i| (i * 31 % 251) as u8).collect();
    let mut aligned = kvik_policy::AlignedBuffer::try_new(data.len()).unwrap();
    aligned.copy_from_slice(&data);
    let done = handle.write_with_report(&aligned[..], 0).unwrap();
    assert_eq!(done.report.path, std::path::Path::new("/reported/name.bin"));
    // The page-aligned middle went through O_DIRECT, opened on the same file.
    if done.report.kvik.direct_io.bytes == 0 {
        eprintln!(
            "skipped: O_DIRECT: {} (the write still went to the adopted file)",
            done.report.kvik.direct_io.status
        );
    }
    assert_eq!(std::fs::read(dir.path().join("moved.bin")).unwrap(), data);
    assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");

    let mut back = vec![0u8; data.len()];
    handle.read_exact(&mut back[..], 0).unwrap();
    assert_eq!(back, data);
}

#[test]
fn an_adopted_file_with_no_name_works() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gone.bin");
    let file = new_file(&path);
    std::fs::remove_file(&path).unwrap();
    let handle = FileHandle::from_file(file, &path, "w+", &settings()).unwrap();
    assert_eq!(handle.write(&[7u8; 10_000][..], 0).unwrap(), 10_000);
    let mut back = vec![0u8; 10_000];
    assert_eq!(handle.read(&mut back[..], 0).unwrap(), 10_000);
    assert!(back.iter().all(|&b| b == 7));
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}
