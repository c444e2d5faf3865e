//! `gds_core::schedule` against cuFile itself: the 2,252 cases in
//! `tests/data/cufile_work_units.csv`, measured on libcufile 1.15 (compat
//! mode, per-GPU `n_total_reads` for one `cuFileRead`).

use std::io::Write as _;

use cufile_config::ExecutionConfig;
use gds_core::schedule::{self, Registration, Request, UNREGISTERED_HEAD};

const VECTORS: &str = include_str!("data/cufile_work_units.csv");
const HEADER: &str = "max_io_threads,max_request_parallelism,min_io_threshold_size_kb,\
                      per_buffer_cache_size_kb,parallel_io,registered,file_offset,size,work_units";
const CASES: usize = 2252;

/// Cases the model is known not to reproduce, as (line number, reason).
/// None today: a new mismatch fails the test until it is explained here.
const KNOWN_MISMATCHES: &[(usize, &str)] = &[];

#[derive(Debug, Clone, Copy)]
struct Case {
    line: usize,
    execution: ExecutionConfig,
    per_buffer_cache_size_kb: u64,
    registration: Registration,
    file_offset: u64,
    size: u64,
    work_units: u64,
}

fn cases() -> Vec<Case> {
    let mut lines = VECTORS.lines().enumerate();
    let (_, header) = lines.next().expect("a header");
    assert_eq!(header, HEADER);
    lines
        .map(|(index, text)| {
            let line = index + 1;
            let fields: Vec<&str> = text.split(',').collect();
            assert_eq!(fields.len(), 9, "line {line}: {text}");
            let number = |i: usize| -> u64 {
                fields[i]
                    .parse()
                    .unwrap_or_else(|e| panic!("line {line} field {i}: {e}: {text}"))
            };
            let parallel_io = match fields[4] {
                "true" => true,
                "false" => false,
                other => panic!("line {line}: parallel_io {other:?}"),
            };
            Case {
                line,
                execution: ExecutionConfig {
                    // Not a column: the queue depth does not enter the model.
                    max_io_queue_depth: 128,
                    max_io_threads: number(0),
                    parallel_io,
                    min_io_threshold_size_kb: number(2),
                    max_request_parallelism: number(1),
                },
                per_buffer_cache_size_kb: number(3),
                registration: match number(5) {
                    0 => Registration::Unregistered,
                    1 => Registration::Registered,
                    other => panic!("line {line}: registered {other}"),
                },
                file_offset: number(6),
                size: number(7),
                work_units: number(8),
            }
        })
        .collect()
}

fn predicted(case: &Case) -> u64 {
    let request = Request {
        file_offset: case.file_offset,
        buffer_offset: 0,
        size: case.size,
    };
    schedule::plan(request, &case.execution, case.registration).len() as u64
}

/// The settings as a hashable key.
fn settings(case: &Case) -> (u64, u64, bool, u64, u64) {
    let e = &case.execution;
    (
        e.max_io_threads,
        e.max_request_parallelism,
        e.parallel_io,
        e.min_io_threshold_size_kb,
        case.per_buffer_cache_size_kb,
    )
}

fn describe(case: &Case) -> String {
    let e = &case.execution;
    format!(
        "line {}: threads {} parallelism {} threshold {} KiB cache {} KiB parallel_io {} {:?} \
         offset {} size {}",
        case.line,
        e.max_io_threads,
        e.max_request_parallelism,
        e.min_io_threshold_size_kb,
        case.per_buffer_cache_size_kb,
        e.parallel_io,
        case.registration,
        case.file_offset,
        case.size
    )
}

