//! `Driver::shutdown` on a real GPU: the shut-down session refuses cuFile
//! calls, the next `Driver::open` opens the driver anew (and works), and a
//! file handle of the old session drops without touching the new driver.
//!
//! Needs a CUDA driver with a GPU and libcufile; says "skipped" otherwise
//! and never touches cuFile then (`KVIK_REQUIRE_GPU=1` makes that a
//! failure). One test function: the driver is process-wide.

use std::io::Write as _;

use cufile_sys::CuFileLibrary;
use gds_core::{CuFileHandle, Driver, Error, OpenFlags};

fn skip(reason: &dyn std::fmt::Display) {
    if std::env::var_os("KVIK_REQUIRE_GPU").is_some_and(|v| v == "1") {
        panic!("KVIK_REQUIRE_GPU=1 but: {reason}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipped: shutdown_then_open_gives_a_working_driver: {reason}"
    );
}

#[test]
fn shutdown_then_open_gives_a_working_driver() {
    if let Err(reason) = gds_core::cuda::probe() {
        return skip(&reason);
    }
    if let Err(reason) = CuFileLibrary::load() {
        return skip(&reason);
    }
    let dir = std::env::var_os("KVIK_TEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("gds-core-shutdown-{}", std::process::id()));
    std::fs::write(&path, vec![5u8; 1 << 20]).unwrap();

    let first = Driver::open().expect("cuFileDriverOpen");
    let joined = Driver::open().unwrap();
    let old_handle = CuFileHandle::open(&first, &path, OpenFlags::READ);
    first.shutdown();
    assert!(
        !first.is_open() && !joined.is_open(),
        "one session, shut down"
    );
    assert!(
        matches!(
            joined.properties(),
            Err(Error::DriverClosed {
                operation: "cuFileDriverGetProperties"
            })
        ),
        "a shut-down session refuses cuFile calls"
    );
    assert!(matches!(
        CuFileHandle::open(&joined, &path, OpenFlags::READ),
        Err(Error::DriverClosed { .. })
    ));

    let second = Driver::open().expect("cuFileDriverOpen after shutdown");
    assert!(second.is_open(), "the next open is a new, open session");
    let props = second.properties().expect("properties of the new session");
    let _ = writeln!(std::io::stderr(), "after reopen: {props:?}");
    let new_handle = CuFileHandle::open(&second, &path, OpenFlags::READ);
    // The old session's handle drops without deregistering from the new driver.
    drop(old_handle);
    if let (Ok(_), Err(e)) = (&new_handle, second.properties()) {
        panic!("the new session broke when an old handle dropped: {e}");
    }
    drop(new_handle);
    drop((first, joined, second));
    std::fs::remove_file(&path).unwrap();
}
