//! Plots: one numeric column against another, one line per value of a series
//! column, drawn with plotters to SVG and PNG. Text is laid out with an
//! embedded DejaVu Sans subset (`font/`), so no system font library is needed.
//! A log axis plots `log10` of the values and labels ticks with the values.

use std::ops::Range;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axes::{axis_title, powers_of_two, sparse_ticks, ticks, Ticked};
use super::cell::Cell;
use super::compare::{same, table_column};
use super::labels::axis_label;
use super::labels::tick;
use super::spec::Plot;
use super::table::Table;
use crate::tasks::TaskError;

const FONT: &[u8] = include_bytes!("font/DejaVuSans-subset.ttf");
pub(super) const FAMILY: &str = "sans-serif";
pub(super) const SIZE: (u32, u32) = (900, 560);
/// A plot with no data: a line of text.
pub(super) const EMPTY: (u32, u32) = (900, 48);
/// The Tableau 10 colours: distinct, and readable on white.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line of a plot: its legend label and points sorted by x.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// The 95 % intervals of points that have one: (x, low, high).
    pub bars: Vec<(f64, f64, f64)>,
    /// The uncertain points: their row folds fewer than [`FEW_REPS`]
    /// repetitions, or its interval of the plotted metric is wider than
    /// the report's target. Drawn hollow.
    pub few: Vec<(f64, f64)>,
}

/// A point of fewer repetitions is drawn hollow: one or two processes say
/// little of where the next lands.
pub(super) const FEW_REPS: usize = 3;

/// The line under a plot with hollow points.
pub(super) fn hollow_note() -> String {
    format!("hollow points: fewer than {FEW_REPS} repetitions, or an interval wider than the report's target")
}

/// The height of one line under a chart.
pub(super) const FOOT_LINE: u32 = 22;

/// The lines under a chart or a figure: its caption (with where it was
/// measured), then what hollow points mean, each on a line of its own.
pub(super) fn foot_lines(caption: Option<&String>, hollow: bool) -> Vec<String> {
    caption
        .cloned()
        .into_iter()
        .chain(hollow.then(hollow_note))
        .collect()
}

/// Draws `lines` into `area`, one under the other.
pub(super) fn draw_foot<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[String],
    scale: u32,
) -> Result<(), String> {
    let style = TextStyle::from((FAMILY, 15 * scale).into_font()).color(&BLACK);
    for (k, line) in lines.iter().enumerate() {
        let y = (6 + k as u32 * FOOT_LINE) * scale;
        area.draw_text(line, &style, ((16 * scale) as i32, y as i32))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Each series label's colour index, the same in every plot of a report:
/// labels in the order the plots first show them.
pub(super) fn colour_indices<'a>(plots: impl IntoIterator<Item = &'a [Series]>) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    for series in plots {
        for s in series {
            let key = colour_key(&s.label);
            if !labels.contains(&key) {
                labels.push(key);
            }
        }
    }
    labels
}

/// What picks a series' colour: its label's `name=value` parts in sorted
/// order, so `patch=16, depth=6` in one plot and `depth=6, patch=16` in
/// another are one series in one hue (N16).
pub(super) fn colour_key(label: &str) -> String {
    let mut parts: Vec<&str> = label.split(", ").collect();
    parts.sort_unstable();
    parts.join(", ")
}

/// A series' colour among a report's (`labels` from [`colour_indices`]).
pub(super) fn colour_of(labels: &[String], label: &str) -> RGBColor {
    let key = colour_key(label);
    let i = labels.iter().position(|l| *l == key).unwrap_or(0);
    COLORS[i % COLORS.len()]
}

pub(super) fn register_font() {
    static ONCE: Once = Once::new();
    // The font is compiled in and known to parse (a unit test checks); were it
    // not, drawing the first label fails and the plot reports `DrawPlot`.
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(FAMILY, FontStyle::Normal, FONT);
    });
}

