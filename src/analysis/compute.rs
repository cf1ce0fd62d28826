//! Computes [`Metrics`] from a loaded [`Trace`]: selects the window, then for
//! each device the busy/span/idle figures, gaps, launch latency, memcpy per
//! direction and the nsys-equivalent kernel and memory summaries.
//!
//! Selection rule: an activity belongs to the window when it overlaps it.
//! Busy time, spans, gaps and `kernel_time_sum_ns` use the part inside the
//! window (clipped); the per-kernel and memory summaries and memcpy figures
//! use whole activities, as `nsys stats` reports them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::OnceLock;

use super::intervals::union;
use super::metrics::*;
use super::window::{batch_latency, find_window, Span};
use crate::stats::nsys::{median, percentile, stats};
use crate::trace::idmap::IdMap;
use crate::trace::reader::{KernelRow, MemcpyRow, MemsetRow, RuntimeRow, Trace};
use crate::trace::records::{copy_kind_label, copy_kind_operation, mem_kind_label, process_of_tid};

/// What to analyse.
#[derive(Debug, Clone)]
pub struct Options {
    /// The NVTX range that delimits the measured window.
    pub window: String,
    /// The name prefix of the per-batch NVTX ranges inside the window.
    pub batch_prefix: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: "measure".into(),
            batch_prefix: "batch".into(),
        }
    }
}

/// Computes the metrics of every device of `trace`.
pub fn compute(trace: &Trace, opts: &Options) -> Metrics {
    let (window, span) = find_window(&trace.nvtx, &opts.window);
    // The launch index (a hash of every runtime call) builds beside the
    // grouping of kernels by device.
    let (launches, (devices, mut by_device)) = rayon::join(
        || LaunchIndex::new(&trace.runtime),
        || {
            let devices: BTreeSet<u32> = trace
                .kernels
                .iter()
                .map(|k| k.device)
                .chain(trace.memcpys.iter().map(|m| m.device))
                .chain(trace.memsets.iter().map(|m| m.device))
                .collect();
            let mut by_device: HashMap<u32, Vec<&KernelRow>> = HashMap::new();
            for k in trace
                .kernels
                .iter()
                .filter(|k| span.overlaps(k.start, k.end))
            {
                by_device.entry(k.device).or_default().push(k);
            }
            (devices, by_device)
        },
    );
    let devices = devices
        .into_iter()
        .map(|d| {
            let kernels = by_device.remove(&d).unwrap_or_default();
            let memcpys: Vec<&MemcpyRow> = trace
                .memcpys
                .iter()
                .filter(|m| m.device == d && span.overlaps(m.start, m.end))
                .collect();
            let memsets: Vec<&MemsetRow> = trace
                .memsets
                .iter()
                .filter(|m| m.device == d && span.overlaps(m.start, m.end))
                .collect();
            device_metrics(trace, d, span, &kernels, &memcpys, &memsets, &launches)
        })
        .collect();
    Metrics {
        metrics_version: METRICS_VERSION,
        source: source(trace),
        window,
        devices,
        batches: batch_latency(&trace.nvtx, span, &opts.window, &opts.batch_prefix),
    }
}

