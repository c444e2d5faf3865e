//! Figures against each other: the best reference of each kind, every
//! ratio, the throughput targets, and notes on figures not to trust.

use super::cache::ColdCache;
use super::stats::{self, ratio};
use super::{Case, MemoryTarget, RefKind, Reference, Target, Workload};

/// The best tool figure (dd, fio) for `workload`, any thread count.
pub fn best_tool(refs: &[Reference], workload: Workload) -> Option<&Reference> {
    best(
        refs.iter()
            .filter(|r| r.kind == RefKind::Tool && r.workload == workload),
    )
}

/// The ceiling for reads into `memory` from a page-cached file: the fastest
/// memcpy (host) or host→device copy (that GPU).
pub fn ceiling(refs: &[Reference], memory: MemoryTarget) -> Option<&Reference> {
    best(refs.iter().filter(|r| {
        r.kind == RefKind::Ceiling && r.memory == memory && r.workload == Workload::READ_HOT
    }))
}

/// KvikIO's figure for the same memory and thread count (same task size
/// when KvikIO measured it, else any).
pub fn kvikio_peer<'a>(refs: &'a [Reference], case: &Case) -> Option<&'a Reference> {
    let peers = || {
        refs.iter().filter(|r| {
            r.kind == RefKind::Peer
                && r.memory == case.memory
                && r.workload == case.workload
                && r.threads == case.threads
        })
    };
    best(peers().filter(|r| r.block_size == Some(case.task_size))).or_else(|| best(peers()))
}

fn best<'a>(refs: impl Iterator<Item = &'a Reference>) -> Option<&'a Reference> {
    refs.filter(|r| r.median().is_some()).max_by(|a, b| {
        a.median()
            .unwrap_or(0.0)
            .total_cmp(&b.median().unwrap_or(0.0))
    })
}

/// Fill in every ratio.
pub fn compare(cases: &mut [Case], refs: &mut [Reference]) {
    for case in cases.iter_mut() {
        let Some(median) = case.median() else {
            continue;
        };
        case.vs_best_tool = ratio(
            median,
            best_tool(refs, case.workload).and_then(|r| r.median()),
        );
        if case.workload == Workload::READ_HOT {
            case.vs_ceiling = ratio(median, ceiling(refs, case.memory).and_then(|r| r.median()));
        }
        case.vs_kvikio = ratio(median, kvikio_peer(refs, case).and_then(|r| r.median()));
    }
    let best_by_workload: Vec<(Workload, Option<f64>)> = refs
        .iter()
        .map(|r| {
            (
                r.workload,
                best_tool(refs, r.workload).and_then(|b| b.median()),
            )
        })
        .collect();
    for (r, (_, best)) in refs.iter_mut().zip(best_by_workload) {
        if let Some(m) = r.median() {
            r.vs_best_tool = ratio(m, best);
        }
    }
}

/// The case the throughput targets judge: the default settings when measured,
/// else the fastest configuration; the whole range into one buffer.
fn judged(cases: &[Case], memory: MemoryTarget, workload: Workload) -> Option<&Case> {
    let candidates = || {
        cases.iter().filter(move |c| {
            c.memory == memory
                && c.workload == workload
                && c.window.is_none()
                && c.median().is_some()
        })
    };
    candidates().find(|c| c.defaults).or_else(|| {
        candidates().max_by(|a, b| {
            a.median()
                .unwrap_or(0.0)
                .total_cmp(&b.median().unwrap_or(0.0))
        })
    })
}

fn case_name(c: &Case) -> String {
    if c.defaults {
        format!("{} (defaults)", c.label())
    } else {
        format!("{} (fastest)", c.label())
    }
}

fn ref_name(r: &Reference) -> String {
    format!(
        "{}, {} thread{}",
        r.name,
        r.threads,
        if r.threads == 1 { "" } else { "s" }
    )
}

fn target(name: &str, ours: &Case, reference: &Reference, goal: f64) -> Option<Target> {
    let (o, r) = (ours.median()?, reference.median()?);
    let ratio = ratio(o, Some(r))?;
    Some(Target {
        name: name.to_string(),
        ours: case_name(ours),
        ours_bytes_per_second: o,
        reference: ref_name(reference),
        reference_bytes_per_second: r,
        ratio,
        goal,
        met: ratio >= goal,
    })
}