#[test]
fn the_model_reproduces_every_measured_case() {
    let cases = cases();
    assert_eq!(cases.len(), CASES, "the vectors file changed");
    let mismatches: Vec<(&Case, u64)> = cases
        .iter()
        .map(|c| (c, predicted(c)))
        .filter(|(c, p)| *p != c.work_units)
        .collect();
    let matched = cases.len() - mismatches.len();
    let mut stderr = std::io::stderr();
    let _ = writeln!(
        stderr,
        "cufile_work_units.csv: {matched}/{} cases match ({:.2}%)",
        cases.len(),
        100.0 * matched as f64 / cases.len() as f64
    );
    let mut unexplained = Vec::new();
    for (case, got) in &mismatches {
        let known = KNOWN_MISMATCHES.iter().find(|(line, _)| *line == case.line);
        let _ = writeln!(
            stderr,
            "  mismatch {}: measured {}, model {got} ({})",
            describe(case),
            case.work_units,
            known.map_or("UNEXPLAINED", |(_, why)| why)
        );
        if known.is_none() {
            unexplained.push(case.line);
        }
    }
    assert!(
        unexplained.is_empty(),
        "unexplained mismatches on lines {unexplained:?}"
    );
    // A known mismatch that now matches must leave the list.
    for (line, _) in KNOWN_MISMATCHES {
        assert!(
            mismatches.iter().any(|(c, _)| c.line == *line),
            "line {line} is listed as a known mismatch but now matches"
        );
    }
}

/// The plain threshold rule for unregistered buffers, `min(P, ceil((size −
/// 1 MiB) / T))`, is what the model reduces to when `T >= 1 MiB`; the vectors
/// contradict it in exactly six cases (T = 512 KiB, unregistered, 2.5 MiB <
/// size <= 4 MiB), which the model explains by widening the units to
/// `size / P` first. This pins both facts, so the data keeps justifying the
/// rule.
#[test]
fn the_vectors_separate_the_model_from_the_plain_threshold_rule() {
    let plain_rule = |c: &Case| -> u64 {
        let e = &c.execution;
        let parallelism = e.max_request_parallelism.min(e.max_io_threads);
        if !e.parallel_io || parallelism == 0 {
            return 1;
        }
        let threshold = e.min_io_threshold_size_kb * 1024;
        let counted = match c.registration {
            Registration::Registered => c.size,
            Registration::Unregistered => c.size.saturating_sub(UNREGISTERED_HEAD),
        };
        counted.div_ceil(threshold).clamp(1, parallelism)
    };
    let cases = cases();
    let contradicted: Vec<&Case> = cases
        .iter()
        .filter(|c| plain_rule(c) != c.work_units)
        .collect();
    let described: Vec<String> = contradicted.iter().map(|c| describe(c)).collect();
    assert_eq!(contradicted.len(), 6, "{described:#?}");
    for c in &contradicted {
        assert_eq!(c.execution.min_io_threshold_size_kb, 512, "{}", describe(c));
        assert_eq!(c.registration, Registration::Unregistered);
        assert!(
            c.size > 5 * (1 << 19) && c.size <= 4 << 20,
            "{}",
            describe(c)
        );
        assert_eq!(c.work_units, 3);
        assert_eq!(predicted(c), 3);
    }
}

/// The model ignores `per_buffer_cache_size_kb` because the measurements do:
/// every case measured with 4096 KiB has a twin with 1024 KiB and the same count.
#[test]
fn per_buffer_cache_size_does_not_change_the_count() {
    let cases = cases();
    let by_key: std::collections::HashMap<_, u64> = cases
        .iter()
        .map(|c| {
            (
                (settings(c), c.registration, c.file_offset, c.size),
                c.work_units,
            )
        })
        .collect();
    let large_cache: Vec<&Case> = cases
        .iter()
        .filter(|c| c.per_buffer_cache_size_kb == 4096)
        .collect();
    assert!(large_cache.len() > 400, "{}", large_cache.len());
    for c in large_cache {
        let mut twin = (settings(c), c.registration, c.file_offset, c.size);
        twin.0.4 = 1024;
        assert_eq!(by_key.get(&twin), Some(&c.work_units), "{}", describe(c));
    }
}

/// Neither does the file offset: cases at offsets 100 and 4096 match their
/// twins at offset 0.
#[test]
fn the_file_offset_does_not_change_the_count() {
    let cases = cases();
    let at_zero: std::collections::HashMap<_, u64> = cases
        .iter()
        .filter(|c| c.file_offset == 0)
        .map(|c| ((settings(c), c.registration, c.size), c.work_units))
        .collect();
    let offset: Vec<&Case> = cases.iter().filter(|c| c.file_offset != 0).collect();
    assert!(offset.len() > 300, "{}", offset.len());
    for c in offset {
        let twin = (settings(c), c.registration, c.size);
        assert_eq!(at_zero.get(&twin), Some(&c.work_units), "{}", describe(c));
    }
}