fn source(trace: &Trace) -> Source {
    let file = Path::new(&trace.path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Source {
        file,
        producer: trace.producer.name.clone(),
        producer_version: trace.producer.version.clone(),
        schema_version: trace.producer.schema_version.clone(),
        gpus: trace
            .gpus
            .iter()
            .map(|g| GpuInfo {
                id: g.id,
                name: g.name.clone(),
            })
            .collect(),
    }
}

fn device_metrics(
    trace: &Trace,
    device: u32,
    span: Span,
    kernels: &[&KernelRow],
    memcpys: &[&MemcpyRow],
    memsets: &[&MemsetRow],
    launches: &LaunchIndex,
) -> DeviceMetrics {
    // The launch join and the per-kernel summary run beside the unions.
    let ((launch, summary), intervals) = rayon::join(
        || {
            rayon::join(
                || launch_figures(kernels, launches),
                || kernel_summary(trace, kernels),
            )
        },
        || unions(span, kernels, memcpys, memsets),
    );
    let (launch_latency_ns, cpu_api) = launch;
    let (kernel_time_sum, clipped_kernels, busy, busy_all) = intervals;
    DeviceMetrics {
        device,
        kernel_count: kernels.len() as u64,
        kernel_time_sum_ns: kernel_time_sum,
        span_ns: busy.span,
        busy_ns: busy.busy,
        gpu_utilization: ratio(busy.busy as f64, busy.span as f64),
        busy_all_ns: busy_all.busy,
        span_all_ns: busy_all.span,
        gpu_utilization_all: ratio(busy_all.busy as f64, busy_all.span as f64),
        kernel_time_ratio: ratio(kernel_time_sum as f64, busy.span as f64),
        idle_time_ns: busy.span - busy.busy,
        gaps: gaps(busy.gaps),
        launch_latency_ns,
        memcpy: memcpy_directions(memcpys),
        kernels: summary,
        clipped_kernels,
        streams: kernels
            .iter()
            .map(|k| k.stream)
            .collect::<BTreeSet<_>>()
            .len() as u64,
        cpu_api,
        memset: transfer(memsets.iter().map(|m| (1, m.bytes, m.end - m.start))),
        memory_time: memory_summary(memcpys, memsets, |m| m.1, |s| s.1, true),
        memory_size: memory_summary(memcpys, memsets, |m| m.0, |s| s.0, false),
    }
}

/// Σ clipped kernel time, the clipped kernels, and the unions of kernels
/// and of everything (kernels, copies, sets) in the window.
fn unions(
    span: Span,
    kernels: &[&KernelRow],
    memcpys: &[&MemcpyRow],
    memsets: &[&MemsetRow],
) -> (i64, u64, super::intervals::Union, super::intervals::Union) {
    let mut kernel_iv: Vec<(i64, i64)> =
        kernels.iter().map(|k| span.clip(k.start, k.end)).collect();
    let clipped_kernels = kernels
        .iter()
        .zip(&kernel_iv)
        .filter(|(k, c)| (k.start, k.end) != **c)
        .count() as u64;
    let kernel_time_sum: i64 = kernel_iv.iter().map(|(s, e)| e - s).sum();
    let busy = union(&mut kernel_iv);
    // `union` left the kernels sorted: merging in the sorted copies and sets
    // keeps the second union's sort linear.
    let mut others: Vec<(i64, i64)> = memcpys
        .iter()
        .map(|m| span.clip(m.start, m.end))
        .chain(memsets.iter().map(|m| span.clip(m.start, m.end)))
        .collect();
    others.sort_unstable_by_key(|i| i.0);
    let mut all_iv = merge_sorted(&kernel_iv, &others);
    let busy_all = union(&mut all_iv);
    (kernel_time_sum, clipped_kernels, busy, busy_all)
}

/// Two lists sorted by start, merged into one.
fn merge_sorted(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 <= b[j].0 {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn gaps(mut gaps: Vec<i64>) -> Gaps {
    let count_ge = |t: i64| gaps.iter().filter(|&&g| g >= t).count() as u64;
    let (c1, c10, c100) = (count_ge(1_000), count_ge(10_000), count_ge(100_000));
    let count = gaps.len() as u64;
    // The ten largest, without sorting them all.
    if gaps.len() > 10 {
        gaps.select_nth_unstable_by(9, |a, b| b.cmp(a));
        gaps.truncate(10);
    }
    gaps.sort_unstable_by(|a, b| b.cmp(a));
    Gaps {
        count_ge_1us: c1,
        count_ge_10us: c10,
        count_ge_100us: c100,
        largest_ns: gaps,
        count,
    }
}

/// The runtime API calls by (process, correlation id): correlation ids are
/// unique per process only.
pub(crate) enum LaunchIndex<'a> {
    /// Every call of one process, with correlation ids below a few times the
    /// call count (as CUPTI and nsys number them: densely, from 1): an array
    /// indexed by correlation id, of the call's position + 1 (0: none).
    /// Building it is one pass of stores, where a hash costs an insert per
    /// call.
    Dense {
        runtime: &'a [RuntimeRow],
        process: i64,
        slots: Vec<u32>,
    },
    Hashed {
        runtime: &'a [RuntimeRow],
        by_process: IdMap<(i64, u32), &'a RuntimeRow>,
        /// By correlation id alone, for kernels without `globalPid` (Kineto
        /// imports of several processes); `None` where two processes share the id.
        by_correlation: OnceLock<HashMap<u32, Option<&'a RuntimeRow>>>,
    },
}

impl<'a> LaunchIndex<'a> {
    fn new(runtime: &'a [RuntimeRow]) -> Self {
        let mut calls = runtime.iter().filter(|r| r.correlation != 0);
        let process = calls.next().map(|r| process_of_tid(r.global_tid));
        let one_process = calls.all(|r| Some(process_of_tid(r.global_tid)) == process);
        let max = runtime.iter().map(|r| r.correlation).max().unwrap_or(0) as usize;
        if let (Some(process), true) = (process, one_process) {
            if max <= 4 * runtime.len() + 1024 && runtime.len() < u32::MAX as usize {
                let mut slots = vec![0u32; max + 1];
                let mut unique = true;
                for (i, r) in runtime
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.correlation != 0)
                {
                    let slot = &mut slots[r.correlation as usize];
                    unique &= *slot == 0;
                    *slot = i as u32 + 1;
                }
                // A correlation id used twice is resolved as the hash does it
                // (the last call by process, the first without one).
                if unique {
                    return LaunchIndex::Dense {
                        runtime,
                        process,
                        slots,
                    };
                }
            }
        }
        Self::hashed(runtime)
    }

    fn hashed(runtime: &'a [RuntimeRow]) -> Self {
        let mut by_process = IdMap::with_capacity_and_hasher(runtime.len(), Default::default());
        for r in runtime.iter().filter(|r| r.correlation != 0) {
            by_process.insert((process_of_tid(r.global_tid), r.correlation), r);
        }
        LaunchIndex::Hashed {
            runtime,
            by_process,
            by_correlation: OnceLock::new(),
        }
    }

    fn launch_of(&self, k: &KernelRow) -> Option<&'a RuntimeRow> {
        match self {
            LaunchIndex::Dense {
                runtime,
                process,
                slots,
            } => {
                // One process: a kernel of another has no launch here, and
                // one without a process id cannot be ambiguous.
                if k.global_pid.is_some_and(|pid| pid != *process) {
                    return None;
                }
                let slot = *slots.get(k.correlation as usize)?;
                (slot != 0).then(|| &runtime[slot as usize - 1])
            }
            LaunchIndex::Hashed {
                runtime,
                by_process,
                by_correlation,
            } => {
                if let Some(pid) = k.global_pid {
                    return by_process.get(&(pid, k.correlation)).copied();
                }
                let index = by_correlation.get_or_init(|| {
                    let mut m: HashMap<u32, Option<&RuntimeRow>> = HashMap::new();
                    for r in runtime.iter().filter(|r| r.correlation != 0) {
                        m.entry(r.correlation)
                            .and_modify(|e| {
                                let same = e.is_some_and(|o| {
                                    process_of_tid(o.global_tid) == process_of_tid(r.global_tid)
                                });
                                if !same {
                                    *e = None;
                                }
                            })
                            .or_insert(Some(r));
                    }
                    m
                });
                index.get(&k.correlation).copied().flatten()
            }
        }
    }
}