/// The points of each series; rows of different environments never share a
/// line, so when there are several, the label names the environment. Fails
/// when a column is unknown or no row has numbers in both `x` and `y`.
pub(super) fn series(table: &Table, plot: &Plot) -> Result<Vec<Series>, TaskError> {
    let x = table_column(table, "plot.x", &plot.x)?;
    let y = table_column(table, "plot.y", &plot.y)?;
    let by = match &plot.series {
        Some(columns) => columns
            .0
            .iter()
            .map(|name| Ok((name, table_column(table, "plot.series", name)?)))
            .collect::<Result<Vec<_>, TaskError>>()?,
        None => Vec::new(),
    };
    let filter = plot
        .filter
        .iter()
        .map(|(name, value)| {
            Ok((
                table_column(table, "plot.filter", name)?,
                Cell::from_value(value),
            ))
        })
        .collect::<Result<Vec<_>, TaskError>>()?;
    let several_envs = table.env_groups.len() > 1;
    let mut lines: Vec<Series> = Vec::new();
    // Each line's rows, to find a line drawn through a hidden param.
    let mut members: Vec<Vec<(f64, usize)>> = Vec::new();
    for (r, row) in table.rows.iter().enumerate() {
        if !filter
            .iter()
            .all(|(i, wanted)| same(&row.cells[*i], wanted))
        {
            continue;
        }
        let (Some(px), Some(py)) = (row.cells[x].as_f64(), row.cells[y].as_f64()) else {
            continue;
        };
        let mut label = if by.is_empty() {
            plot.y.clone()
        } else {
            by.iter()
                .map(|(name, i)| format!("{name}={}", row.cells[*i].text()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if several_envs {
            let env = row
                .env_group
                .map_or("unknown env", |g| &table.env_groups[g].label);
            label = format!("{label} ({env})");
        }
        let point = (
            axis(px, plot.log_x, &plot.x)?,
            axis(py, plot.log_y, &plot.y)?,
        );
        // A bound a log axis cannot show leaves the point without a bar.
        let bar = row.intervals[y]
            .filter(|e| !plot.log_y || e.low > 0.0)
            .map(|e| {
                let at = |v: f64| if plot.log_y { v.log10() } else { v };
                (point.0, at(e.low), at(e.high))
            });
        let at = match lines.iter().position(|s| s.label == label) {
            Some(i) => i,
            None => {
                lines.push(Series {
                    label,
                    points: Vec::new(),
                    bars: Vec::new(),
                    few: Vec::new(),
                });
                members.push(Vec::new());
                lines.len() - 1
            }
        };
        lines[at].points.push(point);
        lines[at].bars.extend(bar);
        let wide = |t: f64| row.intervals[y].is_some_and(|e| e.half_width_rel() > t);
        if row.reps < FEW_REPS || table.target.is_some_and(wide) {
            lines[at].few.push(point);
        }
        members[at].push((px, r));
    }
    for (line, rows) in lines.iter().zip(&members) {
        super::zigzag::hidden_params(table, plot, &line.label, rows)?;
    }
    for line in &mut lines {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        line.bars.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    if lines.is_empty() && table.rows_without_gpu > 0 {
        // CPU runs: the GPU metrics are empty; the plot says so instead of
        // failing the report.
        return Ok(lines);
    }
    if lines.is_empty() {
        let (detail, help) = if filter.is_empty() {
            (
                format!("no row has numbers in both `{}` and `{}`", plot.x, plot.y),
                "plot columns that hold numbers; text columns can only be a `series`".to_owned(),
            )
        } else {
            let wanted: Vec<String> = plot
                .filter
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            (
                format!(
                    "no row with {} has numbers in both `{}` and `{}`",
                    wanted.join(", "),
                    plot.x,
                    plot.y
                ),
                "set `filter` to values the table has (see table.csv), or plot columns that hold numbers"
                    .to_owned(),
            )
        };
        return Err(TaskError::BadSpec {
            field: "plot".to_owned(),
            detail,
            help,
        });
    }
    Ok(lines)
}

fn axis(value: f64, log: bool, column: &str) -> Result<f64, TaskError> {
    if !log {
        return Ok(value);
    }
    if value <= 0.0 {
        return Err(TaskError::BadSpec {
            field: "plot".to_owned(),
            detail: format!("`{column}` has the value {value}, which a log axis cannot show"),
            help: format!("set the log flag of `{column}` to false, or filter the rows"),
        });
    }
    Ok(value.log10())
}

/// The plotted range of one axis, padded so points do not sit on the frame.
fn range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo > hi {
        return 0.0..1.0;
    }
    let pad = if hi > lo {
        (hi - lo) * 0.05
    } else {
        lo.abs().max(1.0) * 0.1
    };
    (lo - pad)..(hi + pad)
}

/// Whether a column holds a ratio (its last path segment says `ratio` or
/// `speedup`): its plot gets a reference line at 1.
fn is_ratio(column: &str) -> bool {
    let last = column
        .rsplit('.')
        .next()
        .unwrap_or(column)
        .to_ascii_lowercase();
    last.contains("ratio") || last.contains("speedup")
}

/// The x and y ranges `series` need: every point and interval, and 1 on
/// a ratio's axis, where "no change" lies.
pub(super) fn ranges(plot: &Plot, series: &[Series]) -> (Range<f64>, Range<f64>) {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let bar_ends = series
        .iter()
        .flat_map(|s| s.bars.iter().flat_map(|b| [b.1, b.2]));
    let ratio = is_ratio(&plot.y) && !series.is_empty();
    (
        range(points().map(|p| p.0)),
        range(
            points()
                .map(|p| p.1)
                .chain(bar_ends)
                .chain(ratio.then_some(1.0)),
        ),
    )
}

/// Draws one chart into `root` (the whole figure, or one panel of it);
/// the caller presents the figure once every part is drawn.
pub(super) fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    plot: &Plot,
    series: &[Series],
    labels: &[String],
    scale: u32,
    shared: Option<&(Range<f64>, Range<f64>)>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let px = |n: u32| n * scale;
    root.fill(&WHITE).map_err(err)?;
    let points = || series.iter().flat_map(|s| s.points.iter());
    let mut caption = plot.heading();
    if !plot.filter.is_empty() {
        let fixed: Vec<String> = plot
            .filter
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        caption = format!("{caption} ({})", fixed.join(", "));
    }
    if series.is_empty() {
        // One line of text instead of an empty frame.
        caption = format!("{caption}: no data, the traces recorded no GPU (runs on the CPU)");
        let style = TextStyle::from((FAMILY, px(18)).into_font()).color(&BLACK);
        root.draw_text(&caption, &style, (px(16) as i32, px(20) as i32))
            .map_err(err)?;
        return Ok(());
    }
    // The caption's line under the chart, and what hollow points mean (a
    // faceted figure's panels, drawn on shared ranges, leave both to the
    // figure's foot).
    let few = shared.is_none() && series.iter().any(|s| !s.few.is_empty());
    let lines = foot_lines(plot.caption.as_ref(), few);
    let root = if lines.is_empty() {
        root
    } else {
        let (_, h) = root.dim_in_pixel();
        let foot_h = px(8 + FOOT_LINE * lines.len() as u32);
        let (chart, foot) = root.split_vertically(h.saturating_sub(foot_h));
        draw_foot(&foot, &lines, scale)?;
        chart
    };
    let ratio = is_ratio(&plot.y) && !series.is_empty();
    let (xr, yr) = shared.cloned().unwrap_or_else(|| ranges(plot, series));
    // A sparse sweep (batch 1, 8, 32) is ticked at its own values, a log
    // axis of powers of two (batch 1 to 256) at powers of two.
    let twos = plot
        .log_x
        .then(|| powers_of_two(points().map(|p| p.0), &xr))
        .flatten();
    let x_ticks = sparse_ticks(points().map(|p| p.0))
        .or_else(|| twos.clone())
        .unwrap_or_else(|| ticks(&xr, plot.log_x, points().all(|p| p.0.fract() == 0.0)));
    let y_ticks = ticks(&yr, plot.log_y, points().all(|p| p.1.fract() == 0.0));
    // The legend goes in a corner without data, or else beside the plot; a
    // faceted figure's panels share one legend, drawn by the figure.
    let corner = emptiest_corner(series, &xr, &yr);
    let own_legend = shared.is_none();
    let longest = series
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0) as u32;
    let outside_w = if own_legend && corner.is_none() && !series.is_empty() {
        px(56) + longest * px(8)
    } else {
        0
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, (FAMILY, px(22)))
        .margin(px(16))
        .margin_right(px(16) + outside_w)
        .x_label_area_size(px(48))
        .y_label_area_size(px(80))
        .build_cartesian_2d(
            Ticked {
                range: xr.clone(),
                ticks: x_ticks,
            },
            Ticked {
                range: yr.clone(),
                ticks: y_ticks,
            },
        )
        .map_err(err)?;
    let x_label = |v: &f64| tick(*v, plot.log_x);
    let y_label = |v: &f64| tick(*v, plot.log_y);
    chart
        .configure_mesh()
        .x_desc(match twos {
            Some(_) => format!("{}, log scale (powers of 2)", axis_label(&plot.x)),
            None => axis_title(&plot.x, plot.log_x),
        })
        .y_desc(axis_title(&plot.y, plot.log_y))
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .label_style((FAMILY, px(14)))
        .axis_desc_style((FAMILY, px(16)))
        .bold_line_style(BLACK.mix(0.12).stroke_width(scale))
        .axis_style(BLACK.stroke_width(scale))
        .draw()
        .map_err(err)?;
    if ratio {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(xr.start, 1.0), (xr.end, 1.0)],
                BLACK.mix(0.55).stroke_width(px(2)),
            )))
            .map_err(err)?;
    }
    for line in series {
        let color = colour_of(labels, &line.label);
        let width = px(2);
        chart
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                color.stroke_width(width),
            ))
            .map_err(err)?
            .label(line.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(
                    vec![(x, y), (x + 20 * scale as i32, y)],
                    color.stroke_width(width),
                )
            });
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, px(4), color.filled())),
            )
            .map_err(err)?;
        chart
            .draw_series(
                line.few
                    .iter()
                    .map(|&p| Circle::new(p, px(2), WHITE.filled())),
            )
            .map_err(err)?;
        // Each interval: a vertical bar with caps (the caps a fixed
        // fraction of the x range wide).
        let cap = (xr.end - xr.start) * 0.006;
        chart
            .draw_series(line.bars.iter().flat_map(|&(x, lo, hi)| {
                [
                    vec![(x, lo), (x, hi)],
                    vec![(x - cap, lo), (x + cap, lo)],
                    vec![(x - cap, hi), (x + cap, hi)],
                ]
                .into_iter()
                .map(move |pts| PathElement::new(pts, color.stroke_width(px(1))))
            }))
            .map_err(err)?;
    }
    match corner.filter(|_| own_legend) {
        Some(corner) => {
            chart
                .configure_series_labels()
                .label_font((FAMILY, px(14)))
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK.stroke_width(scale))
                .margin(px(10))
                .legend_area_size(px(30))
                .position(corner)
                .draw()
                .map_err(err)?;
        }
        None if own_legend && !series.is_empty() => {
            // Every corner has data: a legend of its own right of the plot.
            let (w, _) = root.dim_in_pixel();
            let x0 = (w - outside_w + px(8)) as i32;
            let y0 = px(60) as i32;
            let step = px(22) as i32;
            let h = step * series.len() as i32 + px(12) as i32;
            root.draw(&Rectangle::new(
                [(x0, y0), (x0 + (outside_w - px(16)) as i32, y0 + h)],
                BLACK.stroke_width(scale),
            ))
            .map_err(err)?;
            for (k, line) in series.iter().enumerate() {
                let color = colour_of(labels, &line.label);
                let y = y0 + px(17) as i32 + k as i32 * step;
                let x = x0 + px(8) as i32;
                root.draw(&PathElement::new(
                    vec![(x, y), (x + px(20) as i32, y)],
                    color.stroke_width(px(2)),
                ))
                .map_err(err)?;
                root.draw(&Text::new(
                    line.label.clone(),
                    (x + px(28) as i32, y - px(7) as i32),
                    (FAMILY, px(14)).into_font(),
                ))
                .map_err(err)?;
            }
        }
        None => {}
    }
    Ok(())
}

