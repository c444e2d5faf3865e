//! `kvik bench --file URL`: the benchmark of a remote object (S3, HTTP(S),
//! presigned URLs) — throughput of whole-object reads (at most `--size`
//! bytes from its start) through kvik-remote, for every memory kind,
//! window, task size (`--task-size`: one ranged GET each) and number of
//! GETs in flight (`--threads`, as KvikIO runs one GET per pool thread);
//! median [min–max] over `--reps` after one untimed warm-up.
//!
//! Reads only, and no reference points: `dd`, `fio`, memcpy and the
//! cold-cache runs measure local storage and the page cache, which a
//! remote read does not go through (and what the server caches is not
//! ours to drop). kvik-remote's own benchmark (`examples/remote_bench.rs`)
//! compares with `curl` and KvikIO on the same object.

use std::fmt::Write as _;
use std::time::Instant;

use kvik_policy::{MemoryKind, Settings, Size};
use kvik_remote::{RemoteFile, RemoteOptions, Source};

use super::args::{Args, Op, Window};
use super::machine::{self, Machine};
use super::measure::command_line;
use super::results::{Defaults, FileInfo, MemoryTarget, Report, SCHEMA};
use super::stats::Summary;
use crate::CliError;
use crate::args::{Location, MemoryChoice};
use crate::window::WindowBuffer;

/// Why a remote run has no reference points and no cold-cache runs.
pub const NO_REFERENCES: &str = "remote object: no dd, fio or memcpy reference and no cold-cache \
                                 runs (they measure local storage and the page cache, which a \
                                 remote read does not go through; the server's cache is not ours \
                                 to drop)";

/// One measured configuration.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RemoteCase {
    pub memory: MemoryTarget,
    /// The most ranged GETs in flight (`--threads`).
    pub in_flight: usize,
    /// Bytes per ranged GET (`--task-size`).
    pub task_size: u64,
    /// The reused destination window; `None`: one buffer for the whole range.
    pub window: Option<u64>,
    /// The default settings (`num_threads` GETs in flight, `task_size`), one
    /// buffer.
    pub defaults: bool,
    /// Bytes per read.
    pub bytes: u64,
    /// Ranged GETs per read.
    pub requests: Option<usize>,
    /// Attempts beyond the first, over every timed read (retries).
    pub retries: Option<usize>,
    pub throughput: Option<Summary>,
    pub error: Option<String>,
}

/// The remote part of a run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RemoteRun {
    /// The object's URL, without its query string.
    pub url: String,
    /// How it is reached (`HTTP`, `S3`, `S3 presigned URL`, …).
    pub endpoint: String,
    pub object_size: u64,
    pub cases: Vec<RemoteCase>,
    pub notes: Vec<String>,
}

/// What cannot be asked of a remote object, before anything is measured.
fn refuse_local_only(args: &Args) -> Result<(), CliError> {
    let refused = [
        (args.random.random(), "--pattern random"),
        (args.kvikio.is_some(), "--kvikio"),
        (args.random.kvikio_random.is_some(), "--kvikio-random"),
        (args.compat.is_some(), "--compat"),
        (args.dir.is_some(), "--dir"),
        (args.keep, "--keep"),
        (args.plot.is_some(), "--plot"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(asked, _)| *asked) {
        return Err(CliError::Usage(format!(
            "{flag} applies to a local benchmark file; a remote object is measured by \
             whole-object reads only"
        )));
    }
    if !args.ops.contains(&Op::Read) {
        return Err(CliError::Usage(
            "a remote object is only read: --ops read".into(),
        ));
    }
    Ok(())
}

/// Measure every case `args` asks for on the object at `url`.
pub fn measure_all(args: &Args, url: &str) -> Result<Report, CliError> {
    let command_line = command_line(std::env::args().map(|a| redact_url(&a)));
    let date = machine::utc_now();
    refuse_local_only(args)?;
    if args.threads.is_empty() || args.task_sizes.is_empty() || args.window.is_empty() {
        return Err(CliError::Usage(
            "--threads, --task-size and --window need at least one value".into(),
        ));
    }
    let settings = Settings::global()?;
    let object = RemoteFile::open(url)?;
    let bytes = args.size.min(object.nbytes());
    usize::try_from(bytes)
        .map_err(|_| CliError::Usage(format!("--size {} is too large here", args.size)))?;
    let defaults = Defaults {
        num_threads: settings.num_threads(),
        task_size: settings.task_size(),
        bounce_buffer_size: settings.bounce_buffer_size(),
    };
    let mut notes = vec![NO_REFERENCES.to_string()];
    if args.ops.contains(&Op::Write) {
        notes.push("remote object: writes not measured (kvik-remote only reads)".into());
    }
    let mut machine = Machine::describe(std::path::Path::new("."));
    // No local file: the filesystem and device describe nothing measured.
    machine.filesystem = None;
    machine.device = None;
    notes.extend(machine.busy_note());
    let memories = match args.memory.is_empty() {
        true => vec![MemoryTarget::Host],
        false => args.memory.clone(),
    };
    let mut cases = Vec::new();
    for &memory in &memories {
        let choice = MemoryChoice {
            kind: memory.kind(),
            reason: format!("--memory {memory}"),
        };
        if let (MemoryKind::Device { .. }, Err(e)) = (memory.kind(), gds_core::cuda::probe()) {
            notes.push(format!("{memory}: {}", super::device::unavailable(e)));
            continue;
        }
        let mut buffer: Option<WindowBuffer> = None;
        for &window in &args.window {
            for &task_size in &args.task_sizes {
                for &in_flight in &args.threads {
                    let mut case = RemoteCase {
                        memory,
                        in_flight,
                        task_size,
                        window: window.bytes(),
                        defaults: in_flight == defaults.num_threads
                            && task_size == defaults.task_size
                            && window == Window::All,
                        bytes,
                        requests: None,
                        retries: None,
                        throughput: None,
                        error: None,
                    };
                    let len = window.bytes().unwrap_or(bytes).min(bytes).max(1);
                    if buffer.as_ref().is_none_or(|b| b.len() as u64 != len) {
                        buffer = Some(WindowBuffer::new(&choice, len)?);
                    }
                    let source = RemoteOptions::new()
                        .nbytes(object.nbytes())
                        .max_in_flight(in_flight)
                        .task_size(task_size)
                        .open(url)?;
                    let measured = measure(
                        &Source::Remote(source),
                        buffer.as_mut().expect("allocated above"),
                        bytes,
                        args.reps,
                    );
                    match measured {
                        Ok(m) => {
                            case.throughput = Summary::from_seconds(bytes, &m.seconds);
                            case.requests = Some(m.requests);
                            case.retries = Some(m.retries);
                        }
                        Err(e) => case.error = Some(e.to_string()),
                    }
                    cases.push(case);
                }
            }
        }
    }
    machine.load_average_end = machine::load_average();
    Ok(Report {
        schema: SCHEMA.into(),
        command_line,
        date,
        kvik_version: env!("CARGO_PKG_VERSION").into(),
        machine,
        file: FileInfo {
            path: object.url().into(),
            bytes,
            created: false,
            kept: true,
        },
        reps: args.reps,
        compat_mode: settings.compat_mode().to_string(),
        cold_cache: None,
        defaults,
        cases: vec![],
        references: vec![],
        targets: vec![],
        tuning: vec![],
        notes: vec![],
        random: None,
        remote: Some(RemoteRun {
            url: object.url().to_string(),
            endpoint: object.endpoint_kind().to_string(),
            object_size: object.nbytes(),
            cases,
            notes,
        }),
    })
}

/// A URL argument (`URL` or `--file=URL`) without its query string (a
/// presigned URL's signature is a credential); any other argument as it is.
fn redact_url(arg: &str) -> String {
    let (flag, value) = match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with("--") => (format!("{flag}="), value),
        _ => (String::new(), arg),
    };
    match Location::from(std::ffi::OsString::from(value)) {
        Location::Url(url) => flag + &kvik_remote::redact(&url),
        Location::Path(_) => arg.to_string(),
    }
}