fn launch_figures(kernels: &[&KernelRow], launches: &LaunchIndex) -> (LaunchLatency, CpuApi) {
    let mut latency = Vec::with_capacity(kernels.len());
    let mut api = Vec::with_capacity(kernels.len());
    for k in kernels {
        if let Some(r) = launches.launch_of(k) {
            latency.push(k.start - r.start);
            api.push(r.end - r.start);
        }
    }
    let n = latency.len();
    let ll = LaunchLatency {
        median: median(&mut latency),
        p99: percentile(&mut latency, 99.0),
        count: n as u64,
        mean: ratio(latency.iter().sum::<i64>() as f64, n as f64),
        min: latency.iter().copied().min().unwrap_or(0),
        max: latency.iter().copied().max().unwrap_or(0),
    };
    let api_sum: i64 = api.iter().sum();
    let cpu = CpuApi {
        launch_call_mean_ns: ratio(api_sum as f64, api.len() as f64),
        launch_call_median_ns: median(&mut api),
        api_time_per_kernel_ns: ratio(api_sum as f64, kernels.len() as f64),
    };
    (ll, cpu)
}

/// count, bytes, duration triples → a [`Transfer`].
fn transfer(items: impl Iterator<Item = (u64, u64, i64)>) -> Transfer {
    let mut t = Transfer::default();
    for (count, bytes, time) in items {
        t.count += count;
        t.bytes += bytes;
        t.time_ns += time;
    }
    t.bandwidth_gbps = ratio(t.bytes as f64, t.time_ns as f64);
    t
}

