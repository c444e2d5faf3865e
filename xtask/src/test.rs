//! `cargo xtask test`: every test of the repository in one command.
//!
//! 1. `cargo test --workspace` (the Rust tests);
//! 2. the Python package's pytest suite: a virtual environment under
//!    `target/python-venv` (made once, reused), maturin, numpy and pytest
//!    installed into it with pip, `./kvik-python` built and installed into it
//!    (`pip install`, as a user would), then `pytest kvik-python/tests`.
//!
//! The environment passes through (`KVIK_CUFILE_LIBRARY`,
//! `KVIK_REQUIRE_GPU`, …). Where Python cannot be had — no `python3`, no
//! `venv` module, no package index — the Python tests are skipped, saying
//! `skipped: …` and why, and the command still succeeds; with
//! `KVIK_REQUIRE_PYTHON=1` (CI sets it) that is a failure instead.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::wheel::workspace_root;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Skip `cargo test --workspace` (run only the Python tests).
    #[arg(long)]
    pub python_only: bool,
    /// The interpreter that makes the virtual environment [default: python3].
    #[arg(long, default_value = "python3")]
    pub python: OsString,
    /// Arguments passed on to pytest (after `--`).
    #[arg(last = true)]
    pub pytest_args: Vec<OsString>,
}

/// Why the Python tests could not run (a skip, unless Python is required).
struct Unavailable(String);

pub fn run(args: &Args) -> Result<(), String> {
    let root = workspace_root();
    if !args.python_only {
        status(
            Command::new(env!("CARGO"))
                .args(["test", "--workspace"])
                .current_dir(&root),
            "cargo test --workspace",
        )?;
    }
    match python_environment(&root, &args.python) {
        Ok(venv) => python_tests(&root, &venv, &args.pytest_args),
        Err(Unavailable(why)) => {
            if std::env::var_os("KVIK_REQUIRE_PYTHON").is_some_and(|v| v == "1") {
                return Err(format!(
                    "the Python tests cannot run, and KVIK_REQUIRE_PYTHON=1: {why}"
                ));
            }
            eprintln!("skipped: Python tests (kvik-python/tests): {why}");
            Ok(())
        }
    }
}

/// A virtual environment with maturin, numpy and pytest.
fn python_environment(root: &Path, python: &OsString) -> Result<PathBuf, Unavailable> {
    let venv = target_dir(root).join("python-venv");
    let venv_python = venv.join("bin").join("python");
    let usable = |p: &Path| {
        Command::new(p)
            .args(["-c", "import pip"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !usable(&venv_python) {
        let version = Command::new(python).arg("--version").output();
        match version {
            Ok(out) if out.status.success() => {}
            _ => {
                return Err(Unavailable(format!(
                    "{} not found (install CPython 3.10 or later)",
                    python.to_string_lossy()
                )));
            }
        }
        let made = Command::new(python)
            .args(["-m", "venv", "--clear"])
            .arg(&venv)
            .output()
            .map_err(|e| Unavailable(format!("cannot run {}: {e}", python.to_string_lossy())))?;
        if !made.status.success() || !usable(&venv_python) {
            return Err(Unavailable(format!(
                "`{} -m venv` failed (on Debian: apt-get install python3-venv): {}",
                python.to_string_lossy(),
                String::from_utf8_lossy(&made.stderr).trim()
            )));
        }
    }
    let installed = Command::new(&venv_python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "maturin>=1.9.4,<2",
            "numpy",
            "pytest",
        ])
        .status()
        .map_err(|e| Unavailable(format!("cannot run pip: {e}")))?;
    if !installed.success() {
        return Err(Unavailable(
            "pip could not install maturin, numpy and pytest (no package index?)".into(),
        ));
    }
    Ok(venv)
}

/// Build and install `./kvik-python` into `venv`, then run pytest.
fn python_tests(root: &Path, venv: &Path, pytest_args: &[OsString]) -> Result<(), String> {
    let bin = venv.join("bin");
    // maturin's PEP 517 hooks run the `maturin` of the active environment.
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .map_err(|e| format!("PATH: {e}"))?;
    let python = bin.join("python");
    status(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--no-build-isolation"])
            .args(["--force-reinstall", "--no-deps", "./kvik-python"])
            .env("PATH", &path)
            .env("VIRTUAL_ENV", venv)
            .current_dir(root),
        "pip install ./kvik-python",
    )?;
    status(
        Command::new(&python)
            .args([
                "-m",
                "pytest",
                "kvik-python/tests",
                "-rs",
                "-p",
                "no:cacheprovider",
            ])
            .args(pytest_args)
            .env("PATH", &path)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(root),
        "pytest kvik-python/tests",
    )
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// Run `command` with the terminal; an error naming `what` unless it succeeds.
fn status(command: &mut Command, what: &str) -> Result<(), String> {
    eprintln!("==> {what}");
    let status = command
        .status()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}
