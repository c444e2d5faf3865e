//! `--plot` for the random pattern: throughput against read size (log
//! scale: 4 KiB reads and 1 MiB reads differ by orders of magnitude), ours
//! solid (one line per memory, thread count and window, min–max as bars),
//! references dashed (fio randread, KvikIO), one line per thread count.
//!
//! [`render_all`] is what `kvik bench --plot` calls: the sequential panels
//! (`plot::render`) at the path asked for, and the random chart there too when
//! the run has only random figures, else beside it (`NAME-random.svg`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::coord::combinators::BindKeyPoints as _;
use plotters::prelude::*;

use super::plot::{OURS, REFS};
use super::random::RandomRun;
use super::stats::Summary;
use super::{MemoryTarget, Report, plot};

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 560;
const LEGEND_WIDTH: u32 = 420;

/// The random chart's path when the sequential panels take `svg`.
pub fn beside(svg: &Path) -> PathBuf {
    let stem = svg
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bench".into());
    svg.with_file_name(format!("{stem}-random.svg"))
}

/// Every chart of `report`, as (path, SVG text): sequential panels at
/// `svg`; the random chart at `svg` when there is nothing else, else at
/// [`beside`]`(svg)`.
pub fn render_all(svg: &Path, report: &Report) -> Result<Vec<(PathBuf, String)>, String> {
    match &report.random {
        None => Ok(vec![(svg.to_path_buf(), plot::render(report)?)]),
        Some(random) if report.cases.is_empty() => Ok(vec![(svg.to_path_buf(), render(random)?)]),
        Some(random) => Ok(vec![
            (svg.to_path_buf(), plot::render(report)?),
            (beside(svg), render(random)?),
        ]),
    }
}

/// A line: its label and (size index, median, min, max) in GB/s.
struct Series {
    label: String,
    points: Vec<(usize, f64, f64, f64)>,
}

fn point(x: usize, s: &Option<Summary>) -> Option<(usize, f64, f64, f64)> {
    let s = s.as_ref()?;
    Some((x, s.median / 1e9, s.min / 1e9, s.max / 1e9))
}

fn series(run: &RandomRun) -> (Vec<Series>, Vec<Series>) {
    let x_of = |size: u64| run.io_sizes.iter().position(|&s| s == size).unwrap_or(0);
    let mut ours: BTreeMap<(MemoryTarget, usize, Option<u64>), Vec<_>> = BTreeMap::new();
    for c in &run.cases {
        if let Some(p) = point(x_of(c.io_size), &c.throughput) {
            ours.entry((c.memory, c.threads, c.window))
                .or_default()
                .push(p);
        }
    }
    let mut refs: BTreeMap<(String, usize), Vec<_>> = BTreeMap::new();
    for r in &run.references {
        if let Some(p) = point(x_of(r.io_size), &r.throughput) {
            let name = match r.memory {
                MemoryTarget::Host => r.name.clone(),
                m => format!("{} ({m})", r.name),
            };
            refs.entry((name, r.threads)).or_default().push(p);
        }
    }
    let threads = |t: usize| format!("{t} thread{}", if t == 1 { "" } else { "s" });
    let ours = ours
        .into_iter()
        .map(|((memory, t, window), points)| Series {
            label: format!(
                "kvik {memory}, {}, {}",
                threads(t),
                window.map_or("own slots".to_string(), |w| format!(
                    "{} window",
                    kvik_policy::Size(w)
                ))
            ),
            points,
        })
        .collect();
    let refs = refs
        .into_iter()
        .map(|((name, t), points)| Series {
            label: format!("{name}, {}", threads(t)),
            points,
        })
        .collect();
    (ours, refs)
}

/// The random chart of `run`, as SVG text.
pub fn render(run: &RandomRun) -> Result<String, String> {
    let (ours, refs) = series(run);
    if ours.is_empty() && refs.is_empty() {
        return Err("no random-read figure to plot".into());
    }
    let mut svg = String::new();
    draw_chart(&mut svg, run, &ours, &refs).map_err(|e| e.to_string())?;
    Ok(svg)
}

