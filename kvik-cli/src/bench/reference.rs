//! Reference points measured in the same run: what other tools reach on the
//! same file (`dd`, `fio`), what the memory system allows (`memcpy`), and
//! KvikIO's figures when its results are supplied.
//!
//! Command lines are built and outputs parsed by pure functions (tested);
//! running them is a thin layer on top.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use kvik_policy::AlignedBuffer;

use super::args::Op;
use super::cache::ColdCache;
use super::device;
use super::results::{MemoryTarget, RefKind, Reference, Workload};
use super::stats::Summary;

/// `dd`'s block size (`bs=16M`, as bench/README.md describes).
pub const DD_BLOCK: u64 = 16 << 20;

/// The fio engines compared, and the queue depth of the asynchronous ones
/// (psync is synchronous: one request in flight per job).
pub const FIO_ENGINES: [&str; 3] = ["psync", "libaio", "io_uring"];
pub const FIO_ASYNC_DEPTH: u32 = 8;

/// `program` on `$PATH`.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `dd` reading the whole file to /dev/null in 16 MiB blocks, through the
/// page cache or with `iflag=direct`.
pub fn dd_read_args(path: &Path, direct: bool) -> Vec<String> {
    let mut args = vec![
        format!("if={}", path.display()),
        "of=/dev/null".into(),
        "bs=16M".into(),
    ];
    if direct {
        args.push("iflag=direct".into());
    }
    args
}

/// `dd` writing `size` bytes of zeros (rounded down to whole 16 MiB blocks,
/// at least one) and flushing them: `conv=fdatasync`, plus `oflag=direct`.
pub fn dd_write_args(path: &Path, size: u64, direct: bool) -> Vec<String> {
    let blocks = (size / DD_BLOCK).max(1);
    let mut args = vec![
        "if=/dev/zero".into(),
        format!("of={}", path.display()),
        "bs=16M".into(),
        format!("count={blocks}"),
        "conv=fdatasync".into(),
    ];
    if direct {
        args.push("oflag=direct".into());
    }
    args
}

/// The bytes and seconds of dd's summary line (`… bytes (…) copied, 0.51 s,
/// 2.1 GB/s`), run with `LC_ALL=C`.
pub fn parse_dd(stderr: &str) -> Result<(u64, f64), String> {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains(" copied, "))
        .ok_or_else(|| format!("no summary line in dd's output: {:?}", stderr.trim()))?;
    let bytes = line
        .split_whitespace()
        .next()
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| format!("no byte count in dd's line {line:?}"))?;
    let seconds = line
        .split(" copied, ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|t| t.parse::<f64>().ok())
        .ok_or_else(|| format!("no seconds in dd's line {line:?}"))?;
    Ok((bytes, seconds))
}

/// One fio run: `threads` jobs each reading its own contiguous share of the
/// file sequentially (`offset_increment`), together the whole file once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FioJob {
    pub engine: &'static str,
    pub threads: usize,
    pub direct: bool,
    pub block: u64,
}

/// fio's command line for `job` on `size` bytes of `path`. Read-only, no
/// cache invalidation (the harness decides what is cached), threads not
/// processes, JSON output. Each job's share is rounded down to whole blocks.
pub fn fio_args(path: &Path, size: u64, job: &FioJob) -> Result<Vec<String>, String> {
    let threads = job.threads.max(1) as u64;
    let share = size / threads / job.block * job.block;
    if share == 0 {
        return Err(format!(
            "{size} bytes in {threads} jobs is less than one {}-byte block each",
            job.block
        ));
    }
    let mut args = vec![
        "--name=kvik-bench".to_string(),
        format!("--filename={}", path.display()),
        "--readonly".into(),
        "--rw=read".into(),
        format!("--bs={}", job.block),
        format!("--ioengine={}", job.engine),
        format!("--direct={}", u8::from(job.direct)),
        format!("--numjobs={threads}"),
        format!("--size={share}"),
        format!("--offset_increment={share}"),
        "--thread".into(),
        "--group_reporting".into(),
        "--invalidate=0".into(),
        "--output-format=json".into(),
    ];
    if job.engine != "psync" {
        args.push(format!("--iodepth={FIO_ASYNC_DEPTH}"));
    }
    Ok(args)
}

