//! What the commands that move data share: the I/O options, the choice of
//! memory, reading and writing in windows with progress, CRC-32, atomic
//! output files, page-cache residency, and mapping errors to exit codes.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use kvik_policy::{AlignedBuffer, CompatMode, Error, FileHandle, MemoryKind, PathReport, Settings};

use crate::CliError;

/// The most host memory a command reads into at once; longer ranges are
/// read in windows of this size, reusing the buffer.
pub const DEFAULT_WINDOW: u64 = 1 << 30;

/// Options of every command that moves data.
#[derive(Debug, Clone, clap::Args)]
pub struct IoArgs {
    /// Use host memory (today the only kind; GPU memory lands with the
    /// device-memory issue).
    #[arg(long)]
    pub host: bool,
    /// Task size: how requests are cut for the thread pool (overrides
    /// KVIKIO_TASK_SIZE), e.g. 4MiB.
    #[arg(long, value_name = "SIZE", value_parser = parse_positive_size)]
    pub task_size: Option<u64>,
    /// Threads in the I/O pool (overrides KVIKIO_NTHREADS).
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<usize>,
    /// Compat mode: on (POSIX only), off (cuFile only), auto (overrides
    /// KVIKIO_COMPAT_MODE).
    #[arg(long, value_name = "MODE", value_parser = parse_compat)]
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
        let mut s = Settings::global().map_err(policy_error)?;
        if let Some(mode) = self.compat {
            s.set_compat_mode(mode);
        }
        if let Some(n) = self.threads {
            s.set_num_threads(n).map_err(policy_error)?;
        }
        if let Some(bytes) = self.task_size {
            s.set_task_size(bytes).map_err(policy_error)?;
        }
        Ok(s)
    }
}

/// A size argument: bytes or units (`4MiB`), strictly.
pub fn parse_size_arg(text: &str) -> Result<u64, String> {
    kvik_policy::parse_size(text).map_err(|e| e.to_string())
}

/// A size argument that must be > 0.
pub fn parse_positive_size(text: &str) -> Result<u64, String> {
    match parse_size_arg(text)? {
        0 => Err(format!("{text:?} is zero; it must be greater than 0")),
        n => Ok(n),
    }
}

fn parse_threads(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 threads: it must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number of threads")),
    }
}

fn parse_compat(text: &str) -> Result<CompatMode, String> {
    text.parse::<CompatMode>().map_err(|e| e.to_string())
}

/// Which memory a command uses, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemoryChoice {
    #[serde(flatten)]
    pub kind: MemoryKind,
    pub reason: String,
}

/// SPEC §6: without `--host` / `--device N`, GPU 0 when a CUDA driver and a
/// GPU are present, host memory otherwise. GPU memory lands with the
/// device-memory issue; until then a GPU machine also uses host memory, and
/// says so.
pub fn choose_memory(host: bool) -> MemoryChoice {
    let reason = if host {
        "--host".to_string()
    } else {
        match gds_core::cuda::probe() {
            Ok(driver) => format!(
                "a GPU is present ({}), but reading into GPU memory lands with the device-memory \
                 issue: using host memory",
                driver
                    .devices
                    .first()
                    .map(String::as_str)
                    .unwrap_or("GPU 0")
            ),
            Err(e) => format!("{e}: using host memory"),
        }
    };
    MemoryChoice {
        kind: MemoryKind::Host,
        reason,
    }
}

/// Map a kvik-policy error to an exit code: bad input (2) when the user
/// named something unusable, operational failure (1) otherwise.
pub fn policy_error(e: Error) -> CliError {
    let usage = match &e {
        Error::Environment { .. } | Error::InvalidSetting { .. } | Error::OpenMode { .. } => true,
        Error::Open { source, .. } => matches!(
            source.raw_os_error(),
            Some(libc::ENOENT | libc::EISDIR | libc::ENOTDIR | libc::EACCES | libc::EPERM)
        ),
        _ => false,
    };
    if usage {
        CliError::Usage(e.to_string())
    } else {
        CliError::Failed(e.to_string())
    }
}

