//! Small multiples: a plot with `facet: "column"` is drawn as one panel per
//! value of that column, each panel the plot's rows with that value (the
//! value fixed as a `filter` would fix it), all on shared axes; and the
//! figure a plot's panels make, written as SVG and PNG.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::cell::Cell;
use super::compare::table_column;
use super::plot::{
    colour_of, draw, draw_foot, foot_lines, ranges, register_font, series, Series, EMPTY, FAMILY,
    FOOT_LINE, SIZE,
};
use super::spec::Plot;
use super::table::Table;
use super::write::write_atomic;
use crate::tasks::TaskError;
use crate::value::Value;

/// One panel of small multiples (`facet`), and the figure's heading and
/// caption lines above and below the panels.
const PANEL: (u32, u32) = (560, 400);
const HEADING: u32 = 40;
/// Room for two lines under the panels (see `plot::foot_lines`).
const FOOT: u32 = 8 + 2 * FOOT_LINE;
/// A row of the legend the panels share, under the heading.
const LEGEND_ROW: u32 = 24;

/// One panel of a plot: its heading (None for an unfaceted plot) and lines.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Panel {
    pub title: Option<String>,
    pub series: Vec<Series>,
}

/// The panels of `plot`: one, or one per value of its `facet` column that
/// has points, in the column's order (numbers by value, text as written).
pub(super) fn panels(table: &Table, plot: &Plot) -> Result<Vec<Panel>, TaskError> {
    let Some(facet) = &plot.facet else {
        return Ok(vec![Panel {
            title: None,
            series: series(table, plot)?,
        }]);
    };
    let column = table_column(table, "plot.facet", facet)?;
    let drawn = [Some(&plot.x), Some(&plot.y)]
        .into_iter()
        .flatten()
        .chain(plot.series.iter().flat_map(|s| s.0.iter()))
        .chain(plot.filter.keys());
    if let Some(taken) = drawn.into_iter().find(|c| *c == facet) {
        return Err(TaskError::BadSpec {
            field: "plot.facet".to_owned(),
            detail: format!(
                "`{taken}` is already on the plot (as its x, y, a series or a filter); a facet splits the plot by a column it does not show"
            ),
            help: "facet by another column, or leave `facet` out".to_owned(),
        });
    }
    let mut values: Vec<&Cell> = Vec::new();
    for row in &table.rows {
        let cell = &row.cells[column];
        if !cell.is_null() && !values.contains(&cell) {
            values.push(cell);
        }
    }
    values.sort_by(|a, b| a.order(b));
    let mut out = Vec::new();
    for value in values {
        let mut one = plot.clone();
        one.facet = None;
        one.filter.insert(facet.clone(), value_of(value));
        let lines = series(table, &one)?;
        if !lines.is_empty() {
            out.push(Panel {
                title: Some(format!("{facet} = {}", value.text())),
                series: lines,
            });
        }
    }
    Ok(out)
}

/// A cell as a filter's value (a panel's rows are those whose cell equals it).
fn value_of(cell: &Cell) -> Value {
    match cell {
        Cell::Bool(b) => Value::Bool(*b),
        Cell::Int(i) => Value::Int(*i),
        Cell::Float(x) => Value::Float(*x),
        Cell::Str(s) => Value::Str(s.clone()),
        Cell::Null => Value::Str(String::new()),
    }
}

/// Writes `plots/<stem>.svg` and `plots/<stem>.png` (at twice the size, for
/// sharp slides) under `out`, drawing the lines [`series`] made; `labels`
/// fixes each series' colour across the report (see [`colour_indices`]).
pub(super) fn write_plot(
    plot: &Plot,
    panels: &[Panel],
    labels: &[String],
    out: &Path,
) -> Result<(), TaskError> {
    let stem = plot.stem();
    let svg_path = out.join("plots").join(format!("{stem}.svg"));
    let png_path = out.join("plots").join(format!("{stem}.png"));
    let fail = |path: &Path, detail: String| TaskError::DrawPlot {
        path: path.to_owned(),
        detail,
    };
    register_font();

    let size = figure_size(panels);
    let mut svg = String::new();
    figure(
        SVGBackend::with_string(&mut svg, size).into_drawing_area(),
        plot,
        panels,
        labels,
        1,
    )
    .map_err(|e| fail(&svg_path, e))?;
    write_atomic(&svg_path, svg.as_bytes())?;

    // The bitmap backend picks the encoder from the extension, so the
    // temporary name ends in `.png` too.
    let mut temp = crate::atomic::temp_name(&png_path).into_os_string();
    temp.push(".png");
    let temp = std::path::PathBuf::from(temp);
    figure(
        BitMapBackend::new(&temp, (size.0 * 2, size.1 * 2)).into_drawing_area(),
        plot,
        panels,
        labels,
        2,
    )
    .map_err(|e| fail(&png_path, e))?;
    std::fs::rename(&temp, &png_path).map_err(|source| TaskError::WriteOutput {
        path: png_path.clone(),
        source,
    })
}

