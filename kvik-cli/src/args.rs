//! The command line's values, parsed in one place: sizes, thread counts,
//! compat modes, memory kinds, what to read (a path or a URL); the options
//! every command that moves data takes; and the settings and memory they
//! lead to. Every command's arguments use these, so a value means the same,
//! and is refused in the same words, wherever it is given.
//!
//! Nothing here decides policy: settings are kvik-policy's `Settings` (the
//! `KVIKIO_*` environment, its defaults and rules) with the command line's
//! values set through its setters, which check them.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use kvik_policy::{CompatMode, MemoryKind, Settings};

use crate::CliError;

/// A size: bytes or with a unit (`4096`, `4KiB`, `1GiB`), strictly.
pub fn size(text: &str) -> Result<u64, String> {
    kvik_policy::parse_size(text).map_err(|e| e.to_string())
}

/// A size that must be greater than 0.
pub fn positive_size(text: &str) -> Result<u64, String> {
    match size(text)? {
        0 => Err(format!("{text:?} is zero; it must be greater than 0")),
        n => Ok(n),
    }
}

/// A thread count (at least 1).
pub fn threads(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 threads: a thread count must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number of threads")),
    }
}

/// KvikIO's compat mode: `on`, `off`, `auto` (kvik-policy's parser).
pub fn compat(text: &str) -> Result<CompatMode, String> {
    text.parse::<CompatMode>().map_err(|e| e.to_string())
}

/// Host memory, or the memory of GPU N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryTarget {
    Host,
    Device(u32),
}

impl MemoryTarget {
    pub fn kind(self) -> MemoryKind {
        match self {
            MemoryTarget::Host => MemoryKind::Host,
            MemoryTarget::Device(ordinal) => MemoryKind::Device { ordinal },
        }
    }
}

impl fmt::Display for MemoryTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryTarget::Host => f.write_str("host"),
            MemoryTarget::Device(n) => write!(f, "device:{n}"),
        }
    }
}

impl serde::Serialize for MemoryTarget {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for MemoryTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        memory(&text).map_err(serde::de::Error::custom)
    }
}

/// A memory kind: `host`, `device` (GPU 0) or `device:N`.
pub fn memory(text: &str) -> Result<MemoryTarget, String> {
    let t = text.trim().to_ascii_lowercase();
    match t.as_str() {
        "host" => Ok(MemoryTarget::Host),
        "device" => Ok(MemoryTarget::Device(0)),
        _ => t
            .strip_prefix("device:")
            .and_then(|n| n.parse::<u32>().ok())
            .map(MemoryTarget::Device)
            .ok_or_else(|| format!("{text:?} is not a memory kind: use host, device or device:N")),
    }
}

/// What a command reads: a local path, or a remote object's URL
/// (`s3://…`, `http://…`, `https://…`, presigned URLs included). A path
/// that happens to start like a URL is given as `./s3://…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Path(PathBuf),
    Url(String),
}

impl From<OsString> for Location {
    fn from(text: OsString) -> Location {
        match text.to_str() {
            Some(url) if kvik_remote::Source::is_remote(url) => Location::Url(url.to_string()),
            _ => Location::Path(PathBuf::from(text)),
        }
    }
}

impl Location {
    /// The last component: a path's file name, a URL's last path segment
    /// (as it is written in the URL); `None` where there is none.
    pub fn file_name(&self) -> Option<OsString> {
        match self {
            Location::Path(path) => path.file_name().map(OsString::from),
            Location::Url(url) => {
                let shown = kvik_remote::redact(url);
                let path = shown.split(['?', '#']).next().unwrap_or_default();
                let (_, last) = path.split_once("://")?.1.split_once('/')?;
                let name = last.rsplit('/').next()?;
                (!name.is_empty()).then(|| OsString::from(name))
            }
        }
    }

    /// For messages: the path escaped, or the URL without its query string
    /// (a presigned URL's signature is a credential).
    pub fn shown(&self) -> String {
        match self {
            Location::Path(path) => crate::output::escaped(path).to_string(),
            Location::Url(url) => kvik_remote::redact(url),
        }
    }
}

