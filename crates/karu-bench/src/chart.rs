//! The SVG chart at the top of BENCHMARKS.md: one line per cell (server, workload, profile),
//! each reader's median wall time divided by the fastest reader's in that cell, on a log
//! axis. karu's defaults are the large red dot, so where karu wins (at 1) and loses (right of
//! 1) shows at a glance. Drawn from the same rows as the tables, with plotters' SVG backend.

use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::Row;
use crate::readers::Reader;

/// Ratios beyond this are drawn at the right edge (an extrapolated naive reader at 50 ms
/// is thousands of times slower, which would squash everything else).
const CLIP: f64 = 20.0;

/// One line of the chart: its label and each reader's time relative to the fastest.
struct Cell {
    label: String,
    ratios: Vec<(Reader, f64)>,
}

/// The cells in the order the rows came (the run's order: server, workload, profile).
fn cells(rows: &[Row]) -> Vec<Cell> {
    let mut out: Vec<Cell> = Vec::new();
    let mut keys: Vec<(String, String, String)> = Vec::new();
    for r in rows {
        let key = (r.server.clone(), r.cell(), r.profile.label());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    for (server, workload, profile) in keys {
        let cell: Vec<&Row> = rows
            .iter()
            .filter(|r| r.server == server && r.cell() == workload && r.profile.label() == profile)
            .collect();
        let best = cell
            .iter()
            .map(|r| r.wall().as_secs_f64())
            .fold(f64::INFINITY, f64::min);
        if !(best > 0.0 && best.is_finite()) {
            continue;
        }
        out.push(Cell {
            label: format!("{server} {workload} {profile}"),
            ratios: cell
                .iter()
                .map(|r| (r.reader, r.wall().as_secs_f64() / best))
                .collect(),
        });
    }
    out
}

/// Each reader's colour and marker size (karu's defaults stand out).
fn style(reader: Reader) -> (RGBColor, u32) {
    match reader {
        Reader::KaruDefault => (RGBColor(214, 39, 40), 6),
        Reader::KaruGap0 => (RGBColor(255, 152, 150), 4),
        Reader::KaruGuards => (RGBColor(255, 127, 14), 4),
        Reader::OsRanges => (RGBColor(31, 119, 180), 4),
        Reader::OsRange => (RGBColor(174, 199, 232), 4),
        Reader::Naive => (RGBColor(127, 127, 127), 3),
        Reader::Curl => (RGBColor(44, 160, 44), 4),
        Reader::OsGet => (RGBColor(148, 103, 189), 4),
        Reader::OsChunks => (RGBColor(197, 176, 213), 4),
        Reader::PqOwn | Reader::PqOwnScan => (RGBColor(214, 39, 40), 6),
        Reader::PqKaruStore | Reader::PqKaruStoreScan => (RGBColor(255, 127, 14), 4),
        Reader::PqObjectStore | Reader::PqObjectStoreScan => (RGBColor(31, 119, 180), 4),
    }
}

/// Draws the chart of `rows` into `path` (an SVG file); an empty run draws nothing.
pub fn draw(rows: &[Row], title: &str, path: &Path) -> Result<(), String> {
    let cells = cells(rows);
    if cells.is_empty() {
        return Ok(());
    }
    let n = cells.len() as u32;
    let height = 110 + 18 * n;
    let root = SVGBackend::new(path, (980, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(250)
        .build_cartesian_2d((1f64..CLIP).log_scale(), (0..n).into_segmented())
        .map_err(|e| e.to_string())?;
    let labels: Vec<&str> = cells.iter().map(|c| c.label.as_str()).collect();
    chart
        .configure_mesh()
        .y_labels(n as usize)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => labels
                .get(*i as usize)
                .map_or(String::new(), |s| (*s).to_owned()),
            SegmentValue::Last => String::new(),
        })
        .x_desc("wall time ÷ the fastest reader in the cell (log scale; 1 = fastest)")
        .x_label_formatter(&|x| {
            // Only round ratios: a log axis puts its ticks at 1, 2, …, 9, 10, 20.
            let keep = [1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0];
            if keep.iter().any(|k| (x / k - 1.0).abs() < 0.01) {
                format!("{x}×")
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(|e| e.to_string())?;
    let mut readers: Vec<Reader> = Vec::new();
    for c in &cells {
        for (r, _) in &c.ratios {
            if !readers.contains(r) {
                readers.push(*r);
            }
        }
    }
    // karu last, so its dots sit on top.
    readers.sort_by_key(|r| *r == Reader::KaruDefault);
    for reader in readers {
        let (colour, size) = style(reader);
        let points: Vec<(f64, u32)> = cells
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.ratios
                    .iter()
                    .find(|(r, _)| *r == reader)
                    .map(|(_, x)| (x.clamp(1.0, CLIP * 0.999), i as u32))
            })
            .collect();
        chart
            .draw_series(
                points.into_iter().map(|(x, i)| {
                    Circle::new((x, SegmentValue::CenterOf(i)), size, colour.filled())
                }),
            )
            .map_err(|e| e.to_string())?
            .label(reader.short().replace('`', ""))
            .legend(move |(x, y)| Circle::new((x, y), size, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
