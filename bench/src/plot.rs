//! PNG figures for `bench compare`, `bench fetch-cost` and `bench latency-sweep` (plotters, bitmap backend, no
//! fontconfig).
//!
//! Left panel: latency by percentile on an HdrHistogram-style axis (x = log10(1/(1-p)), so
//! 90%, 99%, 99.9%, 99.99% are evenly spaced; y logarithmic in ms). Right panel: throughput
//! over time (records/s per second of the run). Text is drawn with DejaVu Sans, embedded
//! from `bench/assets/` (Bitstream Vera licence, see `DejaVuSans-LICENSE.txt` there).

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // Registration fails only on a malformed font file, which the embedded one is not.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One broker's (or run's) data for a figure.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub name: String,
    /// (percentile in 0..100, latency in ms), ascending percentiles.
    pub percentiles: Vec<(f64, f64)>,
    /// (seconds since start, records/s).
    pub throughput: Vec<(f64, f64)>,
}

/// The highest percentile the x axis shows (the max is drawn there).
pub const TOP_PERCENTILE: f64 = 99.999;

/// x position of a percentile: log10(1 / (1 - p/100)), capped at [`TOP_PERCENTILE`].
pub fn percentile_x(p: f64) -> f64 {
    let p = p.clamp(0.0, TOP_PERCENTILE);
    (1.0 / (1.0 - p / 100.0)).log10()
}

