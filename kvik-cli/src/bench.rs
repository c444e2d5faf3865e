//! `kvik bench`: read and write throughput through the stack, measured
//! against the tools people already trust (`dd`, `fio`), against what the
//! hardware allows (memcpy, pinned host→device copies) and, when its results
//! are supplied, against KvikIO — in one run, on one file.
//!
//! For every combination of memory (host / device N), workload (read from a
//! page-cached file, read from an uncached file, write + fdatasync), bounce
//! buffer size (device memory only), task size and thread count it times
//! `--reps` repetitions after one untimed warm-up, and reports the median,
//! min and max throughput with ratios to the best tool and to the ceiling.
//! It then recommends settings from the data (`tune`), checks issue 7's
//! targets, and can draw the figures (`--plot out.svg`).
//!
//! Only the transfer is timed: buffers are allocated and faulted in before
//! any clock starts (page faults are the allocation's cost, not the read's),
//! the file is opened (and routed) outside the timing, and for cold-cache
//! repetitions the cache is emptied before the clock starts.

mod cache;
mod compare;
mod device;
mod machine;
mod plot;
mod random;
mod random_plot;
mod reference;
mod stats;
mod table;
mod tune;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kvik_policy::{AlignedBuffer, CompatMode, FileHandle, PathReport, Settings, Size};

use crate::CliError;
use crate::error::print_json;
use crate::transfer::{self, parse_positive_size};
use cache::{ColdCache, DropMethod};
use compare::{cold_notes, compare, noise_notes, targets};
use machine::Machine;
use reference::{FioJob, KvikioResult};
use stats::Summary;

/// What a result file is (bump when the JSON changes shape).
pub const SCHEMA: &str = "kvik-bench/1";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Benchmark this file (its first --size bytes; created with random bytes
    /// when missing, and then kept). Default: a temporary file in --dir,
    /// removed afterwards.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Directory for the temporary file (default: the system temp directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Bytes per transfer (the file's size).
    #[arg(long, default_value = "1GiB", value_parser = parse_positive_size)]
    pub size: u64,
    /// Thread counts, comma-separated.
    #[arg(long, value_name = "N,…", value_delimiter = ',', default_value = "1,2,4", value_parser = parse_threads)]
    pub threads: Vec<usize>,
    /// Task sizes, comma-separated.
    #[arg(long = "task-size", value_name = "SIZE,…", value_delimiter = ',', default_value = "1MiB,4MiB,16MiB", value_parser = parse_positive_size)]
    pub task_sizes: Vec<u64>,
    /// Bounce buffer sizes, comma-separated (device memory only).
    #[arg(long = "bounce-buffer", value_name = "SIZE,…", value_delimiter = ',', default_value = "16MiB", value_parser = parse_positive_size)]
    pub bounce_buffers: Vec<u64>,
    /// Destination per transfer, comma-separated: `all` (the whole range in
    /// one buffer, as an application loading a file) or a SIZE reused for
    /// each part of the range in turn (as dd and fio do: their few MiB stay
    /// in the CPU cache, so page-cache reads never pay for memory bandwidth).
    #[arg(long, value_name = "all|SIZE,…", value_delimiter = ',', default_value = "all", value_parser = parse_window)]
    pub window: Vec<Window>,
    /// Memory kinds: host, device (GPU 0) or device:N, comma-separated.
    /// Default: host, plus device:0 where a CUDA driver and a GPU are present.
    #[arg(long, value_name = "KIND,…", value_delimiter = ',', value_parser = parse_memory)]
    pub memory: Vec<MemoryTarget>,
    /// Operations, comma-separated.
    #[arg(
        long,
        value_name = "OP,…",
        value_delimiter = ',',
        value_enum,
        default_value = "read,write"
    )]
    pub ops: Vec<Op>,
    /// Page-cache states for reads, comma-separated.
    #[arg(
        long,
        value_name = "STATE,…",
        value_delimiter = ',',
        value_enum,
        default_value = "hot,cold"
    )]
    pub cache: Vec<Cache>,
    /// Timed repetitions of each measurement (after one untimed warm-up).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,
    /// How cold-cache runs empty the cache.
    #[arg(long = "drop", value_enum, default_value = "auto")]
    pub drop_method: DropMethod,
    /// Reference points, comma-separated.
    #[arg(
        long,
        value_name = "REF,…",
        value_delimiter = ',',
        value_enum,
        default_value = "memcpy,htod,dd,fio"
    )]
    pub references: Vec<RefSource>,
    /// Measure no reference points.
    #[arg(long, conflicts_with = "references")]
    pub no_references: bool,
    /// fio's block size.
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = parse_positive_size)]
    pub fio_block: u64,
    /// KvikIO's results for the same file (the JSON lines of
    /// bench/kvikio_bench.py), compared thread count by thread count.
    #[arg(long, value_name = "FILE")]
    pub kvikio: Option<PathBuf>,
    /// Compat mode for the file handles (overrides KVIKIO_COMPAT_MODE).
    #[arg(long, value_name = "MODE", value_parser = parse_compat)]
    pub compat: Option<CompatMode>,
    /// Draw throughput vs threads (one panel per workload) as SVG here.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Keep the temporary benchmark file.
    #[arg(long)]
    pub keep: bool,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON to FILE (with the readable report on stdout).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    #[command(flatten)]
    pub random: random::RandomArgs,
    /// Measure nothing: show a saved run (--json / --save output, from this
    /// or another machine) as a table, and --plot it.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
}

fn parse_threads(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("0 threads: each count must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number of threads")),
    }
}

/// Where one transfer's bytes land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Window {
    /// One buffer as large as the range.
    All,
    /// A buffer of this size, reused for each part of the range.
    Reused(u64),
}

impl Window {
    /// The reused size, `None` for the whole range.
    pub fn bytes(self) -> Option<u64> {
        match self {
            Window::All => None,
            Window::Reused(n) => Some(n),
        }
    }
}

/// `all` or a size.
pub fn parse_window(text: &str) -> Result<Window, String> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(Window::All);
    }
    parse_positive_size(text).map(Window::Reused)
}

fn parse_compat(text: &str) -> Result<CompatMode, String> {
    text.parse::<CompatMode>().map_err(|e| e.to_string())
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// The file is in the page cache.
    Hot,
    /// The file's pages are dropped before each repetition.
    Cold,
}

