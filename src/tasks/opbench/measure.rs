//! Runs one `OpBench` spec on libtorch and assembles its `results.json`.

use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};

use super::ops::{self, Workload};
use super::spec::{Op, OpBenchSpec, SdpaBackend};
use super::timing::{self, Times};
use super::Calibration;
use crate::host::env;
use crate::tasks::cuda;
use crate::tasks::error::TaskError;
use crate::tasks::vit::spec::{Device as SpecDevice, Dtype};
use crate::telemetry::{self, verdict};

pub(super) fn torch_error(during: &'static str) -> impl Fn(tch::TchError) -> TaskError {
    move |e| TaskError::Torch {
        during: during.to_owned(),
        message: e.to_string(),
    }
}

pub(super) fn device_of(spec: &OpBenchSpec) -> Result<Device, TaskError> {
    match SpecDevice::parse(&spec.device) {
        Some(SpecDevice::Cuda(index)) => cuda::cuda_device(index),
        _ => Ok(Device::Cpu),
    }
}

pub(super) fn kind_of(spec: &OpBenchSpec) -> Kind {
    match Dtype::parse(&spec.dtype) {
        Some(Dtype::F16) => Kind::Half,
        Some(Dtype::Bf16) => Kind::BFloat16,
        _ => Kind::Float,
    }
}

/// Measures `spec` and returns the `results.json` document.
pub(super) fn measure(
    spec: &OpBenchSpec,
    calibration: Option<Calibration>,
) -> Result<Value, TaskError> {
    let device = device_of(spec)?;
    let _guard = tch::no_grad_guard();
    tch::manual_seed(spec.seed as i64);
    let before = env::probe();
    let baseline = device.is_cuda().then(cuda::device_memory_used).flatten();
    let doc = match &spec.op {
        Op::Calibrate => calibrate(spec, device)?,
        op => measure_op(spec, op, kind_of(spec), device, calibration)?,
    };
    let peak = device.is_cuda().then(cuda::device_memory_used).flatten();
    let peak = match (peak, baseline) {
        (Some(p), Some(b)) => json!(p.saturating_sub(b)),
        _ => json!(cuda::host_peak_memory()),
    };
    ops::force_sdp_backend(SdpaBackend::Auto);
    Ok(annotate(doc, spec, &before, &env::probe(), peak))
}

/// A member's or a node's document with its spec, its environment before
/// and after, and its peak memory (null for a block's member: the
/// process holds every member's inputs).
pub(super) fn annotate(
    mut doc: Value,
    spec: &OpBenchSpec,
    before: &env::Env,
    after: &env::Env,
    peak: Value,
) -> Value {
    doc["config"] = serde_json::to_value(spec).unwrap_or(Value::Null);
    doc["env"] = json!({ "key_facets": before.key_facets, "record": { "before": before.record, "after": after.record } });
    doc["peak_memory_bytes"] = peak;
    doc
}

/// An operator made ready to time: its document so far and its workload.
pub(super) struct Ready {
    pub doc: Value,
    pub workload: Workload,
    /// An SDPA backend forced: one the device or shape cannot run is a
    /// result (`status: "unsupported"`), not a failure.
    pub forced: bool,
}

pub(super) fn ready(
    spec: &OpBenchSpec,
    op: &Op,
    kind: Kind,
    device: Device,
) -> Result<Ready, TaskError> {
    let forced = matches!(op, Op::Sdpa { backend, .. } if *backend != SdpaBackend::Auto);
    let auto_choice = sdpa_auto_choice(op, kind, device);
    let doc = json!({ "op": op.name(), "shape": op, "dtype": spec.dtype, "device": spec.device, "sdpa_auto_choice": auto_choice });
    let workload = ops::workload(op, kind, device, spec.rotate as usize)
        .map_err(torch_error("making the inputs"))?;
    Ok(Ready {
        doc,
        workload,
        forced,
    })
}

/// The document of an operator whose forced backend could not run.
pub(super) fn unsupported(mut doc: Value, message: &str) -> Value {
    doc["status"] = json!("unsupported");
    doc["error"] = json!(first_line(message));
    doc
}

fn measure_op(
    spec: &OpBenchSpec,
    op: &Op,
    kind: Kind,
    device: Device,
    calibration: Option<Calibration>,
) -> Result<Value, TaskError> {
    let Ready {
        doc,
        mut workload,
        forced,
    } = ready(spec, op, kind, device)?;
    let mut probe = crate::tasks::vit::measure::telemetry_probe(device);
    let waited = match &mut probe {
        Ok(p) if device.is_cuda() => telemetry::wait_until_alone(p.as_mut(), telemetry::gpu_wait()),
        _ => None,
    };
    let mut monitor = None;
    let timed = timing::time_runs(
        device,
        spec.warmup,
        spec.repeats,
        &mut workload.run,
        torch_error("running the operator"),
        // After the warm-up: the window the repetitions are timed in.
        || monitor = Some(telemetry::Monitor::start(probe, std::time::Instant::now())),
    );
    let recording = monitor.map(|m| m.finish(telemetry::probe_source(), waited));
    let samples = match timed {
        Ok(samples) => samples,
        Err(TaskError::Torch { message, .. }) if forced => return Ok(unsupported(doc, &message)),
        Err(e) => return Err(e),
    };
    // The repetitions ran back to back on the device from the window's
    // start: each one's span is where the sums of the times before it put it.
    let mut end = 0.0;
    let spans: Vec<(f64, f64)> = samples
        .iter()
        .map(|ms| {
            end += ms;
            (end - ms, end)
        })
        .collect();
    let recording = recording.unwrap_or_default();
    Ok(conclude(
        doc,
        &workload,
        &samples,
        &spans,
        &recording,
        calibration,
    ))
}