fn percentile_label(x: f64) -> String {
    let p = 100.0 - 100.0 / 10f64.powf(x);
    if (x - x.round()).abs() > 1e-6 {
        return String::new();
    }
    let s = format!("{p:.5}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws the two-panel figure to `path` (PNG, 1400x560).
pub fn draw(path: &Path, title: &str, series: &[Series]) -> Result<()> {
    register_font();
    let root = BitMapBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let (left, right) = root.split_horizontally(700);
    draw_percentiles(&left, series)?;
    draw_throughput(&right, series)?;
    root.present().map_err(err)?;
    Ok(())
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plot: {e:?}")
}

fn draw_percentiles(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    series: &[Series],
) -> Result<()> {
    let values = series
        .iter()
        .flat_map(|s| s.percentiles.iter().map(|&(_, v)| v))
        .filter(|v| *v > 0.0);
    let (lo, hi) = values.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi <= 0.0 {
        (0.01, 1.0)
    } else {
        (lo / 1.5, hi * 1.5)
    };
    let x_max = percentile_x(TOP_PERCENTILE);
    let mut chart = ChartBuilder::on(area)
        .caption("latency by percentile", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(6)
        .x_label_formatter(&|x| percentile_label(*x))
        .y_labels(12)
        .y_label_formatter(&|y| format_ms(*y))
        .x_desc("percentile")
        .y_desc("latency (ms)")
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = s
            .percentiles
            .iter()
            .filter(|(_, v)| *v > 0.0)
            .map(|&(p, v)| (percentile_x(p), v))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

fn draw_throughput(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    series: &[Series],
) -> Result<()> {
    let t_max = series
        .iter()
        .flat_map(|s| s.throughput.iter().map(|&(t, _)| t))
        .fold(1f64, f64::max);
    let y_max = series
        .iter()
        .flat_map(|s| s.throughput.iter().map(|&(_, v)| v))
        .fold(1f64, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption("throughput over time", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_max, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("records/s")
        .y_label_formatter(&|y| format_si(*y))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // Markers too: a run shorter than two seconds has a single point.
        chart
            .draw_series(
                s.throughput
                    .iter()
                    .map(|&p| Circle::new(p, 3, color.filled())),
            )
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(s.throughput.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// One bar of a bar panel; None: not measured (no bar, "n/a" over its place).
#[derive(Debug, Clone)]
pub struct Bar {
    pub name: String,
    pub value: Option<f64>,
}

/// A panel of bars with labelled horizontal reference lines (limits, targets).
#[derive(Debug, Clone)]
pub struct BarPanel {
    pub caption: String,
    pub unit: String,
    pub bars: Vec<Bar>,
    pub lines: Vec<(String, f64)>,
}

/// Draws two bar panels side by side to `path` (PNG, 1400x560).
pub fn draw_bars(path: &Path, title: &str, left: &BarPanel, right: &BarPanel) -> Result<()> {
    draw_two_panels(
        path,
        title,
        |l| draw_bar_panel(l, left),
        |r| draw_bar_panel(r, right),
    )
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

/// A titled 1400x560 PNG of two panels side by side, each drawn by its function.
fn draw_two_panels(
    path: &Path,
    title: &str,
    left: impl FnOnce(&Area<'_>) -> Result<()>,
    right: impl FnOnce(&Area<'_>) -> Result<()>,
) -> Result<()> {
    register_font();
    let root = BitMapBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(err)?;
    let (l, r) = root.split_horizontally(700);
    left(&l)?;
    right(&r)?;
    root.present().map_err(err)?;
    Ok(())
}

fn draw_bar_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    panel: &BarPanel,
) -> Result<()> {
    let n = panel.bars.len().max(1);
    let y_max = panel
        .bars
        .iter()
        .filter_map(|b| b.value)
        .chain(panel.lines.iter().map(|&(_, v)| v))
        .filter(|v| v.is_finite())
        .fold(0f64, f64::max)
        .max(1e-3)
        * 1.25;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)
        .map_err(err)?;
    let names: Vec<String> = panel.bars.iter().map(|b| b.name.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(panel.unit.as_str())
        .draw()
        .map_err(err)?;
    for (i, bar) in panel.bars.iter().enumerate() {
        let x = i as f64;
        let color = COLORS[i % COLORS.len()];
        let text = match bar.value {
            Some(v) if v.is_finite() => {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x - 0.3, 0.0), (x + 0.3, v)],
                        color.filled(),
                    )))
                    .map_err(err)?;
                (format_value(v), v)
            }
            _ => ("n/a".to_string(), 0.0),
        };
        chart
            .draw_series(std::iter::once(Text::new(
                text.0,
                (x - 0.12, text.1 + y_max * 0.06),
                ("sans-serif", 15),
            )))
            .map_err(err)?;
    }
    for (i, (name, v)) in panel.lines.iter().enumerate() {
        let color = COLORS[(i + 3) % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                vec![(-0.5, *v), (n as f64 - 0.5, *v)],
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!("{name}: {}", format_value(*v)))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    if !panel.lines.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// A panel of lines over a logarithmic x axis (`bench latency-sweep`: a figure by offered
/// rate), y logarithmic too when `log_y`.
#[derive(Debug, Clone)]
pub struct LinePanel {
    pub caption: String,
    pub x_desc: String,
    pub y_desc: String,
    pub log_y: bool,
    /// (name, (x, y) points); points with a non-positive or non-finite value are left out.
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

/// Draws two line panels side by side to `path` (PNG, 1400x560).
pub fn draw_lines(path: &Path, title: &str, left: &LinePanel, right: &LinePanel) -> Result<()> {
    draw_two_panels(
        path,
        title,
        |l| draw_line_panel(l, left),
        |r| draw_line_panel(r, right),
    )
}

fn draw_line_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    panel: &LinePanel,
) -> Result<()> {
    let usable = |&(x, y): &(f64, f64)| x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite();
    let points: Vec<(f64, f64)> = panel
        .lines
        .iter()
        .flat_map(|(_, p)| p.iter().copied())
        .filter(usable)
        .collect();
    let (x_lo, x_hi) = points
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &(x, _)| (lo.min(x), hi.max(x)));
    let (y_lo, y_hi) = points
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &(_, y)| (lo.min(y), hi.max(y)));
    let (x_lo, x_hi) = if points.is_empty() {
        (1.0, 10.0)
    } else {
        (x_lo / 1.3, x_hi * 1.3)
    };
    let (y_lo, y_hi) = if points.is_empty() {
        (0.01, 1.0)
    } else {
        (y_lo / 1.5, y_hi * 1.5)
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&panel.caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    // Two chart types (log or linear y): the drawing is the same for both.
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(panel.x_desc.as_str())
                .y_desc(panel.y_desc.as_str())
                .x_label_formatter(&|x| format_si(*x))
                .y_label_formatter(&|y| format_ms(*y))
                .draw()
                .map_err(err)?;
            for (i, (name, line)) in panel.lines.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let pts: Vec<(f64, f64)> = line.iter().copied().filter(usable).collect();
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(err)?;
                chart
                    .draw_series(LineSeries::new(pts, color.stroke_width(2)))
                    .map_err(err)?
                    .label(name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }};
    }
    if panel.log_y {
        draw!(builder
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
            .map_err(err)?);
    } else {
        draw!(builder
            .build_cartesian_2d((x_lo..x_hi).log_scale(), 0f64..y_hi)
            .map_err(err)?);
    }
    Ok(())
}

fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn format_ms(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// 1234567 -> "1.23M".
pub fn format_si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_axis() {
        assert!((percentile_x(90.0) - 1.0).abs() < 1e-9);
        assert!((percentile_x(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(4.0), "99.99%");
        assert_eq!(percentile_label(1.5), "");
    }

    #[test]
    fn draws_a_png() {
        let dir = std::env::temp_dir().join(format!("plot-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.png");
        let s = |name: &str, k: f64| Series {
            name: name.into(),
            percentiles: vec![
                (50.0, 0.2 * k),
                (99.0, 0.9 * k),
                (99.9, 2.0 * k),
                (99.99, 5.0 * k),
                (100.0, 9.0 * k),
            ],
            throughput: (0..10)
                .map(|t| (t as f64, 1e5 * k + t as f64 * 1e3))
                .collect(),
        };
        draw(&path, "test", &[s("a", 1.0), s("b", 2.0)]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let bars = path.with_file_name("bars.png");
        let panel = |v: Option<f64>| BarPanel {
            caption: "c".into(),
            unit: "s/GiB".into(),
            bars: vec![
                Bar {
                    name: "a".into(),
                    value: Some(0.5),
                },
                Bar {
                    name: "b".into(),
                    value: v,
                },
            ],
            lines: vec![("limit".into(), 0.4)],
        };
        draw_bars(&bars, "bars", &panel(Some(0.7)), &panel(None)).unwrap();
        let bytes = std::fs::read(&bars).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let lines = path.with_file_name("lines.png");
        let panel = |log_y| LinePanel {
            caption: "p99".into(),
            x_desc: "records/s".into(),
            y_desc: "ms".into(),
            log_y,
            lines: vec![
                ("a".into(), vec![(1e3, 0.1), (1e4, 0.2), (5e4, f64::NAN)]),
                ("b".into(), vec![]),
            ],
        };
        draw_lines(&lines, "lines", &panel(true), &panel(false)).unwrap();
        let bytes = std::fs::read(&lines).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
