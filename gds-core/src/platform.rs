//! Facts about the machine and a path that decide whether GPUDirect Storage
//! can work: the nvidia-fs kernel module, udev, WSL, the filesystem, O_DIRECT.

use std::ffi::CString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where nvidia-fs publishes its version when the module is loaded.
pub const NVIDIA_FS_VERSION_FILE: &str = "/proc/driver/nvidia-fs/version";

/// The nvidia-fs kernel module: what gives cuFile its direct (`nvfs`) path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NvidiaFs {
    pub loaded: bool,
    /// The first line of the version file, when loaded.
    pub version: Option<String>,
}

pub fn nvidia_fs() -> NvidiaFs {
    match std::fs::read_to_string(NVIDIA_FS_VERSION_FILE) {
        Ok(text) => NvidiaFs {
            loaded: true,
            version: text.lines().next().map(|l| l.trim().to_string()),
        },
        Err(_) => NvidiaFs {
            loaded: false,
            version: None,
        },
    }
}

/// `/run/udev` exists as a directory. KvikIO requires it; libcufile asks udev
/// for the filesystem of a block device and fails registration without it.
pub fn udev_present() -> bool {
    Path::new("/run/udev").is_dir()
}

/// Whether this kernel is WSL's (cuFile is not supported there; KvikIO checks
/// the same). Read from the kernel release string.
pub fn is_wsl() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|release| kernel_release_is_wsl(&release))
        .unwrap_or(false)
}

fn kernel_release_is_wsl(release: &str) -> bool {
    let release = release.to_ascii_lowercase();
    release.contains("microsoft") || release.contains("wsl")
}

/// A filesystem type, from `statfs`'s magic number.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileSystem {
    /// `f_type` as the kernel reports it.
    pub magic: u64,
    /// The usual name, or `unknown (0x…)`.
    pub name: String,
    /// Whether cuFile's direct path supports this filesystem at all (the
    /// block device and the mount still have to qualify).
    pub gds_capable: bool,
}

/// Names of filesystems by magic number (linux/magic.h and vendors' values),
/// and whether GDS documents direct-path support for them.
const FILESYSTEMS: &[(u64, &str, bool)] = &[
    (0xEF53, "ext4", true),
    (0x5846_5342, "xfs", true),
    (0x0BD0_0BD0, "lustre", true),
    (0x6969, "nfs", true),
    (0x4750_4653, "gpfs", true),
    (0x1983_0326, "beegfs", true),
    (0x5745_4B41, "wekafs", true),
    (0xAAD7_AAEA, "panfs", true),
    (0x6573_5546, "fuse (or virtiofs)", false),
    (0x9123_683E, "btrfs", false),
    (0x0102_1994, "tmpfs", false),
    (0x858_458F6, "ramfs", false),
    (0x794C_7630, "overlayfs", false),
    (0x2FC1_2FC1, "zfs", false),
    (0xF2F5_2010, "f2fs", false),
    (0x0102_1997, "9p", false),
    (0xFF53_4D42, "cifs", false),
    (0xFE53_4D42, "smb2", false),
    (0x00C3_6400, "ceph", false),
    (0x7371_7368, "squashfs", false),
    (0x4D44, "vfat", false),
    (0x9FA0, "proc", false),
    (0x6265_6572, "sysfs", false),
];

pub fn filesystem_from_magic(magic: u64) -> FileSystem {
    match FILESYSTEMS.iter().find(|(m, _, _)| *m == magic) {
        Some((_, name, gds)) => FileSystem {
            magic,
            name: name.to_string(),
            gds_capable: *gds,
        },
        None => FileSystem {
            magic,
            name: format!("unknown (0x{magic:x})"),
            gds_capable: false,
        },
    }
}

/// The filesystem holding `path`.
pub fn filesystem(path: &Path) -> std::io::Result<FileSystem> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte")
    })?;
    let mut buf = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: statfs fills `buf` for a NUL-terminated path.
    if unsafe { libc::statfs(c_path.as_ptr(), buf.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statfs succeeded.
    let buf = unsafe { buf.assume_init() };
    // f_type is signed on some targets; the magic is the bit pattern.
    Ok(filesystem_from_magic(buf.f_type as u32 as u64))
}

/// Whether `O_DIRECT` I/O works at a path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DirectIo {
    /// Every step of the probe worked; `probe` is its last step (a read of
    /// 4 KiB from a file, or a write of 4 KiB to a new file).
    Supported { probe: DirectIoStep },
    /// The filesystem refused at `probe`: cuFile cannot register files here.
    Unsupported {
        probe: DirectIoStep,
        errno: i32,
        error: String,
    },
    /// Could not tell: `probe` failed for another reason (no permission to
    /// create a probe file, say).
    Unknown { probe: DirectIoStep, error: String },
}

/// One step of the O_DIRECT probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DirectIoStep {
    /// Open the file with `O_DIRECT`.
    Open,
    /// Read its first 4 KiB through an aligned buffer.
    Read,
    /// Create a probe file in the directory with `O_DIRECT`.
    Create,
    /// Write 4 KiB to it.
    Write,
}

impl fmt::Display for DirectIoStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DirectIoStep::Open => "opened with O_DIRECT",
            DirectIoStep::Read => "read 4 KiB with O_DIRECT",
            DirectIoStep::Create => "created a file with O_DIRECT",
            DirectIoStep::Write => "wrote 4 KiB with O_DIRECT",
        })
    }
}