fn copy_triple(m: &MemcpyRow) -> (u64, u64, i64) {
    (u64::from(m.copy_count), m.bytes, m.end - m.start)
}

/// The memory kind of a copy's host side: the source of copies to the device,
/// the destination of copies from it; `None` for copies that do not touch the host.
fn host_side(kind: u32, m: &MemcpyRow) -> Option<u32> {
    match kind {
        1 | 3 | 11 => Some(m.src_kind),
        2 | 4 | 12 => Some(m.dst_kind),
        _ => None,
    }
}

fn memcpy_directions(memcpys: &[&MemcpyRow]) -> BTreeMap<String, MemcpyDirection> {
    let mut by_kind: BTreeMap<u32, Vec<&MemcpyRow>> = BTreeMap::new();
    for m in memcpys {
        by_kind.entry(m.copy_kind).or_default().push(m);
    }
    by_kind
        .into_iter()
        .map(|(kind, rows)| {
            let all = transfer(rows.iter().map(|m| copy_triple(m)));
            let mut split: BTreeMap<&str, Vec<&MemcpyRow>> = BTreeMap::new();
            for m in &rows {
                if let Some(side) = host_side(kind, m) {
                    split.entry(mem_kind_label(side)).or_default().push(m);
                }
            }
            let host_memory = split
                .into_iter()
                .map(|(label, ms)| {
                    (
                        label.to_string(),
                        transfer(ms.iter().map(|m| copy_triple(m))),
                    )
                })
                .collect();
            let dir = MemcpyDirection {
                count: all.count,
                bytes: all.bytes,
                time_ns: all.time_ns,
                bandwidth_gbps: all.bandwidth_gbps,
                host_memory,
            };
            (copy_kind_label(kind).to_string(), dir)
        })
        .collect()
}

/// `cuda_gpu_kern_sum`: per kernel name, by total time descending.
fn kernel_summary(trace: &Trace, kernels: &[&KernelRow]) -> Vec<KernelSummary> {
    // Group by the dense name index first (cheap), then merge indices that
    // carry the same text, so rows are exactly one per name.
    let mut by_index: Vec<Vec<i64>> = vec![Vec::new(); trace.names.len()];
    for k in kernels {
        if let Some(v) = by_index.get_mut(k.name as usize) {
            v.push(k.end - k.start);
        }
    }
    let mut by_name: HashMap<&str, Vec<i64>> = HashMap::new();
    for (i, durations) in by_index.into_iter().enumerate() {
        if !durations.is_empty() {
            by_name
                .entry(trace.name(i as u32))
                .or_default()
                .extend(durations);
        }
    }
    let mut rows: Vec<(&str, _)> = by_name
        .into_iter()
        .map(|(name, mut d)| (name, stats(&mut d)))
        .collect();
    let total: i64 = rows.iter().map(|r| r.1.total).sum();
    rows.sort_by(|a, b| b.1.total.cmp(&a.1.total).then_with(|| a.0.cmp(b.0)));
    rows.into_iter()
        .map(|(name, s)| KernelSummary {
            name: name.to_string(),
            time_pct: ratio(100.0 * s.total as f64, total as f64),
            total_ns: s.total,
            instances: s.count,
            avg_ns: s.avg,
            med_ns: s.med,
            min_ns: s.min,
            max_ns: s.max,
            stddev_ns: s.stddev,
        })
        .collect()
}