/// A path a command writes: never a URL (remote objects are only read).
pub fn local_destination(what: &str, path: &std::path::Path) -> Result<(), CliError> {
    match path.to_str() {
        Some(url) if kvik_remote::Source::is_remote(url) => Err(CliError::Usage(format!(
            "{what} {}: kvik writes local files only; remote objects are read (kvik copy URL \
             DST), never written",
            kvik_remote::redact(url)
        ))),
        _ => Ok(()),
    }
}

/// As JSON: a path as kvik-policy writes paths (a string, or every byte
/// where it is not UTF-8); a URL without its query string.
impl serde::Serialize for Location {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Location::Path(path) => kvik_policy::path_serde::serialize(path, s),
            Location::Url(url) => s.serialize_str(&kvik_remote::redact(url)),
        }
    }
}

/// `--host` / `--device N`: which memory a command moves data through.
#[derive(Debug, Clone, clap::Args)]
pub struct MemoryArgs {
    /// Use host memory [default: GPU 0 when a CUDA driver and a GPU are
    /// present, else host memory; host memory for a URL].
    #[arg(long, conflicts_with = "device")]
    pub host: bool,
    /// Use the memory of GPU N.
    #[arg(long, value_name = "N")]
    pub device: Option<u32>,
}

/// Options of every command that moves data.
#[derive(Debug, Clone, clap::Args)]
pub struct IoArgs {
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// Task size: how requests are cut for the thread pool, or into ranged
    /// GETs for a URL (overrides KVIKIO_TASK_SIZE), e.g. 4MiB.
    #[arg(long, value_name = "SIZE", value_parser = positive_size)]
    pub task_size: Option<u64>,
    /// Threads in the I/O pool, or ranged GETs in flight for a URL
    /// (overrides KVIKIO_NTHREADS).
    #[arg(long, value_name = "N", value_parser = threads)]
    pub threads: Option<usize>,
    /// Compat mode: on (POSIX only), off (cuFile only), auto (overrides
    /// KVIKIO_COMPAT_MODE).
    #[arg(long, value_name = "MODE", value_parser = compat)]
    pub compat: Option<CompatMode>,
    /// Print the CRC-32 (IEEE, as zlib.crc32) of the bytes moved.
    #[arg(long)]
    pub checksum: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

impl IoArgs {
    /// The global settings with this command line's overrides.
    pub fn settings(&self) -> Result<Settings, CliError> {
        Overrides {
            compat: self.compat,
            threads: self.threads,
            task_size: self.task_size,
            gds_threshold: None,
        }
        .settings()
    }
}

/// Values given on the command line for KvikIO settings; the rest come
/// from the `KVIKIO_*` environment, else kvik-policy's defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrides {
    pub compat: Option<CompatMode>,
    pub threads: Option<usize>,
    pub task_size: Option<u64>,
    pub gds_threshold: Option<u64>,
}

impl Overrides {
    /// kvik-policy's global settings with these values set (its setters
    /// check them).
    pub fn settings(&self) -> Result<Settings, CliError> {
        let mut s = Settings::global()?;
        if let Some(mode) = self.compat {
            s.set_compat_mode(mode);
        }
        if let Some(n) = self.threads {
            s.set_num_threads(n)?;
        }
        if let Some(bytes) = self.task_size {
            s.set_task_size(bytes)?;
        }
        if let Some(bytes) = self.gds_threshold {
            s.set_gds_threshold(bytes);
        }
        Ok(s)
    }
}

/// Which memory a command uses, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemoryChoice {
    #[serde(flatten)]
    pub kind: MemoryKind,
    pub reason: String,
}