/// The figure's size: one plot, a line of text when there is no data, or
/// a grid of up to three panels a row under a heading.
fn figure_size(panels: &[Panel]) -> (u32, u32) {
    match panels {
        [] => EMPTY,
        [one] if one.title.is_none() => {
            if one.series.is_empty() {
                EMPTY
            } else {
                SIZE
            }
        }
        many => {
            let (cols, rows) = grid(many.len());
            let width = PANEL.0 * cols;
            let legend = legend_layout(many, width).last().map_or(0, |e| e.row + 1);
            (width, PANEL.1 * rows + HEADING + LEGEND_ROW * legend + FOOT)
        }
    }
}

/// One entry of the legend a faceted figure's panels share.
#[derive(Debug, PartialEq)]
struct LegendEntry {
    label: String,
    row: u32,
    /// Its left edge, in unscaled pixels.
    x: u32,
}

/// Every series label of `panels` once, in the order they first appear,
/// laid out left to right in rows no wider than `width`.
fn legend_layout(panels: &[Panel], width: u32) -> Vec<LegendEntry> {
    let mut labels: Vec<&str> = Vec::new();
    for s in panels.iter().flat_map(|p| &p.series) {
        if !labels.contains(&s.label.as_str()) {
            labels.push(&s.label);
        }
    }
    let (mut row, mut x) = (0, 16);
    let mut out = Vec::new();
    for label in labels {
        // A 20 px line, a gap, the text (about 8 px a character), a gap.
        let w = 20 + 8 + 8 * label.chars().count() as u32 + 24;
        if x > 16 && x + w > width {
            row += 1;
            x = 16;
        }
        out.push(LegendEntry {
            label: label.to_owned(),
            row,
            x,
        });
        x += w;
    }
    out
}

