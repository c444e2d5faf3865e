//! The pinned `nvidia-cufile` wheels: download them with pip into a cache
//! under `target/`, unpack them, and hand out the header and the library.
//!
//! Pinning by version *and* by the header's SHA-256 means a republished wheel
//! cannot silently change the generated bindings.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One `nvidia-cufile` release we build against.
#[derive(Debug, Clone, Copy)]
pub struct PinnedWheel {
    /// The package version on PyPI (`nvidia-cufile==…`).
    pub version: &'static str,
    /// The libcufile version it ships, as `cuFileGetVersion` reports it (`1000*major + 10*minor`).
    pub library_version: u32,
    /// SHA-256 of `nvidia/cu13/include/cufile.h` in that wheel.
    pub header_sha256: &'static str,
}

/// The header the bindings are generated from.
pub const CUFILE_1_20: PinnedWheel = PinnedWheel {
    version: "1.20.0.107",
    library_version: 1200,
    header_sha256: "e9314020f95a8f806d1884b6ded4462ce2daba3fcde050925ab7afdf4e9c3674",
};

/// The header the 1.15 statistics layout is generated from (the GPU test
/// machine runs libcufile 1.15; its `CUfileStatsLevel*_t` differ from 1.20's).
pub const CUFILE_1_15: PinnedWheel = PinnedWheel {
    version: "1.15.1.6",
    library_version: 1150,
    header_sha256: "43c5c3b738673f0c1dd6bab8c978d5c5382f848c3504a179268488b6b7bb309f",
};

pub const ALL: [PinnedWheel; 2] = [CUFILE_1_20, CUFILE_1_15];

pub fn find(version: &str) -> Option<PinnedWheel> {
    ALL.into_iter().find(|w| w.version == version)
}

/// Where the unpacked wheel keeps its files, relative to the unpack root.
pub const HEADER_IN_WHEEL: &str = "nvidia/cu13/include/cufile.h";
pub const LIBRARY_IN_WHEEL: &str = "nvidia/cu13/lib/libcufile.so.0";

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

pub fn cache_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("xtask-cache")
}

impl PinnedWheel {
    fn unpack_dir(&self) -> PathBuf {
        cache_dir().join(format!("nvidia-cufile-{}", self.version))
    }

    /// Download (once) and unpack the wheel; returns the unpack root.
    pub fn ensure_unpacked(&self) -> Result<PathBuf, String> {
        let dir = self.unpack_dir();
        if dir.join(HEADER_IN_WHEEL).is_file() && dir.join(LIBRARY_IN_WHEEL).is_file() {
            return Ok(dir);
        }
        let downloads = cache_dir().join("wheels");
        std::fs::create_dir_all(&downloads)
            .map_err(|e| format!("cannot create {}: {e}", downloads.display()))?;
        let requirement = format!("nvidia-cufile=={}", self.version);
        eprintln!(
            "xtask: downloading {requirement} with pip into {}",
            downloads.display()
        );
        let mut pip = Command::new("python3");
        pip.args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
        ])
        .args(["--python-version", "3.12"])
        .args(["--platform", "manylinux_2_27_x86_64"])
        .args(["--platform", "manylinux_2_17_x86_64"])
        .args(["--platform", "manylinux2014_x86_64"])
        .arg("--dest")
        .arg(&downloads)
        .arg(&requirement);
        run(&mut pip, "pip download").map_err(|e| {
            format!(
                "{e}\nxtask needs `python3 -m pip` to fetch {requirement} (or pass the header with --header)"
            )
        })?;
        let wheel = std::fs::read_dir(&downloads)
            .map_err(|e| format!("cannot list {}: {e}", downloads.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with(&format!("nvidia_cufile-{}-", self.version))
                        && n.ends_with(".whl")
                })
            })
            .ok_or_else(|| {
                format!(
                    "pip reported success but no wheel for {requirement} is in {}",
                    downloads.display()
                )
            })?;
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut unzip = Command::new("python3");
        unzip.args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&dir);
        run(&mut unzip, "unpacking the wheel")?;
        Ok(dir)
    }

    /// The pinned header, verified against its SHA-256.
    pub fn header(&self) -> Result<PathBuf, String> {
        let path = self.ensure_unpacked()?.join(HEADER_IN_WHEEL);
        let actual = crate::codegen::sha256_file(&path)?;
        if actual != self.header_sha256 {
            return Err(format!(
                "{} has SHA-256 {actual}, but nvidia-cufile=={} is pinned to {}; \
                 delete {} and retry, or update the pin in xtask/src/wheel.rs deliberately",
                path.display(),
                self.version,
                self.header_sha256,
                self.unpack_dir().display()
            ));
        }
        Ok(path)
    }

    pub fn library(&self) -> Result<PathBuf, String> {
        Ok(self.ensure_unpacked()?.join(LIBRARY_IN_WHEEL))
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let output = cmd.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "{what}: `{}` was not found on PATH",
                cmd.get_program().to_string_lossy()
            )
        } else {
            format!(
                "{what}: cannot start `{}`: {e}",
                cmd.get_program().to_string_lossy()
            )
        }
    })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        ))
    }
}
