//! The measurement loop of the `Vit` task: synthetic images → preprocessing →
//! host-to-device copy → forward pass → logits back to the host, through the
//! sync or async flow, with NVTX ranges and per-stage timing.

use std::time::Instant;

use tch::{Device, Kind, Tensor};

use super::cuda_graph::CudaGraph;
use super::flow;
use super::images::{preprocess, source_pool};
use super::model::Vit;
use super::results::{CudaGraphUse, Measurement, Settled};
use super::spec::{
    Device as SpecDevice, Dtype, Graph, Pipeline, Preprocess, VitConfig, SETTLE_BLOCK, SETTLE_REL,
};
use super::streams::{copy_stream, copy_streams_wanted, synchronize_stream, InferenceMode};
use crate::tasks::cuda;
use crate::tasks::error::TaskError;
use crate::tasks::nvtx::Nvtx;
use crate::telemetry::{self, Monitor};

pub(crate) fn torch_error(during: &str) -> impl Fn(tch::TchError) -> TaskError + '_ {
    move |e| TaskError::Torch {
        during: during.to_owned(),
        message: e.to_string(),
    }
}

fn kind(dtype: Dtype) -> Kind {
    match dtype {
        Dtype::F32 => Kind::Float,
        Dtype::F16 => Kind::Half,
        Dtype::Bf16 => Kind::BFloat16,
    }
}

/// The tch device of a config, CUDA checked.
pub fn device(config: &VitConfig) -> Result<Device, TaskError> {
    match config.device {
        SpecDevice::Cpu => Ok(Device::Cpu),
        SpecDevice::Cuda(index) => cuda::cuda_device(index),
    }
}

/// A batch ready for the device: preprocessed on the CPU, or raw uint8 when
/// preprocessing runs on the GPU.
struct Prepared {
    images: Tensor,
    preprocess_ms: f64,
    /// Already copied to the device on a copy stream (the async flow on a
    /// GPU), in this many milliseconds.
    copied_ms: Option<f64>,
}

pub(super) struct Runner<'a> {
    config: &'a VitConfig,
    model: Vit,
    device: Device,
    kind: Kind,
    pool: Vec<Tensor>,
    batch_ms: Vec<f64>,
    stage_sum_ms: [f64; 4],
    forward_ms: Vec<f64>,
    /// Each timed forward pass on the device, by CUDA events (GPU only),
    /// and the events that time it.
    forward_device_ms: Vec<f64>,
    timer: Option<cuda::EventTimer>,
    peak_memory: Option<u64>,
    /// Batches arrive on the device through copy streams.
    copy_stream: bool,
    /// `graph: Cuda`, once captured.
    graph: Option<Graphed>,
    /// The timed window's start, once it has begun.
    pub(super) origin: Option<Instant>,
    /// When each timed batch ran, in ms since `origin`.
    spans: Vec<(f64, f64)>,
    /// The sampler and its A/B block size (see [`telemetry::ab_block`]),
    /// while the timed batches run.
    monitor: Option<(Monitor, Option<usize>)>,
}

/// The captured forward pass and the buffers it reads and writes: each
/// batch is copied into `input`, the graph replayed, `output` read.
struct Graphed {
    graph: CudaGraph,
    input: Tensor,
    output: Tensor,
    capture: CudaGraphUse,
}

/// Runs warm-up and measured batches and returns the timings.
/// Batches run after tracing starts and before the traced ones, so the
/// recording's own start-up is not in the traced window.
const TRACE_WARMUP: usize = 2;

