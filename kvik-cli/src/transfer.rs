//! What the commands that move data share: the I/O options, the choice of
//! memory, reading and writing in windows with progress, CRC-32,
//! page-cache residency, and mapping errors to exit codes. (Output files:
//! `output_file`; sources: `source`.)

use std::io::IsTerminal as _;
use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use kvik_policy::{
    AlignedBuffer, CompatMode, Error, FileHandle, MemoryKind, PathReport, Settings, Transfer,
};

use crate::CliError;

/// The most host memory a command reads into at once; longer ranges are
/// read in windows of this size, reusing the buffer.
pub const DEFAULT_WINDOW: u64 = 1 << 30;

/// Options of every command that moves data.
#[derive(Debug, Clone, clap::Args)]
pub struct IoArgs {
    /// Use host memory [default: GPU 0 when a CUDA driver and a GPU are
    /// present, else host memory].
    #[arg(long, conflicts_with = "device")]
    pub host: bool,
    /// Use the memory of GPU N.
    #[arg(long, value_name = "N")]
    pub device: Option<u32>,
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

pub fn parse_compat(text: &str) -> Result<CompatMode, String> {
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
/// GPU are present, host memory otherwise; the reason says which and why.
/// `--device N` without such a GPU is bad input (exit 2).
pub fn choose_memory(host: bool, device: Option<u32>) -> Result<MemoryChoice, CliError> {
    let cuda = gds_core::cuda::probe();
    let (kind, reason) = match (host, device, cuda) {
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

/// `host memory` / `GPU 0 memory`.
pub fn memory_name(kind: MemoryKind) -> String {
    match kind {
        MemoryKind::Host => "host memory".into(),
        MemoryKind::Device { ordinal } => format!("GPU {ordinal} memory"),
    }
}

/// The memory a command moves data through, one window at a time: host
/// memory (page-aligned, faulted in before timing) or a GPU allocation.
pub enum WindowBuffer {
    Host(AlignedBuffer),
    Device(DeviceWindow),
}

/// A window of GPU memory and the stream it was allocated on.
pub struct DeviceWindow {
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    slice: cudarc::driver::CudaSlice<u8>,
    /// Host copies of the window (for checksums and uploads), made lazily.
    staging: Vec<u8>,
}

impl std::fmt::Debug for WindowBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowBuffer::Host(b) => write!(f, "WindowBuffer::Host({} bytes)", b.len()),
            WindowBuffer::Device(d) => write!(
                f,
                "WindowBuffer::Device(GPU {}, {} bytes)",
                d.slice.ordinal(),
                d.slice.len()
            ),
        }
    }
}

fn cuda_failed(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!("{what}: {e}"))
}

impl WindowBuffer {
    /// A window of `len` bytes in the chosen memory.
    pub fn new(memory: &MemoryChoice, len: u64) -> Result<WindowBuffer, CliError> {
        match memory.kind {
            MemoryKind::Host => Ok(WindowBuffer::Host(host_buffer(len)?)),
            MemoryKind::Device { ordinal } => {
                let ctx = kvik_policy::gpu::context(ordinal).map_err(policy_error)?;
                let stream = ctx.default_stream();
                let slice = stream.alloc_zeros::<u8>(len as usize).map_err(|e| {
                    cuda_failed(
                        &format!("allocating {} on GPU {ordinal}", kvik_policy::Size(len)),
                        e,
                    )
                })?;
                Ok(WindowBuffer::Device(DeviceWindow {
                    stream,
                    slice,
                    staging: Vec::new(),
                }))
            }
        }
    }

    /// For a GPU window: allocate `file`'s pinned bounce buffers now, before
    /// any clock starts (as host windows are faulted in before timing).
    pub fn prepare(&self, file: &FileHandle) -> Result<(), CliError> {
        match self {
            WindowBuffer::Host(_) => Ok(()),
            WindowBuffer::Device(d) => file
                .prepare_device(d.slice.ordinal() as u32)
                .map_err(policy_error),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            WindowBuffer::Host(b) => b.len(),
            WindowBuffer::Device(d) => d.slice.len(),
        }
    }

    /// Read `n` bytes of `file` at `offset` into the start of the window.
    pub fn read(&mut self, file: &FileHandle, n: usize, offset: u64) -> Result<Transfer, Error> {
        match self {
            WindowBuffer::Host(b) => file.read_with_report(&mut b[..n], offset),
            WindowBuffer::Device(d) => {
                let ordinal = d.slice.ordinal() as u32;
                let mut view = d.slice.slice_mut(0..n);
                let (ptr, _recorded) =
                    cudarc::driver::DevicePtrMut::device_ptr_mut(&mut view, &d.stream);
                // SAFETY: `ptr..ptr+n` lies in the window's allocation, which
                // this `&mut self` borrow keeps alive and unshared.
                let range = unsafe { kvik_policy::DeviceSliceMut::from_raw(ordinal, ptr, n) };
                file.read_with_report(range, offset)
            }
        }
    }

    /// Write the first `n` bytes of the window to `file` at `offset`.
    pub fn write(&self, file: &FileHandle, n: usize, offset: u64) -> Result<Transfer, Error> {
        match self {
            WindowBuffer::Host(b) => file.write_with_report(&b[..n], offset),
            WindowBuffer::Device(d) => {
                let view = d.slice.slice(0..n);
                let (ptr, _recorded) = cudarc::driver::DevicePtr::device_ptr(&view, &d.stream);
                // SAFETY: as in `read`; the bytes are only read.
                let range =
                    unsafe { kvik_policy::DeviceSlice::from_raw(d.slice.ordinal() as u32, ptr, n) };
                file.write_with_report(range, offset)
            }
        }
    }

