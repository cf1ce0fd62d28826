//! `kernels.parquet`: the per-kernel summary of every device (the rows of
//! `metrics.json`'s `devices[].kernels`, one table), for joining many nodes'
//! kernels in a report. Written through [`crate::tabular`].

use std::path::Path;

use super::error::AnalysisError;
use super::metrics::{KernelSummary, Metrics};
use crate::tabular::{Column, Table};

/// The table: one row per (device, kernel).
fn table(metrics: &Metrics) -> Table {
    let rows: Vec<(u32, &KernelSummary)> = metrics
        .devices
        .iter()
        .flat_map(|d| d.kernels.iter().map(move |k| (d.device, k)))
        .collect();
    let ints = |f: &dyn Fn(&KernelSummary) -> i64| {
        Column::Int(rows.iter().map(|(_, k)| Some(f(k))).collect())
    };
    let floats = |f: &dyn Fn(&KernelSummary) -> f64| {
        Column::Float(rows.iter().map(|(_, k)| Some(f(k))).collect())
    };
    let names = [
        "device",
        "name",
        "time_pct",
        "total_ns",
        "instances",
        "avg_ns",
        "med_ns",
        "min_ns",
        "max_ns",
        "stddev_ns",
    ];
    Table {
        names: names.map(String::from).to_vec(),
        columns: vec![
            Column::Int(rows.iter().map(|(d, _)| Some(i64::from(*d))).collect()),
            Column::Text(rows.iter().map(|(_, k)| Some(k.name.clone())).collect()),
            floats(&|k| k.time_pct),
            ints(&|k| k.total_ns),
            ints(&|k| k.instances as i64),
            floats(&|k| k.avg_ns),
            floats(&|k| k.med_ns),
            ints(&|k| k.min_ns),
            ints(&|k| k.max_ns),
            floats(&|k| k.stddev_ns),
        ],
    }
}

/// Writes `kernels.parquet` at `path` (through a temporary file).
pub(super) fn write_kernels(metrics: &Metrics, path: &Path) -> Result<(), AnalysisError> {
    let fail = |message: String| AnalysisError::Parquet {
        path: path.to_path_buf(),
        message,
    };
    let bytes = table(metrics).parquet().map_err(fail)?;
    crate::atomic::write(path, &bytes).map_err(|e| fail(e.to_string()))
}
