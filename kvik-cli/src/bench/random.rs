//! `kvik bench --pattern random`: many small reads at random offsets of a
//! page-cached file, as data loaders do (Parquet column chunks, image
//! tiles, embedding rows, shuffled samples).
//!
//! For each read size (`--io-size`), `N` reads (`--reads`; by default
//! 256 MiB / size, between 256 and 20,000: 20,000 / 4,096 / 256 for
//! 4 KiB / 64 KiB / 1 MiB) at distinct random offsets aligned to the size,
//! issued as one batch (`FileHandle::read_batch_into`), then all waited —
//! for each memory kind, thread count and window: `all` gives every read its
//! own slot of one buffer (what a loader does), a SIZE reuses a buffer of
//! that size, batch after batch (what fio does with its per-job buffer).
//! In the same run, on the same file: fio `randread` (psync, the same
//! threads and read size, the same number of reads) as the host reference,
//! and KvikIO's pread futures (`bench/kvikio_bench.py --pattern random`,
//! through `--kvikio-random`) as the GPU peer. The file is read once
//! before (and every figure after one untimed warm-up), so it is cached.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kvik_policy::{FileHandle, ReadRange, Settings, Size};

use super::reference;
use super::stats::{Summary, ratio, times};
use super::{Memory, MemoryTarget, RefKind, Target, Window, device};
use crate::CliError;

/// The workload pattern.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Whole-range reads and writes (the other workloads of this command).
    Sequential,
    /// Many reads of `--io-size` at random aligned offsets, one batch.
    Random,
}

#[derive(Debug, clap::Args)]
pub struct RandomArgs {
    /// Access patterns, comma-separated: sequential (whole-range reads and
    /// writes, the workloads above) and/or random (many small reads at
    /// random offsets aligned to the read size, issued as one batch).
    #[arg(
        long,
        value_name = "PATTERN,…",
        value_delimiter = ',',
        value_enum,
        default_value = "sequential"
    )]
    pub pattern: Vec<Pattern>,
    /// Random pattern: read sizes, comma-separated.
    #[arg(long = "io-size", value_name = "SIZE,…", value_delimiter = ',', default_value = "4KiB,64KiB,1MiB", value_parser = crate::args::positive_size)]
    pub io_sizes: Vec<u64>,
    /// Random pattern: reads per batch (default: 256 MiB / read size,
    /// between 256 and 20,000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub reads: Option<u64>,
    /// Random pattern: KvikIO's results for the same file (the JSON lines of
    /// `bench/kvikio_bench.py --pattern random`).
    #[arg(long = "kvikio-random", value_name = "FILE")]
    pub kvikio_random: Option<PathBuf>,
}

impl RandomArgs {
    pub fn sequential(&self) -> bool {
        self.pattern.contains(&Pattern::Sequential)
    }
    pub fn random(&self) -> bool {
        self.pattern.contains(&Pattern::Random)
    }
}

/// Reads per batch for a read size: 256 MiB worth, between 256 and 20,000.
pub fn default_reads(io_size: u64) -> u64 {
    ((256u64 << 20) / io_size.max(1)).clamp(256, 20_000)
}

/// One measured configuration of ours.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RandomCase {
    pub memory: MemoryTarget,
    pub io_size: u64,
    pub reads: u64,
    pub threads: usize,
    /// The reused destination; `None`: each read its own slot.
    pub window: Option<u64>,
    /// Bytes per repetition.
    pub bytes: u64,
    pub throughput: Option<Summary>,
    /// `pread` requests per repetition, from the batch report (fewer than
    /// the reads only where neighbours were coalesced).
    pub preads: Option<usize>,
    pub error: Option<String>,
    /// Against fio randread, the same read size and threads: median over
    /// median.
    pub vs_fio: Option<f64>,
    /// The median of the per-repetition ratios (ours and fio run in turn,
    /// repetition by repetition): steadier on a busy machine.
    #[serde(default)]
    pub vs_fio_paired: Option<f64>,
    /// Against KvikIO, the same read size and threads (device memory).
    pub vs_kvikio: Option<f64>,
}

