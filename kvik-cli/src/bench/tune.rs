//! Settings from data: which thread count, task size and bounce buffer size
//! this run's figures recommend, and why.
//!
//! The rule, per memory kind:
//! 1. Consider the configurations (threads, task size, bounce buffer) that
//!    were measured, successfully, in every workload of the run (read hot,
//!    read cold, write), with the whole range in one buffer (a reused
//!    window is the tools' job, not an application's; it is used only when
//!    nothing else was measured).
//! 2. A configuration's share of a workload is its median divided by the
//!    best median any configuration reached there — or 1.0 when its
//!    repetitions overlap the best's (its fastest repetition beats the
//!    best's slowest): on a shared machine such figures cannot be told
//!    apart. Its score is its worst share: 1.0 means "as fast as the
//!    fastest everywhere, within the noise", 0.8 "within 20% everywhere".
//! 3. Among the configurations within [`TOLERANCE`] of the top score, take
//!    the fewest threads, then the smallest task, then the smallest bounce
//!    buffer: more threads and bigger buffers cost memory and cores that
//!    the application could use, so they must earn their place.

use crate::bench::{Case, MemoryTarget, Workload};

/// Scores this close to the top are a tie (repetitions on a shared machine
/// differ by more than this).
pub const TOLERANCE: f64 = 0.03;

pub const RULE: &str = "score = the worst, over the workloads measured, of median / best median \
    in that workload (1.0 where the repetitions overlap the best's); among configurations within \
    0.03 of the top score: fewest threads, then smallest task, then smallest bounce buffer";

/// How the chosen configuration did in one workload.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct WorkloadFit {
    #[serde(flatten)]
    pub workload: Workload,
    pub median: f64,
    pub best_median: f64,
    /// The configuration that reached `best_median`.
    pub best: String,
}

/// The settings one memory kind's figures recommend.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Recommendation {
    pub memory: MemoryTarget,
    pub threads: usize,
    pub task_size: u64,
    pub bounce_buffer_size: Option<u64>,
    pub score: f64,
    pub workloads: Vec<WorkloadFit>,
    /// Configurations measured in every workload.
    pub candidates: usize,
    pub rule: String,
}

type Config = (usize, u64, Option<u64>);

fn config(c: &Case) -> Config {
    (c.threads, c.task_size, c.bounce_buffer_size)
}

/// `2 threads, 4 MiB tasks`.
pub fn config_label((threads, task, bounce): Config) -> String {
    let mut s = format!(
        "{threads} thread{}, {} tasks",
        if threads == 1 { "" } else { "s" },
        kvik_policy::Size(task)
    );
    if let Some(b) = bounce {
        s.push_str(&format!(", {} bounce buffers", kvik_policy::Size(b)));
    }
    s
}

/// One recommendation per memory kind with successful figures.
pub fn recommend(cases: &[Case]) -> Vec<Recommendation> {
    let mut memories: Vec<MemoryTarget> = cases.iter().map(|c| c.memory).collect();
    memories.sort();
    memories.dedup();
    memories
        .into_iter()
        .filter_map(|m| recommend_for(cases, m))
        .collect()
}