/// Runs the model: warm-up, then the timed batches (the `measure` range),
/// all untraced. With `start_trace` (a traced run), the timed batches are
/// the `timing` range instead; then `start_trace` starts the recording, and
/// `trace_batches` more batches run as the `measure` range, recorded but
/// never timed, so tracing cannot slow the timing figures.
pub fn measure(
    config: &VitConfig,
    nvtx: &mut Nvtx,
    start_trace: Option<&mut dyn FnMut() -> Result<(), TaskError>>,
) -> Result<Measurement, TaskError> {
    let device = device(config)?;
    let (probe, waited) = probe_alone(device);
    let _guard = tch::no_grad_guard();
    let _inference = InferenceMode::enter();
    let baseline = context_baseline(device)?;
    let mut runner = Runner::build(config, device)?;
    let settled = runner.prepare(nvtx)?;
    let timed = if start_trace.is_some() {
        "timing"
    } else {
        "measure"
    };
    let start = Instant::now();
    runner.origin = Some(start);
    runner.monitor = Some((Monitor::start(probe, start), telemetry::ab_block()));
    nvtx.range(timed, |nvtx| {
        runner.run_batches(config.batches as usize, nvtx, true)
    })?;
    let window_s = start.elapsed().as_secs_f64();
    let (monitor, _) = runner.monitor.take().expect("started above");
    let recording = monitor.finish(telemetry::probe_source(), waited);
    let mut traced_batches = 0;
    if let Some(start_trace) = start_trace {
        start_trace()?;
        nvtx.range("trace_warmup", |nvtx| {
            runner.run_batches(TRACE_WARMUP.min(config.warmup as usize), nvtx, false)
        })?;
        nvtx.range("measure", |nvtx| {
            runner.run_batches(config.trace_batches as usize, nvtx, false)
        })?;
        traced_batches = config.trace_batches;
    }
    let peak = peak_memory(device, runner.peak_memory, baseline);
    Ok(runner.into_measurement(window_s, recording, traced_batches, settled, peak))
}

/// NVML opened before anything is timed, and a GPU busy with another
/// process waited for (bounded) before any model is built.
pub(super) fn probe_alone(
    device: Device,
) -> (
    Result<Box<dyn telemetry::GpuProbe>, String>,
    Option<telemetry::Waited>,
) {
    let mut probe = telemetry_probe(device);
    let waited = match &mut probe {
        Ok(p) if device.is_cuda() => telemetry::wait_until_alone(p.as_mut(), telemetry::gpu_wait()),
        _ => None,
    };
    (probe, waited)
}

/// Creates the CUDA context first, so that the memory baseline excludes it
/// and includes nothing of ours: the weights count towards the peak.
pub(super) fn context_baseline(device: Device) -> Result<Option<u64>, TaskError> {
    if !device.is_cuda() {
        return Ok(None);
    }
    let _context =
        Tensor::f_zeros([1], (Kind::Float, device)).map_err(torch_error("initializing CUDA"))?;
    Ok(cuda::device_memory_used())
}

/// The peak memory of a run: device memory at its peak less `baseline`
/// (CUDA), the process's peak resident memory (CPU).
pub(super) fn peak_memory(device: Device, peak: Option<u64>, baseline: Option<u64>) -> Option<u64> {
    match (peak, baseline) {
        (Some(peak), Some(base)) => Some(peak.saturating_sub(base)),
        _ if !device.is_cuda() => cuda::host_peak_memory(),
        _ => None,
    }
}

/// What samples the GPU of a run: NVML for its GPU (found by PCI bus id),
/// none on the CPU or with `VITGRAPH_TELEMETRY=0` (said in the source).
pub(crate) fn telemetry_probe(device: Device) -> Result<Box<dyn telemetry::GpuProbe>, String> {
    if std::env::var_os("VITGRAPH_TELEMETRY").is_some_and(|v| v == "0") {
        return Err("off (VITGRAPH_TELEMETRY=0)".to_owned());
    }
    match device {
        Device::Cuda(index) => {
            telemetry::gpu_probe(cuda::pci_bus_id(index).as_deref(), index as u32)
        }
        _ => telemetry::cpu_probe(),
    }
}

/// The source batches, read by every preprocessing worker.
struct SharedPool(Vec<Tensor>);

// SAFETY: workers only read the tensors (convert, resize, `shallow_clone`);
// libtorch tensors may be read from several threads at once, and their
// reference counts are atomic. tch marks `Tensor` Send but not Sync only
// because it cannot know that no one mutates.
unsafe impl Sync for SharedPool {}

