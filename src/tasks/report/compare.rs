//! Comparisons: for each group of rows equal in every param but one, the
//! ratio of a metric at each value of that param to its value at the
//! baseline, with its 95 % interval and verdict from [`crate::stats`].
//! Rows of different environments are never paired; the pair is listed with a
//! note instead.

use super::cell::Cell;
use super::spec::Compare;
use super::table::Table;
use crate::stats::estimate::cancellation;
use crate::stats::verdict::{self, Verdict};
use crate::stats::{self, Basis, Design, Statistic};
use crate::tasks::TaskError;

/// The column names of `compare.csv` after the group's params and the param.
pub(super) const TAIL: [&str; 14] = [
    "baseline",
    "metric_baseline",
    "metric_value",
    "ratio",
    "ci95_low",
    "ci95_high",
    "n_baseline",
    "n_value",
    "reps_baseline",
    "reps_value",
    "interval",
    "verdict",
    "env_group",
    "note",
];

/// The comparison as a table: group params, the compared param, then [`TAIL`].
pub(super) struct Comparison {
    pub names: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

pub(super) fn compare(table: &Table, spec: &Compare) -> Result<Comparison, TaskError> {
    if !(spec.margin > 0.0 && spec.margin < 1.0) {
        return Err(TaskError::BadSpec {
            field: "compare.margin".to_owned(),
            detail: format!("margin {} is not a fraction between 0 and 1", spec.margin),
            help: "write the equivalence margin as a fraction: `margin: 0.02` for ±2 %".to_owned(),
        });
    }
    let param = table_column(table, "compare.param", &spec.param)?;
    let metric = table_column(table, "compare.metric", &spec.metric)?;
    let baseline = Cell::from_value(&spec.baseline);
    let is_baseline = |row: usize| same(&table.rows[row].cells[param], &baseline);
    if !(0..table.rows.len()).any(is_baseline) {
        return Err(TaskError::BadSpec {
            field: "compare.baseline".to_owned(),
            detail: format!(
                "baseline `{}` of `{}` is in no row",
                baseline.text(),
                spec.param
            ),
            help: format!(
                "the table's values of `{}` are: {}",
                spec.param,
                values_of(table, param)
            ),
        });
    }
    let shown: Vec<usize> = (0..table.param_count).filter(|&i| i != param).collect();
    // A param with one value per value of the compared param (HET1's
    // `max_over_mean` beside its `pattern`) describes that value: shown,
    // never grouped by, or no row would share a group with its baseline.
    let keys: Vec<usize> = shown
        .iter()
        .copied()
        .filter(|&k| !follows(table, param, k))
        .collect();
    let mut names: Vec<String> = shown.iter().map(|&i| table.names[i].clone()).collect();
    names.push(spec.param.clone());
    names.extend(TAIL.map(str::to_owned));

    let mut rows = Vec::new();
    for group in groups(table, &keys) {
        let bases: Vec<usize> = group.iter().copied().filter(|&r| is_baseline(r)).collect();
        for &row in group.iter().filter(|&&r| !is_baseline(r)) {
            if table.rows[row].cells[param].is_null() {
                continue;
            }
            let mut out: Vec<Cell> = shown
                .iter()
                .map(|&k| table.rows[row].cells[k].clone())
                .collect();
            out.push(table.rows[row].cells[param].clone());
            out.extend(pair(table, spec, metric, &bases, row, &baseline));
            rows.push(out);
        }
    }
    Ok(Comparison { names, rows })
}

/// The [`TAIL`] cells of one compared row.
fn pair(
    table: &Table,
    spec: &Compare,
    metric: usize,
    bases: &[usize],
    row: usize,
    baseline: &Cell,
) -> Vec<Cell> {
    let value = &table.rows[row];
    let n = |r: &super::table::TableRow| {
        r.samples
            .as_ref()
            .map_or(Cell::Null, |s| Cell::Int(s.len() as i64))
    };
    let env = |r: &super::table::TableRow| r.env_group.map(|g| table.env_groups[g].label.clone());
    let mut cells = vec![baseline.clone(), Cell::Null, value.cells[metric].clone()];
    let mut tail = [
        Cell::Null,
        Cell::Null,
        Cell::Null,
        Cell::Null,
        n(value),
        Cell::Null,
        Cell::Int(value.reps as i64),
        Cell::Null,
        Cell::Null,
    ];
    let base = match bases {
        [one] => &table.rows[*one],
        [] => return finish(cells, tail, env(value), "no baseline row in this group"),
        _ => {
            return finish(
                cells,
                tail,
                env(value),
                "several baseline rows in this group",
            )
        }
    };
    cells[1] = base.cells[metric].clone();
    tail[3] = n(base);
    tail[5] = Cell::Int(base.reps as i64);
    if env(base) != env(value) {
        let note = format!(
            "environments differ (baseline in {}, this row in {}): not compared",
            env(base).unwrap_or_else(|| "unknown".into()),
            env(value).unwrap_or_else(|| "unknown".into())
        );
        return finish(cells, tail, env(value), &note);
    }
    let (Some(b), Some(v)) = (base.cells[metric].as_f64(), value.cells[metric].as_f64()) else {
        return finish(cells, tail, env(value), "metric missing");
    };
    if b == 0.0 {
        return finish(cells, tail, env(value), "baseline metric is zero");
    }
    // The one ratio of `crate::stats`, by the design that measured the
    // pair: together (the same processes), apart with repetitions, or one
    // run on a side (its batches' noise only).
    let together = base.processes.len() >= 2 && base.processes == value.processes;
    let design = if together {
        Design::Together
    } else {
        Design::Apart
    };
    let stat = Statistic::for_metric(&spec.metric);
    let r = stats::ratio::ratio(&side(base, metric, b), &side(value, metric, v), design);
    tail[0] = Cell::Float(r.map_or(v / b, |r| r.value));
    let note = match r.and_then(|r| r.interval.map(|i| (r, i))) {
        Some((r, (low, high))) => {
            tail[1] = Cell::Float(low);
            tail[2] = Cell::Float(high);
            tail[7] = Cell::Str(r.basis.as_str().to_owned());
            let higher = verdict::higher_is_better(&spec.metric);
            let verdict = verdict::judge(r.value, (low, high), spec.margin, higher);
            tail[8] = Cell::Str(verdict.as_str().to_owned());
            let mut notes: Vec<String> = Vec::new();
            if verdict == Verdict::Inconclusive {
                notes.push(INCONCLUSIVE.to_owned());
            }
            if r.basis == Basis::WithinRun {
                notes.push("within-run interval only: the next run may land outside it".to_owned());
            }
            if r.basis == Basis::Paired {
                let at = |i: usize| table.aa.get(i).and_then(Option::as_ref);
                let aa = at(bases[0]).or(at(row));
                match aa.and_then(|aa| against_aa(base, value, metric, aa)) {
                    Some((f, p)) if p < AA_P => notes.push(format!(
                        "measured together but the per-process ratios spread {f:.1} times the A/A check's (F test p = {p:.1e}): the process's speed moved these members unequally and the interval carries it"
                    )),
                    Some(_) => {}
                    None if unequal_band(base, value, metric, (low, high), r.value) => {
                        notes.push(UNEQUAL_BAND.to_owned());
                    }
                    None => {}
                }
            }
            notes.join("; ")
        }
        None if r.is_none() => "no interval: a value is not above 0".to_owned(),
        None if stat.is_none() => {
            "no interval: no repetitions and no per-sample statistic for this metric".to_owned()
        }
        None => "no interval: no repetitions and no per-batch samples".to_owned(),
    };
    finish(cells, tail, env(value), &note)
}

/// A row's side of a ratio: its repetitions' values, or its one run's value
/// with the standard error its batches give the metric's statistic.
fn side(row: &super::table::TableRow, metric: usize, value: f64) -> Vec<stats::Value> {
    if let Some(per_rep) = &row.per_rep[metric] {
        return per_rep.iter().copied().map(stats::Value::exact).collect();
    }
    vec![stats::Value {
        value,
        rel_se: row.rel_se[metric].unwrap_or(0.0),
        inverse: false,
    }]
}

/// Below this p, a paired comparison spreads more than its A/A check.
const AA_P: f64 = 0.01;

/// The interaction test of a paired comparison against the A/A check
/// `aa` over the same processes: the variance ratio and its p (see
/// [`stats::ratio::interaction`]).
fn against_aa(
    base: &super::table::TableRow,
    value: &super::table::TableRow,
    metric: usize,
    aa: &super::aa::AaLogs,
) -> Option<(f64, f64)> {
    let (b, v) = (
        base.per_rep[metric].as_ref()?,
        value.per_rep[metric].as_ref()?,
    );
    let mut pair = Vec::new();
    let mut check = Vec::new();
    for ((process, b), v) in base.processes.iter().zip(b).zip(v) {
        let Some((_, a)) = aa.iter().find(|(p, _)| p == process) else {
            continue;
        };
        if *b > 0.0 && *v > 0.0 {
            pair.push((v / b).ln());
            check.push(*a);
        }
    }
    stats::ratio::interaction(&pair, &check)
}

/// The note of an inconclusive comparison.
pub(super) const INCONCLUSIVE: &str =
    "inconclusive: the 95% interval holds 1 and reaches beyond the margin";

/// The note of a paired comparison whose members the process's speed
/// moved unequally.
pub(super) const UNEQUAL_BAND: &str = "measured together but the process's speed moved these members unequally (as it moves a launch-bound eager run and not a CUDA graph): pairing removed less than half the spread between processes and the interval carries the rest";

/// Whether a paired comparison wider than ±2 % kept more than half of the
/// spread its members show between processes ([`cancellation`] < 0.5).
fn unequal_band(
    base: &super::table::TableRow,
    value: &super::table::TableRow,
    metric: usize,
    (low, high): (f64, f64),
    ratio: f64,
) -> bool {
    let half = (high - low) / 2.0 / ratio;
    let (Some(b), Some(c)) = (&base.per_rep[metric], &value.per_rep[metric]) else {
        return false;
    };
    half > 0.02 && cancellation(b, c).is_some_and(|k| k < 0.5)
}

fn finish(mut cells: Vec<Cell>, tail: [Cell; 9], env: Option<String>, note: &str) -> Vec<Cell> {
    cells.extend(tail);
    cells.push(env.map_or(Cell::Null, Cell::Str));
    cells.push(if note.is_empty() {
        Cell::Null
    } else {
        Cell::Str(note.to_owned())
    });
    cells
}

/// Numbers equal by value (so `1` matches `1.0`), everything else by text.
pub(super) fn same(cell: &Cell, wanted: &Cell) -> bool {
    match (cell.as_f64(), wanted.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => !cell.is_null() && cell.text() == wanted.text(),
    }
}

/// Whether column `k` takes more than one value and exactly one for each
/// value of column `param`: it then varies only as `param` does.
fn follows(table: &Table, param: usize, k: usize) -> bool {
    let mut seen: Vec<(String, String)> = Vec::new();
    for row in &table.rows {
        let (p, v) = (row.cells[param].text(), row.cells[k].text());
        match seen.iter().find(|(q, _)| *q == p) {
            Some((_, w)) if *w != v => return false,
            Some(_) => {}
            None => seen.push((p, v)),
        }
    }
    let first = seen.first().map(|(_, v)| v);
    seen.iter().any(|(_, v)| Some(v) != first)
}

/// Row indices grouped by the cells of `keys`, groups in first-row order.
fn groups(table: &Table, keys: &[usize]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
    for (i, row) in table.rows.iter().enumerate() {
        let key: Vec<String> = keys.iter().map(|&k| row.cells[k].text()).collect();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

fn values_of(table: &Table, column: usize) -> String {
    let mut seen: Vec<String> = Vec::new();
    for cell in table.column(column).filter(|c| !c.is_null()) {
        let text = format!("`{}`", cell.text());
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    seen.join(", ")
}

/// The index of a column a spec field names, or an error listing the columns.
pub(super) fn table_column(table: &Table, field: &str, name: &str) -> Result<usize, TaskError> {
    table
        .column_index(name)
        .ok_or_else(|| TaskError::UnknownTableColumn {
            field: field.to_owned(),
            name: name.to_owned(),
            help: format!(
                "the table's columns are {}; a metric must also be listed in `columns`",
                table
                    .names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}