/// A progress bar on stderr when it is a terminal and the output is for
/// people; hidden otherwise.
pub fn progress(total: u64, what: &str, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// CRC-32 (IEEE, what `zlib.crc32` computes) as 8 lowercase hex digits.
pub fn crc_hex(crc: u32) -> String {
    format!("{crc:08x}")
}

/// Update a CRC-32 with `bytes`, hashing large inputs in parallel chunks
/// and combining them in order.
pub fn crc_update(hasher: &mut crc32fast::Hasher, bytes: &[u8]) {
    use rayon::prelude::*;
    const CHUNK: usize = 16 << 20;
    if bytes.len() <= CHUNK {
        hasher.update(bytes);
        return;
    }
    let parts: Vec<crc32fast::Hasher> = bytes
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut h = crc32fast::Hasher::new();
            h.update(chunk);
            h
        })
        .collect();
    for part in parts {
        hasher.combine(&part);
    }
}

/// `8.73 GB/s` (decimal, as SPEC §7 and dd write them).
pub fn rate(bytes: u64, seconds: f64) -> String {
    if seconds <= 0.0 {
        return "∞".into();
    }
    let per_second = bytes as f64 / seconds;
    if per_second >= 1e9 {
        format!("{:.2} GB/s", per_second / 1e9)
    } else {
        format!("{:.1} MB/s", per_second / 1e6)
    }
}

/// A page-aligned host buffer of `len` bytes, faulted in before any clock
/// starts (page faults are the allocation's cost, not the read's). More
/// than the system will give (`--buffer 1TiB`) is an error, not a crash.
pub fn host_buffer(len: u64) -> Result<AlignedBuffer, CliError> {
    let mut buffer = usize::try_from(len)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::ENOMEM))
        .and_then(AlignedBuffer::try_new)
        .map_err(|e| {
            CliError::Failed(format!(
                "cannot allocate a {} buffer: {e} (use a smaller --buffer)",
                kvik_policy::Size(len)
            ))
        })?;
    buffer.prefault();
    Ok(buffer)
}

/// Refuse early a write of `bytes` that cannot fit: `statvfs` of the
/// directory says fewer blocks are free (to anyone, root included) than the
/// file needs. Writing until ENOSPC would fill the filesystem for everyone
/// else first. Where `statvfs` fails, the write itself finds out.
pub fn ensure_space(dir: &Path, bytes: u64, destination: &Path) -> Result<(), CliError> {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(c_dir) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: an all-zero statvfs is valid; statvfs fills it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // Filesystems that report no size at all (some FUSE and network ones)
    // are not judged.
    // SAFETY: a NUL-terminated path and a statvfs we own.
    if unsafe { libc::statvfs(c_dir.as_ptr(), &mut st) } != 0 || st.f_blocks == 0 {
        return Ok(());
    }
    let free = (st.f_bfree as u64).saturating_mul(st.f_frsize as u64);
    if bytes > free {
        return Err(CliError::Failed(format!(
            "{} needs {} but its filesystem has {} free",
            destination.display(),
            kvik_policy::Size(bytes),
            approximate(free)
        )));
    }
    Ok(())
}

/// A range read through the stack, window by window.
#[derive(Debug)]
pub struct ReadResult {
    pub bytes: u64,
    /// Time spent in the reads only.
    pub seconds: f64,
    pub report: PathReport,
}

/// Read `size` bytes from `offset` through `file` into `buffer`, a window
/// at a time, handing each window to `each` (its bytes and its offset from
/// `offset`). Only the reads are timed.
pub fn read_windows(
    file: &FileHandle,
    offset: u64,
    size: u64,
    buffer: &mut AlignedBuffer,
    bar: &ProgressBar,
    mut each: impl FnMut(&[u8], u64) -> Result<(), CliError>,
) -> Result<ReadResult, CliError> {
    let window = buffer.len() as u64;
    let mut report: Option<PathReport> = None;
    let mut elapsed = Duration::ZERO;
    let mut done = 0u64;
    loop {
        let n = (size - done).min(window) as usize;
        let start = Instant::now();
        let transfer = file
            .read_with_report(&mut buffer[..n], offset + done)
            .map_err(policy_error)?;
        elapsed += start.elapsed();
        if transfer.bytes < n {
            return Err(CliError::Failed(format!(
                "{}: the file ended at offset {} while reading {} bytes from offset {offset} \
                 (did it shrink?)",
                file.path().display(),
                offset + done + transfer.bytes as u64,
                size
            )));
        }
        each(&buffer[..n], done)?;
        done += n as u64;
        bar.inc(n as u64);
        match &mut report {
            None => report = Some(transfer.report),
            Some(r) => r.absorb(transfer.report),
        }
        if done >= size {
            break;
        }
    }
    Ok(ReadResult {
        bytes: done,
        seconds: elapsed.as_secs_f64(),
        report: report.expect("at least one window"),
    })
}