impl<'a> Runner<'a> {
    /// The model of `config` on `device`, and its source batches.
    pub(super) fn build(config: &'a VitConfig, device: Device) -> Result<Runner<'a>, TaskError> {
        let kind = kind(config.dtype);
        let model = Vit::new(config, kind, device).map_err(torch_error("building the model"))?;
        let pool = source_pool(config, device)?;
        Ok(Runner {
            config,
            model,
            device,
            kind,
            pool,
            batch_ms: Vec::new(),
            stage_sum_ms: [0.0; 4],
            forward_ms: Vec::new(),
            forward_device_ms: Vec::new(),
            timer: device.is_cuda().then(cuda::EventTimer::new).flatten(),
            peak_memory: None,
            copy_stream: false,
            graph: None,
            origin: None,
            spans: Vec::new(),
            monitor: None,
        })
    }

    /// Warm-up, the CUDA graph's capture (`graph: Cuda`) and `settle`;
    /// then nothing recorded so far is kept.
    pub(super) fn prepare(&mut self, nvtx: &mut Nvtx) -> Result<Option<Settled>, TaskError> {
        let config = self.config;
        nvtx.range("warmup", |nvtx| {
            self.run_batches(config.warmup as usize, nvtx, false)
        })?;
        if config.graph == Graph::Cuda {
            nvtx.range("graph_capture", |_| self.capture_graph())?;
        }
        let settled = match config.settle {
            Some(max) => Some(nvtx.range("settle", |nvtx| self.settle(max, nvtx))?),
            None => None,
        };
        self.batch_ms.clear();
        self.stage_sum_ms = [0.0; 4];
        self.forward_ms.clear();
        self.forward_device_ms.clear();
        Ok(settled)
    }

    /// What the timed batches gave, with the window's length and telemetry.
    pub(super) fn into_measurement(
        self,
        window_s: f64,
        recording: telemetry::Recording,
        traced_batches: u32,
        settled: Option<Settled>,
        peak_memory_bytes: Option<u64>,
    ) -> Measurement {
        Measurement {
            params: self.model.param_count(),
            flops_per_image: self.model.flops_per_image(),
            images: self.batch_ms.len() as u64 * u64::from(self.config.batch),
            window_s,
            batch_ms: self.batch_ms,
            stage_sum_ms: self.stage_sum_ms,
            forward_ms: self.forward_ms,
            forward_device_ms: self.forward_device_ms,
            peak_memory_bytes,
            copy_stream: self.copy_stream,
            traced_batches,
            cuda_graph: self.graph.as_ref().map(|g| g.capture),
            spans: self.spans,
            recording,
            settled,
        }
    }

    /// Warms up in blocks of [`SETTLE_BLOCK`] batches, at most `max` more,
    /// until a block's median latency is within [`SETTLE_REL`] of the one
    /// before it.
    fn settle(&mut self, max: u32, nvtx: &mut Nvtx) -> Result<Settled, TaskError> {
        let mut previous: Option<f64> = None;
        let mut batches = 0;
        while batches + SETTLE_BLOCK <= max {
            self.batch_ms.clear();
            self.run_batches(SETTLE_BLOCK as usize, nvtx, true)?;
            batches += SETTLE_BLOCK;
            let median = telemetry::verdict::median(&self.batch_ms);
            if let Some(before) = previous {
                let change = median / before - 1.0;
                if change.abs() <= SETTLE_REL {
                    return Ok(Settled {
                        batches,
                        settled: true,
                        last_change: Some(change),
                    });
                }
            }
            previous = Some(median);
        }
        Ok(Settled {
            batches,
            settled: false,
            last_change: None,
        })
    }

    /// Captures the forward pass of a static input, filled with the first
    /// source batch, preprocessed (see [`CudaGraph::capture`]).
    fn capture_graph(&mut self) -> Result<(), TaskError> {
        let Device::Cuda(gpu) = self.device else {
            return Err(TaskError::InvalidSpec {
                kind: "Vit",
                message: "`graph: Cuda` needs `device: \"cuda\"`".to_owned(),
            });
        };
        let input = self.pool[0]
            .f_to_device_(self.device, Kind::Uint8, false, false)
            .and_then(|raw| preprocess(&raw, self.config, self.kind))
            .map_err(torch_error("making the CUDA graph's static input"))?;
        let model = &self.model;
        let mut output = None;
        let (graph, capture) = CudaGraph::capture(gpu, || {
            output = Some(
                model
                    .forward(&input)
                    .map_err(torch_error("the forward pass"))?,
            );
            Ok(())
        })?;
        let output = output.expect("the captured forward pass returned an output");
        self.graph = Some(Graphed {
            graph,
            input,
            output,
            capture,
        });
        Ok(())
    }

    /// The forward pass of `images`: replayed from the graph when captured
    /// (`images` copied into its static input first, unless `in_static`:
    /// already there).
    fn forward(&self, images: &Tensor, in_static: bool) -> Result<Tensor, TaskError> {
        match &self.graph {
            None => self
                .model
                .forward(images)
                .map_err(torch_error("the forward pass")),
            Some(g) => {
                if !in_static {
                    g.input
                        .shallow_clone()
                        .f_copy_(images)
                        .map_err(torch_error("copying a batch into the graph's input"))?;
                }
                g.graph.replay()?;
                Ok(g.output.shallow_clone())
            }
        }
    }

    pub(super) fn run_batches(
        &mut self,
        batches: usize,
        nvtx: &mut Nvtx,
        record: bool,
    ) -> Result<(), TaskError> {
        let (config, kind, device) = (self.config, self.kind, self.device);
        let pool = SharedPool(self.pool.iter().map(Tensor::shallow_clone).collect());
        let pool = &pool;
        let copy_streams = copy_streams_wanted();
        let produce = move |index: usize| -> Result<Prepared, TaskError> {
            let raw = &pool.0[index % pool.0.len()];
            let (mut images, preprocess_ms) = if config.preprocess == Preprocess::Gpu {
                (raw.shallow_clone(), 0.0)
            } else {
                let start = Instant::now();
                let mut images =
                    preprocess(raw, config, kind).map_err(torch_error("preprocessing"))?;
                if device.is_cuda() {
                    images = images
                        .f_pin_memory(device)
                        .map_err(torch_error("pinning a batch"))?;
                }
                (images, ms(start))
            };
            // The async flow on a GPU copies on the worker's own stream, so
            // the copy of one batch overlaps the forward pass of another.
            let mut copied_ms = None;
            if let (Pipeline::Async { .. }, Device::Cuda(gpu), true) =
                (config.pipeline, device, copy_streams)
            {
                if let Some(stream) = copy_stream(gpu) {
                    let start = Instant::now();
                    images = images
                        .f_to_device_(device, copy_kind(config, kind), true, false)
                        .map_err(torch_error("copying a batch to the device"))?;
                    if !synchronize_stream(stream) {
                        tch::Cuda::synchronize(gpu as i64);
                    }
                    copied_ms = Some(ms(start));
                }
            }
            Ok(Prepared {
                images,
                preprocess_ms,
                copied_ms,
            })
        };
        let mut consume = |index: usize, prepared: Prepared| -> Result<(), TaskError> {
            nvtx.push(&format!("batch {index}"));
            let result = self.one_batch(prepared, record, nvtx);
            nvtx.pop();
            result
        };
        match config.pipeline {
            Pipeline::Sync => flow::run_sync(batches, produce, &mut consume),
            Pipeline::Async { queue, workers } => flow::run_async(
                batches,
                queue as usize,
                workers as usize,
                produce,
                &mut consume,
            ),
        }
    }

    /// Copy in, (GPU preprocessing,) forward, copy out; each stage timed
    /// after a device synchronization.
    fn one_batch(
        &mut self,
        prepared: Prepared,
        record: bool,
        nvtx: &mut Nvtx,
    ) -> Result<(), TaskError> {
        let start = Instant::now();
        let mut stages = [prepared.preprocess_ms, 0.0, 0.0, 0.0];
        // With a CUDA graph the batch lands in the graph's static input
        // where the stage that makes it allows (the host-to-device copy, or
        // the last step of GPU preprocessing), as eager lands it in a fresh
        // buffer; otherwise the forward stage copies it in first.
        let mut in_static = false;
        let mut images = match prepared.copied_ms {
            Some(copied_ms) => {
                self.copy_stream = true;
                stages[1] = copied_ms;
                prepared.images
            }
            None => {
                let t = Instant::now();
                let images = match &self.graph {
                    Some(g) if self.config.preprocess == Preprocess::Cpu => {
                        in_static = true;
                        g.input
                            .shallow_clone()
                            .f_copy_(&prepared.images)
                            .map(|_| g.input.shallow_clone())
                    }
                    _ => prepared.images.f_to_device_(
                        self.device,
                        copy_kind(self.config, self.kind),
                        true,
                        false,
                    ),
                }
                .map_err(torch_error("copying a batch to the device"))?;
                self.sync();
                stages[1] = ms(t);
                images
            }
        };
        if self.config.preprocess == Preprocess::Gpu {
            let t = Instant::now();
            let mut preprocessed = preprocess(&images, self.config, self.kind)
                .map_err(torch_error("preprocessing on the GPU"))?;
            if let Some(g) = &self.graph {
                in_static = true;
                g.input
                    .shallow_clone()
                    .f_copy_(&preprocessed)
                    .map_err(torch_error("copying a batch into the graph's input"))?;
                preprocessed = g.input.shallow_clone();
            }
            self.sync();
            // Freed only now: a copy stream may reuse its memory at once.
            images = preprocessed;
            stages[0] = ms(t);
        }
        let t = Instant::now();
        nvtx.push("forward");
        let timed = self.timer.as_ref().is_some_and(cuda::EventTimer::start);
        let logits = self.forward(&images, in_static);
        let timed = timed && self.timer.as_ref().is_some_and(cuda::EventTimer::stop);
        self.sync();
        nvtx.pop();
        let device_ms = timed.then(|| self.timer.as_ref()?.elapsed_ms()).flatten();
        let logits = logits?;
        stages[2] = ms(t);
        let t = Instant::now();
        let _host = logits
            .f_to_device_(Device::Cpu, Kind::Float, false, false)
            .map_err(torch_error("copying logits to the host"))?;
        stages[3] = ms(t);
        let total = ms(start)
            + if self.config.preprocess == Preprocess::Cpu {
                prepared.preprocess_ms
            } else {
                0.0
            }
            + prepared.copied_ms.unwrap_or(0.0);
        if self.device.is_cuda() {
            self.peak_memory = self.peak_memory.max(cuda::device_memory_used());
        }
        if record {
            if let Some(origin) = self.origin {
                let end = telemetry::signed_ms(origin, Instant::now());
                self.spans.push((end - total, end));
            }
            if let Some((monitor, Some(block))) = &self.monitor {
                // The next batch's block: odd blocks are timed unsampled.
                monitor.pause((self.spans.len() / block) % 2 == 1);
            }
            self.batch_ms.push(total);
            self.forward_ms.push(stages[2]);
            self.forward_device_ms.extend(device_ms);
            for (sum, stage) in self.stage_sum_ms.iter_mut().zip(stages) {
                *sum += stage;
            }
        }
        Ok(())
    }

    /// Waits for the work of this thread's stream. With copy streams at
    /// work, only the default stream: a whole-device synchronization would
    /// also wait for the next batch's copy and count it here.
    fn sync(&self) {
        if let Device::Cuda(index) = self.device {
            if !(self.copy_stream && synchronize_stream(std::ptr::null_mut())) {
                tch::Cuda::synchronize(index as i64);
            }
        }
    }
}

/// What a batch is copied to the device as: uint8 when the GPU preprocesses it.
fn copy_kind(config: &VitConfig, kind: Kind) -> Kind {
    if config.preprocess == Preprocess::Gpu {
        Kind::Uint8
    } else {
        kind
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}