/// Where reference points come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RefSource {
    /// Host memcpy of the same size, at each thread count.
    Memcpy,
    /// Pinned and pageable host→device copies of the same size (GPU only).
    Htod,
    /// dd, 16 MiB blocks, buffered and O_DIRECT.
    Dd,
    /// fio sequential reads: psync, libaio, io_uring; numjobs = threads.
    Fio,
}

/// What is measured: a read from a page-cached (hot) or uncached (cold)
/// file, or a write to storage (the write and an fdatasync, timed together).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Workload {
    pub op: Op,
    /// `None` for writes: the cache state does not apply.
    pub cache: Option<Cache>,
}

impl Workload {
    pub const READ_HOT: Workload = Workload {
        op: Op::Read,
        cache: Some(Cache::Hot),
    };
    pub const READ_COLD: Workload = Workload {
        op: Op::Read,
        cache: Some(Cache::Cold),
    };
    pub const WRITE: Workload = Workload {
        op: Op::Write,
        cache: None,
    };

    /// The workloads `ops` × `cache` ask for, in a fixed order.
    pub fn selected(ops: &[Op], cache: &[Cache]) -> Vec<Workload> {
        let mut out = Vec::new();
        if ops.contains(&Op::Read) {
            for state in [Cache::Hot, Cache::Cold] {
                if cache.contains(&state) {
                    out.push(Workload {
                        op: Op::Read,
                        cache: Some(state),
                    });
                }
            }
        }
        if ops.contains(&Op::Write) {
            out.push(Workload::WRITE);
        }
        out
    }

    /// For panels and headings.
    pub fn title(self) -> &'static str {
        match (self.op, self.cache) {
            (Op::Read, Some(Cache::Hot)) => "read, page-cached file",
            (Op::Read, _) => "read, cold cache",
            (Op::Write, _) => "write + fdatasync",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.op, self.cache) {
            (Op::Read, Some(Cache::Hot)) => "read hot",
            (Op::Read, _) => "read cold",
            (Op::Write, _) => "write",
        })
    }
}

/// Host memory, or GPU memory on GPU N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryTarget {
    Host,
    Device(u32),
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
        parse_memory(&text).map_err(serde::de::Error::custom)
    }
}

/// `host`, `device` (GPU 0) or `device:N`.
pub fn parse_memory(text: &str) -> Result<MemoryTarget, String> {
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

/// One measured configuration of ours.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Case {
    pub memory: MemoryTarget,
    #[serde(flatten)]
    pub workload: Workload,
    pub threads: usize,
    pub task_size: u64,
    /// Device memory only.
    pub bounce_buffer_size: Option<u64>,
    /// The reused destination window; `None`: one buffer for the whole range.
    pub window: Option<u64>,
    /// These are the default settings on this machine (and the whole range
    /// lands in one buffer, as for an application).
    pub defaults: bool,
    pub bytes: u64,
    /// The backend the path report names (`posix`, `cufile`).
    pub backend: Option<String>,
    /// The path report's O_DIRECT status.
    pub direct_io: Option<String>,
    /// The most of the file found in the page cache just before a timed
    /// repetition (cold runs: proves the cache was empty).
    pub page_cache_resident_max: Option<f64>,
    pub throughput: Option<Summary>,
    pub error: Option<String>,
    pub vs_best_tool: Option<f64>,
    pub vs_ceiling: Option<f64>,
    pub vs_kvikio: Option<f64>,
}

impl Case {
    pub fn median(&self) -> Option<f64> {
        self.throughput.as_ref().map(|s| s.median)
    }

    /// `host read hot, 2 threads, 4 MiB tasks`.
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} {}, {} thread{}, {} tasks",
            self.memory,
            self.workload,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            Size(self.task_size)
        );
        if let Some(b) = self.bounce_buffer_size {
            s.push_str(&format!(", {} bounce buffers", Size(b)));
        }
        if let Some(w) = self.window {
            s.push_str(&format!(", {} window reused", Size(w)));
        }
        s
    }
}

/// What a reference point is to our figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    /// Another tool doing the same job (dd, fio): the bar to beat.
    Tool,
    /// What the memory system allows (memcpy, host→device copies).
    Ceiling,
    /// Another implementation of the same library (KvikIO).
    Peer,
}

/// One reference figure.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Reference {
    pub name: String,
    pub kind: RefKind,
    pub memory: MemoryTarget,
    #[serde(flatten)]
    pub workload: Workload,
    pub threads: usize,
    /// O_DIRECT (bypasses the page cache).
    pub direct: bool,
    pub block_size: Option<u64>,
    pub bytes: u64,
    /// How to run it by hand.
    pub command: Option<String>,
    pub throughput: Option<Summary>,
    pub error: Option<String>,
    pub vs_best_tool: Option<f64>,
}

impl Reference {
    pub fn median(&self) -> Option<f64> {
        self.throughput.as_ref().map(|s| s.median)
    }
}

/// Issue 7's targets, checked against this run's figures.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Target {
    pub name: String,
    pub ours: String,
    pub ours_bytes_per_second: f64,
    pub reference: String,
    pub reference_bytes_per_second: f64,
    pub ratio: f64,
    pub goal: f64,
    pub met: bool,
}

/// The settings a run starts from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Defaults {
    pub num_threads: usize,
    pub task_size: u64,
    pub bounce_buffer_size: u64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct FileInfo {
    pub path: PathBuf,
    pub bytes: u64,
    /// Created by this run (random bytes).
    pub created: bool,
    pub kept: bool,
}

/// A whole run: what `--json` prints and `bench/results/` keeps.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub schema: String,
    pub command_line: String,
    pub date: String,
    pub kvik_version: String,
    pub machine: Machine,
    pub file: FileInfo,
    pub reps: u32,
    pub compat_mode: String,
    /// How cold-cache repetitions emptied the cache.
    pub cold_cache: Option<ColdCache>,
    pub defaults: Defaults,
    pub cases: Vec<Case>,
    pub references: Vec<Reference>,
    pub targets: Vec<Target>,
    pub tuning: Vec<tune::Recommendation>,
    pub notes: Vec<String>,
    /// `--pattern random`: many small reads at random offsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<random::RandomRun>,
}

/// The memory kinds to measure: as asked, else host plus GPU 0 where present.
fn memory_targets(asked: &[MemoryTarget]) -> Vec<MemoryTarget> {
    if !asked.is_empty() {
        let mut v: Vec<MemoryTarget> = Vec::new();
        for m in asked {
            if !v.contains(m) {
                v.push(*m);
            }
        }
        return v;
    }
    let mut v = vec![MemoryTarget::Host];
    if gds_core::cuda::probe().is_ok() {
        v.push(MemoryTarget::Device(0));
    }
    v
}