/// A timed operator's document: its repetitions (`samples`, in ms, each
/// run at `spans` of the recorded window) judged against the window's
/// telemetry, the ones an intrusion overlapped left out of its times.
pub(super) fn conclude(
    mut doc: Value,
    workload: &Workload,
    samples: &[f64],
    spans: &[(f64, f64)],
    recording: &telemetry::Recording,
    calibration: Option<Calibration>,
) -> Value {
    let (telemetry, validity) = verdict::judge(recording, spans, samples);
    let kept: Vec<f64> = samples
        .iter()
        .enumerate()
        .filter(|(i, _)| !validity.excluded_batches.contains(i))
        .map(|(_, v)| *v)
        .collect();
    let times = Times::from_ms(&kept);
    let seconds = times.median / 1e3;
    let (flops, bytes) = (workload.flops, workload.bytes);
    let tflops = (flops > 0.0 && seconds > 0.0).then(|| flops / seconds / 1e12);
    let gbps = (seconds > 0.0).then(|| bytes / seconds / 1e9);
    doc["status"] = json!("ok");
    doc["time_ms"] = json!(times);
    doc["flops"] = json!(flops);
    doc["bytes"] = json!(bytes);
    doc["tflops"] = json!(tflops);
    doc["gbps"] = json!(gbps);
    doc["calibration"] = json!(calibration);
    doc["fraction_of_copy_bandwidth"] =
        json!(calibration.and_then(|c| gbps.map(|g| g / c.copy_gbps)));
    doc["fraction_of_matmul_rate"] =
        json!(calibration.and_then(|c| tflops.map(|t| t / c.matmul_tflops)));
    doc["telemetry"] = json!(telemetry);
    doc["validity"] = json!(validity);
    doc
}

fn sdpa_auto_choice(op: &Op, kind: Kind, device: Device) -> Option<&'static str> {
    let Op::Sdpa {
        batch,
        heads,
        seq,
        head_dim,
        pad_to,
        ..
    } = *op
    else {
        return None;
    };
    let shape = [
        i64::from(batch),
        i64::from(heads),
        i64::from(seq),
        i64::from(pad_to.unwrap_or(head_dim)),
    ];
    let q = Tensor::f_empty(shape, (kind, device)).ok()?;
    // What `Auto` picks with every backend on, whichever another member
    // of a block forced last.
    ops::force_sdp_backend(SdpaBackend::Auto);
    ops::auto_choice(&q, &q, &q)
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or(message)
}

/// Copy bandwidth (1 GiB device-to-device, read + write counted) and the bf16
/// 8192³ matmul rate: the ceilings other nodes report fractions of.
fn calibrate(spec: &OpBenchSpec, device: Device) -> Result<Value, TaskError> {
    let elements: i64 = 1 << 29; // 1 GiB of bf16
    let src = Tensor::f_randn([elements], (Kind::BFloat16, device))
        .map_err(torch_error("allocating the copy buffers"))?;
    let mut dst = Tensor::f_empty([elements], (Kind::BFloat16, device))
        .map_err(torch_error("allocating the copy buffers"))?;
    let copy = timing::time_runs(
        device,
        spec.warmup.max(20),
        spec.repeats.clamp(1, 50),
        |_| dst.f_copy_(&src).map(drop),
        torch_error("copying"),
        || (),
    )?;
    let copy = Times::from_ms(&copy);
    drop((src, dst));
    let gemm = Op::Gemm {
        m: 8192,
        n: 8192,
        k: 8192,
        pad_to: None,
    };
    let Workload { flops, mut run, .. } = ops::workload(&gemm, Kind::BFloat16, device, 2)
        .map_err(torch_error("making the matmul inputs"))?;
    let matmul = timing::time_runs(
        device,
        spec.warmup.max(20),
        spec.repeats.clamp(1, 50),
        &mut run,
        torch_error("the matmul"),
        || (),
    )?;
    let matmul = Times::from_ms(&matmul);
    let copy_gbps = 2.0 * (elements as f64 * 2.0) / (copy.median / 1e3) / 1e9;
    let matmul_tflops = flops / (matmul.median / 1e3) / 1e12;
    Ok(json!({
        "op": "Calibrate",
        "status": "ok",
        "calibration": Calibration { copy_gbps, matmul_tflops },
        "copy_time_ms": copy,
        "matmul_time_ms": matmul,
    }))
}