/// Draws the shared legend into `area`, each label in its report colour.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
    labels: &[String],
    scale: u32,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let px = |n: u32| (n * scale) as i32;
    for e in entries {
        let colour = colour_of(labels, &e.label);
        let y = px(e.row * LEGEND_ROW + LEGEND_ROW / 2);
        area.draw(&PathElement::new(
            vec![(px(e.x), y), (px(e.x + 20), y)],
            colour.stroke_width(2 * scale),
        ))
        .map_err(err)?;
        area.draw(&Circle::new((px(e.x + 10), y), px(4), colour.filled()))
            .map_err(err)?;
        area.draw(&Text::new(
            e.label.clone(),
            (px(e.x + 28), y - px(7)),
            (FAMILY, px(14)).into_font(),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// Columns and rows of a grid of `n` panels.
fn grid(n: usize) -> (u32, u32) {
    let cols = n.clamp(1, 3) as u32;
    (cols, (n as u32).div_ceil(cols))
}

/// Draws one plot, or its panels side by side on shared axes.
fn figure<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    plot: &Plot,
    panels: &[Panel],
    labels: &[String],
    scale: u32,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let [first, ..] = panels else {
        draw(root.clone(), plot, &[], labels, scale, None)?;
        return root.present().map_err(err);
    };
    if panels.len() == 1 && first.title.is_none() {
        draw(root.clone(), plot, &first.series, labels, scale, None)?;
        return root.present().map_err(err);
    }
    let px = |n: u32| n * scale;
    root.fill(&WHITE).map_err(err)?;
    let (_, h) = root.dim_in_pixel();
    let (w, _) = root.dim_in_pixel();
    let entries = legend_layout(panels, w / scale);
    let legend_h = LEGEND_ROW * entries.last().map_or(0, |e| e.row + 1);
    let (head, rest) = root.split_vertically(px(HEADING));
    let (legend, rest) = rest.split_vertically(px(legend_h));
    let (body, foot) = rest.split_vertically(h.saturating_sub(px(HEADING + legend_h + FOOT)));
    draw_legend(&legend, &entries, labels, scale)?;
    let heading = match (&plot.title, &plot.facet) {
        (Some(title), _) => title.clone(),
        (None, facet) => format!(
            "{}, one panel per {}",
            plot.heading(),
            facet.as_deref().unwrap_or("value")
        ),
    };
    let style = TextStyle::from((FAMILY, px(20)).into_font()).color(&BLACK);
    head.draw_text(&heading, &style, (px(16) as i32, px(10) as i32))
        .map_err(err)?;
    let few = panels
        .iter()
        .any(|p| p.series.iter().any(|s| !s.few.is_empty()));
    draw_foot(&foot, &foot_lines(plot.caption.as_ref(), few), scale)?;
    let every: Vec<Series> = panels.iter().flat_map(|p| p.series.clone()).collect();
    let shared = ranges(plot, &every);
    let (cols, rows) = grid(panels.len());
    let areas = body.split_evenly((rows as usize, cols as usize));
    for (panel, area) in panels.iter().zip(areas) {
        let mut one = plot.clone();
        one.title = panel.title.clone();
        one.caption = None;
        one.filter.clear();
        draw(area, &one, &panel.series, labels, scale, Some(&shared))?;
    }
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::report::table::TableRow;

    /// A two-way sweep: `patch` × `depth` × `batch`, the value `t`.
    fn sweep() -> Table {
        let row = |patch: i64, depth: i64, batch: i64, t: f64| {
            TableRow::of_cells(vec![
                Cell::Int(patch),
                Cell::Int(depth),
                Cell::Int(batch),
                Cell::Float(t),
            ])
        };
        let mut rows = Vec::new();
        for depth in [12, 6] {
            for patch in [16, 32] {
                for batch in [1, 8] {
                    rows.push(row(patch, depth, batch, (patch * depth * batch) as f64));
                }
            }
        }
        Table {
            names: ["patch", "depth", "batch", "t"].map(str::to_owned).to_vec(),
            param_count: 3,
            value_count: 1,
            rows,
            env_groups: Vec::new(),
            node_count: 8,
            rows_without_gpu: 0,
            target: None,
            aa: Vec::new(),
        }
    }

    #[test]
    fn a_facet_draws_one_panel_per_value_where_a_line_would_zig_zag() {
        let t = sweep();
        let flat: Plot = ron::from_str(r#"Plot(x: "batch", y: "t", series: "patch")"#).unwrap();
        match panels(&t, &flat).unwrap_err() {
            TaskError::BadSpec { detail, help, .. } => {
                assert!(detail.contains("`depth`"), "{detail}");
                assert!(help.contains("facet: \"depth\""), "{help}");
            }
            other => panic!("{other}"),
        }

        let faceted: Plot =
            ron::from_str(r#"Plot(x: "batch", y: "t", series: "patch", facet: "depth")"#).unwrap();
        let drawn = panels(&t, &faceted).unwrap();
        let titles: Vec<_> = drawn.iter().map(|p| p.title.clone().unwrap()).collect();
        assert_eq!(titles, ["depth = 6", "depth = 12"], "in the column's order");
        for p in &drawn {
            assert_eq!(p.series.len(), 2, "one line per patch in each panel");
            assert!(p.series.iter().all(|s| s.points.len() == 2));
        }
        assert_eq!(faceted.stem(), "t_vs_batch_by_patch_per_depth");

        register_font();
        let mut svg = String::new();
        figure(
            SVGBackend::with_string(&mut svg, figure_size(&drawn)).into_drawing_area(),
            &faceted,
            &drawn,
            &["patch=16".into(), "patch=32".into()],
            1,
        )
        .unwrap();
        assert!(
            svg.contains("depth = 6") && svg.contains("depth = 12"),
            "{svg}"
        );
        // One document: the panels inside it, closed once, at the end.
        assert_eq!(svg.matches("</svg>").count(), 1, "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(svg.contains("one panel per depth"), "the figure's heading");
        // One legend for the figure: each series named once, not per panel.
        for label in ["patch=16", "patch=32"] {
            assert_eq!(
                svg.matches(&format!("\n{label}\n")).count(),
                1,
                "{label}: {svg}"
            );
        }
        assert_eq!(
            figure_size(&drawn),
            (2 * PANEL.0, PANEL.1 + HEADING + LEGEND_ROW + FOOT)
        );
    }

    #[test]
    fn the_shared_legend_wraps_into_rows_within_the_figure() {
        let line = |label: &str| Series {
            label: label.to_owned(),
            ..Series::default()
        };
        let panel = |labels: &[&str]| Panel {
            title: Some("p".into()),
            series: labels.iter().map(|l| line(l)).collect(),
        };
        let long = "model=vit16x12x768,pipeline=gpu";
        let panels = [panel(&[long, "b"]), panel(&["b", long, "c", long])];
        let entries = legend_layout(&panels, 400);
        let labels: Vec<_> = entries.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, [long, "b", "c"], "each once, first seen first");
        let at: Vec<_> = entries.iter().map(|e| (e.row, e.x)).collect();
        assert_eq!(
            at,
            [(0, 16), (0, 316), (1, 16)],
            "`c` would end past 400 px"
        );
    }

    #[test]
    fn a_facet_on_a_column_the_plot_shows_or_an_unknown_one_is_an_error() {
        let t = sweep();
        for spec in [
            r#"Plot(x: "batch", y: "t", facet: "batch")"#,
            r#"Plot(x: "batch", y: "t", series: "patch", facet: "patch")"#,
            r#"Plot(x: "batch", y: "t", filter: {"depth": 6}, facet: "depth")"#,
        ] {
            let plot: Plot = ron::from_str(spec).unwrap();
            let err = panels(&t, &plot).unwrap_err().to_string();
            assert!(err.contains("already on the plot"), "{spec}: {err}");
        }
        let typo: Plot =
            ron::from_str(r#"Plot(x: "batch", y: "t", series: "patch", facet: "dpeth")"#).unwrap();
        let err = panels(&t, &typo).unwrap_err().to_string();
        assert!(err.contains("dpeth"), "{err}");
    }
}
