//! The run loop: every combination of memory, workload, bounce buffer,
//! window, task size and thread count (the grid), each timed over its
//! repetitions after an untimed warm-up, then the reference points, the
//! comparisons, the targets and the recommendation.

use std::path::Path;
use std::time::Instant;

use kvik_policy::{AlignedBuffer, FileHandle, PathReport, Settings};

use super::args::{Args, Op, RefSource, Window};
use super::cache::ColdCache;
use super::compare::{cold_notes, compare, noise_notes, targets};
use super::file::{Scratch, prepare_file, sibling};
use super::machine::{self, Machine};
use super::reference::{self, RefContext, dd_refs, fio_refs, htod_refs, kvikio_refs, memcpy_refs};
use super::results::{Case, Defaults, FileInfo, MemoryTarget, Report, SCHEMA, Workload};
use super::stats::Summary;
use super::{device, random, tune};
use crate::CliError;

/// The memory kinds to measure: as asked, else host plus GPU 0 where present.
pub(super) fn memory_targets(asked: &[MemoryTarget]) -> Vec<MemoryTarget> {
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

/// The buffer a case moves its bytes through.
pub(crate) enum Memory<'a> {
    Host(&'a mut AlignedBuffer),
    Device(&'a mut device::DeviceBuffer),
}

/// One transfer of the whole range, into (or from) one buffer or window by
/// window; the path report (of all windows together).
pub(super) fn transfer_once(
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
pub(super) struct Measured {
    seconds: Vec<f64>,
    report: Option<PathReport>,
    resident_max: Option<f64>,
}

/// One measurement's parameters besides the settings and the memory.
pub(super) struct Run<'a> {
    workload: Workload,
    size: u64,
    window: Option<u64>,
    reps: u32,
    cold: Option<&'a ColdCache>,
}

/// One untimed warm-up, then `reps` timed transfers. Cold reads empty the
/// cache before each; writes truncate the target before each (so every
/// repetition allocates the same blocks) and include the fdatasync.
pub(super) fn measure(
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
            let resident = crate::page_cache::residency(path, 0, size);
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
pub(super) fn grid(
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
pub(super) fn count_steps(args: &Args, memories: &[MemoryTarget], workloads: &[Workload]) -> u64 {
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

/// Run every measurement `args` asks for.
pub(super) fn measure_all(args: &Args) -> Result<Report, CliError> {
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
    let base = crate::args::Overrides {
        compat: args.compat,
        ..Default::default()
    }
    .settings()?;
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
    let mut host = crate::window::host_buffer(args.size)?;
    crate::write::fill_random(&mut host, 0, 0);
    let file = prepare_file(args, &host)?;
    let scratch = Scratch(sibling(&file.path, "write"));
    let mut machine = Machine::describe(&file.path);
    let mut notes: Vec<String> = machine.busy_note().into_iter().collect();

    let steps = count_steps(args, &memories, &workloads);
    let bar = crate::progress::bar(steps, "bench", args.json);
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
        remote: None,
    };
    if let Some(svg) = &args.plot {
        super::save_plot(svg, &report)?;
    }
    Ok(report)
}

pub(super) fn case_settings(
    base: &Settings,
    threads: usize,
    task_size: u64,
    bounce: Option<u64>,
) -> Result<Settings, CliError> {
    let mut s = base.clone();
    s.set_num_threads(threads)?;
    s.set_task_size(task_size)?;
    if let Some(b) = bounce {
        s.set_bounce_buffer_size(b)?;
    }
    Ok(s)
}

/// The command line as one line (arguments with spaces quoted).
pub(super) fn command_line(args: impl Iterator<Item = String>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn command_lines_name_the_program_and_quote_spaces() {
        let line = command_line(
            ["/usr/bin/kvik", "bench", "--dir", "/my dir"]
                .into_iter()
                .map(String::from),
        );
        assert_eq!(line, "kvik bench --dir '/my dir'");
    }
}