/// The read bandwidth (bytes per second) and bytes read from fio's JSON
/// output (anything fio prints before the JSON is skipped).
pub fn parse_fio(stdout: &str) -> Result<(f64, u64), String> {
    let start = stdout
        .find('{')
        .ok_or_else(|| format!("no JSON in fio's output: {:?}", first_line(stdout)))?;
    let value: serde_json::Value = serde_json::from_str(&stdout[start..])
        .map_err(|e| format!("fio's JSON does not parse: {e}"))?;
    let job = &value["jobs"][0];
    if let Some(error) = job["error"].as_i64().filter(|&e| e != 0) {
        return Err(format!("fio reports error {error} for the job"));
    }
    let read = &job["read"];
    let bw = read["bw_bytes"]
        .as_f64()
        .ok_or("fio's JSON has no jobs[0].read.bw_bytes")?;
    let bytes = read["io_bytes"]
        .as_u64()
        .ok_or("fio's JSON has no jobs[0].read.io_bytes")?;
    if bytes == 0 {
        return Err("fio read nothing".into());
    }
    Ok((bw, bytes))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

/// Run `program args…` with `LC_ALL=C`; its stdout and stderr, or why it failed.
fn run(program: &str, args: &[String]) -> Result<(String, String), String> {
    let output = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        let why = stderr
            .lines()
            .chain(stdout.lines())
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output");
        return Err(format!("{program} failed ({}): {why}", output.status));
    }
    Ok((stdout, stderr))
}

/// Run dd; the bytes per second it reports.
pub fn run_dd(args: &[String]) -> Result<f64, String> {
    let (_, stderr) = run("dd", args)?;
    let (bytes, seconds) = parse_dd(&stderr)?;
    if seconds <= 0.0 {
        return Err(format!("dd reports {seconds} s"));
    }
    Ok(bytes as f64 / seconds)
}

/// Run fio; the bytes per second it reports.
pub fn run_fio(args: &[String]) -> Result<f64, String> {
    let (stdout, _) = run("fio", args)?;
    parse_fio(&stdout).map(|(bw, _)| bw)
}

/// `program args…` as one shell-readable line, for the report.
pub fn command_line(program: &str, args: &[String]) -> String {
    std::iter::once(program.to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Copy `src` into `dst` with `threads` threads, each one contiguous share;
/// the seconds it took (thread start included, as for a read's pool).
pub fn memcpy_seconds(dst: &mut [u8], src: &[u8], threads: usize) -> f64 {
    let threads = threads.max(1);
    let share = src.len().div_ceil(threads).max(1);
    let start = Instant::now();
    if threads == 1 {
        dst.copy_from_slice(src);
    } else {
        std::thread::scope(|scope| {
            for (d, s) in dst.chunks_mut(share).zip(src.chunks(share)) {
                scope.spawn(move || d.copy_from_slice(s));
            }
        });
    }
    start.elapsed().as_secs_f64()
}

/// One line of `bench/kvikio_bench.py`'s output.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct KvikioResult {
    pub tool: String,
    pub version: String,
    pub compat: String,
    pub threads: usize,
    pub task_size: u64,
    pub bytes: u64,
    pub gbps_median: f64,
    pub gbps_min: f64,
    pub gbps_max: f64,
}

/// The JSON lines of `bench/kvikio_bench.py` (blank lines and lines that
/// are not JSON objects, such as warnings, are skipped; a JSON object that
/// is not a KvikIO result is an error naming its line).
pub fn parse_kvikio_lines(text: &str) -> Result<Vec<KvikioResult>, String> {
    let mut results = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        let result: KvikioResult = serde_json::from_str(line)
            .map_err(|e| format!("line {}: not a kvikio_bench.py result: {e}", i + 1))?;
        results.push(result);
    }
    if results.is_empty() {
        return Err("no kvikio_bench.py results (JSON lines) in it".into());
    }
    Ok(results)
}