/// The benchmark file and whether this run owns it.
struct BenchFile {
    path: PathBuf,
    created: bool,
    remove: bool,
}

impl Drop for BenchFile {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A file this run writes to and always removes.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn prepare_file(args: &Args, pattern: &[u8]) -> Result<BenchFile, CliError> {
    let (path, named) = match &args.file {
        Some(p) => (p.clone(), true),
        None => {
            let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
            if !dir.is_dir() {
                return Err(CliError::Usage(format!(
                    "--dir {} is not a directory",
                    dir.display()
                )));
            }
            (
                dir.join(format!("kvik-bench-{}.bin", std::process::id())),
                false,
            )
        }
    };
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => {
            return Err(CliError::Usage(format!(
                "--file {} is a directory",
                path.display()
            )));
        }
        Ok(meta) if meta.len() >= args.size => {
            return Ok(BenchFile {
                path,
                created: false,
                remove: false,
            });
        }
        Ok(meta) if named => {
            return Err(CliError::Usage(format!(
                "--file {} has {} bytes, less than --size {}; name a new file (it is created) \
                 or ask for less",
                path.display(),
                meta.len(),
                args.size
            )));
        }
        _ => {}
    }
    use std::io::Write as _;
    let file = BenchFile {
        remove: !named && !args.keep,
        path,
        created: true,
    };
    let fail =
        |e: std::io::Error| CliError::Failed(format!("cannot create {}: {e}", file.path.display()));
    let mut out = std::fs::File::create(&file.path).map_err(fail)?;
    out.write_all(pattern).map_err(fail)?;
    out.sync_data().map_err(fail)?;
    Ok(file)
}

/// The buffer a case moves its bytes through.
enum Memory<'a> {
    Host(&'a mut AlignedBuffer),
    Device(&'a mut device::DeviceBuffer),
}

/// One transfer of the whole range, into (or from) one buffer or window by
/// window; the path report (of all windows together).
fn transfer_once(
    file: &FileHandle,
    memory: &mut Memory<'_>,
    op: Op,
    size: usize,
    window: Option<u64>,
) -> Result<PathReport, String> {
    let step = window.map_or(size, |w| (w as usize).min(size)).max(1);
    let mut report: Option<PathReport> = None;
    let mut done = 0usize;
    while done < size {
        let n = step.min(size - done);
        let offset = done as u64;
        let result = match (op, &mut *memory) {
            (Op::Read, Memory::Host(b)) => file.read_with_report(&mut b[..n], offset),
            (Op::Write, Memory::Host(b)) => file.write_with_report(&b[..n], offset),
            (Op::Read, Memory::Device(d)) => file.read_with_report(d.window_mut(n), offset),
            (Op::Write, Memory::Device(d)) => file.write_with_report(d.window(n), offset),
        };
        let transfer = result.map_err(|e| e.to_string())?;
        if transfer.bytes != n {
            return Err(format!(
                "moved {} bytes of {n} at offset {offset} (the file is shorter than --size?)",
                transfer.bytes
            ));
        }
        match &mut report {
            None => report = Some(transfer.report),
            Some(r) => r.absorb(transfer.report),
        }
        done += n;
    }
    if let Memory::Device(d) = memory {
        d.synchronize()?;
    }
    if op == Op::Write {
        file.sync_data().map_err(|e| e.to_string())?;
    }
    report.ok_or_else(|| "nothing to transfer".to_string())
}

/// What the repetitions of one case produced.
#[derive(Debug, Default)]
struct Measured {
    seconds: Vec<f64>,
    report: Option<PathReport>,
    resident_max: Option<f64>,
}

/// One measurement's parameters besides the settings and the memory.
struct Run<'a> {
    workload: Workload,
    size: u64,
    window: Option<u64>,
    reps: u32,
    cold: Option<&'a ColdCache>,
}

/// One untimed warm-up, then `reps` timed transfers. Cold reads empty the
/// cache before each; writes truncate the target before each (so every
/// repetition allocates the same blocks) and include the fdatasync.
fn measure(
    path: &Path,
    settings: &Settings,
    memory: &mut Memory<'_>,
    run: &Run<'_>,
) -> Result<Measured, String> {
    let Run {
        workload,
        size,
        window,
        reps,
        cold,
    } = *run;
    let mode = match workload.op {
        Op::Read => "r",
        Op::Write => "w",
    };
    let mut out = Measured::default();
    for rep in 0..=reps {
        let file = FileHandle::open_with(path, mode, settings).map_err(|e| e.to_string())?;
        if rep > 0 && workload == Workload::READ_COLD {
            let cold = cold.ok_or("no cold-cache method")?;
            cold.drop(path)?;
        }
        if rep > 0 && workload.op == Op::Read {
            let resident = transfer::page_cache_residency(path, 0, size);
            out.resident_max = match (out.resident_max, resident) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        let start = Instant::now();
        let report = transfer_once(&file, memory, workload.op, size as usize, window)?;
        let elapsed = start.elapsed().as_secs_f64();
        if rep > 0 {
            out.seconds.push(elapsed);
            out.report = Some(report);
        }
    }
    Ok(out)
}

/// Every combination, in the order measured: bounce buffer, window, task
/// size, then threads (innermost, so a plot line is measured in one go).
fn grid(
    bounces: &[Option<u64>],
    windows: &[Window],
    task_sizes: &[u64],
    threads: &[usize],
) -> Vec<(Option<u64>, Window, u64, usize)> {
    let mut out = Vec::new();
    for &b in bounces {
        for &w in windows {
            for &t in task_sizes {
                for &n in threads {
                    out.push((b, w, t, n));
                }
            }
        }
    }
    out
}

/// The progress bar's steps.
fn count_steps(args: &Args, memories: &[MemoryTarget], workloads: &[Workload]) -> u64 {
    let per_memory = |m: &MemoryTarget| match m {
        MemoryTarget::Host => 1,
        MemoryTarget::Device(_) => args.bounce_buffers.len(),
    };
    let ours: usize = memories.iter().map(per_memory).sum::<usize>()
        * workloads.len()
        * args.window.len()
        * args.task_sizes.len()
        * args.threads.len();
    (ours + 1) as u64
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let report = match &args.from {
        Some(path) => load(path)?,
        None => measure_all(args)?,
    };
    if let Some(path) = &args.save {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::Failed(format!("cannot encode JSON: {e}")))?;
        crate::output::write_file("--save", path, (text + "\n").as_bytes())?;
    }
    if let Some(svg) = &args.plot {
        save_plot(svg, &report)?;
    }
    if args.json {
        print_json(&report)?;
    } else {
        if !report.cases.is_empty() || report.random.is_none() {
            crate::output::print(&table::render(&report))?;
        } else {
            crate::output::print(&table::header(&report))?;
        }
        if let Some(random) = &report.random {
            crate::output::print(&random::render(random))?;
        }
        if let Some(svg) = &args.plot {
            crate::output::outln!("\nplot: {}", crate::output::escaped(svg))?;
        }
    }
    if !report.cases.is_empty() && report.cases.iter().all(|c| c.throughput.is_none()) {
        let first = report.cases.iter().find_map(|c| c.error.clone());
        return Err(CliError::Failed(format!(
            "no measurement succeeded{}",
            first
                .map(|e| format!(" (first error: {e})"))
                .unwrap_or_default()
        )));
    }
    Ok(())
}