fn recommend_for(cases: &[Case], memory: MemoryTarget) -> Option<Recommendation> {
    let measured = |whole_only: bool| -> Vec<&Case> {
        cases
            .iter()
            .filter(|c| c.memory == memory && c.median().is_some())
            .filter(|c| !whole_only || c.window.is_none())
            .collect()
    };
    let mut ok = measured(true);
    if ok.is_empty() {
        ok = measured(false);
    }
    let mut workloads: Vec<Workload> = ok.iter().map(|c| c.workload).collect();
    workloads.sort();
    workloads.dedup();
    let summary = |cfg: Config, w: Workload| {
        ok.iter()
            .find(|c| config(c) == cfg && c.workload == w)
            .and_then(|c| c.throughput.as_ref())
    };
    let median = |cfg: Config, w: Workload| summary(cfg, w).map(|s| s.median);
    // The best median, its slowest repetition and its configuration, per workload.
    let best: Vec<(Workload, f64, f64, Config)> = workloads
        .iter()
        .filter_map(|&w| {
            ok.iter()
                .filter(|c| c.workload == w)
                .max_by(|a, b| {
                    a.median()
                        .unwrap_or(0.0)
                        .total_cmp(&b.median().unwrap_or(0.0))
                })
                .and_then(|c| {
                    let s = c.throughput.as_ref()?;
                    Some((w, s.median, s.min, config(c)))
                })
        })
        .collect();
    let mut configs: Vec<Config> = ok.iter().map(|c| config(c)).collect();
    configs.sort();
    configs.dedup();
    let scored: Vec<(Config, f64)> = configs
        .into_iter()
        .filter_map(|cfg| {
            let mut score = f64::INFINITY;
            for &(w, best_median, best_min, _) in &best {
                let s = summary(cfg, w)?;
                // Repetitions that overlap the best's are a tie: the
                // machine cannot tell them apart.
                let share = if s.max >= best_min || best_median <= 0.0 {
                    1.0
                } else {
                    s.median / best_median
                };
                score = score.min(share);
            }
            Some((cfg, score))
        })
        .collect();
    let top = scored
        .iter()
        .map(|(_, s)| *s)
        .fold(f64::NEG_INFINITY, f64::max);
    // `configs` is sorted by (threads, task, bounce): the first within the
    // tolerance is the cheapest.
    let (choice, score) = scored
        .iter()
        .find(|(_, s)| *s >= top - TOLERANCE)
        .copied()?;
    Some(Recommendation {
        memory,
        threads: choice.0,
        task_size: choice.1,
        bounce_buffer_size: choice.2,
        score,
        workloads: best
            .iter()
            .map(|&(w, best_median, _, best_cfg)| WorkloadFit {
                workload: w,
                median: median(choice, w).unwrap_or(0.0),
                best_median,
                best: config_label(best_cfg),
            })
            .collect(),
        candidates: scored.len(),
        rule: RULE.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::Summary;

    fn case(workload: Workload, threads: usize, task_mib: u64, gbps: f64) -> Case {
        Case {
            memory: MemoryTarget::Host,
            workload,
            threads,
            task_size: task_mib << 20,
            bounce_buffer_size: None,
            window: None,
            defaults: false,
            bytes: 1 << 30,
            backend: None,
            direct_io: None,
            page_cache_resident_max: None,
            throughput: Summary::from_rates(vec![gbps * 1e9]),
            error: None,
            vs_best_tool: None,
            vs_ceiling: None,
            vs_kvikio: None,
        }
    }

    #[test]
    fn the_cheapest_configuration_within_the_tolerance_wins() {
        let hot = Workload::READ_HOT;
        let cases = vec![
            case(hot, 1, 4, 6.0),
            case(hot, 2, 1, 10.0),
            case(hot, 2, 4, 10.2),
            case(hot, 4, 4, 10.25),
        ];
        let r = &recommend(&cases)[0];
        // 2 threads × 1 MiB scores 10.0 / 10.25 = 0.976: within 0.03 of 1.0.
        assert_eq!((r.threads, r.task_size), (2, 1 << 20));
        assert!((r.score - 10.0 / 10.25).abs() < 1e-9);
        assert_eq!(r.workloads[0].best, "4 threads, 4 MiB tasks");
        assert_eq!(r.candidates, 4);
    }

    #[test]
    fn overlapping_repetitions_are_a_tie() {
        let hot = Workload::READ_HOT;
        let mut noisy_best = case(hot, 4, 4, 12.0);
        noisy_best.throughput = Summary::from_rates(vec![8e9, 12e9, 16e9]);
        let mut cheap = case(hot, 1, 4, 9.0);
        cheap.throughput = Summary::from_rates(vec![8.5e9, 9e9, 9.5e9]);
        let mut clearly_slower = case(hot, 1, 1, 5.0);
        clearly_slower.throughput = Summary::from_rates(vec![4.9e9, 5e9, 5.1e9]);
        let r = &recommend(&[noisy_best, cheap, clearly_slower])[0];
        // 1 thread × 4 MiB reaches 9.5 ≥ the best's slowest 8: a tie, and cheaper.
        assert_eq!((r.threads, r.task_size), (1, 4 << 20));
        assert_eq!(r.score, 1.0);
    }

    #[test]
    fn the_worst_workload_decides() {
        let (hot, cold) = (Workload::READ_HOT, Workload::READ_COLD);
        let cases = vec![
            // Fastest hot, poor cold.
            case(hot, 2, 1, 10.0),
            case(cold, 2, 1, 1.0),
            // A little slower hot, much better cold.
            case(hot, 2, 16, 9.0),
            case(cold, 2, 16, 2.0),
        ];
        let r = &recommend(&cases)[0];
        assert_eq!(r.task_size, 16 << 20);
        assert!((r.score - 0.9).abs() < 1e-9);
        assert_eq!(r.workloads.len(), 2);
    }

    #[test]
    fn configurations_missing_a_workload_or_failed_are_not_candidates() {
        let (hot, cold) = (Workload::READ_HOT, Workload::READ_COLD);
        let mut failed = case(cold, 4, 4, 0.0);
        failed.throughput = None;
        failed.error = Some("boom".into());
        let cases = vec![
            case(hot, 4, 4, 20.0),
            failed,
            case(hot, 1, 4, 5.0),
            case(cold, 1, 4, 1.0),
        ];
        let r = &recommend(&cases)[0];
        assert_eq!(r.threads, 1);
        assert_eq!(r.candidates, 1);
        // Scored against the best hot figure, even from a non-candidate.
        assert!((r.score - 0.25).abs() < 1e-9);
        assert!(recommend(&[]).is_empty());
    }
}