// The reference points of a run, measured.

/// What the reference measurements need to know.
pub(super) struct RefContext<'a> {
    pub path: &'a Path,
    pub scratch: &'a Path,
    pub size: u64,
    pub reps: u32,
    pub threads: &'a [usize],
    pub workloads: &'a [Workload],
    pub cold: Option<&'a ColdCache>,
    pub fio_block: u64,
}

pub(super) fn reference(
    name: String,
    kind: RefKind,
    memory: MemoryTarget,
    workload: Workload,
) -> Reference {
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
pub(super) fn repeat(
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

pub(super) fn memcpy_refs(ctx: &RefContext<'_>, src: &AlignedBuffer) -> Vec<Reference> {
    // A destination the system refuses makes every row an error, not a crash.
    let mut dst = crate::window::host_buffer(ctx.size).map_err(|e| e.to_string());
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
                    Ok(ctx.size as f64 / memcpy_seconds(dst, src, threads))
                }),
                Err(e) => Err(e.clone()),
            };
            set_result(&mut r, result);
            r
        })
        .collect()
}

pub(super) fn htod_refs(
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

pub(super) fn dd_refs(ctx: &RefContext<'_>) -> Vec<Reference> {
    let mut out = Vec::new();
    for &workload in ctx.workloads {
        let variants: &[bool] = match workload {
            Workload::READ_HOT => &[false],
            _ => &[false, true],
        };
        for &direct in variants {
            let args = match workload.op {
                Op::Read => dd_read_args(ctx.path, direct),
                Op::Write => dd_write_args(ctx.scratch, ctx.size, direct),
            };
            let name = format!("dd bs=16M {}", if direct { "O_DIRECT" } else { "buffered" });
            let mut r = reference(name, RefKind::Tool, MemoryTarget::Host, workload);
            r.direct = direct;
            r.block_size = Some(DD_BLOCK);
            r.bytes = match workload.op {
                Op::Read => ctx.size,
                Op::Write => (ctx.size / DD_BLOCK).max(1) * DD_BLOCK,
            };
            r.command = Some(command_line("dd", &args));
            let cold = workload == Workload::READ_COLD;
            set_result(&mut r, repeat(ctx, cold, || run_dd(&args)));
            out.push(r);
        }
    }
    out
}

pub(super) fn fio_refs(ctx: &RefContext<'_>) -> Vec<Reference> {
    let mut out = Vec::new();
    for &workload in ctx.workloads.iter().filter(|w| w.op == Op::Read) {
        let variants: &[bool] = match workload {
            Workload::READ_HOT => &[false],
            _ => &[false, true],
        };
        for &direct in variants {
            for engine in FIO_ENGINES {
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
                    let result = fio_args(ctx.path, ctx.size, &job).and_then(|args| {
                        r.command = Some(command_line("fio", &args));
                        let share = ctx.size / threads as u64 / ctx.fio_block * ctx.fio_block;
                        r.bytes = share * threads as u64;
                        repeat(ctx, cold, || run_fio(&args))
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
pub(super) fn kvikio_refs(results: &[KvikioResult], memories: &[MemoryTarget]) -> Vec<Reference> {
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

pub(super) fn set_result(r: &mut Reference, result: Result<Summary, String>) {
    match result {
        Ok(s) => r.throughput = Some(s),
        Err(e) => r.error = Some(e),
    }
}

#[cfg(test)]
mod tests {
    use super::super::compare::{compare, targets};
    use super::super::results::Case;
    use super::*;

    #[test]
    fn dd_command_lines() {
        let p = Path::new("/data/f");
        assert_eq!(
            command_line("dd", &dd_read_args(p, true)),
            "dd if=/data/f of=/dev/null bs=16M iflag=direct"
        );
        assert_eq!(
            command_line("dd", &dd_write_args(p, (1 << 30) + 5, false)),
            "dd if=/dev/zero of=/data/f bs=16M count=64 conv=fdatasync"
        );
        assert!(dd_write_args(p, 1, true).contains(&"count=1".to_string()));
    }

    #[test]
    fn dd_summary_lines_parse() {
        let out = "64+0 records in\n64+0 records out\n\
                   1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.515118 s, 2.1 GB/s\n";
        assert_eq!(parse_dd(out).unwrap(), (1_073_741_824, 0.515118));
        // Older dd without the human-readable sizes.
        let old = "1048576 bytes copied, 0.25 s, 4.2 MB/s";
        assert_eq!(parse_dd(old).unwrap(), (1_048_576, 0.25));
        assert!(
            parse_dd("dd: failed to open 'x'")
                .unwrap_err()
                .contains("no summary")
        );
    }

    #[test]
    fn fio_splits_the_file_between_jobs() {
        let job = FioJob {
            engine: "io_uring",
            threads: 3,
            direct: true,
            block: 4 << 20,
        };
        let args = fio_args(Path::new("/f"), 1 << 30, &job).unwrap();
        // 1 GiB / 3 = 341.33 MiB, rounded down to 340 MiB (85 blocks of 4 MiB).
        let share = 85u64 * (4 << 20);
        for expected in [
            format!("--size={share}"),
            format!("--offset_increment={share}"),
            "--numjobs=3".into(),
            "--direct=1".into(),
            "--ioengine=io_uring".into(),
            "--iodepth=8".into(),
            "--invalidate=0".into(),
            "--readonly".into(),
        ] {
            assert!(args.contains(&expected), "{expected} missing from {args:?}");
        }
        let psync = FioJob {
            engine: "psync",
            threads: 1,
            direct: false,
            block: 4 << 20,
        };
        let args = fio_args(Path::new("/f"), 1 << 30, &psync).unwrap();
        assert!(args.contains(&"--size=1073741824".to_string()));
        assert!(!args.iter().any(|a| a.starts_with("--iodepth")));
        let tiny = FioJob {
            threads: 4,
            ..psync
        };
        assert!(fio_args(Path::new("/f"), 8 << 20, &tiny).is_err());
    }

    #[test]
    fn fio_json_parses_after_warnings() {
        let out = "fio: some warning\n{\"fio version\": \"fio-3.33\", \"jobs\": [{\"jobname\": \
                   \"kvik-bench\", \"error\": 0, \"read\": {\"io_bytes\": 1073741824, \
                   \"bw_bytes\": 2147483648, \"runtime\": 500}}]}";
        assert_eq!(parse_fio(out).unwrap(), (2_147_483_648.0, 1_073_741_824));
        let failed = "{\"jobs\": [{\"error\": 5, \"read\": {}}]}";
        assert!(parse_fio(failed).unwrap_err().contains("error 5"));
        assert!(parse_fio("fio: engine io_uring not loadable").is_err());
    }

    #[test]
    fn memcpy_copies_everything_with_any_thread_count() {
        let src: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
        for threads in [1, 2, 7] {
            let mut dst = vec![0u8; src.len()];
            let s = memcpy_seconds(&mut dst, &src, threads);
            assert!(s > 0.0);
            assert!(dst == src, "{threads} threads");
        }
    }

    #[test]
    fn kvikio_lines_parse_and_bad_lines_are_named() {
        let text = "warning: something\n\
            {\"tool\": \"kvikio\", \"version\": \"26.10.0\", \"compat\": \"on\", \"threads\": 4, \
             \"task_size\": 4194304, \"bytes\": 1073741824, \"gbps_median\": 25.3, \
             \"gbps_min\": 24.0, \"gbps_max\": 26.1}\n\n";
        let r = parse_kvikio_lines(text).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].threads, r[0].gbps_median), (4, 25.3));
        let bad = "{\"tool\": \"kvikio\"}";
        assert!(parse_kvikio_lines(bad).unwrap_err().starts_with("line 1:"));
        assert!(parse_kvikio_lines("nothing").is_err());
    }

    #[test]
    fn which_finds_sh() {
        assert!(which("sh").is_some());
        assert!(which("kvik-no-such-program").is_none());
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
}
