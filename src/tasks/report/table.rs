//! The report table: joined rows laid out as columns (params, values, then
//! `samples`, `env_group`, `nodes`), with the environment groups that tell
//! rows measured on different machines or software apart.

use serde_json::Value as Json;

use super::cell::Cell;
use super::fold;
use super::join::{join_rows, param_names, sort_rows, value_columns, Row};
use super::spec::ReportSpec;
use crate::stats::estimate::Estimate;
use crate::tasks::{TaskContext, TaskError};

/// Columns every table ends with.
pub(super) const REPS: &str = "reps";
pub(super) const INTERVAL: &str = "interval";
pub(super) const WIDE: &str = "wide";
/// Present only when a row's run is invalid (kept after its limit of
/// measurements, or with `--accept-invalid`): why, per run.
pub(super) const INVALID: &str = "invalid";
pub(super) const SAMPLES: &str = "samples";
pub(super) const ENV_GROUP: &str = "env_group";
pub(super) const NODES: &str = "nodes";

/// The suffixes of a value column's interval columns.
pub(super) const CI_LOW: &str = ".ci95_low";
pub(super) const CI_HIGH: &str = ".ci95_high";

/// Rows with an identical `env.key_facets` object.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EnvGroup {
    /// `env1`, `env2`, … in the order of the first row of each group.
    pub label: String,
    pub facets: Json,
    pub hosts: Vec<String>,
    pub rows: usize,
}

#[derive(Debug, Clone)]
pub(super) struct TableRow {
    pub cells: Vec<Cell>,
    /// Per column: the 95 % interval of the cell, where one is known.
    pub intervals: Vec<Option<Estimate>>,
    /// Per column: the repetitions' values, for a row of two or more.
    pub per_rep: Vec<Option<Vec<f64>>>,
    /// Per column, for a row of one run: its batches' standard error of
    /// the cell, relative to it.
    pub rel_se: Vec<Option<f64>>,
    /// The repetitions the row folds (1 for a run of its own).
    pub reps: usize,
    /// Per-batch latencies (ms), when the row's `results.json` has them.
    pub samples: Option<Vec<f64>>,
    /// Index into [`Table::env_groups`]; `None` when no file had `env`.
    pub env_group: Option<usize>,
    pub images: Option<i64>,
    /// The processes behind the row, one per repetition in `rep` order
    /// (the ids of the nodes that measured it): two rows measured together
    /// share them.
    pub processes: Vec<String>,
}

