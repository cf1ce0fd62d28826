//! Writing an analysis: `metrics.json`, `kernels.parquet` and `analysis.txt`,
//! and the measured window's events and tracks (`window_out`), each through
//! a temporary file renamed into place.

use std::path::Path;

use super::compute::{compute, Options};
use super::error::AnalysisError;
use super::metrics::Metrics;
use super::{parquet_out, text};
use crate::trace::Trace;

/// The files an analysis always writes, in its output folder (with
/// `perfetto`, also [`super::window_out::WINDOW_TRACE`]).
pub const OUTPUTS: [&str; 4] = [
    "metrics.json",
    "kernels.parquet",
    "analysis.txt",
    super::window_out::WINDOW_TRACKS,
];

/// Loads the trace at `trace` and computes its metrics.
pub fn analyze_file(trace: &Path, opts: &Options) -> Result<Metrics, AnalysisError> {
    let trace = Trace::load(trace)?;
    Ok(compute(&trace, opts))
}

/// Loads the trace at `trace`, computes its metrics and writes every one of
/// [`OUTPUTS`] into `dir`, and with `perfetto` the window's events.
pub fn analyze_into(
    trace: &Path,
    opts: &Options,
    dir: &Path,
    perfetto: bool,
) -> Result<Metrics, AnalysisError> {
    let trace = Trace::load(trace)?;
    let metrics = compute(&trace, opts);
    write_outputs(&metrics, dir)?;
    super::window_out::write_window(&trace, opts, dir, perfetto)?;
    Ok(metrics)
}

/// Writes the three outputs of `metrics` into `dir` (`metrics.json`,
/// `kernels.parquet`, `analysis.txt`).
pub fn write_outputs(metrics: &Metrics, dir: &Path) -> Result<(), AnalysisError> {
    let json = metrics_json(metrics);
    write_atomic(&dir.join(OUTPUTS[0]), json.as_bytes())?;
    parquet_out::write_kernels(metrics, &dir.join(OUTPUTS[1]))?;
    write_atomic(&dir.join(OUTPUTS[2]), text::render(metrics).as_bytes())?;
    Ok(())
}

/// `metrics.json` as text: pretty-printed, with a final newline.
pub fn metrics_json(metrics: &Metrics) -> String {
    // Serializing plain structs of numbers and strings cannot fail.
    let mut s = serde_json::to_string_pretty(metrics).unwrap_or_default();
    s.push('\n');
    s
}

/// Writes `bytes` to `path` through a temporary file in the same folder.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AnalysisError> {
    crate::atomic::write(path, bytes).map_err(|source| AnalysisError::Write {
        path: path.to_path_buf(),
        source,
    })
}
