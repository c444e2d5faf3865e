//! What the output-file, source and signal tests share: running `kvik`
//! with a clean environment, and reading its results.

#![allow(dead_code)] // each test file uses its own share of these

use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `kvik ARGS` without any `KVIKIO_*`, `CUFILE_*` or `KVIK_*` variable of
/// the test's environment.
pub fn kvik_cmd<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    let mut cmd = Command::new(KVIK);
    cmd.args(args);
    clean_env(&mut cmd);
    cmd
}

/// The binary under test.
pub const KVIK: &str = env!("CARGO_BIN_EXE_kvik");

/// Remove the test's `KVIKIO_*`, `CUFILE_*` and `KVIK_*` variables from
/// `cmd`'s environment.
pub fn clean_env(cmd: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let name_text = name.to_string_lossy();
        if ["KVIKIO_", "CUFILE_", "KVIK_"]
            .iter()
            .any(|prefix| name_text.starts_with(prefix))
        {
            cmd.env_remove(name);
        }
    }
}

pub fn kvik<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    kvik_cmd(args).output().expect("run kvik")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `out` succeeded (exit 0).
pub fn ok(out: &Output) -> &Output {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&ok(out).stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

/// Exit `code`, stderr naming every needle, no panic.
pub fn fails(out: &Output, code: i32, needles: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

pub fn skip(test: &str, reason: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {reason}");
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Names in `dir`, sorted (lossy: for comparing with expectations).
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether `dir` holds a name that looks like one of kvik's temporaries.
pub fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| {
            let bytes = n.as_bytes();
            bytes.windows(5).any(|w| w == b"kvik-") && bytes.starts_with(b".")
        })
        .map(|n| n.to_string_lossy().into_owned())
        .collect()
}

/// Random-looking bytes from `seed` (not kvik's pattern: the tests compare
/// against bytes kvik did not make).
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Write `data` to a new file at `path`.
pub fn file_with(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap();
}

/// Run `cmd` for at most 60 s (a command that waits forever fails the
/// test instead of hanging it), feeding `stdin` when given.
pub fn output_within(cmd: &mut Command, stdin: Option<Vec<u8>>) -> Output {
    let mut child = cmd
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(data) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{cmd:?} did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}