/// An output file written under a temporary name in the same directory and
/// renamed into place only when complete: a failed command leaves nothing,
/// and an old file of that name stays as it was until the new one is whole.
///
/// The data is always synced (`fdatasync`) before the rename, so that even
/// a crash right after it finds the old file or the whole new one, never a
/// half-written one. `--fsync` ([`Durability::Fsync`]) also makes the new
/// file durable before the command returns: `fsync` of the file, then of
/// its directory after the rename.
#[derive(Debug)]
pub struct AtomicOutput {
    temporary: PathBuf,
    destination: PathBuf,
    /// Whether a file of that name existed when we started.
    replaces: bool,
    committed: bool,
}

/// How far [`AtomicOutput::commit`] goes before returning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Data synced, then renamed: atomic, but a crash soon after the
    /// command may still find the old file.
    Atomic,
    /// File and directory synced: the new file survives a crash once the
    /// command has returned.
    Fsync,
}

impl Durability {
    pub fn from_flag(fsync: bool) -> Durability {
        if fsync {
            Durability::Fsync
        } else {
            Durability::Atomic
        }
    }
}

/// What a commit did, for the report.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Committed {
    pub durability: Durability,
    /// Seconds spent in the syncs.
    pub sync_seconds: f64,
}

impl AtomicOutput {
    /// A new output of `bytes` bytes at `destination` (refused when its
    /// filesystem cannot hold them).
    pub fn new(destination: &Path, bytes: u64) -> Result<AtomicOutput, CliError> {
        let name = destination.file_name().ok_or_else(|| {
            CliError::Usage(format!("{} does not name a file", destination.display()))
        })?;
        let dir = parent_dir(destination);
        if !dir.is_dir() {
            return Err(CliError::Usage(format!(
                "directory {} does not exist (for {})",
                dir.display(),
                destination.display()
            )));
        }
        if destination.is_dir() {
            return Err(CliError::Usage(format!(
                "{} is a directory",
                destination.display()
            )));
        }
        let mut temporary_name = std::ffi::OsString::from(".");
        temporary_name.push(name);
        temporary_name.push(format!(".kvik-{}.tmp", std::process::id()));
        let output = AtomicOutput {
            temporary: dir.join(temporary_name),
            destination: destination.to_path_buf(),
            replaces: destination.exists(),
            committed: false,
        };
        ensure_space(&dir, bytes, destination).map_err(|e| output.failed(e))?;
        Ok(output)
    }

    /// Where to write until [`AtomicOutput::commit`].
    pub fn temporary(&self) -> &Path {
        &self.temporary
    }

    /// `e`, with what it means for the destination: until the commit, the
    /// old file is untouched (or there is still none).
    pub fn failed(&self, e: CliError) -> CliError {
        if self.committed {
            return e;
        }
        let note = if self.replaces {
            format!("{} is unchanged", self.destination.display())
        } else {
            format!("{} was not created", self.destination.display())
        };
        match e {
            CliError::Usage(m) => CliError::Usage(format!("{m} ({note})")),
            CliError::Failed(m) => CliError::Failed(format!("{m} ({note})")),
        }
    }

    /// Sync the data and move the file into place (and with
    /// [`Durability::Fsync`], make that durable).
    pub fn commit(
        &mut self,
        file: &FileHandle,
        durability: Durability,
    ) -> Result<Committed, CliError> {
        let start = Instant::now();
        match durability {
            Durability::Atomic => file.sync_data(),
            Durability::Fsync => file.sync_all(),
        }
        .map_err(policy_error)?;
        let mut sync_seconds = start.elapsed().as_secs_f64();
        std::fs::rename(&self.temporary, &self.destination).map_err(|e| {
            CliError::Failed(format!(
                "cannot rename {} to {}: {e}",
                self.temporary.display(),
                self.destination.display()
            ))
        })?;
        self.committed = true;
        if durability == Durability::Fsync {
            let start = Instant::now();
            let dir = parent_dir(&self.destination);
            std::fs::File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| {
                    CliError::Failed(format!(
                        "{} is complete, but syncing its directory {} failed: {e} (the rename \
                         may not survive a crash)",
                        self.destination.display(),
                        dir.display()
                    ))
                })?;
            sync_seconds += start.elapsed().as_secs_f64();
        }
        Ok(Committed {
            durability,
            sync_seconds,
        })
    }
}

