//! `--plot out.svg`: throughput against threads, one panel per workload;
//! ours as solid lines (one per memory kind, task size and bounce buffer,
//! min–max as bars), references dashed (a horizontal line where a tool ran
//! single-threaded).
//!
//! plotters with only its SVG backend: no bitmap codecs, no font files
//! (SVG text is laid out by the viewer).

use std::collections::BTreeMap;

use plotters::coord::combinators::BindKeyPoints as _;
use plotters::prelude::*;

use super::stats::Summary;
use super::{Case, MemoryTarget, Reference, Report, Workload};

const PANEL_HEIGHT: u32 = 460;
const WIDTH: u32 = 1400;
/// The legend's column on the right of each panel.
const LEGEND_WIDTH: u32 = 380;

pub(super) const OURS: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
];
pub(super) const REFS: [RGBColor; 12] = [
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0x88, 0x88, 0x88),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0xaa, 0x66, 0x00),
    RGBColor(0x66, 0x99, 0xcc),
    RGBColor(0x99, 0x33, 0x66),
    RGBColor(0x33, 0x66, 0x33),
    RGBColor(0xcc, 0x99, 0x00),
    RGBColor(0x44, 0x44, 0xaa),
    RGBColor(0xdd, 0x66, 0x66),
    RGBColor(0x22, 0x99, 0x99),
    RGBColor(0x77, 0x55, 0x22),
];

/// A line to draw: its label and (threads, median, min, max) points.
struct Series {
    label: String,
    points: Vec<(usize, f64, f64, f64)>,
}

fn gb(x: f64) -> f64 {
    x / 1e9
}

/// (threads, median, min, max) in GB/s, by thread count; failures left out.
fn points<'a>(
    figures: impl Iterator<Item = (usize, &'a Option<Summary>)>,
) -> Vec<(usize, f64, f64, f64)> {
    let mut out: Vec<_> = figures
        .filter_map(|(threads, s)| {
            let s = s.as_ref()?;
            Some((threads, gb(s.median), gb(s.min), gb(s.max)))
        })
        .collect();
    out.sort_by_key(|p| p.0);
    out
}

