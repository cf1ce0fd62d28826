//! A plot's line must not zig-zag through a param it does not show.

use super::spec::Plot;
use super::table::Table;
use crate::tasks::TaskError;

/// A line must not pass through two rows at the same x: they differ in a
/// param the plot neither draws, splits by, nor fixes, and the line would
/// zig-zag between them. An error naming those params and the fix.
pub(super) fn hidden_params(
    table: &Table,
    plot: &Plot,
    label: &str,
    rows: &[(f64, usize)],
) -> Result<(), TaskError> {
    let mut sorted = rows.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let Some(pair) = sorted.windows(2).find(|w| w[0].0 == w[1].0) else {
        return Ok(());
    };
    let (a, b) = (&table.rows[pair[0].1], &table.rows[pair[1].1]);
    let differ: Vec<&str> = (0..table.param_count)
        .filter(|&i| a.cells[i] != b.cells[i])
        .map(|i| table.names[i].as_str())
        .collect();
    Err(error(plot, label, pair[0].0, &differ))
}

/// The error for the line `label` of `plot`, which has two rows at `x`
/// that differ in the params `differ` (none: they differ in environment).
pub(super) fn error(plot: &Plot, label: &str, x: f64, differ: &[&str]) -> TaskError {
    let named = if differ.is_empty() {
        "rows of other environments".to_owned()
    } else {
        differ
            .iter()
            .map(|d| format!("`{d}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let first = differ.first().copied().unwrap_or("the param");
    TaskError::BadSpec {
        field: "plot".to_owned(),
        detail: format!(
            "the line `{label}` of the plot of `{}` against `{}` has two rows at {} = {x}: they differ in {named}, which the plot neither draws, splits by, nor fixes, so the line would zig-zag between them",
            plot.y, plot.x, plot.x
        ),
        help: format!(
            "add {first} to the plot's `series` (one line per value), draw one panel per value with `facet: \"{first}\"`, or fix it with `filter: {{ \"{first}\": … }}`"
        ),
    }
}