impl MemoryArgs {
    /// Without `--host` / `--device N`: GPU 0 when a CUDA driver and a GPU
    /// are present, host memory otherwise; the reason says which and why.
    /// `--device N` without such a GPU is bad input (exit 2).
    pub fn choose(&self) -> Result<MemoryChoice, CliError> {
        let cuda = gds_core::cuda::probe();
        let (kind, reason) = match (self.host, self.device, cuda) {
            (true, _, _) => (MemoryKind::Host, "--host".to_string()),
            (false, Some(n), Ok(driver)) if (n as usize) < driver.devices.len() => (
                MemoryKind::Device { ordinal: n },
                format!("--device {n} ({})", driver.devices[n as usize]),
            ),
            (false, Some(n), Ok(driver)) => {
                return Err(CliError::Usage(format!(
                    "--device {n}: this machine has {} GPU{} (0..{})",
                    driver.devices.len(),
                    if driver.devices.len() == 1 { "" } else { "s" },
                    driver.devices.len()
                )));
            }
            (false, Some(n), Err(e)) => return Err(CliError::Usage(format!("--device {n}: {e}"))),
            (false, None, Ok(driver)) => (
                MemoryKind::Device { ordinal: 0 },
                format!(
                    "a GPU is present ({}): using GPU 0's memory (--host for host memory)",
                    driver
                        .devices
                        .first()
                        .map(String::as_str)
                        .unwrap_or("GPU 0")
                ),
            ),
            (false, None, Err(e)) => (MemoryKind::Host, format!("{e}: using host memory")),
        };
        Ok(MemoryChoice { kind, reason })
    }
}

/// `host memory` / `GPU 0 memory`.
pub fn memory_name(kind: MemoryKind) -> String {
    match kind {
        MemoryKind::Host => "host memory".into(),
        MemoryKind::Device { ordinal } => format!("GPU {ordinal} memory"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_bad_ones_are_named() {
        assert_eq!(size("4KiB"), Ok(4096));
        assert_eq!(size("0"), Ok(0));
        assert!(positive_size("0").unwrap_err().contains("greater than 0"));
        assert!(size("4MB/s").is_err());
        assert_eq!(threads(" 8 "), Ok(8));
        assert!(threads("0").unwrap_err().contains("at least 1"));
        assert!(threads("two").unwrap_err().contains("\"two\""));
        assert_eq!(compat("off"), Ok(CompatMode::Off));
        assert!(compat("maybe").is_err());
        assert_eq!(memory("device:3"), Ok(MemoryTarget::Device(3)));
        assert_eq!(memory("Device"), Ok(MemoryTarget::Device(0)));
        let e = memory("vram").unwrap_err();
        assert!(e.contains("\"vram\"") && e.contains("device:N"), "{e}");
    }

    #[test]
    fn urls_are_remote_and_everything_else_a_path() {
        let at = |t: &str| Location::from(OsString::from(t));
        assert_eq!(
            at("s3://b/k"),
            Location::Url("s3://b/k".into()),
            "an S3 URL"
        );
        assert!(matches!(
            at("HTTPS://h/x?X-Amz-Signature=s"),
            Location::Url(_)
        ));
        assert_eq!(at("./s3://b/k"), Location::Path("./s3://b/k".into()));
        assert_eq!(at("data.bin"), Location::Path("data.bin".into()));
        // A presigned URL's signature is never shown.
        let shown = at("https://h/x?X-Amz-Signature=secret").shown();
        assert!(!shown.contains("secret"), "{shown}");
        // A URL's file name is its last path segment, without the query.
        let name = |t: &str| at(t).file_name();
        assert_eq!(name("s3://b/dir/k.bin"), Some("k.bin".into()));
        assert_eq!(
            name("https://h:8/a/b.bin?X-Amz-Signature=s"),
            Some("b.bin".into())
        );
        assert_eq!(name("http://h/"), None);
        assert_eq!(name("http://h"), None);
        // A path that is not UTF-8 stays a path, byte for byte.
        use std::os::unix::ffi::OsStringExt as _;
        let raw = OsString::from_vec(b"caf\xff.bin".to_vec());
        assert_eq!(Location::from(raw.clone()), Location::Path(raw.into()));
    }
}
