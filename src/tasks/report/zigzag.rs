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
    let apart = |columns: std::ops::Range<usize>, text: bool| -> Vec<&str> {
        columns
            .filter(|&i| a.cells[i] != b.cells[i])
            .filter(|&i| table.names[i] != plot.x && table.names[i] != plot.y)
            .filter(|&i| !text || a.cells[i].as_f64().is_none() || b.cells[i].as_f64().is_none())
            .map(|i| table.names[i].as_str())
            .collect()
    };
    // Params first; rows of one configuration (entries of a `rows` table)
    // differ in value columns instead: text ones (`op`) name it best.
    let values = table.param_count..table.param_count + table.value_count;
    let mut differ = apart(0..table.param_count, false);
    if differ.is_empty() {
        differ = apart(values.clone(), true);
    }
    if differ.is_empty() {
        differ = apart(values, false);
    }
    Err(error(plot, label, pair[0].0, &differ))
}

/// The error for the line `label` of `plot`, which has two rows at `x`
/// that differ in the columns `differ` (none: two rows alike in every
/// column the table shows).
pub(super) fn error(plot: &Plot, label: &str, x: f64, differ: &[&str]) -> TaskError {
    let named = if differ.is_empty() {
        "no column the table shows (the same configuration twice)".to_owned()
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

#[cfg(test)]
mod tests {
    use super::super::cell::Cell;
    use super::super::plot::series;
    use super::super::table::TableRow;
    use super::*;

    /// One configuration (`m = 1`) whose `rows` table gives two entries per
    /// `n`, told apart by the text column `op`.
    fn entries() -> Table {
        let row = |op: &str, n: i64, t: f64| {
            TableRow::of_cells(vec![
                Cell::Int(1),
                Cell::Str(op.into()),
                Cell::Int(n),
                Cell::Float(t),
            ])
        };
        Table {
            names: ["m", "op", "n", "t"].map(str::to_owned).to_vec(),
            param_count: 1,
            value_count: 3,
            rows: vec![
                row("mm", 64, 1.0),
                row("add", 64, 0.5),
                row("mm", 128, 2.0),
                row("add", 128, 0.7),
            ],
            env_groups: Vec::new(),
            node_count: 1,
            rows_without_gpu: 0,
            target: None,
            aa: Vec::new(),
        }
    }

    #[test]
    fn entries_of_one_configuration_are_told_apart_by_their_text_column() {
        let plot: Plot = ron::from_str(r#"Plot(x: "n", y: "t", series: "m")"#).unwrap();
        let TaskError::BadSpec { detail, help, .. } = series(&entries(), &plot).unwrap_err() else {
            panic!("a spec error");
        };
        assert!(
            detail.contains("two rows at n = 64: they differ in `op`,"),
            "{detail}"
        );
        assert!(help.contains("add op to the plot's `series`"), "{help}");
        let split: Plot = ron::from_str(r#"Plot(x: "n", y: "t", series: "op")"#).unwrap();
        assert!(series(&entries(), &split).is_ok());
    }
}
