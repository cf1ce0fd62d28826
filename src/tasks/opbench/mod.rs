//! The `OpBench` task: one operator (LayerNorm, GELU, Swish, MSE and
//! cross-entropy losses, SDPA with a forced backend, GEMM, padding of a
//! logical dim, heterogeneous batching) timed after warm-up as the median of
//! many repetitions over rotating inputs, or the device calibration
//! (`op: Calibrate`) that the others report fractions of. Writes
//! `results.json`.

pub mod spec;

#[cfg(feature = "torch")]
mod measure;
#[cfg(feature = "torch")]
pub mod ops;
#[cfg(feature = "torch")]
pub mod timing;
#[cfg(feature = "torch")]
mod together;

pub use spec::{Op, OpBenchSpec, SdpaBackend};

use serde::{Deserialize, Serialize};

use super::error::TaskError;
use super::TaskContext;

pub const VERSION: u32 = 1;

/// The device's measured ceilings, from a `Calibrate` node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Device-to-device copy, bytes read plus bytes written per second, in GB/s.
    pub copy_gbps: f64,
    /// bf16 8192³ matrix product, in TFLOP/s.
    pub matmul_tflops: f64,
}

/// The calibration among the task's upstream outputs, if a `Calibrate` node
/// is one of them.
pub fn find_calibration(ctx: &TaskContext) -> Option<Calibration> {
    ctx.needs.values().flatten().find_map(|dir| {
        let text = std::fs::read_to_string(dir.join("results.json")).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        serde_json::from_value(json.get("calibration")?.clone()).ok()
    })
}

/// Runs the benchmark and writes `results.json` into `ctx.out`.
pub fn run(spec: &OpBenchSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    spec.validate().map_err(|message| TaskError::InvalidSpec {
        kind: "OpBench",
        message,
    })?;
    run_checked(spec, ctx)
}

#[cfg(not(feature = "torch"))]
fn run_checked(_spec: &OpBenchSpec, _ctx: &TaskContext) -> Result<(), TaskError> {
    Err(TaskError::TorchNotBuilt { kind: "OpBench" })
}

#[cfg(feature = "torch")]
fn run_checked(spec: &OpBenchSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    let calibration = find_calibration(ctx);
    let results = match &spec.together {
        Some(block) => together::measure(block, calibration, &ctx.node)?,
        None => measure::measure(spec, calibration)?,
    };
    super::vit::results::write_json(&ctx.out.join("results.json"), &results)
}
