//! The `Vit` task: a Vision Transformer built from its shape alone, with
//! seeded random weights, measured on synthetic images. Writes `results.json`
//! (and `trace.sqlite` with `trace: Cupti`).
//!
//! The spec, its validation and the closed-form counts build without
//! libtorch; running needs the `torch` feature.

pub mod block;
pub mod flow;
pub mod formula;
pub mod results;
pub mod spec;

#[cfg(feature = "torch")]
pub mod cuda_graph;
#[cfg(feature = "torch")]
mod images;
#[cfg(feature = "torch")]
pub mod measure;
#[cfg(feature = "torch")]
pub mod model;
#[cfg(feature = "torch")]
mod streams;
#[cfg(feature = "torch")]
mod together;

pub use spec::{Graph, Pipeline, Preprocess, Trace, VitConfig, VitSpec};

use super::error::TaskError;
use super::TaskContext;

/// Bumped when the task's measurement or output changes meaning.
pub const VERSION: u32 = 1;

/// How a `trace: Cupti` run measures, in the key of traced runs only (a key
/// facet): since this method, the timing figures come from untraced batches
/// and the trace from `trace_batches` more.
pub const CUPTI_METHOD: &str = "timed untraced, then traced apart";

/// The files a `Vit` node creates.
pub fn outputs(spec: &VitSpec) -> Vec<String> {
    let mut files = vec!["results.json".to_owned()];
    match spec.trace {
        Trace::Cupti => files.push("trace.sqlite".to_owned()),
        Trace::Nsys => files.push("trace.nsys-rep".to_owned()),
        Trace::None => {}
    }
    files
}

/// Runs the experiment and writes its outputs into `ctx.out`.
pub fn run(spec: &VitSpec, ctx: &TaskContext) -> Result<(), TaskError> {
    #[cfg(feature = "torch")]
    if let Some(block) = &spec.together {
        return together::run(block, ctx);
    }
    let config = spec.resolve().map_err(|message| TaskError::InvalidSpec {
        kind: "Vit",
        message,
    })?;
    run_config(&config, ctx)
}

#[cfg(not(feature = "torch"))]
fn run_config(_config: &VitConfig, _ctx: &TaskContext) -> Result<(), TaskError> {
    Err(TaskError::TorchNotBuilt { kind: "Vit" })
}

#[cfg(feature = "torch")]
fn run_config(config: &VitConfig, ctx: &TaskContext) -> Result<(), TaskError> {
    use super::nvtx::Nvtx;
    use crate::host::env;
    use crate::tasks::cupti::{Activity, Recorder};
    let before = env::probe();
    // `trace: Cupti` records its own batches after the timed ones (see
    // `measure`): the recording starts between the two. On the CPU there is
    // no CUDA activity to record: it then writes the NVTX ranges alone, so
    // the pipeline's analyses still run.
    let cupti = config.trace == Trace::Cupti;
    let on_gpu = cupti && config.device.is_cuda();
    let clock: Option<Box<dyn Fn() -> u64 + Send>> = if on_gpu {
        Some(crate::tasks::cupti::clock()?)
    } else if cupti {
        // No CUPTI on the CPU: the ranges on a monotonic clock of their own.
        let zero = std::time::Instant::now();
        Some(Box::new(move || zero.elapsed().as_nanos() as u64))
    } else {
        None
    };
    let mut nvtx = Nvtx::new(clock);
    let mut tracer: Option<Recorder> = None;
    let mut start = || -> Result<(), TaskError> {
        if on_gpu {
            tracer = Some(Recorder::start()?);
        }
        Ok(())
    };
    let start_trace: Option<&mut dyn FnMut() -> Result<(), TaskError>> =
        if cupti { Some(&mut start) } else { None };
    let measurement = measure::measure(config, &mut nvtx, start_trace)?;
    let path = ctx.out.join("trace.sqlite");
    let trace = match (tracer, config.trace) {
        (Some(tracer), _) => Some(tracer.finish(nvtx.take_ranges(), &path)?.summary()),
        (None, Trace::Cupti) => {
            let ranges = Activity {
                ranges: nvtx.take_ranges(),
                ..Activity::default()
            };
            crate::tasks::cupti_sqlite::write(&ranges, &[], &path)?;
            Some(ranges.summary())
        }
        (None, _) => None,
    };
    let trace = trace.map(|mut t| {
        // The trace's metrics come from batches apart from the timed ones.
        if let serde_json::Value::Object(map) = &mut t {
            map.insert("traced_batches".into(), measurement.traced_batches.into());
            map.insert(
                "window".into(),
                "measure: traced batches, after and apart from the timed ones (the `timing` range)"
                    .into(),
            );
        }
        t
    });
    let after = env::probe();
    let mut results = results::VitResults::new(config, before, after, &measurement);
    results.trace = trace;
    results::write_json(&ctx.out.join("results.json"), &results)
}