impl fmt::Display for DirectIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectIo::Supported {
                probe: DirectIoStep::Open | DirectIoStep::Read,
            } => f.write_str("O_DIRECT works (opened with O_DIRECT and read 4 KiB)"),
            DirectIo::Supported {
                probe: DirectIoStep::Create | DirectIoStep::Write,
            } => f.write_str("O_DIRECT works (created a file with O_DIRECT and wrote 4 KiB)"),
            DirectIo::Unsupported { probe, error, .. } => {
                write!(f, "O_DIRECT refused ({probe}: {error})")
            }
            DirectIo::Unknown {
                probe: DirectIoStep::Create | DirectIoStep::Write,
                error,
            } => write!(
                f,
                "O_DIRECT not checked: cannot create a probe file: {error}"
            ),
            DirectIo::Unknown { error, .. } => {
                write!(f, "O_DIRECT not checked: cannot open the file: {error}")
            }
        }
    }
}

/// Probe O_DIRECT at `path`: for a file, open it read-only with O_DIRECT and
/// read its first 4 KiB through an aligned buffer; for a directory, create
/// (and remove) a probe file there with O_DIRECT and write 4 KiB.
pub fn direct_io(path: &Path) -> DirectIo {
    use std::os::unix::fs::OpenOptionsExt;
    let block = AlignedBlock::new();
    if path.is_dir() {
        let probe = path.join(format!(".kvik-odirect-probe-{}", std::process::id()));
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_DIRECT)
            .open(&probe);
        let result = match opened {
            Ok(file) => {
                let written = pwrite_all(&file, block.as_slice(), 0);
                let _ = std::fs::remove_file(&probe);
                match written {
                    Ok(()) => DirectIo::Supported {
                        probe: DirectIoStep::Write,
                    },
                    Err(e) => unsupported(DirectIoStep::Write, e),
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                unsupported(DirectIoStep::Create, e)
            }
            Err(e) => DirectIo::Unknown {
                probe: DirectIoStep::Create,
                error: e.to_string(),
            },
        };
        return result;
    }
    // O_NONBLOCK: should PATH have become a FIFO since the caller looked,
    // the open returns instead of waiting for a writer (it changes nothing
    // for files and block devices).
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => {
            let mut block = block;
            match pread(&file, block.as_mut_slice(), 0) {
                Ok(_) => DirectIo::Supported {
                    probe: DirectIoStep::Read,
                },
                Err(e) => unsupported(DirectIoStep::Read, e),
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => unsupported(DirectIoStep::Open, e),
        Err(e) => DirectIo::Unknown {
            probe: DirectIoStep::Open,
            error: e.to_string(),
        },
    }
}

fn unsupported(probe: DirectIoStep, e: std::io::Error) -> DirectIo {
    DirectIo::Unsupported {
        probe,
        errno: e.raw_os_error().unwrap_or(0),
        error: e.to_string(),
    }
}

fn pread(file: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

fn pwrite_all(file: &std::fs::File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

/// 4 KiB aligned to 4 KiB, as O_DIRECT requires.
#[repr(C, align(4096))]
struct AlignedBlock([u8; 4096]);

impl AlignedBlock {
    fn new() -> Box<AlignedBlock> {
        Box::new(AlignedBlock([0; 4096]))
    }
}

trait BlockSlice {
    fn as_slice(&self) -> &[u8];
    fn as_mut_slice(&mut self) -> &mut [u8];
}

impl BlockSlice for Box<AlignedBlock> {
    fn as_slice(&self) -> &[u8] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// `path` made absolute without requiring it to exist.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wsl_is_recognised_from_the_kernel_release() {
        assert!(kernel_release_is_wsl("5.15.90.1-microsoft-standard-WSL2"));
        assert!(kernel_release_is_wsl("4.4.0-19041-Microsoft"));
        assert!(!kernel_release_is_wsl("6.1.0-18-amd64"));
    }

    #[test]
    fn magic_numbers_map_to_names() {
        assert_eq!(filesystem_from_magic(0xEF53).name, "ext4");
        assert!(filesystem_from_magic(0xEF53).gds_capable);
        assert!(!filesystem_from_magic(0x0102_1994).gds_capable);
        assert_eq!(filesystem_from_magic(0x1234).name, "unknown (0x1234)");
    }

    #[test]
    fn the_filesystem_of_a_real_path_is_read() {
        let fs = filesystem(Path::new("/proc")).unwrap();
        assert_eq!(fs.name, "proc");
        assert!(filesystem(Path::new("/nonexistent/kvik")).is_err());
    }

    #[test]
    fn direct_io_probe_on_a_temp_dir_answers() {
        let dir = std::env::temp_dir().join(format!("gds-core-odirect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("data");
        std::fs::write(&file, vec![7u8; 8192]).unwrap();
        let fs = filesystem(&dir).unwrap();
        let cases = [
            (direct_io(&dir), DirectIoStep::Write, DirectIoStep::Create),
            (direct_io(&file), DirectIoStep::Read, DirectIoStep::Open),
        ];
        for (probe, last_step, refusing_step) in cases {
            match probe {
                DirectIo::Supported { probe } => assert_eq!(probe, last_step),
                // tmpfs before Linux 6.6 refuses O_DIRECT with EINVAL, at open.
                DirectIo::Unsupported { probe, errno, .. } => {
                    assert_eq!(
                        (probe, errno),
                        (refusing_step, libc::EINVAL),
                        "on {}",
                        fs.name
                    )
                }
                unknown @ DirectIo::Unknown { .. } => {
                    panic!("probe could not decide on {}: {unknown}", fs.name)
                }
            }
        }
        // The directory probe leaves nothing behind.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("data")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn direct_io_on_procfs_is_refused_or_unknown() {
        // /proc files do not support O_DIRECT: the probe must not claim support.
        let probe = direct_io(Path::new("/proc/self/status"));
        assert!(!matches!(probe, DirectIo::Supported { .. }), "{probe:?}");
    }
}
