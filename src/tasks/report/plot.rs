//! Plots: one numeric column against another, one line per value of a series
//! column, drawn with plotters to SVG and PNG. Text is laid out with an
//! embedded DejaVu Sans subset (`font/`), so no system font library is needed.
//! A log axis plots `log10` of the values and labels ticks with the values.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::cell::Cell;
use super::compare::{same, table_column};
use super::spec::Plot;
use super::table::Table;
use super::write::write_atomic;
use crate::tasks::TaskError;

const FONT: &[u8] = include_bytes!("font/DejaVuSans-subset.ttf");
const FAMILY: &str = "sans-serif";
const SIZE: (u32, u32) = (900, 560);
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
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Writes `plots/<stem>.svg` and `plots/<stem>.png` under `out`, drawing the
/// lines [`series`] made.
pub fn write_plot(plot: &Plot, series: &[Series], out: &Path) -> Result<(), TaskError> {
    let stem = plot.stem();
    let svg_path = out.join("plots").join(format!("{stem}.svg"));
    let png_path = out.join("plots").join(format!("{stem}.png"));
    let fail = |path: &Path, detail: String| TaskError::DrawPlot {
        path: path.to_owned(),
        detail,
    };
    register_font();

    let mut svg = String::new();
    draw(
        SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(),
        plot,
        series,
    )
    .map_err(|e| fail(&svg_path, e))?;
    write_atomic(&svg_path, svg.as_bytes())?;

    // The bitmap backend picks the encoder from the extension, so the
    // temporary name ends in `.png` too.
    let mut temp = crate::atomic::temp_name(&png_path).into_os_string();
    temp.push(".png");
    let temp = std::path::PathBuf::from(temp);
    draw(
        BitMapBackend::new(&temp, SIZE).into_drawing_area(),
        plot,
        series,
    )
    .map_err(|e| fail(&png_path, e))?;
    std::fs::rename(&temp, &png_path).map_err(|source| TaskError::WriteOutput {
        path: png_path.clone(),
        source,
    })
}

fn register_font() {
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
pub fn series(table: &Table, plot: &Plot) -> Result<Vec<Series>, TaskError> {
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
    for row in &table.rows {
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
        match lines.iter_mut().find(|s| s.label == label) {
            Some(line) => line.points.push(point),
            None => lines.push(Series {
                label,
                points: vec![point],
            }),
        }
    }
    for line in &mut lines {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
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

fn tick(value: f64, log: bool) -> String {
    super::cell::format_sig(if log { 10f64.powf(value) } else { value })
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    plot: &Plot,
    series: &[Series],
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let points = || series.iter().flat_map(|s| s.points.iter());
    let mut caption = match &plot.series {
        Some(by) => format!("{} vs {} by {}", plot.y, plot.x, by.joined(", ")),
        None => format!("{} vs {}", plot.y, plot.x),
    };
    if !plot.filter.is_empty() {
        let fixed: Vec<String> = plot
            .filter
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        caption = format!("{caption} ({})", fixed.join(", "));
    }
    if series.is_empty() {
        caption = format!("{caption}: no data, the traces recorded no GPU");
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(range(points().map(|p| p.0)), range(points().map(|p| p.1)))
        .map_err(err)?;
    let x_ticks = |v: &f64| tick(*v, plot.log_x);
    let y_ticks = |v: &f64| tick(*v, plot.log_y);
    chart
        .configure_mesh()
        .x_desc(axis_title(&plot.x, plot.log_x))
        .y_desc(axis_title(&plot.y, plot.log_y))
        .x_label_formatter(&x_ticks)
        .y_label_formatter(&y_ticks)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .draw()
        .map_err(err)?;
    for (i, line) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(line.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, 4, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn axis_title(column: &str, log: bool) -> String {
    if log {
        format!("{column} (log scale)")
    } else {
        column.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::table::TableRow;

    /// Params `m`, `dtype`, `k`, then the value `t`: two values of `m` and of
    /// `dtype` at `k = 1`, and one row at `k = 2` that the filter drops.
    fn table() -> Table {
        let row = |m: i64, dtype: &str, k: i64, n: i64, t: f64| TableRow {
            cells: vec![
                Cell::Int(m),
                Cell::Str(dtype.into()),
                Cell::Int(k),
                Cell::Int(n),
                Cell::Float(t),
            ],
            samples: None,
            env_group: None,
            images: None,
        };
        Table {
            names: ["m", "dtype", "k", "n", "t"].map(str::to_owned).to_vec(),
            param_count: 4,
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
    fn a_filter_that_keeps_no_row_or_names_no_column_is_an_error() {
        let none: Plot = ron::from_str(r#"Plot(x: "n", y: "t", filter: {"k": 3})"#).unwrap();
        let err = series(&table(), &none).unwrap_err().to_string();
        assert!(err.contains("k=3"), "{err}");
        let typo: Plot = ron::from_str(r#"Plot(x: "n", y: "t", filter: {"kk": 1})"#).unwrap();
        let err = series(&table(), &typo).unwrap_err().to_string();
        assert!(err.contains("kk"), "{err}");
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
