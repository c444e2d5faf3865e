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
//! It then recommends settings from the data (`tune`), checks the throughput
//! targets (bench/README.md), and can draw the figures (`--plot out.svg`).
//!
//! Only the transfer is timed: buffers are allocated and faulted in before
//! any clock starts (page faults are the allocation's cost, not the read's),
//! the file is opened (and routed) outside the timing, and for cold-cache
//! repetitions the cache is emptied before the clock starts.

mod args;
mod cache;
mod compare;
mod device;
mod file;
mod machine;
mod measure;
mod plot;
mod random;
mod random_plot;
mod reference;
mod remote;
mod results;
mod saved;
mod stats;
mod table;
mod tune;

use std::path::Path;

use crate::CliError;
use crate::args::Location;
use crate::error::print_json;

pub use args::{Args, Window};
pub(crate) use measure::Memory;
#[cfg(test)]
use results::sample_report;
pub use results::{Case, MemoryTarget, RefKind, Reference, Report, Target, Workload};

pub fn run(args: &Args) -> Result<(), CliError> {
    let report = match (&args.from, &args.file) {
        (Some(path), _) => saved::load(path)?,
        (None, Some(Location::Url(url))) => remote::measure_all(args, url)?,
        (None, _) => measure::measure_all(args)?,
    };
    if let Some(path) = &args.save {
        saved::save(path, &report)?;
    }
    if let Some(svg) = &args.plot {
        save_plot(svg, &report)?;
    }
    if args.json {
        print_json(&report)?;
    } else {
        if !report.cases.is_empty() || (report.random.is_none() && report.remote.is_none()) {
            crate::output::print(&table::render(&report))?;
        } else {
            crate::output::print(&table::header(&report))?;
        }
        if let Some(random) = &report.random {
            crate::output::print(&random::render(random))?;
        }
        if let Some(remote) = &report.remote {
            crate::output::print(&remote::render(remote))?;
        }
        if let Some(svg) = &args.plot {
            crate::output::outln!("\nplot: {}", crate::output::escaped(svg))?;
        }
    }
    let ours: Vec<(bool, Option<&String>)> = match &report.remote {
        Some(remote) => remote
            .cases
            .iter()
            .map(|c| (c.throughput.is_some(), c.error.as_ref()))
            .collect(),
        None => report
            .cases
            .iter()
            .map(|c| (c.throughput.is_some(), c.error.as_ref()))
            .collect(),
    };
    if !ours.is_empty() && ours.iter().all(|(measured, _)| !measured) {
        let first = ours.iter().find_map(|(_, error)| *error);
        return Err(CliError::Failed(format!(
            "no measurement succeeded{}",
            first
                .map(|e| format!(" (first error: {e})"))
                .unwrap_or_default()
        )));
    }
    Ok(())
}

/// `--plot FILE`: the chart of `report`.
fn save_plot(path: &Path, report: &Report) -> Result<(), CliError> {
    if report.remote.is_some() {
        return Err(CliError::Usage(
            "--plot draws runs of local files; this run is of a remote object".into(),
        ));
    }
    let charts = random_plot::render_all(path, report)
        .map_err(|e| CliError::Failed(format!("--plot: {e}")))?;
    for (path, svg) in charts {
        crate::output::write_file("--plot", &path, svg.as_bytes())?;
    }
    Ok(())
}