fn draw_chart(
    svg: &mut String,
    run: &RandomRun,
    ours: &[Series],
    refs: &[Series],
) -> Result<(), Box<dyn std::error::Error>> {
    let all = || ours.iter().chain(refs).flat_map(|s| s.points.iter());
    let y_max = all().map(|p| p.3).fold(0.0f64, f64::max).max(0.01) * 2.0;
    let y_min = all()
        .map(|p| p.2)
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min)
        .min(y_max / 4.0)
        / 2.0;
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot_area, legend_area) = root.split_horizontally(WIDTH - LEGEND_WIDTH);
    let n = run.io_sizes.len().max(1) as i32;
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(
            "random reads of a page-cached file: one batch, all issued then all waited",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (-3..10 * (n - 1) + 3).with_key_points((0..n).map(|i| 10 * i).collect()),
            (y_min..y_max).log_scale(),
        )?;
    let sizes = run.io_sizes.clone();
    chart
        .configure_mesh()
        .x_desc("read size")
        .y_desc("GB/s (log scale)")
        .x_label_formatter(&|x| {
            if *x >= 0 && x % 10 == 0 {
                sizes
                    .get((x / 10) as usize)
                    .map(|s| kvik_policy::Size(*s).to_string())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()?;
    let x = |i: usize| 10 * i as i32;
    let mut legend: Vec<(String, RGBColor, bool)> = Vec::new();
    for (i, s) in ours.iter().enumerate() {
        let color = OURS[i % OURS.len()];
        let line: Vec<(i32, f64)> = s.points.iter().map(|p| (x(p.0), p.1)).collect();
        chart.draw_series(LineSeries::new(line, color.stroke_width(3)).point_size(4))?;
        chart.draw_series(s.points.iter().map(|p| {
            PathElement::new(vec![(x(p.0), p.2), (x(p.0), p.3)], color.stroke_width(1))
        }))?;
        legend.push((s.label.clone(), color, true));
    }
    for (i, s) in refs.iter().enumerate() {
        let color = REFS[i % REFS.len()];
        let line: Vec<(i32, f64)> = s.points.iter().map(|p| (x(p.0), p.1)).collect();
        chart.draw_series(DashedLineSeries::new(line, 8, 5, color.stroke_width(2)))?;
        chart.draw_series(
            s.points
                .iter()
                .map(|p| Circle::new((x(p.0), p.1), 3, color.filled())),
        )?;
        legend.push((s.label.clone(), color, false));
    }
    let font = ("sans-serif", 15).into_font().color(&BLACK);
    for (i, (label, color, ours)) in legend.iter().enumerate() {
        let y = 50 + 22 * i as i32;
        let width = if *ours { 3 } else { 2 };
        let segments: &[(i32, i32)] = if *ours {
            &[(4, 34)]
        } else {
            &[(4, 14), (22, 32)]
        };
        for &(a, b) in segments {
            legend_area.draw(&PathElement::new(
                vec![(a, y), (b, y)],
                color.stroke_width(width),
            ))?;
        }
        legend_area.draw(&Text::new(label.clone(), (42, y - 8), font.clone()))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::RefKind;
    use super::super::random::{RandomCase, RandomReference};
    use super::*;

    #[test]
    fn the_chart_has_a_line_per_configuration_and_reference() {
        let case = |io_size, threads, median| RandomCase {
            memory: MemoryTarget::Host,
            io_size,
            reads: 10,
            threads,
            window: None,
            bytes: 10 * io_size,
            throughput: Summary::from_rates(vec![median]),
            preads: Some(10),
            error: None,
            vs_fio: None,
            vs_fio_paired: None,
            vs_kvikio: None,
        };
        let fio = |io_size, median| RandomReference {
            name: "fio randread psync".into(),
            kind: RefKind::Tool,
            memory: MemoryTarget::Host,
            io_size,
            reads: 10,
            threads: 2,
            command: None,
            throughput: Summary::from_rates(vec![median]),
            error: None,
        };
        let run = RandomRun {
            io_sizes: vec![4096, 1 << 20],
            seed: 1,
            cases: vec![case(4096, 2, 1e9), case(1 << 20, 2, 10e9)],
            references: vec![fio(4096, 1.1e9), fio(1 << 20, 9e9)],
            targets: vec![],
            notes: vec![],
        };
        let svg = render(&run).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(
            svg.contains("kvik host, 2 threads, own slots"),
            "ours in the legend"
        );
        assert!(
            svg.contains("fio randread psync, 2 threads"),
            "fio in the legend"
        );
        assert!(svg.contains("\n4 KiB\n</text>") && svg.contains("\n1 MiB\n</text>"));
        assert_eq!(
            beside(Path::new("/r/cpu.svg")),
            PathBuf::from("/r/cpu-random.svg")
        );
        let empty = RandomRun {
            cases: vec![],
            references: vec![],
            ..run
        };
        assert!(render(&empty).is_err());
    }
}
