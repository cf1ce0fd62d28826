//! The join: upstream nodes with equal params become one row; each column is
//! a dotted path looked up in that row's files. Rows also carry what the
//! comparison and the header need: per-batch latency samples, the environment
//! fingerprint's key facets, and the host.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::cell::Cell;
use super::load::{leaf_paths, lookup, NodeFiles};
use super::spec::{ReportSpec, DEFAULT_COLUMNS};
use crate::tasks::{TaskContext, TaskError};
use crate::value::Value;

/// One table row before the environment groups are assigned.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub params: BTreeMap<String, Value>,
    /// Ids of the joined nodes, in source order.
    pub nodes: Vec<String>,
    /// The documents paths are looked up in, first hit wins: a `rows` entry,
    /// then per node `results.json`, `metrics.json`'s device, `metrics.json`.
    docs: Vec<Json>,
    /// `results.json`'s `env.key_facets`.
    pub facets: Option<Json>,
    /// `results.json`'s `env.host` (or `env.hostname`).
    pub host: Option<String>,
    /// `results.json`'s `latency_samples_ms`.
    pub samples: Option<Vec<f64>>,
    /// `results.json`'s `images`.
    pub images: Option<i64>,
    /// Whether the row is one entry of a `rows` table (its first document).
    pub table_entry: bool,
    /// A `metrics.json` of the row comes from a trace with no GPU.
    pub no_gpu: bool,
    /// The repetition the row's nodes are (see [`super::fold`]).
    pub rep: Option<u32>,
    /// A configuration's row: the rows of its repetitions, by `rep`.
    pub repetitions: Vec<Row>,
    /// An A/A twin's row (see [`super::aa`]): no row of the table.
    pub twin: bool,
}

impl Row {
    /// A path's value in the row's files (for a configuration's row, in
    /// the first repetition that has it).
    pub(super) fn lookup(&self, path: &str) -> Option<&Json> {
        if !self.repetitions.is_empty() {
            return self
                .repetitions
                .iter()
                .find_map(|r| r.lookup(path))
                .or_else(|| self.shared(path));
        }
        self.docs.iter().find_map(|doc| lookup(doc, path))
    }

    /// A path's value in the documents of a row joined to this
    /// configuration (a run without repetitions of the same params).
    pub(super) fn shared(&self, path: &str) -> Option<&Json> {
        self.docs.iter().find_map(|doc| lookup(doc, path))
    }

    /// Joins `other` (a row without repetitions, of equal params) to this
    /// configuration: its documents answer what no repetition has.
    pub(super) fn share(&mut self, other: Row) {
        self.nodes.extend(other.nodes);
        self.docs.extend(other.docs);
        self.no_gpu |= other.no_gpu;
    }

    /// A configuration's row over its repetitions' rows (sorted by `rep`,
    /// params without `rep`).
    pub(super) fn configuration(params: BTreeMap<String, Value>, mut reps: Vec<Row>) -> Row {
        reps.sort_by_key(|r| r.rep);
        let first = &reps[0];
        let samples: Vec<f64> = reps
            .iter()
            .flat_map(|r| r.samples.iter().flatten())
            .copied()
            .collect();
        Row {
            params,
            nodes: reps.iter().flat_map(|r| r.nodes.iter().cloned()).collect(),
            docs: Vec::new(),
            facets: first.facets.clone(),
            host: first.host.clone(),
            samples: (reps.iter().any(|r| r.samples.is_some())).then_some(samples),
            images: reps.iter().map(|r| r.images).sum(),
            table_entry: false,
            no_gpu: reps.iter().any(|r| r.no_gpu),
            rep: None,
            twin: reps.iter().any(|r| r.twin),
            repetitions: reps,
        }
    }
}

