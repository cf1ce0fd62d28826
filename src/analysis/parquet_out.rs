//! `kernels.parquet`: the per-kernel summary of every device (the rows of
//! `metrics.json`'s `devices[].kernels`, one table), for joining many nodes'
//! kernels in a report. Written with the `parquet` crate's column writer,
//! without Arrow: a small dependency for a ten-column table.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use super::error::AnalysisError;
use super::metrics::Metrics;
use super::output::tmp_name;

const SCHEMA: &str = "message kernels {
    required int64 device;
    required binary name (UTF8);
    required double time_pct;
    required int64 total_ns;
    required int64 instances;
    required double avg_ns;
    required double med_ns;
    required int64 min_ns;
    required int64 max_ns;
    required double stddev_ns;
}";

/// One column's values.
enum Col {
    I64(Vec<i64>),
    F64(Vec<f64>),
    Str(Vec<ByteArray>),
}

fn columns(metrics: &Metrics) -> Vec<Col> {
    let rows: Vec<_> = metrics
        .devices
        .iter()
        .flat_map(|d| d.kernels.iter().map(move |k| (d.device, k)))
        .collect();
    let i64s = |f: &dyn Fn(&crate::analysis::metrics::KernelSummary) -> i64| {
        Col::I64(rows.iter().map(|(_, k)| f(k)).collect())
    };
    let f64s = |f: &dyn Fn(&crate::analysis::metrics::KernelSummary) -> f64| {
        Col::F64(rows.iter().map(|(_, k)| f(k)).collect())
    };
    vec![
        Col::I64(rows.iter().map(|(d, _)| i64::from(*d)).collect()),
        Col::Str(
            rows.iter()
                .map(|(_, k)| ByteArray::from(k.name.as_str()))
                .collect(),
        ),
        f64s(&|k| k.time_pct),
        i64s(&|k| k.total_ns),
        i64s(&|k| k.instances as i64),
        f64s(&|k| k.avg_ns),
        f64s(&|k| k.med_ns),
        i64s(&|k| k.min_ns),
        i64s(&|k| k.max_ns),
        f64s(&|k| k.stddev_ns),
    ]
}

fn write_file(metrics: &Metrics, file: File) -> parquet::errors::Result<()> {
    let schema = Arc::new(parse_message_type(SCHEMA)?);
    let props = Arc::new(WriterProperties::builder().build());
    let mut writer = SerializedFileWriter::new(file, schema, props)?;
    let mut group = writer.next_row_group()?;
    for col in columns(metrics) {
        let Some(mut w) = group.next_column()? else {
            break;
        };
        match &col {
            Col::I64(v) => w.typed::<Int64Type>().write_batch(v, None, None)?,
            Col::F64(v) => w.typed::<DoubleType>().write_batch(v, None, None)?,
            Col::Str(v) => w.typed::<ByteArrayType>().write_batch(v, None, None)?,
        };
        w.close()?;
    }
    group.close()?;
    writer.close()?;
    Ok(())
}

/// Writes `kernels.parquet` at `path` (through a temporary file).
pub fn write_kernels(metrics: &Metrics, path: &Path) -> Result<(), AnalysisError> {
    let tmp = tmp_name(path);
    let fail = |message: String| {
        let _ = std::fs::remove_file(&tmp);
        AnalysisError::Parquet {
            path: path.to_path_buf(),
            message,
        }
    };
    let file = File::create(&tmp).map_err(|e| fail(e.to_string()))?;
    write_file(metrics, file).map_err(|e| fail(e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
}
