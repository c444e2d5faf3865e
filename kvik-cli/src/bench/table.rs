//! The readable report: a header saying what was measured where and how,
//! our figures, the reference points, the targets, the recommendation.

use std::fmt::Write as _;

use kvik_policy::Size;

use super::stats::{Summary, gbps, times};
use super::{Report, tune};

/// `11.20 [10.90–11.41]`, with `~` when the repetitions disagree.
pub(super) fn figure(s: &Option<Summary>) -> String {
    match s {
        Some(s) => format!(
            "{:>6} [{}–{}]{}",
            gbps(s.median),
            gbps(s.min),
            gbps(s.max),
            if s.noisy { " ~" } else { "" }
        ),
        None => "failed".into(),
    }
}

fn size_or_dash(s: Option<u64>) -> String {
    s.map_or("-".into(), |b| Size(b).to_string())
}

pub fn render(r: &Report) -> String {
    let mut o = header(r);
    render_body(&mut o, r);
    o
}

/// What was measured where and how.
pub(super) fn header(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "kvik bench {} (kvik {})", r.date, r.kvik_version);
    let _ = writeln!(o, "  command   {}", r.command_line);
    let _ = writeln!(o, "  machine   {}", r.machine.summary());
    let _ = writeln!(
        o,
        "  file      {}, {}{}",
        r.file.path.display(),
        Size(r.file.bytes),
        match (r.remote.is_some(), r.file.created, r.file.kept) {
            (true, _, _) => " (a remote object, read through kvik-remote)",
            (_, true, true) => " (created with random bytes, kept)",
            (_, true, false) => " (created with random bytes, removed afterwards)",
            _ => " (existing file)",
        }
    );
    let _ = writeln!(
        o,
        "  method    {} timed repetitions after 1 untimed warm-up; GB/s (10^9 B/s) as \
         median [min–max]; ~ = spread over {:.0}%",
        r.reps,
        super::stats::NOISY_SPREAD * 100.0
    );
    if let Some(cold) = &r.cold_cache {
        let _ = writeln!(o, "  cold      {}", cold.method);
    }
    if r.remote.is_some() {
        let _ = writeln!(
            o,
            "  defaults  {} GETs in flight (num_threads), {} tasks (one ranged GET each)",
            r.defaults.num_threads,
            Size(r.defaults.task_size),
        );
    } else {
        let _ = writeln!(
            o,
            "  defaults  {} threads (cores, at most 16), {} tasks, {} bounce buffers; compat {}",
            r.defaults.num_threads,
            Size(r.defaults.task_size),
            Size(r.defaults.bounce_buffer_size),
            r.compat_mode
        );
    }

    o
}

/// Our figures, the references, the targets, the recommendation, notes.
fn render_body(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nours (* = the default settings)");
    let _ = writeln!(
        o,
        "  {:<9} {:<10} {:>7} {:>8} {:>8} {:>8}  {:<24} {:>7} {:>9} {:>8}  backend",
        "memory",
        "workload",
        "threads",
        "task",
        "bounce",
        "window",
        "GB/s",
        "× tool",
        "× ceiling",
        "× KvikIO"
    );
    for c in &r.cases {
        let _ = writeln!(
            o,
            "{} {:<9} {:<10} {:>7} {:>8} {:>8} {:>8}  {:<24} {:>7} {:>9} {:>8}  {}",
            if c.defaults { "*" } else { " " },
            c.memory.to_string(),
            c.workload.to_string(),
            c.threads,
            Size(c.task_size).to_string(),
            size_or_dash(c.bounce_buffer_size),
            c.window.map_or("all".into(), |w| Size(w).to_string()),
            figure(&c.throughput),
            times(c.vs_best_tool),
            times(c.vs_ceiling),
            times(c.vs_kvikio),
            match (&c.error, &c.backend) {
                (Some(e), _) => format!("error: {e}"),
                (None, Some(b)) => b.clone(),
                (None, None) => "-".into(),
            }
        );
    }

    if !r.references.is_empty() {
        let _ = writeln!(
            o,
            "\nreference points (× tool = ratio to the best dd / fio figure of the workload)"
        );
        let _ = writeln!(
            o,
            "  {:<10} {:<28} {:<8} {:>7} {:>8}  {:<24} {:>7}",
            "workload", "reference", "kind", "threads", "block", "GB/s", "× tool"
        );
        for x in &r.references {
            let kind = match x.kind {
                super::RefKind::Tool => "tool",
                super::RefKind::Ceiling => "ceiling",
                super::RefKind::Peer => "peer",
            };
            let _ = writeln!(
                o,
                "  {:<10} {:<28} {:<8} {:>7} {:>8}  {:<24} {:>7}{}",
                x.workload.to_string(),
                format!("{} ({})", x.name, x.memory),
                kind,
                x.threads,
                size_or_dash(x.block_size),
                figure(&x.throughput),
                times(x.vs_best_tool),
                x.error
                    .as_ref()
                    .map(|e| format!("  error: {e}"))
                    .unwrap_or_default()
            );
        }
    }

    if !r.targets.is_empty() {
        let _ = writeln!(o, "\ntargets (issue 7)");
        write_targets(o, &r.targets);
    }

    if !r.tuning.is_empty() {
        let _ = writeln!(o, "\ntuning ({})", tune::RULE);
        for t in &r.tuning {
            let _ = writeln!(
                o,
                "  {}: {} (score {:.2} over {} configuration{})",
                t.memory,
                tune::config_label((t.threads, t.task_size, t.bounce_buffer_size)),
                t.score,
                t.candidates,
                if t.candidates == 1 { "" } else { "s" }
            );
            for w in &t.workloads {
                let _ = writeln!(
                    o,
                    "    {:<10} {} GB/s; the best, {} GB/s, with {}",
                    w.workload.to_string(),
                    gbps(w.median),
                    gbps(w.best_median),
                    w.best
                );
            }
        }
    }

    if !r.notes.is_empty() {
        let _ = writeln!(o, "\nnotes");
        for n in &r.notes {
            let _ = writeln!(o, "  - {n}");
        }
    }
}

/// One block per target: met or not, the ratio, and the two figures.
pub(super) fn write_targets(o: &mut String, targets: &[super::Target]) {
    for t in targets {
        let _ = writeln!(
            o,
            "  [{}] {}: {:.2}× (goal {:.2}×)\n        {} {} GB/s vs {} {} GB/s",
            if t.met { "met" } else { "NOT met" },
            t.name,
            t.ratio,
            t.goal,
            t.ours,
            gbps(t.ours_bytes_per_second),
            t.reference,
            gbps(t.reference_bytes_per_second)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_every_figure_with_its_ratio() {
        let text = render(&super::super::sample_report());
        let defaults_row = text
            .lines()
            .find(|l| l.starts_with('*'))
            .expect("a defaults row");
        assert!(
            defaults_row.contains("11.00 [10.45–11.55]"),
            "{defaults_row}"
        );
        assert!(defaults_row.contains("0.92×"), "{defaults_row}");
        assert!(defaults_row.contains("0.55×"), "{defaults_row}");
        let failed = text
            .lines()
            .find(|l| l.contains("fio io_uring O_DIRECT"))
            .unwrap();
        assert!(
            failed.contains("failed") && failed.contains("error: fio failed"),
            "{failed}"
        );
        assert!(
            text.contains("[NOT met] host memory, page-cached file"),
            "{text}"
        );
        assert!(text.contains("\ntuning ("));
    }
}