/// The readable report's line on durability.
pub fn print_durability(committed: &Committed) {
    match committed.durability {
        Durability::Fsync => println!(
            "  durable      yes: file and directory synced ({:.4} s)",
            committed.sync_seconds
        ),
        Durability::Atomic => println!(
            "  durable      data synced, then renamed into place ({:.4} s; --fsync to wait \
             for the rename too)",
            committed.sync_seconds
        ),
    }
}

/// `221.9 GiB`: a size for a message, rounded.
fn approximate(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The directory a path's file is in (`.` for a bare name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl Drop for AtomicOutput {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// The share of `offset..offset + len` of `path` that is in the page cache
/// (0.0–1.0), from `mincore` over a read-only mapping; `None` when it cannot
/// be told. Explains throughput: a cached range reads at memory speed, an
/// uncached one at the storage's.
pub fn page_cache_residency(path: &Path, offset: u64, len: u64) -> Option<f64> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let page = kvik_policy::task::page_size();
    let start = offset / page * page;
    let map_len = usize::try_from(offset + len - start).ok()?;
    // SAFETY: a private read-only mapping of a file we opened; it is only
    // passed to mincore and unmapped below, never read.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            start as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let pages = map_len.div_ceil(page as usize);
    let mut resident = vec![0u8; pages];
    // SAFETY: addr..addr+map_len is our mapping; `resident` has one byte per page.
    let ok = unsafe { libc::mincore(addr, map_len, resident.as_mut_ptr()) } == 0;
    // SAFETY: unmapping exactly what we mapped.
    unsafe { libc::munmap(addr, map_len) };
    if !ok {
        return None;
    }
    let in_cache = resident.iter().filter(|&&b| b & 1 == 1).count();
    Some(in_cache as f64 / pages as f64)
}

/// `100%`, `0.4%`, or `unknown`.
pub fn percent(share: Option<f64>) -> String {
    match share {
        Some(s) if s > 0.0 && s < 0.01 => format!("{:.1}%", s * 100.0),
        Some(s) => format!("{:.0}%", s * 100.0),
        None => "unknown".into(),
    }
}

/// Check that `path` is an existing regular file we can name in errors.
pub fn existing_file(path: &Path, what: &str) -> Result<u64, CliError> {
    let meta = std::fs::metadata(path).map_err(|e| {
        CliError::Usage(match e.kind() {
            std::io::ErrorKind::NotFound => format!("{what} {} does not exist", path.display()),
            _ => format!("{what} {}: {e}", path.display()),
        })
    })?;
    if meta.is_dir() {
        return Err(CliError::Usage(format!(
            "{what} {} is a directory, not a file",
            path.display()
        )));
    }
    Ok(meta.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_zlib_for_the_check_string_and_in_parallel() {
        let mut h = crc32fast::Hasher::new();
        crc_update(&mut h, b"123456789");
        assert_eq!(crc_hex(h.finalize()), "cbf43926");
        // Chunked and combined equals one pass.
        let data: Vec<u8> = (0..(40 << 20) + 7).map(|i| (i * 7 + i / 3) as u8).collect();
        let mut parallel = crc32fast::Hasher::new();
        crc_update(&mut parallel, &data);
        assert_eq!(parallel.finalize(), crc32fast::hash(&data));
    }

    #[test]
    fn rates_are_decimal() {
        assert_eq!(rate(8_730_000_000, 1.0), "8.73 GB/s");
        assert_eq!(rate(2_500_000, 1.0), "2.5 MB/s");
    }

    #[test]
    fn a_fresh_file_written_by_us_is_in_the_page_cache() {
        let dir = std::env::temp_dir().join(format!("kvik-residency-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        assert_eq!(page_cache_residency(&path, 0, 1 << 20), Some(1.0));
        assert_eq!(page_cache_residency(&path, 0, 0), None);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