/// The throughput targets that this run's figures can judge.
pub fn targets(cases: &[Case], refs: &[Reference]) -> Vec<Target> {
    let mut out = Vec::new();
    if let (Some(ours), Some(tool)) = (
        judged(cases, MemoryTarget::Host, Workload::READ_HOT),
        best_tool(refs, Workload::READ_HOT),
    ) {
        out.extend(target(
            "host memory, page-cached file: ≥ 1.0× the best of dd / fio",
            ours,
            tool,
            1.0,
        ));
    }
    // The tools' own job: a small buffer reused for the whole file.
    let streaming = cases
        .iter()
        .filter(|c| {
            c.memory == MemoryTarget::Host && c.workload == Workload::READ_HOT && c.window.is_some()
        })
        .filter(|c| c.median().is_some())
        .max_by(|a, b| {
            a.median()
                .unwrap_or(0.0)
                .total_cmp(&b.median().unwrap_or(0.0))
        });
    if let (Some(ours), Some(tool)) = (streaming, best_tool(refs, Workload::READ_HOT)) {
        out.extend(target(
            "host memory, page-cached file, reused window as dd / fio do: ≥ 1.0× their best",
            ours,
            tool,
            1.0,
        ));
    }
    let fio_direct = best(refs.iter().filter(|r| {
        r.kind == RefKind::Tool
            && r.workload == Workload::READ_COLD
            && r.direct
            && r.name.starts_with("fio")
    }));
    if let (Some(ours), Some(fio)) = (
        judged(cases, MemoryTarget::Host, Workload::READ_COLD),
        fio_direct,
    ) {
        out.extend(target(
            "cold cache: ≥ 0.95× fio's best O_DIRECT sequential read",
            ours,
            fio,
            0.95,
        ));
    }
    let devices: Vec<MemoryTarget> = {
        let mut d: Vec<MemoryTarget> = cases
            .iter()
            .map(|c| c.memory)
            .filter(|m| matches!(m, MemoryTarget::Device(_)))
            .collect();
        d.sort();
        d.dedup();
        d
    };
    for memory in devices {
        if let (Some(ours), Some(ceiling)) = (
            judged(cases, memory, Workload::READ_HOT),
            ceiling(refs, memory),
        ) {
            out.extend(target(
                &format!("{memory}, page-cached file: ≥ 0.9× the pinned host→device ceiling"),
                ours,
                ceiling,
                0.9,
            ));
        }
        let kvikio_defaults = refs
            .iter()
            .find(|r| r.kind == RefKind::Peer && r.memory == memory && r.threads == 1);
        let ours_defaults = cases.iter().find(|c| {
            c.memory == memory
                && c.workload == Workload::READ_HOT
                && c.defaults
                && c.median().is_some()
        });
        if let (Some(ours), Some(k)) = (ours_defaults, kvikio_defaults) {
            out.extend(target(
                &format!("{memory}: our defaults ≥ 6× KvikIO's defaults (1 thread)"),
                ours,
                k,
                6.0,
            ));
        }
        let mut threads: Vec<usize> = refs
            .iter()
            .filter(|r| r.kind == RefKind::Peer && r.memory == memory)
            .map(|r| r.threads)
            .collect();
        threads.sort_unstable();
        threads.dedup();
        for n in threads {
            // Our fastest configuration at this thread count.
            let ours = cases
                .iter()
                .filter(|c| {
                    c.memory == memory && c.workload == Workload::READ_HOT && c.threads == n
                })
                .filter(|c| c.median().is_some())
                .max_by(|a, b| {
                    a.median()
                        .unwrap_or(0.0)
                        .total_cmp(&b.median().unwrap_or(0.0))
                });
            if let Some(ours) = ours {
                if let Some(peer) = kvikio_peer(refs, ours) {
                    let mut t = target(
                        &format!("{memory}, {n} threads: ≥ 1.0× KvikIO"),
                        ours,
                        peer,
                        1.0,
                    );
                    if let Some(t) = t.as_mut() {
                        t.ours = format!("{} (fastest at {} threads)", ours.label(), ours.threads);
                    }
                    out.extend(t);
                }
            }
        }
    }
    out
}

/// Notes on figures whose repetitions disagree.
pub fn noise_notes(cases: &[Case], refs: &[Reference]) -> Vec<String> {
    let noisy = cases
        .iter()
        .filter(|c| c.throughput.as_ref().is_some_and(|s| s.noisy))
        .count()
        + refs
            .iter()
            .filter(|r| r.throughput.as_ref().is_some_and(|s| s.noisy))
            .count();
    if noisy == 0 {
        return vec![];
    }
    vec![format!(
        "{noisy} figure(s) marked ~ spread more than {:.0}% (max − min over the median): \
         treat their medians as rough",
        stats::NOISY_SPREAD * 100.0
    )]
}

/// Notes on cold runs that found the file still cached.
pub fn cold_notes(cases: &[Case], cold: &ColdCache) -> Vec<String> {
    let warm: Vec<String> = cases
        .iter()
        .filter(|c| c.workload == Workload::READ_COLD)
        .filter(|c| c.page_cache_resident_max.is_some_and(|r| r > 0.05))
        .map(|c| {
            format!(
                "{} ({})",
                c.label(),
                crate::report::percent(c.page_cache_resident_max)
            )
        })
        .collect();
    if warm.is_empty() {
        return vec![];
    }
    vec![format!(
        "cold-cache runs found the file still cached after {}: {}",
        cold.method,
        warm.join("; ")
    )]
}