#[cfg(test)]
impl TableRow {
    /// A row of one run with these cells and nothing else known (tests).
    pub(super) fn of_cells(cells: Vec<Cell>) -> TableRow {
        let n = cells.len();
        TableRow {
            cells,
            intervals: vec![None; n],
            per_rep: vec![None; n],
            rel_se: vec![None; n],
            reps: 1,
            samples: None,
            env_group: None,
            images: None,
            processes: Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Table {
    pub names: Vec<String>,
    /// How many leading columns are params.
    pub param_count: usize,
    /// How many value columns follow them (before their interval columns).
    pub value_count: usize,
    pub rows: Vec<TableRow>,
    pub env_groups: Vec<EnvGroup>,
    pub node_count: usize,
    /// Rows whose traces recorded no GPU (CPU runs): their device metrics
    /// are empty.
    pub rows_without_gpu: usize,
    /// The report's precision target (`target`), relative.
    pub target: Option<f64>,
    /// Per row: its A/A check's per-process log-ratios for the compared
    /// metric, where a block measured it with `check: true`.
    pub aa: Vec<Option<super::aa::AaLogs>>,
}

impl Table {
    pub(super) fn column_index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub(super) fn column(&self, index: usize) -> impl Iterator<Item = &Cell> {
        self.rows.iter().map(move |r| &r.cells[index])
    }
}

/// Reads the sources and builds the table.
pub(super) fn build_table(spec: &ReportSpec, ctx: &TaskContext) -> Result<Table, TaskError> {
    super::join::check_filter(spec, ctx)?;
    let (twins, all): (Vec<_>, Vec<_>) = super::fold::fold(join_rows(spec, ctx)?)
        .into_iter()
        .partition(|r| r.twin);
    if all.is_empty() {
        return Err(TaskError::BadSpec {
            field: "sources".to_owned(),
            detail: "the source stages have no nodes, so the table has no rows".to_owned(),
            help: "check the stages named in `sources` produce at least one node".to_owned(),
        });
    }
    // Columns are checked against every source row, so a report that a
    // `filter` narrows keeps a column its own rows happen to lack (empty).
    let values = value_columns(spec, &all)?;
    let mut rows: Vec<_> = all
        .into_iter()
        .filter(|r| super::join::kept(spec, &r.params))
        .collect();
    if rows.is_empty() {
        return Err(TaskError::BadSpec {
            field: "filter".to_owned(),
            detail: format!(
                "no source node has {}, so the table has no rows",
                spec.filter
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            help:
                "check the values against the source nodes' params (`vitgraph ls STAGE` lists them)"
                    .to_owned(),
        });
    }
    let params = param_names(&rows);
    sort_rows(&mut rows, &params);
    let (env_groups, membership) = env_groups(&rows);

    let folded: Vec<Vec<fold::Value>> = rows
        .iter()
        .map(|row| values.iter().map(|v| fold::value(row, v)).collect())
        .collect();
    // Interval columns for the value columns that have an interval somewhere.
    let with_interval: Vec<usize> = (0..values.len())
        .filter(|&k| folded.iter().any(|r| r[k].interval.is_some()))
        .collect();
    let mut names = params.clone();
    names.extend(values.iter().cloned());
    for &k in &with_interval {
        names.push(format!("{}{CI_LOW}", values[k]));
        names.push(format!("{}{CI_HIGH}", values[k]));
    }
    names.extend([REPS, INTERVAL].map(str::to_owned));
    if spec.target.is_some() {
        names.push(WIDE.to_owned());
    }
    let invalid: Vec<Vec<String>> = rows.iter().map(invalid_runs).collect();
    let any_invalid = invalid.iter().any(|i| !i.is_empty());
    if any_invalid {
        names.push(INVALID.to_owned());
    }
    names.extend([SAMPLES, ENV_GROUP, NODES].map(str::to_owned));
    let aa = super::aa::checks(
        &twins,
        &rows,
        spec.compare.as_ref().map(|c| c.metric.as_str()),
    );
    let node_count = rows.iter().map(|r| r.nodes.len()).sum();
    let rows_without_gpu = rows.iter().filter(|r| r.no_gpu).count();
    let layout = Layout {
        params: &params,
        values: &values,
        with_interval: &with_interval,
        target: spec.target,
        width: names.len(),
    };
    let table_rows = rows
        .iter()
        .zip(folded)
        .zip(membership)
        .zip(invalid)
        .map(|(((row, folded), group), invalid)| {
            let mut r = layout.row(row, folded, group, group.map(|g| &env_groups[g]));
            if any_invalid {
                // Before `samples`, `env_group` and `nodes`.
                let at = r.cells.len() - 3;
                let cell = if invalid.is_empty() {
                    Cell::Null
                } else {
                    Cell::Str(invalid.join("; "))
                };
                r.cells.insert(at, cell);
                r.intervals.push(None);
                r.per_rep.push(None);
                r.rel_se.push(None);
            }
            r
        })
        .collect();
    Ok(Table {
        names,
        param_count: params.len(),
        value_count: values.len(),
        rows: table_rows,
        env_groups,
        node_count,
        rows_without_gpu,
        target: spec.target,
        aa,
    })
}

/// Where a row's cells go.
struct Layout<'a> {
    params: &'a [String],
    values: &'a [String],
    /// The value columns (by index) that have interval columns.
    with_interval: &'a [usize],
    target: Option<f64>,
    width: usize,
}

impl Layout<'_> {
    fn row(
        &self,
        row: &Row,
        folded: Vec<fold::Value>,
        group_index: Option<usize>,
        group: Option<&EnvGroup>,
    ) -> TableRow {
        let mut cells: Vec<Cell> = self
            .params
            .iter()
            .map(|p| row.params.get(p).map_or(Cell::Null, Cell::from_value))
            .collect();
        let mut intervals = vec![None; self.width];
        let mut per_rep = vec![None; self.width];
        let mut rel_se = vec![None; self.width];
        for v in &folded {
            intervals[cells.len()] = v.interval;
            per_rep[cells.len()] = v.per_rep.clone();
            rel_se[cells.len()] = v.rel_se;
            cells.push(v.cell.clone());
        }
        for &k in self.with_interval {
            let e = folded[k].interval;
            cells.push(e.map_or(Cell::Null, |e| Cell::Float(e.low)));
            cells.push(e.map_or(Cell::Null, |e| Cell::Float(e.high)));
        }
        let reps = row.repetitions.len().max(1);
        cells.push(Cell::Int(reps as i64));
        let basis = folded.iter().find_map(|v| v.interval).map(|e| e.basis);
        cells.push(basis.map_or(Cell::Null, |b| Cell::Str(b.as_str().to_owned())));
        if let Some(target) = self.target {
            let wide: Vec<String> = folded
                .iter()
                .zip(self.values)
                .filter_map(|(v, name)| {
                    let e = v.interval?;
                    (e.half_width_rel() > target)
                        .then(|| format!("{name} ±{:.1} %", 100.0 * e.half_width_rel()))
                })
                .collect();
            cells.push(if wide.is_empty() {
                Cell::Null
            } else {
                Cell::Str(wide.join("; "))
            });
        }
        cells.push(
            row.samples
                .as_ref()
                .map_or(Cell::Null, |s| Cell::Int(s.len() as i64)),
        );
        cells.push(group.map_or(Cell::Null, |g| Cell::Str(g.label.clone())));
        cells.push(Cell::Str(row.nodes.join(" ")));
        TableRow {
            cells,
            intervals,
            per_rep,
            rel_se,
            reps,
            samples: row.samples.clone(),
            env_group: group_index,
            images: row.images,
            processes: if row.repetitions.is_empty() {
                vec![row.nodes.join(" ")]
            } else {
                row.repetitions.iter().map(|r| r.nodes.join(" ")).collect()
            },
        }
    }
}

/// Why a row's runs are invalid, one entry per invalid run (`rep 2: …`
/// for a repetition): the invalidating flags of a `results.json` whose
/// `validity.verdict` is `invalid`.
fn invalid_runs(row: &Row) -> Vec<String> {
    let of = |r: &Row| -> Option<String> {
        if r.lookup("validity.verdict")?.as_str()? != "invalid" {
            return None;
        }
        let flags = r.lookup("validity.flags")?.as_array()?;
        let details: Vec<&str> = flags
            .iter()
            .filter(|f| f.get("invalidates").and_then(Json::as_bool) == Some(true))
            .filter_map(|f| f.get("detail")?.as_str())
            .collect();
        Some(details.join("; "))
    };
    if row.repetitions.is_empty() {
        return of(row).into_iter().collect();
    }
    row.repetitions
        .iter()
        .filter_map(|r| Some(format!("rep {}: {}", r.rep.unwrap_or(1), of(r)?)))
        .collect()
}

/// Groups rows by their key facets; returns the groups and each row's group.
fn env_groups(rows: &[Row]) -> (Vec<EnvGroup>, Vec<Option<usize>>) {
    let mut groups: Vec<EnvGroup> = Vec::new();
    let membership = rows
        .iter()
        .map(|row| {
            let facets = row.facets.as_ref()?;
            let index = match groups.iter().position(|g| &g.facets == facets) {
                Some(i) => i,
                None => {
                    groups.push(EnvGroup {
                        label: format!("env{}", groups.len() + 1),
                        facets: facets.clone(),
                        hosts: Vec::new(),
                        rows: 0,
                    });
                    groups.len() - 1
                }
            };
            let group = &mut groups[index];
            group.rows += 1;
            if let Some(host) = &row.host {
                if !group.hosts.contains(host) {
                    group.hosts.push(host.clone());
                }
            }
            Some(index)
        })
        .collect();
    (groups, membership)
}
