//! Helpers for kvik-rs's own tests (a dev-dependency only; never published).
//!
//! A test that cannot run on this machine says so on the terminal —
//! `skipped: TEST: REASON` on stderr, past the test harness's capture — and
//! returns; it never passes silently. On a machine that must run it, the
//! skip is a failure instead:
//!
//! * `KVIK_REQUIRE_GPU=1`: [`gpu_or_skip`] (and [`gpu_and_cufile_or_skip`])
//!   panic where they would skip (the GPU machine's run, `gpu/run-all.sh`);
//! * `KVIK_REQUIRE_CUFILE=1`: [`cufile_or_skip`] and [`library_var_or_skip`]
//!   panic where libcufile is missing (CI, which downloads it);
//! * `KVIK_REQUIRE_REMOTE=1`: [`moto::moto`] panics where moto is missing
//!   (CI, which installs it).
//!
//! For remote reads: [`http_server`], an HTTP/1.1 server on localhost with
//! byte ranges that misbehaves on cue, and [`moto`], a real S3 endpoint.
//!
//! [`skip`] alone is for skips that have nothing to do with a GPU or
//! libcufile (O_DIRECT on tmpfs, running as root, a missing tool): it never
//! panics.
//!
//! Nothing here opens the cuFile driver: on a machine without a GPU,
//! `cuFileDriverOpen` never returns. Tests open it only after
//! [`gpu_or_skip`] found a GPU.
//!
//! ```
//! use kvik_test_support::{TestFile, gpu_or_skip, random_bytes};
//!
//! let data = random_bytes(4096, 7);
//! let file = TestFile::new("doc-example", &data);
//! assert_eq!(std::fs::read(file.path()).unwrap(), data);
//! if let Some(driver) = gpu_or_skip("doc_example") {
//!     println!("CUDA {} with {} GPU(s)", driver.version_string(), driver.devices.len());
//! }
//! ```

pub mod http_server;
pub mod moto;

use std::fmt::Display;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub use cufile_sys::CuFileLibrary;
pub use gds_core::cuda::CudaDriver;

/// Set to `1` on a machine with a GPU: GPU skips fail instead.
pub const REQUIRE_GPU: &str = "KVIK_REQUIRE_GPU";
/// Set to `1` where libcufile must be found: libcufile skips fail instead.
pub const REQUIRE_CUFILE: &str = "KVIK_REQUIRE_CUFILE";
/// Set to `1` where moto (a real S3 server) must be found: remote skips
/// fail instead.
pub const REQUIRE_REMOTE: &str = "KVIK_REQUIRE_REMOTE";
/// The directory test files go to (default: the system temp directory).
pub const TEST_DIR: &str = "KVIK_TEST_DIR";

/// Whether the environment variable `var` is `1`.
pub fn required(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| v == "1")
}

/// Say on the terminal that `test` did not run, and why.
pub fn skip(test: &str, reason: impl Display) {
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {reason}");
}

/// Skip, unless one of `require` is set: then fail.
#[track_caller]
fn skip_unless_required(test: &str, reason: impl Display, require: &[&str]) {
    if let Some(var) = require.iter().find(|var| required(var)) {
        panic!("{test} cannot run: {reason} ({var}=1: this machine must run it)");
    }
    skip(test, reason);
}

/// The CUDA driver's facts (version, GPUs) when a driver reports a GPU;
/// otherwise `None` after the skip line (a panic under `KVIK_REQUIRE_GPU=1`).
#[track_caller]
pub fn gpu_or_skip(test: &str) -> Option<&'static CudaDriver> {
    match gds_core::cuda::probe() {
        Ok(driver) => Some(driver),
        Err(reason) => {
            skip_unless_required(test, reason, &[REQUIRE_GPU]);
            None
        }
    }
}