/// Reads every source node and joins them into rows, sorted by params.
pub(super) fn join_rows(spec: &ReportSpec, ctx: &TaskContext) -> Result<Vec<Row>, TaskError> {
    let mut rows: Vec<Row> = Vec::new();
    let mut by_params: BTreeMap<String, usize> = BTreeMap::new();
    for stage in &spec.sources {
        let nodes = ctx
            .upstream
            .get(stage)
            .ok_or_else(|| TaskError::SourceNotNeeded {
                stage: stage.clone(),
            })?;
        let read: Vec<NodeFiles> = nodes
            .iter()
            .map(|node| super::load::read_node(node, spec.device))
            .collect::<Result<Vec<_>, _>>()?;
        for files in read.into_iter().flat_map(super::load::members) {
            let files = files?;
            let mut own = node_docs(&files);
            if let Some(entries) = &files.rows {
                for entry in entries {
                    let mut docs = vec![Json::Object(entry.clone())];
                    docs.extend(own.iter().cloned());
                    rows.push(new_row(&files, docs, true)?);
                }
                continue;
            }
            let key = serde_json::to_string(&files.node.params).unwrap_or_default();
            match by_params.get(&key) {
                Some(&i) => {
                    let row = &mut rows[i];
                    row.nodes.push(files.node.id.clone());
                    row.docs.append(&mut own);
                    let extra = new_row(&files, Vec::new(), false)?;
                    row.facets = row.facets.take().or(extra.facets);
                    row.host = row.host.take().or(extra.host);
                    row.samples = row.samples.take().or(extra.samples);
                    row.images = row.images.or(extra.images);
                    row.no_gpu |= extra.no_gpu;
                    row.rep = row.rep.or(extra.rep);
                }
                None => {
                    by_params.insert(key, rows.len());
                    rows.push(new_row(&files, own, false)?);
                }
            }
        }
    }
    Ok(rows)
}

/// Whether a row passes the report's `filter`.
pub(super) fn kept(spec: &ReportSpec, params: &BTreeMap<String, Value>) -> bool {
    spec.filter.iter().all(|(name, wanted)| {
        params
            .get(name)
            .is_some_and(|v| super::compare::same(&Cell::from_value(v), &Cell::from_value(wanted)))
    })
}