/// One reference figure.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RandomReference {
    pub name: String,
    pub kind: RefKind,
    pub memory: MemoryTarget,
    pub io_size: u64,
    pub reads: u64,
    pub threads: usize,
    pub command: Option<String>,
    pub throughput: Option<Summary>,
    pub error: Option<String>,
}

/// The random-pattern part of a run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RandomRun {
    pub io_sizes: Vec<u64>,
    /// The seed of the offsets (the same offsets for every case of a size).
    pub seed: u64,
    pub cases: Vec<RandomCase>,
    pub references: Vec<RandomReference>,
    pub targets: Vec<Target>,
    pub notes: Vec<String>,
}

impl RandomCase {
    pub fn median(&self) -> Option<f64> {
        self.throughput.as_ref().map(|s| s.median)
    }
}

impl RandomReference {
    pub fn median(&self) -> Option<f64> {
        self.throughput.as_ref().map(|s| s.median)
    }
}

const SEED: u64 = 0x6b76_696b_2d72_6e64;

/// `n` distinct block indices below `blocks`, from `seed` (xorshift64*).
pub fn random_blocks(blocks: u64, n: u64, seed: u64) -> Vec<u64> {
    let n = n.min(blocks);
    let mut state = seed | 1;
    let mut seen = HashSet::with_capacity(n as usize);
    let mut out = Vec::with_capacity(n as usize);
    while (out.len() as u64) < n {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let block = state.wrapping_mul(0x2545_f491_4f6c_dd1d) % blocks;
        if seen.insert(block) {
            out.push(block);
        }
    }
    out
}

/// The batches of one repetition: reads at `blocks × io_size`, into their
/// own slots (`window: None`) or into a reused window, as many per batch as
/// fit in it.
pub fn batches(blocks: &[u64], io_size: u64, window: Option<u64>) -> Vec<Vec<ReadRange>> {
    let per_batch = match window {
        None => blocks.len().max(1),
        Some(w) => ((w / io_size).max(1) as usize).min(blocks.len().max(1)),
    };
    blocks
        .chunks(per_batch)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .map(|(slot, &block)| ReadRange {
                    file_offset: block * io_size,
                    buffer_offset: slot as u64 * io_size,
                    len: io_size,
                })
                .collect()
        })
        .collect()
}

/// fio's command line for `reads` random reads of `io_size` over `size`
/// bytes of `path` with `threads` psync jobs (each its share of the reads).
pub fn fio_randread_args(
    path: &Path,
    size: u64,
    io_size: u64,
    reads: u64,
    threads: usize,
) -> Result<Vec<String>, String> {
    let threads = threads.max(1) as u64;
    let per_job = reads / threads;
    let region = size / io_size * io_size;
    if per_job == 0 || region == 0 {
        return Err(format!(
            "{reads} reads of {io_size} bytes over {threads} jobs in {size} bytes: nothing per job"
        ));
    }
    Ok(vec![
        "--name=kvik-bench-random".into(),
        format!("--filename={}", path.display()),
        "--readonly".into(),
        "--rw=randread".into(),
        format!("--bs={io_size}"),
        "--ioengine=psync".into(),
        format!("--numjobs={threads}"),
        format!("--size={region}"),
        format!("--io_size={}", per_job * io_size),
        "--randrepeat=1".into(),
        "--thread".into(),
        "--group_reporting".into(),
        "--invalidate=0".into(),
        "--output-format=json".into(),
    ])
}

/// One line of `bench/kvikio_bench.py --pattern random`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct KvikioRandom {
    pub version: String,
    pub compat: String,
    pub pattern: String,
    pub threads: usize,
    pub io_size: u64,
    pub reads: u64,
    pub gbps_median: f64,
    pub gbps_min: f64,
    pub gbps_max: f64,
}