fn our_series(cases: &[Case], workload: Workload) -> Vec<Series> {
    type Key = (MemoryTarget, u64, Option<u64>, Option<u64>);
    let mut groups: BTreeMap<Key, Vec<&Case>> = BTreeMap::new();
    for c in cases.iter().filter(|c| c.workload == workload) {
        groups
            .entry((c.memory, c.task_size, c.bounce_buffer_size, c.window))
            .or_default()
            .push(c);
    }
    groups
        .into_iter()
        .map(|((memory, task, bounce, window), cs)| {
            let mut label = format!("kvik {memory}, {} tasks", kvik_policy::Size(task));
            if let Some(b) = bounce {
                label.push_str(&format!(", {} bounce", kvik_policy::Size(b)));
            }
            if let Some(w) = window {
                label.push_str(&format!(", {} window reused", kvik_policy::Size(w)));
            }
            let points = points(cs.iter().map(|c| (c.threads, &c.throughput)));
            Series { label, points }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn reference_series(refs: &[Reference], workload: Workload) -> Vec<Series> {
    let mut groups: BTreeMap<String, Vec<&Reference>> = BTreeMap::new();
    for r in refs.iter().filter(|r| r.workload == workload) {
        let label = match r.memory {
            MemoryTarget::Host => r.name.clone(),
            m => format!("{} ({m})", r.name),
        };
        groups.entry(label).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(label, rs)| {
            let points = points(rs.iter().map(|r| (r.threads, &r.throughput)));
            Series { label, points }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// Draw `report` as an SVG file at `path`.
/// The chart of `report` as SVG text.
pub fn render(report: &Report) -> Result<String, String> {
    let mut workloads: Vec<Workload> = report.cases.iter().map(|c| c.workload).collect();
    workloads.sort();
    workloads.dedup();
    if workloads.is_empty() {
        return Err("nothing to plot".into());
    }
    let height = PANEL_HEIGHT * workloads.len() as u32;
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let panels = root.split_evenly((workloads.len(), 1));
    for (panel, &workload) in panels.iter().zip(&workloads) {
        draw_panel(panel, report, workload).map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    drop(panels);
    drop(root);
    Ok(svg)
}

fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    report: &Report,
    workload: Workload,
) -> Result<(), Box<dyn std::error::Error>> {
    let ours = our_series(&report.cases, workload);
    let refs = reference_series(&report.references, workload);
    // Thread counts on the x axis, evenly spaced whatever their values.
    let mut threads: Vec<usize> = ours
        .iter()
        .chain(&refs)
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    threads.sort_unstable();
    threads.dedup();
    if threads.is_empty() {
        return Ok(());
    }
    // x is 10 × the thread count's position (integer coordinates keep
    // plotters' default tick formatting; 3 units of padding each side).
    let x_of = |t: usize| 10 * threads.iter().position(|&x| x == t).unwrap_or(0) as i32;
    let y_max = ours
        .iter()
        .chain(&refs)
        .flat_map(|s| s.points.iter().map(|p| p.3))
        .fold(0.0f64, f64::max)
        * 1.15;
    let x_max = 10 * (threads.len() as i32 - 1).max(1);
    let title = format!(
        "{} — {} file, {} — {}",
        workload.title(),
        kvik_policy::Size(report.file.bytes),
        report.machine.cpu.as_deref().unwrap_or("unknown CPU"),
        report.date
    );
    let (plot_area, legend_area) = area.split_horizontally(WIDTH - LEGEND_WIDTH);
    // (label, colour, ours) in drawing order, for the legend column.
    let mut legend: Vec<(String, RGBColor, bool)> = Vec::new();
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (-3..x_max + 3).with_key_points((0..threads.len() as i32).map(|i| 10 * i).collect()),
            0.0..y_max.max(0.1),
        )?;
    let labels = threads.clone();
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc("GB/s")
        .x_label_formatter(&|x| {
            if *x >= 0 && x % 10 == 0 {
                labels
                    .get((x / 10) as usize)
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;

    for (i, s) in refs.iter().enumerate() {
        let color = REFS[i % REFS.len()];
        let style = color.stroke_width(2);
        let points: Vec<(i32, f64)> = if s.points.len() == 1 {
            // One figure (a single-threaded tool): a level across the panel.
            vec![(-3, s.points[0].1), (x_max + 3, s.points[0].1)]
        } else {
            s.points.iter().map(|p| (x_of(p.0), p.1)).collect()
        };
        let label = if s.points.len() == 1 {
            format!(
                "{} ({} thread{})",
                s.label,
                s.points[0].0,
                if s.points[0].0 == 1 { "" } else { "s" }
            )
        } else {
            s.label.clone()
        };
        chart.draw_series(DashedLineSeries::new(points, 8, 5, style))?;
        legend.push((label, color, false));
    }
    for (i, s) in ours.iter().enumerate() {
        let color = OURS[i % OURS.len()];
        let points: Vec<(i32, f64)> = s.points.iter().map(|p| (x_of(p.0), p.1)).collect();
        chart.draw_series(LineSeries::new(points, color.stroke_width(3)).point_size(4))?;
        legend.push((s.label.clone(), color, true));
        // min–max of the repetitions.
        chart.draw_series(s.points.iter().map(|p| {
            let x = x_of(p.0);
            PathElement::new(vec![(x, p.2), (x, p.3)], color.stroke_width(1))
        }))?;
    }
    // Ours first (solid), then the references (dashed).
    legend.sort_by_key(|(_, _, ours)| !ours);
    let font = ("sans-serif", 15).into_font().color(&BLACK);
    for (i, (label, color, ours)) in legend.iter().enumerate() {
        let y = 50 + 22 * i as i32;
        let line = vec![(4, y), (34, y)];
        if *ours {
            legend_area.draw(&PathElement::new(line, color.stroke_width(3)))?;
        } else {
            legend_area.draw(&PathElement::new(
                vec![(4, y), (14, y)],
                color.stroke_width(2),
            ))?;
            legend_area.draw(&PathElement::new(
                vec![(22, y), (32, y)],
                color.stroke_width(2),
            ))?;
        }
        legend_area.draw(&Text::new(label.clone(), (42, y - 8), font.clone()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_svg_has_a_panel_per_workload_and_a_legend_entry_per_series() {
        let report = super::super::sample_report();
        let svg = render(&report).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert!(svg.contains("read, page-cached file"));
        assert!(svg.contains("read, cold cache"));
        assert!(svg.contains("kvik host, 4 MiB tasks"));
        assert!(svg.contains("fio psync buffered"));
        assert!(svg.contains("dd bs=16M buffered (1 thread)"));
        assert!(svg.contains("\nthreads\n</text>"));
        // The x axis is labelled with the thread counts measured.
        assert!(svg.contains("\n1\n</text>") && svg.contains("\n2\n</text>"));
        // A failed reference draws nothing.
        assert!(!svg.contains("fio io_uring O_DIRECT"));
    }
}
