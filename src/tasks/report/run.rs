//! The task's entry point: build the table, then write every output.

use super::compare::compare;
use super::facet::{panels, write_plot};
use super::markdown::render;
use super::plot::colour_indices;
use super::spec::{ReportSpec, COMPARE_CSV, REPORT_MD, TABLE_CSV, TABLE_PARQUET};
use super::table::build_table;
use super::write::{write_atomic, Grid};
use crate::tasks::{TaskContext, TaskError};

/// Runs a `Report` node: reads `ctx.upstream` for the stages in
/// `spec.sources` and writes [`ReportSpec::outputs`] into `ctx.out`.
pub fn run(spec: &ReportSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    let table = build_table(spec, ctx)?;
    if let Some(answer) = &spec.answer {
        let named = table.names.contains(answer)
            || spec.compare.as_ref().is_some_and(|c| &c.metric == answer);
        if !named {
            return Err(TaskError::UnknownTableColumn {
                field: "answer".to_owned(),
                name: answer.clone(),
                help: format!(
                    "`answer` names the metric that answers the report's question: list it in `columns` (the table's columns are {})",
                    table.names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
    // Check every spec field against the table before writing anything, so a
    // typo in a plot does not leave a half-done output directory behind.
    let comparison = spec
        .compare
        .as_ref()
        .map(|c| compare(&table, c))
        .transpose()?;
    let plots = spec
        .plots
        .iter()
        .map(|p| Ok((p, panels(&table, p)?)))
        .collect::<Result<Vec<_>, TaskError>>()?;

    let grid = Grid {
        names: &table.names,
        rows: table.rows.iter().map(|r| r.cells.as_slice()).collect(),
    };
    grid.write_csv(&ctx.out.join(TABLE_CSV))?;
    grid.write_parquet(&ctx.out.join(TABLE_PARQUET))?;
    if let Some(c) = &comparison {
        Grid {
            names: &c.names,
            rows: c.rows.iter().map(Vec::as_slice).collect(),
        }
        .write_csv(&ctx.out.join(COMPARE_CSV))?;
    }
    let labels = colour_indices(
        plots
            .iter()
            .flat_map(|(_, panels)| panels.iter().map(|p| p.series.as_slice())),
    );
    // Each plot says where its numbers were measured, under it.
    let place = super::markdown::measured_on(&table).map(|p| format!("measured on {p}"));
    for (plot, panels) in &plots {
        let mut plot = (*plot).clone();
        if let Some(place) = &place {
            plot.caption = Some(match &plot.caption {
                Some(c) => format!("{c}; {place}"),
                None => place.clone(),
            });
        }
        write_plot(&plot, panels, &labels, &ctx.out)?;
    }
    let md = render(spec, &table, comparison.as_ref());
    write_atomic(&ctx.out.join(REPORT_MD), md.as_bytes())
}