/// The JSON lines of `kvikio_bench.py --pattern random` (lines that are not
/// JSON objects are skipped; a JSON object that is not a random-pattern
/// result is an error naming its line).
pub fn parse_kvikio_random(text: &str) -> Result<Vec<KvikioRandom>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        let r: KvikioRandom = serde_json::from_str(line).map_err(|e| {
            format!(
                "line {}: not a kvikio_bench.py --pattern random result: {e}",
                i + 1
            )
        })?;
        if r.pattern != "random" {
            return Err(format!(
                "line {}: pattern {:?}, not random",
                i + 1,
                r.pattern
            ));
        }
        out.push(r);
    }
    if out.is_empty() {
        return Err("no kvikio_bench.py --pattern random results (JSON lines) in it".into());
    }
    Ok(out)
}

/// What the random measurements need from the run.
pub struct Setup<'a> {
    pub path: &'a Path,
    pub size: u64,
    pub threads: &'a [usize],
    pub windows: &'a [Window],
    pub memories: &'a [MemoryTarget],
    pub reps: u32,
    pub base: &'a Settings,
    /// Measure fio randread (asked for, and installed).
    pub fio: bool,
}

/// One repetition: every batch, timed together; the `pread` count.
fn run_once(
    file: &FileHandle,
    dest: &mut Memory<'_>,
    batches: &[Vec<ReadRange>],
) -> Result<(f64, usize), String> {
    let start = Instant::now();
    let mut preads = 0;
    for batch in batches {
        let len = batch.len() * batch.first().map_or(0, |r| r.len as usize);
        let done = match dest {
            Memory::Host(b) => file.read_batch_into(&mut b[..len], batch),
            Memory::Device(d) => file.read_batch_into(d.window_mut(len), batch),
        }
        .map_err(|e| e.to_string())?;
        preads += done.report.grouping.reads;
        if let Some((r, result)) = batch
            .iter()
            .zip(&done.entries)
            .find(|(r, result)| !matches!(result, Ok(n) if *n as u64 == r.len))
        {
            return Err(match result {
                Ok(n) => format!("read {n} of {} bytes at {}", r.len, r.file_offset),
                Err(e) => e.to_string(),
            });
        }
    }
    if let Memory::Device(d) = dest {
        d.synchronize()?;
    }
    Ok((start.elapsed().as_secs_f64(), preads))
}

/// Every random-pattern measurement of the run.
pub fn measure(args: &RandomArgs, setup: &Setup<'_>) -> Result<RandomRun, CliError> {
    let kvikio = match &args.kvikio_random {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::Usage(format!("--kvikio-random {}: {e}", p.display())))?;
            parse_kvikio_random(&text)
                .map_err(|e| CliError::Usage(format!("--kvikio-random {}: {e}", p.display())))?
        }
        None => vec![],
    };
    if args.io_sizes.is_empty() {
        return Err(CliError::Usage("--io-size needs at least one size".into()));
    }
    let load_start = super::machine::load_average();
    // Cache the whole file first: these are page-cache figures.
    std::fs::read(setup.path)
        .map_err(|e| CliError::Failed(format!("cannot read {}: {e}", setup.path.display())))?;
    let mut run = RandomRun {
        io_sizes: args.io_sizes.clone(),
        seed: SEED,
        cases: vec![],
        references: vec![],
        targets: vec![],
        notes: vec![],
    };
    for &io_size in &args.io_sizes {
        let reads = args
            .reads
            .unwrap_or_else(|| default_reads(io_size))
            .min(setup.size / io_size);
        if reads == 0 {
            run.notes.push(format!(
                "{} reads do not fit in a {} file: skipped",
                Size(io_size),
                Size(setup.size)
            ));
            continue;
        }
        let blocks = random_blocks(setup.size / io_size, reads, SEED ^ io_size);
        measure_size(setup, io_size, &blocks, &mut run);
    }
    if !setup.fio {
        run.notes.push(
            "no fio randread reference (not asked for, or fio is not installed: apt-get install \
             fio)"
                .into(),
        );
    }
    run.references
        .extend(kvikio.iter().map(|k| kvikio_reference(k, setup.memories)));
    compare(&mut run);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let (Some(start), Some(end)) = (load_start, super::machine::load_average()) {
        if start.max(end) > 0.5 * cores as f64 {
            run.notes.push(format!(
                "load average {start:.2} at the start, {end:.2} at the end, on {cores} cores: \
                 other processes were running; read the spreads and the paired ratios"
            ));
        }
    }
    Ok(run)
}

