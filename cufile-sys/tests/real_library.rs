//! Tests against a real libcufile, named by environment variables:
//!
//! * `KVIK_CUFILE_LIBRARY` — the library under test (CI: nvidia-cufile 1.20.0.107);
//! * `KVIK_CUFILE_LIBRARY_1_15` — a libcufile 1.15 (CI: nvidia-cufile 1.15.1.6).
//!
//! Without them the tests say "skipped" on the terminal; with
//! `KVIK_REQUIRE_CUFILE=1` (set by `.ci/run`) a missing library fails instead.
//! None of these tests opens the cuFile driver: without a GPU that call never
//! returns.

use cufile_sys::stats::StatsLayout;
use cufile_sys::{CuFileLibrary, Feature, LibraryVersion, LoadError, cufile_fn};
use kvik_test_support::{library_var_or_skip, skip};

#[test]
fn the_configured_library_loads_and_answers_its_version() {
    let Some(path) = library_var_or_skip("the_configured_library_loads", "KVIK_CUFILE_LIBRARY")
    else {
        return;
    };
    let lib = CuFileLibrary::load().unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));

    let resolved = lib.path().expect("dladdr resolves the loaded file");
    assert_eq!(
        resolved,
        std::fs::canonicalize(&path).unwrap(),
        "the environment variable was honoured"
    );

    let version = lib
        .version()
        .expect("cuFileGetVersion answers without a driver");
    assert!(
        version.at_least(1, 15),
        "libcufile {version} is older than any we support"
    );

    // A required function resolves to a real address.
    cufile_fn!(lib, cuFileRead).expect("cuFileRead is required");
    assert!(lib.has_symbol("cuFileRead"));
    assert!(!lib.has_symbol("cuFileNoSuchFunction"));
    assert_eq!(lib.driver_close_symbol(), "cuFileDriverClose_v2");

    // Optional features agree with the version: stats since 1.15, vector I/O since 1.19.
    assert!(
        lib.feature(Feature::Stats).available(),
        "{:?}",
        lib.feature(Feature::Stats)
    );
    assert_eq!(
        lib.feature(Feature::VectorIo).available(),
        version.at_least(1, 19)
    );

    // The stats layout chosen for this library.
    let layout = StatsLayout::for_version(version).expect("known layout");
    let expected = if version.at_least(1, 19) {
        StatsLayout::V1_19
    } else {
        StatsLayout::V1_15
    };
    assert_eq!(layout, expected);
}

#[test]
fn libcufile_1_15_lacks_vector_io_and_uses_the_old_stats_layout() {
    let Some(path) = library_var_or_skip("libcufile_1_15", "KVIK_CUFILE_LIBRARY_1_15") else {
        return;
    };
    let lib = CuFileLibrary::load_from(&path)
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    assert_eq!(lib.version(), Ok(LibraryVersion(1150)));
    assert_eq!(
        StatsLayout::for_version(LibraryVersion(1150)),
        Ok(StatsLayout::V1_15)
    );

    let vector = lib.feature(Feature::VectorIo);
    assert_eq!(vector.missing, vec!["cuFileReadv", "cuFileWritev"]);

    // Asking for a missing optional function is a typed error, not a panic.
    let err = cufile_fn!(lib, cuFileReadv).unwrap_err();
    assert_eq!(err.symbol, "cuFileReadv");
    assert_eq!(err.feature, Some(Feature::VectorIo));
    assert!(err.to_string().contains("needed for vector I/O"), "{err}");

    // Loading the same path again returns the same library (loaded once).
    let again = CuFileLibrary::load_from(&path).unwrap();
    assert!(std::ptr::eq(lib, again));
}

#[test]
fn a_sibling_library_without_the_driver_api_is_refused_by_name() {
    let Some(path) = library_var_or_skip("a_sibling_library_is_refused", "KVIK_CUFILE_LIBRARY")
    else {
        return;
    };
    // The wheel ships libcufile_rdma.so.1 beside libcufile.so.0: a real
    // NVIDIA library that lacks the cuFile driver API.
    let rdma = path.with_file_name("libcufile_rdma.so.1");
    if !rdma.exists() {
        skip(
            "a_sibling_library_is_refused",
            format!("{} not found beside the library", rdma.display()),
        );
        return;
    }
    // Without its own dependencies (libmlx5, from rdma-core) the dynamic
    // loader refuses it, and the error must carry the loader's words. With
    // them it loads, and dlsym finds the driver API in the libcufile it
    // depends on: then the library we report must be that libcufile, the
    // file that really provides the functions.
    match CuFileLibrary::load_from(&rdma) {
        Ok(lib) => {
            let provider = lib.path().expect("dladdr names the provider").to_path_buf();
            assert_ne!(
                provider,
                std::fs::canonicalize(&rdma).unwrap(),
                "the wrapper is not the provider"
            );
            assert!(
                provider.to_string_lossy().contains("libcufile.so"),
                "{}",
                provider.display()
            );
        }
        Err(LoadError::MissingSymbol {
            symbol, library, ..
        }) => {
            assert_eq!(symbol, "cuFileDriverOpen");
            assert!(library.ends_with("libcufile_rdma.so.1"), "{library}");
        }
        Err(LoadError::NotFound { attempts }) => {
            assert_eq!(attempts.len(), 1);
            assert_eq!(attempts[0].candidate, rdma.to_string_lossy());
            assert!(
                attempts[0]
                    .message
                    .contains("cannot open shared object file"),
                "{}",
                attempts[0].message
            );
        }
        other => panic!("expected a typed load error, got {other:?}"),
    }
}