/// A corner of the plot where the legend covers no data (upper left
/// first); None when every corner has some.
fn emptiest_corner(
    series: &[Series],
    xr: &std::ops::Range<f64>,
    yr: &std::ops::Range<f64>,
) -> Option<SeriesLabelPosition> {
    let (w, h) = (xr.end - xr.start, yr.end - yr.start);
    // The legend takes about 40 % of the width and 8 % of the height per line.
    let lines = series.len().max(1) as f64;
    let (fw, fh) = (0.4, (0.08 * lines + 0.04).min(0.9));
    let corners = [
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::LowerLeft, false, false),
        (SeriesLabelPosition::LowerRight, true, false),
    ];
    let inside = |&(x, y): &(f64, f64), right: bool, top: bool| {
        let fx = (x - xr.start) / w;
        let fy = (y - yr.start) / h;
        let in_x = if right { fx >= 1.0 - fw } else { fx <= fw };
        let in_y = if top { fy >= 1.0 - fh } else { fy <= fh };
        in_x && in_y
    };
    // Points, and the lines between them sampled, near each corner.
    let mut samples = Vec::new();
    for s in series {
        for pair in s.points.windows(2) {
            for k in 0..8 {
                let t = k as f64 / 8.0;
                samples.push((
                    pair[0].0 + t * (pair[1].0 - pair[0].0),
                    pair[0].1 + t * (pair[1].1 - pair[0].1),
                ));
            }
        }
        samples.extend(s.points.iter().copied());
    }
    corners
        .into_iter()
        .find(|&(_, right, top)| !samples.iter().any(|p| inside(p, right, top)))
        .map(|(pos, _, _)| pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::table::TableRow;

    /// Params `m`, `dtype`, `k`, then the value `t`: two values of `m` and of
    /// `dtype` at `k = 1`, and one row at `k = 2` that the filter drops.
    fn table() -> Table {
        let row = |m: i64, dtype: &str, k: i64, n: i64, t: f64| {
            TableRow::of_cells(vec![
                Cell::Int(m),
                Cell::Str(dtype.into()),
                Cell::Int(k),
                Cell::Int(n),
                Cell::Float(t),
            ])
        };
        Table {
            names: ["m", "dtype", "k", "n", "t"].map(str::to_owned).to_vec(),
            param_count: 4,
            value_count: 1,
            rows: vec![
                row(1, "f16", 1, 64, 1.0),
                row(1, "f16", 1, 128, 2.0),
                row(1, "bf16", 1, 64, 3.0),
                row(2, "f16", 1, 64, 4.0),
                row(2, "f16", 2, 64, 5.0),
            ],
            env_groups: Vec::new(),
            node_count: 5,
            rows_without_gpu: 0,
            target: None,
            aa: Vec::new(),
        }
    }

    #[test]
    fn a_line_through_a_hidden_param_is_an_error_naming_it() {
        // Series by `m` alone: the m=1 line has three rows at n=64 (they
        // differ in `dtype`).
        let plot: Plot =
            ron::from_str(r#"Plot(x: "n", y: "t", series: "m", filter: {"k": 1.0})"#).unwrap();
        let err = series(&table(), &plot).unwrap_err().to_string();
        assert!(err.contains("the line `m=1`"), "{err}");
        assert!(err.contains("two rows at n = 64"), "{err}");
        assert!(err.contains("they differ in `dtype`"), "{err}");
        let TaskError::BadSpec { help, .. } = series(&table(), &plot).unwrap_err() else {
            panic!("a spec error");
        };
        assert!(help.contains("add dtype to the plot's `series`"), "{help}");
        // Split by it, or fixed by a filter: one point per x on every line.
        for fixed in [
            r#"Plot(x: "n", y: "t", series: ["m", "dtype"], filter: {"k": 1.0})"#,
            r#"Plot(x: "n", y: "t", series: "m", filter: {"k": 1.0, "dtype": "f16"})"#,
        ] {
            let plot: Plot = ron::from_str(fixed).unwrap();
            assert!(series(&table(), &plot).is_ok(), "{fixed}");
        }
    }

    #[test]
    fn several_series_columns_make_one_line_per_combination() {
        let plot: Plot =
            ron::from_str(r#"Plot(x: "n", y: "t", series: ["m", "dtype"], filter: {"k": 1.0})"#)
                .unwrap();
        let lines = series(&table(), &plot).unwrap();
        let got: Vec<(&str, &[(f64, f64)])> = lines
            .iter()
            .map(|l| (l.label.as_str(), l.points.as_slice()))
            .collect();
        assert_eq!(
            got,
            [
                ("m=1, dtype=f16", &[(64.0, 1.0), (128.0, 2.0)][..]),
                ("m=1, dtype=bf16", &[(64.0, 3.0)][..]),
                ("m=2, dtype=f16", &[(64.0, 4.0)][..]),
            ]
        );
    }

    #[test]
    fn intervals_become_bars_and_widen_the_range() {
        let mut t = table();
        t.rows[0].intervals[4] = Some(crate::stats::estimate::Estimate {
            value: 1.0,
            low: 0.5,
            high: 9.0,
            runs: 3,
            basis: crate::stats::estimate::Basis::Repetitions,
        });
        let plot: Plot =
            ron::from_str(r#"Plot(x: "n", y: "t", filter: {"k": 1, "m": 1, "dtype": "f16"})"#)
                .unwrap();
        let lines = series(&t, &plot).unwrap();
        let bars: Vec<_> = lines.iter().flat_map(|l| l.bars.iter().copied()).collect();
        assert_eq!(bars, [(64.0, 0.5, 9.0)]);
        let log: Plot = ron::from_str(
            r#"Plot(x: "n", y: "t", log_y: true, filter: {"k": 1, "m": 1, "dtype": "f16"})"#,
        )
        .unwrap();
        let bars: Vec<_> = series(&t, &log)
            .unwrap()
            .iter()
            .flat_map(|l| l.bars.clone())
            .collect();
        assert!(
            (bars[0].1 - 0.5f64.log10()).abs() < 1e-12 && (bars[0].2 - 9f64.log10()).abs() < 1e-12
        );
        let mut svg = String::new();
        register_font();
        draw(
            SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(),
            &plot,
            &lines,
            &colour_indices([lines.as_slice()]),
            1,
            None,
        )
        .unwrap();
        // One bar and its two caps beside the lines and points.
        assert!(svg.matches("<polyline").count() >= lines.len() + 3, "{svg}");
    }

    #[test]
    fn a_filter_that_keeps_no_row_or_names_no_column_is_an_error() {
        let none: Plot = ron::from_str(r#"Plot(x: "n", y: "t", filter: {"k": 3})"#).unwrap();
        let err = series(&table(), &none).unwrap_err().to_string();
        assert!(err.contains("k=3"), "{err}");
        let typo: Plot = ron::from_str(r#"Plot(x: "n", y: "t", filter: {"kk": 1})"#).unwrap();
        let err = series(&table(), &typo).unwrap_err().to_string();
        assert!(err.contains("kk"), "{err}");
    }

    #[test]
    fn ticks_are_integers_decades_or_round_steps() {
        // batch 1, 8, 64 on a linear axis: integer ticks, labelled as such.
        let r = range([1.0, 8.0, 64.0].into_iter());
        let t = ticks(&r, false, true);
        assert!(t.iter().all(|v| v.fract() == 0.0), "{t:?}");
        assert_eq!(tick(t[1], false), format!("{}", t[1] as i64));
        // The same on a log axis: 1, 2 and 5 of each decade (it spans less
        // than three), no 1.585.
        let r = range([1f64, 8.0, 64.0].iter().map(|v| v.log10()));
        let t = ticks(&r, true, false);
        let labels: Vec<String> = t.iter().map(|v| tick(*v, true)).collect();
        assert_eq!(labels, ["1", "2", "5", "10", "20", "50"]);
        let r = range([1f64, 10_000.0].iter().map(|v| v.log10()));
        let labels: Vec<String> = ticks(&r, true, false)
            .iter()
            .map(|v| tick(*v, true))
            .collect();
        assert_eq!(labels, ["1", "10", "100", "1000", "10k"]);
        // Less than a decade: 1, 2 and 5 of it.
        let r = range([2f64, 9.0].iter().map(|v| v.log10()));
        let labels: Vec<String> = ticks(&r, true, false)
            .iter()
            .map(|v| tick(*v, true))
            .collect();
        assert_eq!(labels, ["2", "5"]);
        assert_eq!(tick(5e8, false), "500M");
        assert_eq!(tick(2.5e6f64.log10(), true), "2.5M");
        assert_eq!(tick(12_000.0, false), "12k");
        assert_eq!(tick(1e9, false), "1G");
        assert_eq!(tick(-3e4, false), "-30k");
        assert_eq!(tick(8_750.0, false), "8750");
        // Fractions step at 1, 2 or 5 of a power of ten.
        let t = ticks(&(0.0..1.0), false, false);
        let labels: Vec<String> = t.iter().map(|v| tick(*v, false)).collect();
        assert_eq!(labels, ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        // Data far above the lowest round tick's place gets a tick of its
        // own near its minimum (the quickstart's 53 images/s line).
        let r = range([53.0, 400.0, 1000.0].into_iter());
        let labels: Vec<String> = ticks(&r, false, false)
            .iter()
            .map(|v| tick(*v, false))
            .collect();
        assert_eq!(labels, ["53", "200", "400", "600", "800", "1000"]);
        let r = range([53f64, 9_000.0, 400_000.0].iter().map(|v| v.log10()));
        let labels: Vec<String> = ticks(&r, true, false)
            .iter()
            .map(|v| tick(*v, true))
            .collect();
        assert_eq!(labels, ["100", "1000", "10k", "100k"]);
        let r = range([23f64, 9_000.0, 400_000.0].iter().map(|v| v.log10()));
        let labels: Vec<String> = ticks(&r, true, false)
            .iter()
            .map(|v| tick(*v, true))
            .collect();
        assert_eq!(labels[0], "23", "{labels:?}");
        // Tick labels carry three significant digits.
        assert_eq!(tick(242_814_000.0, false), "243M");
        assert_eq!(tick(874_579_968.0, false), "875M");
        assert_eq!(tick(87_450_000.0, false), "87.5M");
    }

    #[test]
    fn the_legend_goes_to_the_emptiest_corner() {
        // A line rising from lower left to upper right leaves the other two corners.
        let up = Series {
            label: "a".into(),
            points: vec![(0.0, 0.0), (10.0, 10.0)],
            few: Vec::new(),
            bars: Vec::new(),
        };
        let r = range([0.0, 10.0].into_iter());
        let c = emptiest_corner(std::slice::from_ref(&up), &r, &r);
        assert!(matches!(c, Some(SeriesLabelPosition::UpperLeft)), "{c:?}");
        // A line along the top: the legend goes below.
        let top = Series {
            label: "b".into(),
            points: vec![(0.0, 10.0), (5.0, 9.5), (10.0, 10.0)],
            few: Vec::new(),
            bars: Vec::new(),
        };
        let r2 = range([0.0, 10.0].into_iter());
        let c = emptiest_corner(
            std::slice::from_ref(&top),
            &r2,
            &range([0.0, 10.0].into_iter()),
        );
        assert!(matches!(c, Some(SeriesLabelPosition::LowerLeft)), "{c:?}");
        // Lines along the top and the bottom: no corner is free.
        let bottom = Series {
            label: "c".into(),
            points: vec![(0.0, 0.0), (10.0, 0.5)],
            few: Vec::new(),
            bars: Vec::new(),
        };
        let c = emptiest_corner(&[top, bottom], &r2, &range([0.0, 10.0].into_iter()));
        assert!(c.is_none(), "{c:?}");
    }

    #[test]
    fn a_label_keeps_its_colour_across_plots() {
        let s = |l: &str| Series {
            label: l.into(),
            points: vec![],
            few: Vec::new(),
            bars: vec![],
        };
        let first = [s("m=2"), s("m=1")];
        let second = [s("m=1"), s("m=3")];
        let labels = colour_indices([&first[..], &second[..]]);
        assert_eq!(labels, ["m=2", "m=1", "m=3"]);
        // The same series named in another order is the same colour (N16).
        let a = [s("patch=16, depth=6"), s("patch=32, depth=6")];
        let b = [s("depth=6, patch=32"), s("depth=6, patch=16")];
        let labels = colour_indices([&a[..], &b[..]]);
        assert_eq!(labels.len(), 2);
        assert_eq!(
            colour_of(&labels, "depth=6, patch=16"),
            colour_of(&labels, "patch=16, depth=6")
        );
        assert_ne!(
            colour_of(&labels, "depth=6, patch=32"),
            colour_of(&labels, "patch=16, depth=6")
        );
    }

    #[test]
    fn a_ratio_plot_has_a_line_at_one() {
        assert!(is_ratio("speedup") && is_ratio("latency_ms.median.ratio") && is_ratio("ratio"));
        assert!(!is_ratio("latency_ms.median") && !is_ratio("ratio_of.x"));
        let svg_of = |y: &str| {
            let plot: Plot = ron::from_str(&format!(r#"Plot(x: "n", y: "{y}")"#)).unwrap();
            let series = vec![Series {
                label: String::new(),
                points: vec![(64.0, 1.4), (128.0, 1.8)],
                few: Vec::new(),
                bars: Vec::new(),
            }];
            register_font();
            let mut svg = String::new();
            draw(
                SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(),
                &plot,
                &series,
                &[String::new()],
                1,
                None,
            )
            .unwrap();
            svg
        };
        // The grey reference line across the plot (the axis reaches down to
        // 1, below the data's 1.4).
        let line = r##"opacity="0.55" stroke="#000000" stroke-width="2" points="96,"##;
        let ratio = svg_of("speedup");
        assert!(ratio.contains(line), "{ratio}");
        assert!(
            ratio.contains("\n1\n") || ratio.contains("\n1.0\n"),
            "no tick at 1: {ratio}"
        );
        assert!(!svg_of("t").contains(line));
    }

    #[test]
    fn embedded_font_parses() {
        assert!(plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    }

    #[test]
    fn ranges_are_padded_and_never_empty() {
        let r = range([1.0, 3.0].into_iter());
        assert!(
            (r.start - 0.9).abs() < 1e-12 && (r.end - 3.1).abs() < 1e-12,
            "{r:?}"
        );
        let single = range([5.0].into_iter());
        assert!(single.start < 5.0 && single.end > 5.0);
        assert_eq!(range(std::iter::empty()), 0.0..1.0);
    }
}