    /// The first `n` bytes as host memory (a device window is copied back;
    /// callers do this outside their timed region).
    pub fn host_bytes(&mut self, n: usize) -> Result<&[u8], CliError> {
        match self {
            WindowBuffer::Host(b) => Ok(&b[..n]),
            WindowBuffer::Device(d) => {
                d.staging.resize(n, 0);
                d.stream
                    .memcpy_dtoh(&d.slice.slice(0..n), &mut d.staging[..])
                    .and_then(|()| d.stream.synchronize())
                    .map_err(|e| cuda_failed("copying the window back from the GPU", e))?;
                Ok(&d.staging[..n])
            }
        }
    }

    /// Fill up to `n` bytes from `source` (a stream: fewer at its end);
    /// returns how many. A device window is filled through host memory.
    pub fn fill_from(
        &mut self,
        n: usize,
        source: &mut crate::source::Source,
    ) -> Result<usize, CliError> {
        let mut got = 0;
        self.try_fill(n, |window| {
            got = source.read_stream(window)?;
            Ok(got)
        })?;
        Ok(got)
    }

    /// Fill the first `n` bytes with `fill` (run on host memory; a device
    /// window is then uploaded).
    pub fn fill(&mut self, n: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), CliError> {
        self.try_fill(n, |window| {
            fill(window);
            Ok(window.len())
        })
    }

    /// Let `fill` write up to `n` bytes on host memory and say how many it
    /// wrote; a device window then gets those bytes uploaded.
    fn try_fill(
        &mut self,
        n: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<usize, CliError>,
    ) -> Result<(), CliError> {
        match self {
            WindowBuffer::Host(b) => fill(&mut b[..n]).map(drop),
            WindowBuffer::Device(d) => {
                d.staging.resize(n, 0);
                let filled = fill(&mut d.staging[..n])?;
                let mut view = d.slice.slice_mut(0..filled);
                d.stream
                    .memcpy_htod(&d.staging[..filled], &mut view)
                    .and_then(|()| d.stream.synchronize())
                    .map_err(|e| cuda_failed("uploading the window to the GPU", e))
            }
        }
    }
}

/// A kvik-policy error as a command error; its exit code is decided with
/// every other in `error.rs` (`CliError::code`).
pub fn policy_error(e: Error) -> CliError {
    CliError::Policy(e)
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

/// The readable report's CRC-32 line (when there is one) and memory line.
pub fn checksum_and_memory(text: &mut String, crc: Option<&String>, memory: &MemoryChoice) {
    use std::fmt::Write as _;
    if let Some(crc) = crc {
        let _ = writeln!(text, "  CRC-32       {crc}");
    }
    let _ = writeln!(
        text,
        "  memory       {}: {}",
        memory_name(memory.kind),
        memory.reason
    );
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

/// A range read through the stack, window by window.
#[derive(Debug)]
pub struct ReadResult {
    pub bytes: u64,
    /// Time spent in the reads only.
    pub seconds: f64,
    pub report: PathReport,
}

/// Read `size` bytes from `offset` through `file` into `buffer`, a window
/// at a time, handing each window to `each` (the buffer, the bytes in it, and
/// their offset from `offset`). Only the reads are timed.
pub fn read_windows(
    file: &FileHandle,
    offset: u64,
    size: u64,
    buffer: &mut WindowBuffer,
    bar: &ProgressBar,
    mut each: impl FnMut(&mut WindowBuffer, usize, u64) -> Result<(), CliError>,
) -> Result<ReadResult, CliError> {
    let window = buffer.len() as u64;
    let mut report: Option<PathReport> = None;
    let mut elapsed = Duration::ZERO;
    let mut done = 0u64;
    loop {
        let n = (size - done).min(window) as usize;
        let start = Instant::now();
        let transfer = buffer.read(file, n, offset + done).map_err(policy_error)?;
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
        each(buffer, n, done)?;
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

/// `221.9 GiB`: a size for a message, rounded.
pub fn approximate(bytes: u64) -> String {
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

/// The share of `offset..offset + len` of `path` that is in the page cache
/// (0.0–1.0; `kvik_policy::residency`: `cachestat`, else `mincore`); `None`
/// when it cannot be told. Explains throughput: a cached range reads at
/// memory speed, an uncached one at the storage's.
pub fn page_cache_residency(path: &Path, offset: u64, len: u64) -> Option<f64> {
    page_cache_residency_of(&std::fs::File::open(path).ok()?, offset, len)
}

/// [`page_cache_residency`] of a file already open.
pub fn page_cache_residency_of(file: &std::fs::File, offset: u64, len: u64) -> Option<f64> {
    if len == 0 {
        return None;
    }
    kvik_policy::residency::residency(file, offset, len)
        .ok()
        .map(|r| r.cached_share())
}

/// `100%`, `0.4%`, or `unknown`.
pub fn percent(share: Option<f64>) -> String {
    match share {
        Some(s) if s > 0.0 && s < 0.01 => format!("{:.1}%", s * 100.0),
        Some(s) => format!("{:.0}%", s * 100.0),
        None => "unknown".into(),
    }
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