/// A destination buffer, allocated once per read size.
enum Owned {
    Host(kvik_policy::AlignedBuffer),
    Device(device::DeviceBuffer),
}

impl Owned {
    fn new(memory: MemoryTarget, len: u64) -> Result<Owned, String> {
        match memory {
            MemoryTarget::Host => crate::window::host_buffer(len)
                .map(Owned::Host)
                .map_err(|e| e.to_string()),
            MemoryTarget::Device(n) => {
                device::DeviceBuffer::new(n, &vec![0u8; len as usize]).map(Owned::Device)
            }
        }
    }

    fn memory(&mut self) -> Memory<'_> {
        match self {
            Owned::Host(b) => Memory::Host(b),
            Owned::Device(d) => Memory::Device(d),
        }
    }
}

/// One of our configurations while it is measured.
struct Ours {
    case: RandomCase,
    /// Index into the size's destination buffers.
    buffer: usize,
    batches: Vec<Vec<ReadRange>>,
    seconds: Vec<f64>,
}

/// Every figure of one read size. Per thread count, each repetition runs
/// every configuration of ours and then fio, in turn (after one untimed
/// round): on a shared machine, load that comes and goes then weighs on
/// both sides alike, and each of our figures can be paired with fio's of
/// the same round.
fn measure_size(setup: &Setup<'_>, io_size: u64, blocks: &[u64], run: &mut RandomRun) {
    let reads = blocks.len() as u64;
    let all = reads * io_size;
    // `all` and a window as large as the batch are the same case.
    let mut windows: Vec<Option<u64>> = setup
        .windows
        .iter()
        .map(|w| w.bytes().filter(|&b| b < all))
        .collect();
    windows.dedup();
    let largest = windows
        .iter()
        .map(|w| w.unwrap_or(all))
        .max()
        .unwrap_or(all);
    let mut buffers: Vec<(MemoryTarget, Owned)> = Vec::new();
    for &memory in setup.memories {
        match Owned::new(memory, largest) {
            Ok(b) => buffers.push((memory, b)),
            Err(e) => run.notes.push(format!("{memory} {}: {e}", Size(io_size))),
        }
    }
    for &threads in setup.threads {
        let mut ours: Vec<Ours> = Vec::new();
        for (buffer, (memory, _)) in buffers.iter().enumerate() {
            for &window in &windows {
                ours.push(Ours {
                    case: RandomCase {
                        memory: *memory,
                        io_size,
                        reads,
                        threads,
                        window,
                        bytes: all,
                        throughput: None,
                        preads: None,
                        error: None,
                        vs_fio: None,
                        vs_fio_paired: None,
                        vs_kvikio: None,
                    },
                    buffer,
                    batches: batches(blocks, io_size, window),
                    seconds: vec![],
                });
            }
        }
        let mut fio = fio_reference(setup, io_size, reads, threads);
        let fio_args = match (setup.fio, &fio.command) {
            (true, Some(_)) => {
                fio_randread_args(setup.path, setup.size, io_size, reads, threads).ok()
            }
            _ => None,
        };
        let mut fio_rates = Vec::new();
        let mut settings = setup.base.clone();
        let file = settings
            .set_num_threads(threads)
            .map(drop)
            .and_then(|()| FileHandle::open_with(setup.path, "r", &settings))
            .map_err(|e| e.to_string());
        for rep in 0..=setup.reps {
            for o in ours.iter_mut().filter(|o| o.case.error.is_none()) {
                let result = file
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|f| run_once(f, &mut buffers[o.buffer].1.memory(), &o.batches));
                match result {
                    Ok((seconds, preads)) if rep > 0 => {
                        o.seconds.push(seconds);
                        o.case.preads = Some(preads);
                    }
                    Ok(_) => {}
                    Err(e) => o.case.error = Some(e),
                }
            }
            if let (Some(args), None) = (&fio_args, &fio.error) {
                match reference::run_fio(args) {
                    Ok(rate) if rep > 0 => fio_rates.push(rate),
                    Ok(_) => {}
                    Err(e) => fio.error = Some(e),
                }
            }
        }
        if fio.error.is_none() {
            fio.throughput = Summary::from_rates(fio_rates.clone());
        }
        for mut o in ours {
            if o.case.error.is_none() {
                o.case.throughput = Summary::from_seconds(all, &o.seconds);
                o.case.vs_fio_paired = paired_ratio(all, &o.seconds, &fio_rates);
            }
            run.cases.push(o.case);
        }
        if setup.fio {
            run.references.push(fio);
        }
    }
}