/// What the repetitions of one case produced.
struct Measured {
    seconds: Vec<f64>,
    requests: usize,
    retries: usize,
}

/// One untimed warm-up, then `reps` timed reads of `bytes` from the start
/// of the object, each into `buffer` whole or window by window.
fn measure(
    source: &Source,
    buffer: &mut WindowBuffer,
    bytes: u64,
    reps: u32,
) -> Result<Measured, CliError> {
    let mut out = Measured {
        seconds: Vec::new(),
        requests: 0,
        retries: 0,
    };
    for rep in 0..=reps {
        let start = Instant::now();
        let mut done = 0u64;
        let mut requests = 0;
        let mut retries = 0;
        while done < bytes {
            let n = (bytes - done).min(buffer.len() as u64) as usize;
            let transfer = buffer.read(source, n, done)?;
            if let kvik_remote::SourceReport::Remote(report) = &transfer.report {
                requests += report.requests.len();
                retries += report
                    .requests
                    .iter()
                    .map(|r| r.attempts.len().saturating_sub(1))
                    .sum::<usize>();
            }
            done += n as u64;
        }
        let elapsed = start.elapsed().as_secs_f64();
        if rep > 0 {
            out.seconds.push(elapsed);
            out.requests = requests;
            out.retries += retries;
        }
    }
    Ok(out)
}

/// The readable part of the report for a remote object.
pub fn render(run: &RemoteRun) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\nremote reads of {} ({}, {}; * = the default settings)",
        run.url,
        run.endpoint,
        Size(run.object_size)
    );
    let _ = writeln!(
        o,
        "  {:<9} {:>9} {:>8} {:>9}  {:<24} {:>8} {:>7}",
        "memory", "in flight", "task", "window", "GB/s", "requests", "retries"
    );
    for c in &run.cases {
        let _ = writeln!(
            o,
            "  {:<9} {:>9} {:>8} {:>9}  {:<24} {:>8} {:>7}{}{}",
            c.memory.to_string(),
            c.in_flight,
            Size(c.task_size).to_string(),
            c.window.map_or("all".into(), |w| Size(w).to_string()),
            super::table::figure(&c.throughput),
            c.requests.map_or("-".into(), |n| n.to_string()),
            c.retries.map_or("-".into(), |n| n.to_string()),
            if c.defaults { " *" } else { "" },
            c.error
                .as_ref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default()
        );
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
    fn a_signature_never_reaches_the_saved_command_line() {
        let signed = "https://h/b/k?X-Amz-Algorithm=A&X-Amz-Signature=secret";
        for arg in [signed.to_string(), format!("--file={signed}")] {
            let shown = redact_url(&arg);
            assert!(!shown.contains("secret"), "{shown}");
            assert!(shown.contains("https://h/b/k"), "{shown}");
        }
        assert_eq!(redact_url("--size=1GiB"), "--size=1GiB");
        assert_eq!(redact_url("/data/x?y"), "/data/x?y");
    }
}
