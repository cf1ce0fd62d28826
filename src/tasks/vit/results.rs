//! `results.json` of the `Vit` task (normative fields): the resolved config,
//! the environment before and after, parameter and FLOP counts, throughput,
//! per-batch latency statistics, the stage split and peak memory.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::spec::VitConfig;
use crate::host::env::Env;
use crate::stats::latency::LatencyStats;
use crate::tasks::error::TaskError;
use crate::telemetry::verdict::{self, Telemetry, Validity};
use crate::telemetry::Recording;

/// What one measured run gives back, before summarising.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub params: u64,
    pub flops_per_image: u64,
    pub images: u64,
    /// Wall time of the measured window, in seconds.
    pub window_s: f64,
    /// Work time of each measured batch (its preprocessing, copies and
    /// forward pass), in ms.
    pub batch_ms: Vec<f64>,
    /// Σ per stage over measured batches, in ms: preprocess, h2d, forward, d2h.
    pub stage_sum_ms: [f64; 4],
    /// The forward stage of each measured batch, in ms.
    pub forward_ms: Vec<f64>,
    /// The forward stage of each measured batch timed on the device by
    /// CUDA events, in ms; empty on the CPU or where events failed.
    pub forward_device_ms: Vec<f64>,
    pub peak_memory_bytes: Option<u64>,
    /// Batches reached the GPU through copy streams (the async flow).
    pub copy_stream: bool,
    /// Batches run while tracing, after the timed ones (0 untraced).
    pub traced_batches: u32,
    /// What capturing the CUDA graph cost (`graph: Cuda` only).
    pub cuda_graph: Option<CudaGraphUse>,
    /// When each measured batch ran, in ms since the window began.
    pub spans: Vec<(f64, f64)>,
    /// The GPU and host telemetry of the measured window.
    pub recording: Recording,
    /// What `settle` did, when asked.
    pub settled: Option<Settled>,
}

/// `results.json`'s account of `settle`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settled {
    /// Warm-up batches run after `warmup`.
    pub batches: u32,
    /// Whether two blocks' medians came within the bound before `settle`'s
    /// limit.
    pub settled: bool,
    /// The last block's median over the one before, less 1 (null when
    /// not settled).
    pub last_change: Option<f64>,
}

/// `results.json`'s account of `graph: Cuda`: every measured forward pass
/// was a replay of one graph, captured after the warm-up batches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CudaGraphUse {
    /// Always true where present: the timed forward passes were replays.
    pub replayed: bool,
    /// Forward passes on the capture stream before the capture.
    pub side_stream_warmup: u32,
    /// Their wall time, in ms.
    pub side_stream_warmup_ms: f64,
    /// Capturing one forward pass and instantiating the graph, in ms.
    pub capture_ms: f64,
}

/// Mean time per batch of each stage, in ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stages {
    pub preprocess: f64,
    pub h2d: f64,
    pub forward: f64,
    pub d2h: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VitResults {
    pub config: VitConfig,
    /// `key_facets` as probed before the run; `record` holds the record-only
    /// facts `before` and `after` it.
    pub env: Env,
    pub params: u64,
    pub flops_per_image: u64,
    pub images: u64,
    pub throughput_images_per_s: f64,
    pub latency_ms: LatencyStats,
    pub stages_ms: Stages,
    /// Device memory in use at the peak less that before the model was built
    /// (CUDA), or the process's peak resident memory (CPU); null if unknown.
    pub peak_memory_bytes: Option<u64>,
    /// Achieved arithmetic rate over the measured window.
    pub tflops: f64,
    /// Every measured batch's latency in milliseconds, in order, less the
    /// batches `validity.excluded_batches` names: what `latency_ms`
    /// summarises and a report's within-run intervals read.
    pub latency_samples_ms: Vec<f64>,
    /// Every measured batch's forward pass alone (after a device
    /// synchronization), in ms, in order: medians free of the copies.
    #[serde(default)]
    pub forward_samples_ms: Vec<f64>,
    /// The forward pass timed on the device (CUDA events around it on the
    /// stream it runs on): the GPU's time per forward, free of the host's
    /// clock and of the synchronization after it; absent on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_device_ms: Option<LatencyStats>,
    /// Its samples, in order, less the excluded batches (as
    /// `forward_samples_ms`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forward_device_samples_ms: Vec<f64>,
    /// Where the host-to-device copies ran: `"copy_stream"` (the async flow
    /// on a GPU: each worker's own stream, overlapping the forward pass of
    /// another batch) or `"compute_stream"` (before the forward pass, on
    /// its stream). Absent on CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2d_on: Option<String>,
    /// With `graph: Cuda`: the capture and its cost. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graph: Option<CudaGraphUse>,
    /// Counts from the CUPTI trace (`trace: Cupti` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<serde_json::Value>,
    /// The diagnostic switches set for this run (`VITGRAPH_COPY_STREAMS`,
    /// `VITGRAPH_CUPTI_API`, `VITGRAPH_CUPTI_KINDS`); empty for a normal run.
    #[serde(default)]
    pub diagnostics: std::collections::BTreeMap<String, String>,
    /// What the GPU and the task's cores did during the timed window.
    /// Absent in files written before telemetry was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<Telemetry>,
    /// The run's verdict and the batches left out of the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<Validity>,
    /// With `settle`: the warm-up batches it added and whether it settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<Settled>,
}