/// The median, over repetitions, of our rate over fio's of the same round.
fn paired_ratio(bytes: u64, seconds: &[f64], fio_rates: &[f64]) -> Option<f64> {
    if seconds.is_empty() || seconds.len() != fio_rates.len() {
        return None;
    }
    let ratios: Vec<f64> = seconds
        .iter()
        .zip(fio_rates)
        .map(|(s, f)| bytes as f64 / s / f)
        .collect();
    Summary::from_rates(ratios).map(|s| s.median)
}

/// fio randread's reference for one read size and thread count, without
/// figures yet (they are measured interleaved with ours).
fn fio_reference(setup: &Setup<'_>, io_size: u64, reads: u64, threads: usize) -> RandomReference {
    let mut r = RandomReference {
        name: "fio randread psync".into(),
        kind: RefKind::Tool,
        memory: MemoryTarget::Host,
        io_size,
        reads: reads / threads as u64 * threads as u64,
        threads,
        command: None,
        throughput: None,
        error: None,
    };
    match fio_randread_args(setup.path, setup.size, io_size, reads, threads) {
        Ok(args) => r.command = Some(reference::command_line("fio", &args)),
        Err(e) => r.error = Some(e),
    }
    r
}

fn kvikio_reference(k: &KvikioRandom, memories: &[MemoryTarget]) -> RandomReference {
    let memory = memories
        .iter()
        .copied()
        .find(|m| matches!(m, MemoryTarget::Device(_)))
        .unwrap_or(MemoryTarget::Device(0));
    RandomReference {
        name: format!("KvikIO {} pread futures (compat {})", k.version, k.compat),
        kind: RefKind::Peer,
        memory,
        io_size: k.io_size,
        reads: k.reads,
        threads: k.threads,
        command: Some(format!(
            "python3 bench/kvikio_bench.py FILE --pattern random --io-size {} --reads {} \
             --threads {} --compat {}",
            k.io_size, k.reads, k.threads, k.compat
        )),
        throughput: Summary::from_figures(k.gbps_median * 1e9, k.gbps_min * 1e9, k.gbps_max * 1e9),
        error: None,
    }
}

