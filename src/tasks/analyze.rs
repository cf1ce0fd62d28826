//! `Analyze`: trace SQLite → `metrics.json`, `kernels.parquet`, `analysis.txt`
//! (the metrics of DESIGN §6 for each device, over the `measure` NVTX window),
//! the window's tracks for the study page, and with `perfetto: true` its
//! events for ui.perfetto.dev.

use serde::{Deserialize, Serialize};

use super::error::TaskError;
use super::export::resolve;
use super::TaskContext;
use crate::analysis::window_out::WINDOW_TRACE;
use crate::analysis::{analyze_into, Options, OUTPUTS};

/// Bump when a metric's computation or the outputs' layout changes.
pub const VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeSpec {
    /// The trace, usually `${needs.S}/trace.sqlite`.
    pub trace: String,
    /// The NVTX range that delimits the measured window.
    #[serde(default = "default_window")]
    pub window: String,
    /// The name prefix of per-batch NVTX ranges inside the window.
    #[serde(default = "default_batch")]
    pub batch_prefix: String,
    /// Also write the measured window's events as `window.perfetto.json`
    /// (its size grows with the trace: 4 MB for a ViT run's window of
    /// 3,400 kernels, 285 MB for a million). Left out of the serialized
    /// spec when off, so analyses without it keep their keys.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub perfetto: bool,
}

fn default_window() -> String {
    "measure".into()
}

fn default_batch() -> String {
    "batch".into()
}

impl AnalyzeSpec {
    /// The trace when it is a workspace file rather than an upstream output.
    pub fn inputs(&self) -> Vec<String> {
        if self.trace.starts_with("${") {
            Vec::new()
        } else {
            vec![self.trace.clone()]
        }
    }

    pub fn outputs(&self) -> Vec<String> {
        let mut outputs: Vec<String> = OUTPUTS.iter().map(|s| s.to_string()).collect();
        if self.perfetto {
            outputs.push(WINDOW_TRACE.to_string());
        }
        outputs
    }

    pub fn options(&self) -> Options {
        Options {
            window: self.window.clone(),
            batch_prefix: self.batch_prefix.clone(),
        }
    }
}

pub fn run(spec: &AnalyzeSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    let trace = resolve(&ctx.root, &spec.trace);
    analyze_into(&trace, &spec.options(), &ctx.out, spec.perfetto)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_defaults_to_measure_and_unknown_fields_are_rejected() {
        let spec: AnalyzeSpec = ron::from_str(r#"(trace: "${needs.runs}/trace.sqlite")"#).unwrap();
        assert_eq!(spec.window, "measure");
        assert!(spec.inputs().is_empty());
        let bad = ron::from_str::<AnalyzeSpec>(r#"(trace: "t.sqlite", windw: "x")"#);
        assert!(bad.is_err());
    }
}
