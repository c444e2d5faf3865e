//! The batch API against a real libcufile, without opening the driver:
//! every function `Batch` needs resolves in the libraries we support (1.15
//! and 1.20), and the feature table agrees. The library comes from
//! `KVIK_CUFILE_LIBRARY` / `KVIK_CUFILE_LIBRARY_1_15` (see cufile-sys's
//! `tests/real_library.rs`); without them the test says "skipped", and with
//! `KVIK_REQUIRE_CUFILE=1` a missing library fails it.

use std::io::Write as _;

use cufile_sys::{CuFileLibrary, Feature};

#[test]
fn every_batch_function_resolves_in_the_supported_libraries() {
    let mut tested = 0;
    for var in ["KVIK_CUFILE_LIBRARY", "KVIK_CUFILE_LIBRARY_1_15"] {
        let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
            if std::env::var_os("KVIK_REQUIRE_CUFILE").is_some_and(|v| v == "1") {
                panic!("{var} is not set but KVIK_REQUIRE_CUFILE=1");
            }
            let _ = writeln!(
                std::io::stderr(),
                "skipped: batch functions in {var}: {var} is not set (no libcufile to test)"
            );
            continue;
        };
        let lib = CuFileLibrary::load_from(&path)
            .unwrap_or_else(|e| panic!("loading {}: {e}", path.to_string_lossy()));
        let feature = lib.feature(Feature::BatchIo);
        assert!(feature.available(), "{var}: {feature:?}");
        assert_eq!(
            Feature::BatchIo.symbols().len(),
            5,
            "setup, submit, status, cancel, destroy"
        );
        gds_core::batch::check_library(lib)
            .unwrap_or_else(|e| panic!("{var}: the batch functions do not resolve: {e}"));
        tested += 1;
    }
    let _ = writeln!(
        std::io::stderr(),
        "batch functions checked in {tested} libraries"
    );
}