/// libcufile, loaded (`KVIK_CUFILE_LIBRARY`, then the default search; the
/// driver is not opened); otherwise `None` after the skip line (a panic
/// under `KVIK_REQUIRE_CUFILE=1`).
#[track_caller]
pub fn cufile_or_skip(test: &str) -> Option<&'static CuFileLibrary> {
    load_cufile(test, &[REQUIRE_CUFILE])
}

/// A GPU, then libcufile: for tests that open the cuFile driver. libcufile
/// is not looked for on a machine without a GPU; on one with a GPU it must
/// be found under either `KVIK_REQUIRE_GPU=1` or `KVIK_REQUIRE_CUFILE=1`.
#[track_caller]
pub fn gpu_and_cufile_or_skip(test: &str) -> Option<(&'static CudaDriver, &'static CuFileLibrary)> {
    let driver = gpu_or_skip(test)?;
    let library = load_cufile(test, &[REQUIRE_CUFILE, REQUIRE_GPU])?;
    Some((driver, library))
}

#[track_caller]
fn load_cufile(test: &str, require: &[&str]) -> Option<&'static CuFileLibrary> {
    match CuFileLibrary::load() {
        Ok(library) => Some(library),
        Err(reason) => {
            skip_unless_required(test, reason, require);
            None
        }
    }
}

/// The libcufile the environment variable `var` names (such as
/// `KVIK_CUFILE_LIBRARY_1_15`), not loaded; otherwise `None` after the skip
/// line (a panic under `KVIK_REQUIRE_CUFILE=1`).
#[track_caller]
pub fn library_var_or_skip(test: &str, var: &str) -> Option<PathBuf> {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            skip_unless_required(
                test,
                format!("{var} is not set (no libcufile to test)"),
                &[REQUIRE_CUFILE],
            );
            None
        }
    }
}

/// `len` deterministic pseudo-random bytes (splitmix64 from `seed`): data
/// that no off-by-one copy or stale buffer reproduces by accident.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The directory for test files: `KVIK_TEST_DIR`, else the system temp
/// directory. (On the GPU machine a directory on the disk cuFile can
/// register, not a tmpfs.)
pub fn test_dir() -> PathBuf {
    std::env::var_os(TEST_DIR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// A file in [`test_dir`], removed when dropped. Its name is unique in the
/// machine: `NAME-PID-N`.
#[derive(Debug)]
pub struct TestFile {
    path: PathBuf,
}

impl TestFile {
    /// A file holding `data`.
    ///
    /// # Panics
    /// When the file cannot be written (a test cannot go on without it).
    pub fn new(name: &str, data: &[u8]) -> TestFile {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = test_dir().join(format!("{name}-{}-{n}", std::process::id()));
        std::fs::write(&path, data)
            .unwrap_or_else(|e| panic!("cannot write test file {}: {e}", path.display()));
        TestFile { path }
    }

    /// A file of `len` bytes of [`random_bytes`]`(len, seed)`.
    pub fn random(name: &str, len: usize, seed: u64) -> TestFile {
        TestFile::new(name, &random_bytes(len, seed))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TestFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bytes_are_deterministic_and_seeded() {
        assert_eq!(random_bytes(100, 1), random_bytes(100, 1));
        assert_ne!(random_bytes(100, 1), random_bytes(100, 2));
        // A prefix of a longer run: the stream does not depend on the length.
        assert_eq!(random_bytes(13, 5), random_bytes(64, 5)[..13]);
        assert_eq!(random_bytes(0, 5), Vec::<u8>::new());
    }

    #[test]
    fn test_files_are_unique_and_removed_on_drop() {
        let a = TestFile::new("support-self-test", b"a");
        let b = TestFile::new("support-self-test", b"b");
        assert_ne!(a.path(), b.path());
        assert_eq!(std::fs::read(a.path()).unwrap(), b"a");
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
    }

    #[test]
    fn only_the_value_1_requires() {
        // A variable no test sets.
        assert!(!required("KVIK_TEST_SUPPORT_NEVER_SET"));
    }
}