/// A `filter` name that no source node has as a param: a typo.
pub(super) fn check_filter(spec: &ReportSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    let nodes = || {
        spec.sources
            .iter()
            .filter_map(|s| ctx.upstream.get(s))
            .flatten()
    };
    for name in spec.filter.keys() {
        if !nodes().any(|n| n.params.contains_key(name)) {
            let mut params: Vec<&String> = nodes().flat_map(|n| n.params.keys()).collect();
            params.sort();
            params.dedup();
            return Err(TaskError::UnknownFilterParam {
                name: name.clone(),
                help: format!(
                    "`filter` names params of the source nodes; they have {}",
                    params
                        .iter()
                        .map(|p| format!("`{p}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    Ok(())
}

fn node_docs(files: &NodeFiles) -> Vec<Json> {
    let mut docs = Vec::new();
    docs.extend(files.results.iter().cloned());
    if let Some(m) = &files.metrics {
        docs.push(m.device.clone());
        docs.push(m.document.clone());
    }
    docs
}

fn new_row(files: &NodeFiles, docs: Vec<Json>, table_entry: bool) -> Result<Row, TaskError> {
    let results = files.results.as_ref();
    let env = results.and_then(|r| r.get("env"));
    let samples = match results.and_then(|r| r.get("latency_samples_ms")) {
        None => None,
        Some(list) => Some(numbers(list).ok_or_else(|| TaskError::UpstreamShape {
            node: files.node.id.clone(),
            path: files.node.dir.join(super::load::RESULTS_JSON),
            detail: "`latency_samples_ms` is not a list of numbers".to_owned(),
        })?),
    };
    Ok(Row {
        params: files.node.params.clone(),
        nodes: vec![files.node.id.clone()],
        docs,
        facets: env.and_then(|e| e.get("key_facets")).cloned(),
        host: env.and_then(host_of),
        samples,
        images: results.and_then(|r| r.get("images")).and_then(Json::as_i64),
        table_entry,
        no_gpu: files.metrics.as_ref().is_some_and(|m| m.no_gpu),
        rep: files.node.rep,
        repetitions: Vec::new(),
        twin: files.node.aa_twin,
    })
}

/// The host an `env` names: `host` or `hostname`, directly or in its
/// `record` (the `Vit` task records the facts before and after the run).
fn host_of(env: &Json) -> Option<String> {
    let direct = |e: &Json| {
        e.get("host")
            .or_else(|| e.get("hostname"))
            .and_then(Json::as_str)
            .map(str::to_owned)
    };
    direct(env)
        .or_else(|| env.pointer("/record/before").and_then(direct))
        .or_else(|| env.get("record").and_then(direct))
}

fn numbers(list: &Json) -> Option<Vec<f64>> {
    list.as_array()?.iter().map(Json::as_f64).collect()
}

/// The param columns, in the order the matrix declares them: by where
/// `name=` first appears in a node id, then by name.
pub(super) fn param_names(rows: &[Row]) -> Vec<String> {
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for row in rows {
        for name in row.params.keys() {
            let pos = row
                .nodes
                .iter()
                .filter_map(|id| position_in_id(id, name))
                .min()
                .unwrap_or(usize::MAX);
            let slot = names.entry(name.clone()).or_insert(pos);
            *slot = (*slot).min(pos);
        }
    }
    let mut ordered: Vec<(usize, String)> = names.into_iter().map(|(n, p)| (p, n)).collect();
    ordered.sort();
    ordered.into_iter().map(|(_, n)| n).collect()
}

fn position_in_id(id: &str, name: &str) -> Option<usize> {
    let open = id.find('[')?;
    let inner = &id[open..];
    ["[", ","]
        .iter()
        .filter_map(|sep| inner.find(&format!("{sep}{name}=")))
        .min()
}

/// The value columns: the spec's, or every field of `rows` entries, or the
/// default headline metrics that some row has.
pub(super) fn value_columns(spec: &ReportSpec, rows: &[Row]) -> Result<Vec<String>, TaskError> {
    if spec.columns.is_empty() {
        return Ok(default_columns(rows));
    }
    let some_without_gpu = rows.iter().any(|r| r.no_gpu);
    for column in &spec.columns {
        // A device metric that no row has because the traces saw no GPU (a
        // CPU run) is an empty column, not a typo.
        let gpu_only = some_without_gpu && is_device_metric(column);
        if !gpu_only && !rows.iter().any(|r| r.lookup(column).is_some()) {
            return Err(TaskError::UnknownColumn {
                column: column.clone(),
                help: column_help(column, rows),
            });
        }
    }
    Ok(spec.columns.clone())
}

/// Whether `column` names a field of `metrics.json`'s device entries.
fn is_device_metric(column: &str) -> bool {
    const DEVICE_FIELDS: [&str; 16] = [
        "device",
        "cpu_api",
        "kernel_count",
        "kernel_time_sum_ns",
        "span_ns",
        "busy_ns",
        "gpu_utilization",
        "busy_all_ns",
        "span_all_ns",
        "gpu_utilization_all",
        "kernel_time_ratio",
        "idle_time_ns",
        "gaps",
        "launch_latency_ns",
        "memcpy",
        "kernels",
    ];
    let head = column.split('.').next().unwrap_or(column);
    DEVICE_FIELDS.contains(&head)
}

fn default_columns(rows: &[Row]) -> Vec<String> {
    let mut columns: Vec<String> = Vec::new();
    for row in rows {
        if let Some(Json::Object(entry)) = row.docs.first().filter(|_| row.table_entry) {
            for key in entry.keys() {
                if !columns.contains(key) && !row.params.contains_key(key) {
                    columns.push(key.clone());
                }
            }
        }
    }
    if columns.is_empty() {
        columns = DEFAULT_COLUMNS
            .iter()
            .filter(|c| rows.iter().any(|r| r.lookup(c).is_some()))
            .map(|c| (*c).to_owned())
            .collect();
    }
    columns
}

/// "did you mean" over every leaf path of the first row's files.
fn column_help(column: &str, rows: &[Row]) -> String {
    let mut paths = Vec::new();
    if let Some(row) = rows.first() {
        let row = row.repetitions.first().unwrap_or(row);
        for doc in &row.docs {
            leaf_paths(doc, "", &mut paths);
        }
    }
    let best = paths
        .iter()
        .map(|p| (strsim::jaro_winkler(column, p), p))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, path)) => format!("did you mean `{path}`? paths are dotted, as in `latency_ms.median`"),
        None => "paths are dotted fields of `results.json` or of `metrics.json`'s device entry, as in `latency_ms.median`".to_owned(),
    }
}

/// Sorts rows by their params in column order, keeping the file order of
/// `rows` entries that share params.
pub(super) fn sort_rows(rows: &mut [Row], params: &[String]) {
    rows.sort_by(|a, b| {
        params
            .iter()
            .map(|p| {
                let cell = |r: &Row| r.params.get(p).map_or(Cell::Null, Cell::from_value);
                cell(a).order(&cell(b))
            })
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
}