/// A saved run.
fn load(path: &Path) -> Result<Report, CliError> {
    let text = crate::input::read_text("--from", path, crate::input::MAX_RESULTS_BYTES)?;
    let report: Report = serde_json::from_str(&text).map_err(|e| {
        CliError::Usage(format!(
            "--from {}: not a kvik bench result ({SCHEMA}): {e}",
            crate::output::escaped(path)
        ))
    })?;
    if report.schema != SCHEMA {
        return Err(CliError::Usage(format!(
            "--from {}: schema {:?}, this kvik reads {SCHEMA:?}",
            crate::output::escaped(path),
            report.schema
        )));
    }
    Ok(report)
}

/// Run every measurement `args` asks for.
fn measure_all(args: &Args) -> Result<Report, CliError> {
    let command_line = command_line(std::env::args());
    let date = machine::utc_now();
    if args.threads.is_empty()
        || args.task_sizes.is_empty()
        || args.bounce_buffers.is_empty()
        || args.window.is_empty()
    {
        return Err(CliError::Usage(
            "--threads, --task-size, --bounce-buffer and --window need at least one value".into(),
        ));
    }
    usize::try_from(args.size)
        .map_err(|_| CliError::Usage(format!("--size {} is too large here", args.size)))?;
    let workloads = Workload::selected(&args.ops, &args.cache);
    if workloads.is_empty() {
        return Err(CliError::Usage(
            "nothing to measure: --ops read needs at least one --cache state".into(),
        ));
    }
    let cold = if workloads.contains(&Workload::READ_COLD) {
        Some(ColdCache::resolve(args.drop_method).map_err(CliError::Usage)?)
    } else {
        None
    };
    let mut base = Settings::global().map_err(transfer::policy_error)?;
    if let Some(mode) = args.compat {
        base.set_compat_mode(mode);
    }
    let memories = memory_targets(&args.memory);
    let references: Vec<RefSource> = if args.no_references {
        vec![]
    } else {
        args.references.clone()
    };
    let kvikio = match &args.kvikio {
        Some(p) => {
            let text = crate::input::read_text("--kvikio", p, crate::input::MAX_RESULTS_BYTES)?;
            reference::parse_kvikio_lines(&text).map_err(|e| {
                CliError::Usage(format!("--kvikio {}: {e}", crate::output::escaped(p)))
            })?
        }
        None => vec![],
    };
    let defaults = Defaults {
        num_threads: kvik_policy::settings::default_num_threads(),
        task_size: Settings::default().task_size(),
        bounce_buffer_size: Settings::default().bounce_buffer_size(),
    };

    // The pattern every write and device buffer carries, and the read buffer.
    let mut host = transfer::host_buffer(args.size)?;
    crate::write::fill_random(&mut host, 0, 0);
    let file = prepare_file(args, &host)?;
    let scratch = Scratch(sibling(&file.path, "write"));
    let mut notes = Vec::new();
    let mut machine = Machine::describe(&file.path);
    if let Some(load) = machine.load_average_start {
        if load > 0.5 {
            notes.push(format!(
                "load average {load:.2} at the start on {} cores: other processes were running; \
                 read the spreads (min–max) before the medians",
                machine.cores
            ));
        }
    }

    let steps = count_steps(args, &memories, &workloads);
    let bar = transfer::progress(steps, "bench", args.json);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:50} [{bar:30}] {pos}/{len} {elapsed}")
            .expect("a valid template")
            .progress_chars("=> "),
    );

    let mut cases = Vec::new();
    for &memory in memories.iter().filter(|_| args.random.sequential()) {
        let mut device_buffer = match memory {
            MemoryTarget::Host => None,
            MemoryTarget::Device(n) => match device::DeviceBuffer::new(n, &host) {
                Ok(d) => Some(d),
                Err(e) => {
                    notes.push(format!("{memory}: {e}"));
                    bar.inc(count_steps(args, &[memory], &workloads) - 1);
                    continue;
                }
            },
        };
        let bounces: Vec<Option<u64>> = match memory {
            MemoryTarget::Host => vec![None],
            MemoryTarget::Device(_) => args.bounce_buffers.iter().copied().map(Some).collect(),
        };
        for &workload in &workloads {
            let path = match workload.op {
                Op::Read => &file.path,
                Op::Write => &scratch.0,
            };
            for (bounce, window, task_size, threads) in
                grid(&bounces, &args.window, &args.task_sizes, &args.threads)
            {
                let mut case = Case {
                    memory,
                    workload,
                    threads,
                    task_size,
                    bounce_buffer_size: bounce,
                    window: window.bytes(),
                    defaults: threads == defaults.num_threads
                        && task_size == defaults.task_size
                        && bounce.is_none_or(|b| b == defaults.bounce_buffer_size)
                        && window == Window::All,
                    bytes: args.size,
                    backend: None,
                    direct_io: None,
                    page_cache_resident_max: None,
                    throughput: None,
                    error: None,
                    vs_best_tool: None,
                    vs_ceiling: None,
                    vs_kvikio: None,
                };
                bar.set_message(case.label());
                let settings = case_settings(&base, threads, task_size, bounce)?;
                let mut mem = match device_buffer.as_mut() {
                    Some(d) => Memory::Device(d),
                    None => Memory::Host(&mut host),
                };
                let run = Run {
                    workload,
                    size: args.size,
                    window: window.bytes(),
                    reps: args.reps,
                    cold: cold.as_ref(),
                };
                match measure(path, &settings, &mut mem, &run) {
                    Ok(m) => {
                        case.throughput = Summary::from_seconds(args.size, &m.seconds);
                        case.page_cache_resident_max = m.resident_max;
                        if let Some(r) = &m.report {
                            case.backend = Some(r.kvik.route.backend.to_string());
                            case.direct_io = Some(r.kvik.direct_io.status.to_string());
                        }
                    }
                    Err(e) => case.error = Some(e),
                }
                cases.push(case);
                bar.inc(1);
            }
        }
    }

    bar.set_message("reference points");
    let mut refs = Vec::new();
    let ctx = RefContext {
        path: &file.path,
        scratch: &scratch.0,
        size: args.size,
        reps: args.reps,
        threads: &args.threads,
        workloads: &workloads,
        cold: cold.as_ref(),
        fio_block: args.fio_block,
    };
    for source in references.iter().filter(|_| args.random.sequential()) {
        match source {
            RefSource::Memcpy if workloads.contains(&Workload::READ_HOT) => {
                refs.extend(memcpy_refs(&ctx, &host));
            }
            RefSource::Htod if workloads.contains(&Workload::READ_HOT) => {
                for &m in &memories {
                    if let MemoryTarget::Device(n) = m {
                        refs.extend(htod_refs(&ctx, n, &host, &mut notes));
                    }
                }
            }
            RefSource::Dd => refs.extend(dd_refs(&ctx)),
            RefSource::Fio if workloads.iter().any(|w| w.op == Op::Read) => {
                if reference::which("fio").is_some() {
                    refs.extend(fio_refs(&ctx));
                } else {
                    notes.push(
                        "fio is not installed: no fio reference (apt-get install fio)".into(),
                    );
                }
            }
            _ => {}
        }
    }
    refs.extend(kvikio_refs(&kvikio, &memories));
    bar.inc(1);
    bar.finish_and_clear();
    let random = if args.random.random() {
        let setup = random::Setup {
            path: &file.path,
            size: args.size,
            threads: &args.threads,
            windows: &args.window,
            memories: &memories,
            reps: args.reps,
            base: &base,
            fio: references.contains(&RefSource::Fio) && reference::which("fio").is_some(),
        };
        Some(random::measure(&args.random, &setup)?)
    } else {
        None
    };

    compare(&mut cases, &mut refs);
    let targets = targets(&cases, &refs);
    let tuning = tune::recommend(&cases);
    notes.extend(noise_notes(&cases, &refs));
    if let Some(cold) = &cold {
        notes.extend(cold_notes(&cases, cold));
    }
    machine.load_average_end = machine::load_average();
    if cases.iter().all(|c| c.throughput.is_none()) && !cases.is_empty() {
        notes.push("none of our measurements succeeded".into());
    }

    let report = Report {
        schema: SCHEMA.into(),
        command_line,
        date,
        kvik_version: env!("CARGO_PKG_VERSION").into(),
        machine,
        file: FileInfo {
            path: file.path.clone(),
            bytes: args.size,
            created: file.created,
            kept: !file.remove,
        },
        reps: args.reps,
        compat_mode: base.compat_mode().to_string(),
        cold_cache: cold,
        defaults,
        cases,
        references: refs,
        targets,
        tuning,
        notes,
        random,
    };
    if let Some(svg) = &args.plot {
        save_plot(svg, &report)?;
    }
    Ok(report)
}