/// `cuda_gpu_mem_time_sum` (`time`: durations) or `cuda_gpu_mem_size_sum` (bytes).
fn memory_summary(
    memcpys: &[&MemcpyRow],
    memsets: &[&MemsetRow],
    copy_value: impl Fn((i64, i64)) -> i64,
    set_value: impl Fn((i64, i64)) -> i64,
    time: bool,
) -> Vec<MemorySummary> {
    let mut by_op: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for m in memcpys {
        let v = copy_value((m.bytes as i64, m.end - m.start));
        by_op
            .entry(copy_kind_operation(m.copy_kind))
            .or_default()
            .push(v);
    }
    for m in memsets {
        let v = set_value((m.bytes as i64, m.end - m.start));
        by_op.entry("[CUDA memset]").or_default().push(v);
    }
    let mut rows: Vec<(&str, _)> = by_op
        .into_iter()
        .map(|(op, mut v)| (op, stats(&mut v)))
        .collect();
    let total: i64 = rows.iter().map(|r| r.1.total).sum();
    rows.sort_by(|a, b| b.1.total.cmp(&a.1.total).then_with(|| a.0.cmp(b.0)));
    rows.into_iter()
        .map(|(op, s)| MemorySummary {
            operation: op.to_string(),
            time_pct: if time {
                ratio(100.0 * s.total as f64, total as f64)
            } else {
                0.0
            },
            total: s.total,
            count: s.count,
            avg: s.avg,
            med: s.med,
            min: s.min,
            max: s.max,
            stddev: s.stddev,
        })
        .collect()
}

#[cfg(test)]
mod launch_index_tests {
    use super::*;

    fn call(tid: i64, correlation: u32, start: i64) -> RuntimeRow {
        RuntimeRow {
            start,
            end: start + 1,
            global_tid: tid,
            correlation,
            name: 0,
        }
    }

    fn kernel(pid: Option<i64>, correlation: u32) -> KernelRow {
        KernelRow {
            start: 0,
            end: 1,
            device: 0,
            stream: 7,
            correlation,
            global_pid: pid,
            name: 0,
        }
    }

    /// The dense index finds exactly what the hash finds, for every kernel.
    #[test]
    fn the_dense_index_agrees_with_the_hash() {
        let p1 = 0x0100_0000_0000_0000_i64;
        let p2 = 0x0200_0000_0000_0000_i64;
        let cases: Vec<(Vec<RuntimeRow>, bool)> = vec![
            // One process, ids 1..=50 with gaps and an id-0 call: dense.
            (
                (0..60)
                    .filter(|i| i % 7 != 3)
                    .map(|i| call(p1 + 5, if i == 10 { 0 } else { i + 1 }, i as i64))
                    .collect(),
                true,
            ),
            // A correlation id used twice: the hash decides.
            (vec![call(p1, 1, 0), call(p1, 2, 1), call(p1, 1, 2)], false),
            // Two processes sharing ids: the hash.
            (vec![call(p1, 1, 0), call(p2, 1, 1), call(p2, 2, 2)], false),
            // Ids far beyond the call count: the hash.
            (vec![call(p1, 1, 0), call(p1, 1_000_000, 1)], false),
            (Vec::new(), false),
        ];
        for (runtime, dense) in &cases {
            let fast = LaunchIndex::new(runtime);
            assert_eq!(
                matches!(fast, LaunchIndex::Dense { .. }),
                *dense,
                "{runtime:?}"
            );
            let slow = LaunchIndex::hashed(runtime);
            for correlation in 0..70 {
                for pid in [None, Some(p1), Some(p2)] {
                    let k = kernel(pid, correlation);
                    assert_eq!(
                        fast.launch_of(&k).map(|r| r.start),
                        slow.launch_of(&k).map(|r| r.start),
                        "kernel {pid:?}/{correlation} in {runtime:?}"
                    );
                }
            }
        }
    }
}