/// Ratios to fio and KvikIO, and the random-read targets.
fn compare(run: &mut RandomRun) {
    let find = |kind: RefKind, io_size: u64, threads: usize| {
        run.references
            .iter()
            .filter(|r| r.kind == kind && r.io_size == io_size && r.threads == threads)
            .filter_map(|r| r.median().map(|m| (r, m)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let mut targets = Vec::new();
    for case in &mut run.cases {
        let Some(ours) = case.median() else { continue };
        case.vs_fio = ratio(
            ours,
            find(RefKind::Tool, case.io_size, case.threads).map(|x| x.1),
        );
        if matches!(case.memory, MemoryTarget::Device(_)) {
            case.vs_kvikio = ratio(
                ours,
                find(RefKind::Peer, case.io_size, case.threads).map(|x| x.1),
            );
        }
    }
    // Per memory, size and thread count: our best window against each goal.
    let mut keys: Vec<(MemoryTarget, u64, usize)> = run
        .cases
        .iter()
        .map(|c| (c.memory, c.io_size, c.threads))
        .collect();
    keys.sort();
    keys.dedup();
    for (memory, io_size, threads) in keys {
        let Some(best) = run
            .cases
            .iter()
            .filter(|c| (c.memory, c.io_size, c.threads) == (memory, io_size, threads))
            .filter(|c| c.median().is_some())
            .max_by(|a, b| a.median().unwrap().total_cmp(&b.median().unwrap()))
        else {
            continue;
        };
        let ours = best.median().unwrap_or(0.0);
        let label = format!(
            "kvik {memory}, {} reads, {threads} thread{}, {}",
            Size(io_size),
            if threads == 1 { "" } else { "s" },
            best.window.map_or("own slots".to_string(), |w| format!(
                "{} window reused",
                Size(w)
            ))
        );
        // Against fio, the paired ratio where there is one (see RandomCase).
        let paired = best.vs_fio_paired;
        let mut goal = |name: String, kind, goal: f64| {
            if let Some((r, reference)) = find(kind, io_size, threads) {
                let ratio = match kind {
                    RefKind::Tool => paired.unwrap_or(ours / reference),
                    _ => ours / reference,
                };
                targets.push(Target {
                    name,
                    ours: label.clone(),
                    ours_bytes_per_second: ours,
                    reference: format!("{} ({} threads)", r.name, r.threads),
                    reference_bytes_per_second: reference,
                    ratio,
                    goal,
                    met: ratio >= goal,
                });
            }
        };
        match memory {
            MemoryTarget::Host => goal(
                format!("host memory, {}: ≥ 0.9× fio randread", Size(io_size)),
                RefKind::Tool,
                0.9,
            ),
            MemoryTarget::Device(_) => {
                let peer = if io_size <= 4096 { 20.0 } else { 10.0 };
                goal(
                    format!("GPU memory, {}: ≥ {peer}× KvikIO", Size(io_size)),
                    RefKind::Peer,
                    peer,
                );
                goal(
                    format!(
                        "GPU memory, {}: ≥ 0.6× the host pread figure (fio)",
                        Size(io_size)
                    ),
                    RefKind::Tool,
                    0.6,
                );
            }
        }
    }
    run.targets = targets;
}

/// `12.34 [12.00–12.50]` GB/s and the kIOPS of the median.
fn figure(s: &Option<Summary>, io_size: u64) -> (String, String) {
    let kiops = s.as_ref().map_or("-".into(), |s| {
        format!("{:.0}", s.median / io_size as f64 / 1e3)
    });
    (super::table::figure(s), kiops)
}

/// The readable part of the report for the random pattern.
pub fn render(run: &RandomRun) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\nrandom reads (one batch of N reads at distinct random offsets aligned to the read \
         size, all issued then all waited; page-cached file; ours and fio in turn, repetition \
         by repetition: paired = median of the per-repetition ratios)"
    );
    let _ = writeln!(
        o,
        "  {:<9} {:>7} {:>6} {:>7} {:>9}  {:<24} {:>7} {:>6} {:>7} {:>8} {:>7}",
        "memory",
        "size",
        "reads",
        "threads",
        "window",
        "GB/s",
        "kIOPS",
        "× fio",
        "paired",
        "× KvikIO",
        "preads"
    );
    for c in &run.cases {
        let (gb, kiops) = figure(&c.throughput, c.io_size);
        let _ = writeln!(
            o,
            "  {:<9} {:>7} {:>6} {:>7} {:>9}  {:<24} {:>7} {:>6} {:>7} {:>8} {:>7}{}",
            c.memory.to_string(),
            Size(c.io_size).to_string(),
            c.reads,
            c.threads,
            c.window.map_or("own".into(), |w| Size(w).to_string()),
            gb,
            kiops,
            times(c.vs_fio),
            times(c.vs_fio_paired),
            times(c.vs_kvikio),
            c.preads.map_or("-".into(), |p| p.to_string()),
            c.error
                .as_ref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default()
        );
    }
    if !run.references.is_empty() {
        let _ = writeln!(o, "\n  references");
        for r in &run.references {
            let (gb, kiops) = figure(&r.throughput, r.io_size);
            let _ = writeln!(
                o,
                "  {:<44} {:>7} {:>6} {:>7}  {:<24} {:>7}{}",
                format!("{} ({})", r.name, r.memory),
                Size(r.io_size).to_string(),
                r.reads,
                r.threads,
                gb,
                kiops,
                r.error
                    .as_ref()
                    .map(|e| format!("  error: {e}"))
                    .unwrap_or_default()
            );
        }
    }
    if !run.targets.is_empty() {
        let _ = writeln!(o, "\n  targets (issue 13)");
        super::table::write_targets(&mut o, &run.targets);
    }
    for n in &run.notes {
        let _ = writeln!(o, "  - {n}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_read_counts_follow_the_issue() {
        assert_eq!(default_reads(4096), 20_000);
        assert_eq!(default_reads(64 << 10), 4096);
        assert_eq!(default_reads(1 << 20), 256);
        assert_eq!(default_reads(16 << 20), 256);
    }

    #[test]
    fn offsets_are_distinct_aligned_and_reproducible() {
        let blocks = random_blocks(1000, 500, 7);
        assert_eq!(blocks.len(), 500);
        let distinct: HashSet<u64> = blocks.iter().copied().collect();
        assert_eq!(distinct.len(), 500);
        assert!(blocks.iter().all(|&b| b < 1000));
        assert_eq!(blocks, random_blocks(1000, 500, 7));
        assert_ne!(blocks, random_blocks(1000, 500, 8));
        // Not simply ascending.
        assert!(blocks.windows(2).any(|w| w[0] > w[1]));
        // Never more than there are blocks.
        assert_eq!(random_blocks(10, 50, 1).len(), 10);
    }

    #[test]
    fn batches_give_each_read_its_slot_or_reuse_a_window() {
        let own = batches(&[5, 1, 9], 4096, None);
        assert_eq!(own.len(), 1);
        let r: Vec<(u64, u64)> = own[0]
            .iter()
            .map(|r| (r.file_offset, r.buffer_offset))
            .collect();
        assert_eq!(r, vec![(5 * 4096, 0), (4096, 4096), (9 * 4096, 8192)]);
        let windowed = batches(&[5, 1, 9], 4096, Some(8192));
        assert_eq!(windowed.len(), 2);
        assert_eq!(windowed[1][0].buffer_offset, 0, "the window is reused");
        assert_eq!(windowed[1][0].file_offset, 9 * 4096);
    }

    #[test]
    fn fio_randread_command_lines() {
        let args = fio_randread_args(Path::new("/data/f"), (1 << 30) + 5, 4096, 20_000, 2).unwrap();
        let line = reference::command_line("fio", &args);
        assert!(
            line.contains("--rw=randread --bs=4096 --ioengine=psync --numjobs=2"),
            "{line}"
        );
        assert!(
            line.contains("--size=1073741824 --io_size=40960000"),
            "{line}"
        );
        assert!(fio_randread_args(Path::new("/f"), 1 << 20, 4096, 1, 2).is_err());
    }

    #[test]
    fn kvikio_random_lines_parse_and_others_are_refused() {
        let line = r#"{"tool": "kvikio", "version": "26.10.0", "compat": "on", "pattern": "random", "threads": 16, "io_size": 4096, "reads": 20000, "bytes": 81920000, "gbps_median": 0.18, "gbps_min": 0.17, "gbps_max": 0.19}"#;
        let parsed = parse_kvikio_random(&format!("warning: x\n{line}\n")).unwrap();
        assert_eq!(
            (parsed[0].threads, parsed[0].io_size, parsed[0].reads),
            (16, 4096, 20_000)
        );
        let sequential = line.replace("\"random\"", "\"sequential\"");
        assert!(
            parse_kvikio_random(&sequential)
                .unwrap_err()
                .contains("not random")
        );
        assert!(
            parse_kvikio_random("{\"tool\": \"kvikio\"}")
                .unwrap_err()
                .starts_with("line 1:")
        );
        assert!(parse_kvikio_random("").is_err());
    }

    #[test]
    fn paired_ratios_take_the_median_round() {
        // Rates 100, 50, 200 against fio's 100 each round: ratios 1, 0.5, 2.
        assert_eq!(paired_ratio(100, &[1.0, 2.0, 0.5], &[100.0; 3]), Some(1.0));
        assert_eq!(paired_ratio(100, &[1.0], &[]), None, "no fio figures");
        assert_eq!(paired_ratio(100, &[], &[]), None);
    }

    fn summary(median: f64) -> Option<Summary> {
        Summary::from_rates(vec![median])
    }

    #[test]
    fn ratios_and_targets_compare_like_with_like() {
        let case = |memory, io_size, window, median| RandomCase {
            memory,
            io_size,
            reads: 100,
            threads: 2,
            window,
            bytes: 100 * io_size,
            throughput: summary(median),
            preads: Some(100),
            error: None,
            vs_fio: None,
            vs_fio_paired: None,
            vs_kvikio: None,
        };
        let reference = |name: &str, kind, memory, io_size, threads, median| RandomReference {
            name: name.into(),
            kind,
            memory,
            io_size,
            reads: 100,
            threads,
            command: None,
            throughput: summary(median),
            error: None,
        };
        let device = MemoryTarget::Device(0);
        let mut run = RandomRun {
            io_sizes: vec![4096],
            seed: 1,
            cases: vec![
                case(MemoryTarget::Host, 4096, None, 1.0e9),
                case(MemoryTarget::Host, 4096, Some(1 << 20), 1.9e9),
                case(device, 4096, None, 4.0e9),
            ],
            references: vec![
                reference("fio", RefKind::Tool, MemoryTarget::Host, 4096, 2, 2.0e9),
                reference("fio", RefKind::Tool, MemoryTarget::Host, 4096, 4, 9.0e9),
                reference("KvikIO", RefKind::Peer, device, 4096, 2, 0.1e9),
            ],
            targets: vec![],
            notes: vec![],
        };
        // Paired by repetition, our best window was below fio after all.
        run.cases[1].vs_fio_paired = Some(0.88);
        compare(&mut run);
        assert_eq!(run.cases[0].vs_fio, Some(0.5), "the same thread count only");
        assert_eq!(run.cases[1].vs_fio, Some(0.95));
        assert_eq!(
            run.cases[0].vs_kvikio, None,
            "host rows have no KvikIO peer"
        );
        assert_eq!(run.cases[2].vs_kvikio, Some(40.0));
        let names: Vec<(&str, bool)> = run
            .targets
            .iter()
            .map(|t| (t.name.as_str(), t.met))
            .collect();
        assert_eq!(
            names,
            vec![
                ("host memory, 4 KiB: ≥ 0.9× fio randread", false),
                ("GPU memory, 4 KiB: ≥ 20× KvikIO", true),
                (
                    "GPU memory, 4 KiB: ≥ 0.6× the host pread figure (fio)",
                    true
                ),
            ]
        );
        assert!(
            run.targets[0].ours.contains("1 MiB window reused"),
            "our best window counts"
        );
        assert_eq!(run.targets[0].ratio, 0.88, "the paired ratio decides");
        let text = render(&run);
        assert!(text.contains("[NOT met] host memory, 4 KiB"), "{text}");
        assert!(text.contains("0.95×") && text.contains("0.88×"), "{text}");
        // What --save writes, --from reads back.
        let json = serde_json::to_string(&run).unwrap();
        let back: RandomRun = serde_json::from_str(&json).unwrap();
        assert_eq!(back.cases.len(), 3);
        assert_eq!(back.targets[1].ratio, 40.0);
    }
}