impl VitResults {
    pub fn new(config: &VitConfig, before: Env, after: Env, m: &Measurement) -> VitResults {
        let batches = m.batch_ms.len().max(1) as f64;
        let [preprocess, h2d, forward, d2h] = m.stage_sum_ms.map(|sum| sum / batches);
        let throughput = if m.window_s > 0.0 {
            m.images as f64 / m.window_s
        } else {
            0.0
        };
        let (telemetry, validity) = verdict::judge(&m.recording, &m.spans, &m.batch_ms);
        let kept = |samples: &[f64]| -> Vec<f64> {
            samples
                .iter()
                .enumerate()
                .filter(|(i, _)| !validity.excluded_batches.contains(i))
                .map(|(_, v)| *v)
                .collect()
        };
        let (batch_ms, forward_ms) = (kept(&m.batch_ms), kept(&m.forward_ms));
        // One device time per batch, or none: never misaligned with the batches.
        let device_ms = if m.forward_device_ms.len() == m.batch_ms.len() {
            kept(&m.forward_device_ms)
        } else {
            Vec::new()
        };
        let zero = LatencyStats {
            mean: 0.0,
            median: 0.0,
            p90: 0.0,
            p99: 0.0,
            min: 0.0,
            max: 0.0,
            std: 0.0,
            median_ci95: [0.0, 0.0],
        };
        VitResults {
            config: config.clone(),
            env: Env {
                key_facets: before.key_facets,
                record: json!({ "before": before.record, "after": after.record }),
            },
            params: m.params,
            flops_per_image: m.flops_per_image,
            images: m.images,
            throughput_images_per_s: throughput,
            latency_ms: LatencyStats::from_samples(&batch_ms, config.seed).unwrap_or(zero),
            stages_ms: Stages {
                preprocess,
                h2d,
                forward,
                d2h,
            },
            peak_memory_bytes: m.peak_memory_bytes,
            tflops: throughput * m.flops_per_image as f64 / 1e12,
            latency_samples_ms: batch_ms,
            forward_samples_ms: forward_ms,
            forward_device_ms: LatencyStats::from_samples(&device_ms, config.seed),
            forward_device_samples_ms: device_ms,
            h2d_on: matches!(config.device, super::spec::Device::Cuda(_)).then(|| {
                if m.copy_stream {
                    "copy_stream"
                } else {
                    "compute_stream"
                }
                .to_owned()
            }),
            cuda_graph: m.cuda_graph,
            trace: None,
            diagnostics: crate::tasks::diagnostics::current(),
            telemetry: Some(telemetry),
            validity: Some(validity),
            settle: m.settled,
        }
    }
}

/// Writes `value` as pretty JSON to `path` through a temporary file and a
/// rename, so a crash never leaves a half-written file.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<(), TaskError> {
    let io = |source| TaskError::Io {
        path: path.to_owned(),
        source,
    };
    let text = serde_json::to_string_pretty(value).map_err(|e| io(std::io::Error::other(e)))?;
    crate::atomic::write(path, (text + "\n").as_bytes()).map_err(io)
}

/// Checks a `results.json` document against the normative schema: it must
/// deserialize into [`VitResults`] (every field, with its type) and its
/// numbers must agree with each other (`params` and `flops_per_image` the
/// closed forms of its `config`, `images` = `batches` × `batch`, ordered
/// latency statistics, non-negative stage times). The `Vit` task's files and
/// those of `examples/vit_compile_bench.py` pass the same check; the error
/// names the first field that fails.
pub fn check(value: &serde_json::Value) -> Result<VitResults, String> {
    let r: VitResults = serde_json::from_value(value.clone())
        .map_err(|e| format!("does not match the `Vit` results.json schema: {e}"))?;
    let c = &r.config;
    let expect = |field: &str, got: u64, want: u64| {
        if got == want {
            Ok(())
        } else {
            Err(format!("`{field}` is {got}, but its config gives {want}"))
        }
    };
    expect("params", r.params, super::formula::params(c))?;
    expect(
        "flops_per_image",
        r.flops_per_image,
        super::formula::flops_per_image(c),
    )?;
    expect(
        "config.batches",
        u64::from(c.batches),
        u64::from(c.samples.div_ceil(c.batch)),
    )?;
    expect(
        "images",
        r.images,
        u64::from(c.batches) * u64::from(c.batch),
    )?;
    for facet in ["gpu", "driver", "cuda", "libtorch", "cpu", "numa"] {
        if !r.env.key_facets.contains_key(facet) {
            return Err(format!("`env.key_facets.{facet}` is missing"));
        }
    }
    if !(r.env.record["before"].is_object() && r.env.record["after"].is_object()) {
        return Err("`env.record` needs the objects `before` and `after`".to_owned());
    }
    let l = &r.latency_ms;
    let ordered = [l.min, l.median, l.p90, l.p99, l.max]
        .windows(2)
        .all(|w| w[0] <= w[1]);
    if !(ordered && l.min > 0.0 && l.min <= l.mean && l.mean <= l.max && l.std >= 0.0) {
        return Err(format!(
            "`latency_ms` is not ordered as min ≤ median ≤ p90 ≤ p99 ≤ max, min ≤ mean ≤ max: {l:?}"
        ));
    }
    let [lo, hi] = l.median_ci95;
    if !(l.min <= lo && lo <= hi && hi <= l.max) {
        return Err(format!(
            "`latency_ms.median_ci95` [{lo}, {hi}] is not inside [min, max]"
        ));
    }
    let s = &r.stages_ms;
    for (name, v) in [
        ("preprocess", s.preprocess),
        ("h2d", s.h2d),
        ("forward", s.forward),
        ("d2h", s.d2h),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(format!("`stages_ms.{name}` is {v}"));
        }
    }
    if !(r.throughput_images_per_s.is_finite() && r.throughput_images_per_s > 0.0) {
        return Err(format!(
            "`throughput_images_per_s` is {}",
            r.throughput_images_per_s
        ));
    }
    Ok(r)
}