/// `--plot FILE`: the chart of `report`.
fn save_plot(path: &Path, report: &Report) -> Result<(), CliError> {
    let charts = random_plot::render_all(path, report)
        .map_err(|e| CliError::Failed(format!("--plot: {e}")))?;
    for (path, svg) in charts {
        crate::output::write_file("--plot", &path, svg.as_bytes())?;
    }
    Ok(())
}

fn case_settings(
    base: &Settings,
    threads: usize,
    task_size: u64,
    bounce: Option<u64>,
) -> Result<Settings, CliError> {
    let mut s = base.clone();
    s.set_num_threads(threads).map_err(transfer::policy_error)?;
    s.set_task_size(task_size).map_err(transfer::policy_error)?;
    if let Some(b) = bounce {
        s.set_bounce_buffer_size(b)
            .map_err(transfer::policy_error)?;
    }
    Ok(s)
}

/// `dir/.name.kvik-bench-<what>-<pid>` next to `path`.
fn sibling(path: &Path, what: &str) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!(".{name}.kvik-bench-{what}-{}", std::process::id()))
}

/// The command line as one line (arguments with spaces quoted).
fn command_line(args: impl Iterator<Item = String>) -> String {
    args.enumerate()
        .map(|(i, a)| {
            let a = if i == 0 {
                Path::new(&a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or(a)
            } else {
                a
            };
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the reference measurements need to know.
struct RefContext<'a> {
    path: &'a Path,
    scratch: &'a Path,
    size: u64,
    reps: u32,
    threads: &'a [usize],
    workloads: &'a [Workload],
    cold: Option<&'a ColdCache>,
    fio_block: u64,
}

fn reference(name: String, kind: RefKind, memory: MemoryTarget, workload: Workload) -> Reference {
    Reference {
        name,
        kind,
        memory,
        workload,
        threads: 1,
        direct: false,
        block_size: None,
        bytes: 0,
        command: None,
        throughput: None,
        error: None,
        vs_best_tool: None,
    }
}

/// Run `once` (bytes per second) once untimed and `reps` times timed,
/// emptying the cache before each timed run when `cold`.
fn repeat(
    ctx: &RefContext<'_>,
    cold: bool,
    mut once: impl FnMut() -> Result<f64, String>,
) -> Result<Summary, String> {
    once()?;
    let mut rates = Vec::new();
    for _ in 0..ctx.reps {
        if cold {
            ctx.cold.ok_or("no cold-cache method")?.drop(ctx.path)?;
        }
        rates.push(once()?);
    }
    Summary::from_rates(rates).ok_or_else(|| "no valid figures".to_string())
}

fn memcpy_refs(ctx: &RefContext<'_>, src: &AlignedBuffer) -> Vec<Reference> {
    // A destination the system refuses makes every row an error, not a crash.
    let mut dst = transfer::host_buffer(ctx.size).map_err(|e| e.to_string());
    ctx.threads
        .iter()
        .map(|&threads| {
            let mut r = reference(
                "memcpy".into(),
                RefKind::Ceiling,
                MemoryTarget::Host,
                Workload::READ_HOT,
            );
            r.threads = threads;
            r.bytes = ctx.size;
            let result = match &mut dst {
                Ok(dst) => repeat(ctx, false, || {
                    Ok(ctx.size as f64 / reference::memcpy_seconds(dst, src, threads))
                }),
                Err(e) => Err(e.clone()),
            };
            set_result(&mut r, result);
            r
        })
        .collect()
}

fn htod_refs(
    ctx: &RefContext<'_>,
    ordinal: u32,
    host: &AlignedBuffer,
    notes: &mut Vec<String>,
) -> Vec<Reference> {
    let memory = MemoryTarget::Device(ordinal);
    match device::htod_seconds(ordinal, host, ctx.reps as usize) {
        Ok((pinned, pageable)) => [
            ("pinned host→device copy", pinned),
            ("pageable host→device copy", pageable),
        ]
        .into_iter()
        .map(|(name, seconds)| {
            let mut r = reference(name.into(), RefKind::Ceiling, memory, Workload::READ_HOT);
            r.bytes = ctx.size;
            r.throughput = Summary::from_seconds(ctx.size, &seconds);
            r
        })
        .collect(),
        Err(e) => {
            notes.push(format!("{memory} host→device ceiling: {e}"));
            vec![]
        }
    }
}

fn dd_refs(ctx: &RefContext<'_>) -> Vec<Reference> {
    let mut out = Vec::new();
    for &workload in ctx.workloads {
        let variants: &[bool] = match workload {
            Workload::READ_HOT => &[false],
            _ => &[false, true],
        };
        for &direct in variants {
            let args = match workload.op {
                Op::Read => reference::dd_read_args(ctx.path, direct),
                Op::Write => reference::dd_write_args(ctx.scratch, ctx.size, direct),
            };
            let name = format!("dd bs=16M {}", if direct { "O_DIRECT" } else { "buffered" });
            let mut r = reference(name, RefKind::Tool, MemoryTarget::Host, workload);
            r.direct = direct;
            r.block_size = Some(reference::DD_BLOCK);
            r.bytes = match workload.op {
                Op::Read => ctx.size,
                Op::Write => (ctx.size / reference::DD_BLOCK).max(1) * reference::DD_BLOCK,
            };
            r.command = Some(reference::command_line("dd", &args));
            let cold = workload == Workload::READ_COLD;
            set_result(&mut r, repeat(ctx, cold, || reference::run_dd(&args)));
            out.push(r);
        }
    }
    out
}

fn fio_refs(ctx: &RefContext<'_>) -> Vec<Reference> {
    let mut out = Vec::new();
    for &workload in ctx.workloads.iter().filter(|w| w.op == Op::Read) {
        let variants: &[bool] = match workload {
            Workload::READ_HOT => &[false],
            _ => &[false, true],
        };
        for &direct in variants {
            for engine in reference::FIO_ENGINES {
                for &threads in ctx.threads {
                    let job = FioJob {
                        engine,
                        threads,
                        direct,
                        block: ctx.fio_block,
                    };
                    let name = format!(
                        "fio {engine} {}",
                        if direct { "O_DIRECT" } else { "buffered" }
                    );
                    let mut r = reference(name, RefKind::Tool, MemoryTarget::Host, workload);
                    r.threads = threads;
                    r.direct = direct;
                    r.block_size = Some(ctx.fio_block);
                    let cold = workload == Workload::READ_COLD;
                    let result = reference::fio_args(ctx.path, ctx.size, &job).and_then(|args| {
                        r.command = Some(reference::command_line("fio", &args));
                        let share = ctx.size / threads as u64 / ctx.fio_block * ctx.fio_block;
                        r.bytes = share * threads as u64;
                        repeat(ctx, cold, || reference::run_fio(&args))
                    });
                    set_result(&mut r, result);
                    out.push(r);
                }
            }
        }
    }
    out
}

/// KvikIO's figures (reads into GPU memory from a page-cached file) as
/// peers of our device rows; of GPU 0 unless only another GPU is measured.
fn kvikio_refs(results: &[KvikioResult], memories: &[MemoryTarget]) -> Vec<Reference> {
    let memory = memories
        .iter()
        .copied()
        .find(|m| matches!(m, MemoryTarget::Device(_)))
        .unwrap_or(MemoryTarget::Device(0));
    results
        .iter()
        .map(|k| {
            let name = format!("KvikIO {} (compat {})", k.version, k.compat);
            let mut r = reference(name, RefKind::Peer, memory, Workload::READ_HOT);
            r.threads = k.threads;
            r.block_size = Some(k.task_size);
            r.bytes = k.bytes;
            r.command = Some(format!(
                "python3 bench/kvikio_bench.py FILE --threads {} --task-size {} --compat {}",
                k.threads, k.task_size, k.compat
            ));
            r.throughput =
                Summary::from_figures(k.gbps_median * 1e9, k.gbps_min * 1e9, k.gbps_max * 1e9);
            r
        })
        .collect()
}

fn set_result(r: &mut Reference, result: Result<Summary, String>) {
    match result {
        Ok(s) => r.throughput = Some(s),
        Err(e) => r.error = Some(e),
    }
}

/// The JSON of a run, for tests of its shape.
#[cfg(test)]
fn sample_report() -> Report {
    let case = |threads, task_size, median: f64, workload| Case {
        memory: MemoryTarget::Host,
        workload,
        threads,
        task_size,
        bounce_buffer_size: None,
        window: None,
        defaults: threads == 2 && task_size == 4 << 20,
        bytes: 1 << 30,
        backend: Some("posix".into()),
        direct_io: Some("off".into()),
        page_cache_resident_max: Some(0.0),
        throughput: Summary::from_rates(vec![median * 0.95, median, median * 1.05]),
        error: None,
        vs_best_tool: None,
        vs_ceiling: None,
        vs_kvikio: None,
    };
    let mut cases = vec![
        case(1, 4 << 20, 6e9, Workload::READ_HOT),
        case(2, 4 << 20, 11e9, Workload::READ_HOT),
        case(1, 4 << 20, 1.5e9, Workload::READ_COLD),
        case(2, 4 << 20, 2.0e9, Workload::READ_COLD),
    ];
    let tool = |name: &str, workload, threads, direct, median: f64| {
        let mut r = reference(name.into(), RefKind::Tool, MemoryTarget::Host, workload);
        r.threads = threads;
        r.direct = direct;
        r.throughput = Summary::from_rates(vec![median]);
        r
    };
    let mut memcpy = reference(
        "memcpy".into(),
        RefKind::Ceiling,
        MemoryTarget::Host,
        Workload::READ_HOT,
    );
    memcpy.threads = 2;
    memcpy.throughput = Summary::from_rates(vec![20e9]);
    let mut failed = tool("fio io_uring O_DIRECT", Workload::READ_COLD, 1, true, 0.0);
    failed.throughput = None;
    failed.error = Some("fio failed".into());
    let mut refs = vec![
        tool("dd bs=16M buffered", Workload::READ_HOT, 1, false, 10e9),
        tool("fio psync buffered", Workload::READ_HOT, 2, false, 12e9),
        tool("fio psync O_DIRECT", Workload::READ_COLD, 2, true, 2.1e9),
        tool("dd bs=16M buffered", Workload::READ_COLD, 1, false, 2.5e9),
        failed,
        memcpy,
    ];
    compare(&mut cases, &mut refs);
    let targets = targets(&cases, &refs);
    let tuning = tune::recommend(&cases);
    Report {
        schema: SCHEMA.into(),
        command_line: "kvik bench --size 1GiB".into(),
        date: machine::utc(0),
        kvik_version: "0.1.0".into(),
        machine: Machine::describe(Path::new("/tmp/x")),
        file: FileInfo {
            path: "/tmp/x".into(),
            bytes: 1 << 30,
            created: true,
            kept: false,
        },
        reps: 3,
        compat_mode: "AUTO".into(),
        cold_cache: Some(ColdCache::resolve(DropMethod::File).unwrap()),
        defaults: Defaults {
            num_threads: 2,
            task_size: 4 << 20,
            bounce_buffer_size: 16 << 20,
        },
        cases,
        references: refs,
        targets,
        tuning,
        notes: vec![],
        random: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_parse() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.size, 1 << 30);
        assert_eq!(a.threads, vec![1, 2, 4]);
        assert_eq!(a.task_sizes, vec![1 << 20, 4 << 20, 16 << 20]);
        assert_eq!(a.bounce_buffers, vec![16 << 20]);
        assert_eq!(a.ops, vec![Op::Read, Op::Write]);
        assert_eq!(a.cache, vec![Cache::Hot, Cache::Cold]);
        assert_eq!(a.reps, 5);
        assert!(a.memory.is_empty());
        assert_eq!(a.references.len(), 4);
    }

    #[test]
    fn lists_parse_and_bad_values_are_refused() {
        let a = parse(&[
            "--threads",
            "1,4,8,16",
            "--task-size",
            "256KiB,4MiB",
            "--memory",
            "host,device:1,device",
            "--ops",
            "read",
            "--cache",
            "hot",
            "--reps",
            "3",
        ])
        .unwrap();
        assert_eq!(a.threads, vec![1, 4, 8, 16]);
        assert_eq!(a.task_sizes, vec![256 << 10, 4 << 20]);
        assert_eq!(
            a.memory,
            vec![
                MemoryTarget::Host,
                MemoryTarget::Device(1),
                MemoryTarget::Device(0)
            ]
        );
        assert_eq!(
            Workload::selected(&a.ops, &a.cache),
            vec![Workload::READ_HOT]
        );
        for bad in [
            &["--threads", "0"][..],
            &["--threads", "two"],
            &["--task-size", "4MB/s"],
            &["--task-size", "0"],
            &["--memory", "gpu"],
            &["--memory", "device:x"],
            &["--reps", "0"],
            &["--ops", "append"],
            &["--references", "dd", "--no-references"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        let e = parse_memory("vram").unwrap_err();
        assert!(e.contains("\"vram\"") && e.contains("device:N"), "{e}");
    }

    #[test]
    fn workloads_follow_ops_and_cache_states() {
        assert_eq!(
            Workload::selected(&[Op::Write, Op::Read], &[Cache::Cold, Cache::Hot]),
            vec![Workload::READ_HOT, Workload::READ_COLD, Workload::WRITE]
        );
        assert_eq!(Workload::selected(&[Op::Write], &[]), vec![Workload::WRITE]);
        assert!(Workload::selected(&[Op::Read], &[]).is_empty());
        assert_eq!(Workload::READ_COLD.to_string(), "read cold");
    }

    #[test]
    fn ratios_compare_with_the_best_of_the_same_workload() {
        let r = sample_report();
        let hot2 = &r.cases[1];
        // Best hot tool: fio psync at 12 GB/s; ceiling: memcpy at 20 GB/s.
        assert!((hot2.vs_best_tool.unwrap() - 11.0 / 12.0).abs() < 1e-9);
        assert!((hot2.vs_ceiling.unwrap() - 11.0 / 20.0).abs() < 1e-9);
        assert_eq!(hot2.vs_kvikio, None);
        // Cold: best tool is dd buffered at 2.5 GB/s; no ceiling for cold reads.
        let cold2 = &r.cases[3];
        assert!((cold2.vs_best_tool.unwrap() - 0.8).abs() < 1e-9);
        assert_eq!(cold2.vs_ceiling, None);
        // References get their own ratio; a failed one gets none.
        let dd_hot = &r.references[0];
        assert!((dd_hot.vs_best_tool.unwrap() - 10.0 / 12.0).abs() < 1e-9);
        assert_eq!(r.references[4].vs_best_tool, None);
    }

    #[test]
    fn targets_judge_the_defaults() {
        let r = sample_report();
        let host = &r.targets[0];
        assert!(host.ours.contains("(defaults)"), "{}", host.ours);
        assert!((host.ratio - 11.0 / 12.0).abs() < 1e-9);
        assert!(!host.met);
        // Cold: against fio's best O_DIRECT (2.1 GB/s), not dd buffered.
        let cold = &r.targets[1];
        assert!(
            cold.reference.starts_with("fio psync O_DIRECT"),
            "{}",
            cold.reference
        );
        assert!(cold.met);
        assert_eq!(r.targets.len(), 2);
    }

    #[test]
    fn kvikio_results_become_peers_at_each_thread_count() {
        let k = |threads, median| KvikioResult {
            tool: "kvikio".into(),
            version: "26.10.0".into(),
            compat: "on".into(),
            threads,
            task_size: 4 << 20,
            bytes: 1 << 30,
            gbps_median: median,
            gbps_min: median - 1.0,
            gbps_max: median + 1.0,
        };
        let mut refs = kvikio_refs(
            &[k(1, 7.6), k(4, 25.3)],
            &[MemoryTarget::Host, MemoryTarget::Device(0)],
        );
        let mut pinned = reference(
            "pinned host→device copy".into(),
            RefKind::Ceiling,
            MemoryTarget::Device(0),
            Workload::READ_HOT,
        );
        pinned.throughput = Summary::from_rates(vec![55.4e9]);
        refs.push(pinned);
        let case = |threads, median: f64, defaults| Case {
            memory: MemoryTarget::Device(0),
            workload: Workload::READ_HOT,
            threads,
            task_size: 4 << 20,
            bounce_buffer_size: Some(16 << 20),
            window: None,
            defaults,
            bytes: 1 << 30,
            backend: Some("posix".into()),
            direct_io: None,
            page_cache_resident_max: Some(1.0),
            throughput: Summary::from_rates(vec![median]),
            error: None,
            vs_best_tool: None,
            vs_ceiling: None,
            vs_kvikio: None,
        };
        let mut cases = vec![
            case(1, 9.8e9, false),
            case(4, 37.6e9, false),
            case(16, 51e9, true),
        ];
        compare(&mut cases, &mut refs);
        assert!((cases[1].vs_kvikio.unwrap() - 37.6 / 25.3).abs() < 1e-9);
        assert_eq!(cases[2].vs_kvikio, None, "KvikIO did not run 16 threads");
        assert!((cases[2].vs_ceiling.unwrap() - 51.0 / 55.4).abs() < 1e-9);
        let t = targets(&cases, &refs);
        let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "device:0, page-cached file: ≥ 0.9× the pinned host→device ceiling",
                "device:0: our defaults ≥ 6× KvikIO's defaults (1 thread)",
                "device:0, 1 threads: ≥ 1.0× KvikIO",
                "device:0, 4 threads: ≥ 1.0× KvikIO",
            ]
        );
        assert!(t[0].met && t[1].met && t[2].met && t[3].met);
        assert!((t[1].ratio - 51.0 / 7.6).abs() < 1e-9);
    }

    #[test]
    fn the_json_has_the_documented_shape() {
        let value = serde_json::to_value(sample_report()).unwrap();
        for key in [
            "schema",
            "command_line",
            "date",
            "machine",
            "file",
            "reps",
            "cold_cache",
            "defaults",
            "cases",
            "references",
            "targets",
            "tuning",
            "notes",
        ] {
            assert!(value.get(key).is_some(), "no {key}");
        }
        assert_eq!(value["schema"], "kvik-bench/1");
        assert_eq!(value["date"], "1970-01-01T00:00:00Z");
        let case = &value["cases"][1];
        assert_eq!(case["memory"], "host");
        assert_eq!(case["op"], "read");
        assert_eq!(case["cache"], "hot");
        assert_eq!(case["threads"], 2);
        assert_eq!(case["defaults"], true);
        assert_eq!(case["throughput"]["median"], 11e9);
        assert!(case["throughput"]["samples"].as_array().unwrap().len() == 3);
        assert!(case["vs_best_tool"].is_f64());
        let failed = &value["references"][4];
        assert_eq!(failed["throughput"], serde_json::Value::Null);
        assert_eq!(failed["error"], "fio failed");
        assert!(value["machine"]["cores"].as_u64().unwrap() >= 1);
        assert!(value["tuning"][0]["threads"].is_u64());
    }

    #[test]
    fn windows_parse() {
        let a = parse(&["--window", "all,16MiB"]).unwrap();
        assert_eq!(a.window, vec![Window::All, Window::Reused(16 << 20)]);
        assert_eq!(parse(&[]).unwrap().window, vec![Window::All]);
        assert!(parse(&["--window", "0"]).is_err());
        assert!(parse(&["--window", "some"]).is_err());
    }

    #[test]
    fn a_transfer_in_windows_reads_every_byte_and_reports_them_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..(3 << 20) + 5).map(|i: u32| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = FileHandle::open_with(&path, "r", &Settings::default()).unwrap();
        let mut buffer = AlignedBuffer::new(data.len());
        let mut memory = Memory::Host(&mut buffer);
        // Windows of 1 MiB: four reads, the last 5 bytes; each lands at the
        // start of the buffer, so the buffer ends holding the last window.
        let report =
            transfer_once(&file, &mut memory, Op::Read, data.len(), Some(1 << 20)).unwrap();
        assert_eq!(report.bytes, data.len() as u64);
        assert_eq!(&buffer[..5], &data[3 << 20..]);
        assert_eq!(&buffer[5..1 << 20], &data[(2 << 20) + 5..3 << 20]);
        // The whole range at once.
        let mut memory = Memory::Host(&mut buffer);
        transfer_once(&file, &mut memory, Op::Read, data.len(), None).unwrap();
        assert!(buffer[..] == data[..]);
        // A range longer than the file is an error that says so.
        let mut longer = AlignedBuffer::new(data.len() + 4096);
        let mut memory = Memory::Host(&mut longer);
        let e = transfer_once(&file, &mut memory, Op::Read, data.len() + 4096, None).unwrap_err();
        assert!(e.contains("shorter than --size"), "{e}");
    }

    #[test]
    fn a_saved_run_reads_back_as_it_was() {
        let report = sample_report();
        let text = serde_json::to_string(&report).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, &text).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(table::render(&back), table::render(&report));
        std::fs::write(&path, text.replace("kvik-bench/1", "kvik-bench/0")).unwrap();
        let Err(CliError::Usage(e)) = load(&path) else {
            panic!("another schema was accepted");
        };
        assert!(e.contains("kvik-bench/0"), "{e}");
    }

    #[test]
    fn command_lines_name_the_program_and_quote_spaces() {
        let line = command_line(
            ["/usr/bin/kvik", "bench", "--dir", "/my dir"]
                .into_iter()
                .map(String::from),
        );
        assert_eq!(line, "kvik bench --dir '/my dir'");
    }

    #[test]
    fn a_short_named_file_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small");
        std::fs::write(&path, b"abc").unwrap();
        let args = parse(&["--file", path.to_str().unwrap(), "--size", "4KiB"]).unwrap();
        let Err(CliError::Usage(e)) = prepare_file(&args, &[0u8; 4096]) else {
            panic!("a short file was accepted");
        };
        assert!(e.contains("less than --size"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
    }
}
