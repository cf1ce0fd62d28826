//! The `metrics.json` document (normative: other tools read it). Field names
//! are fixed; new facts are added as new fields, never by renaming.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// File format version of `metrics.json`.
pub const METRICS_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub metrics_version: u32,
    pub source: Source,
    pub window: Window,
    pub devices: Vec<DeviceMetrics>,
    /// Per-batch latency from the batch NVTX ranges inside the window.
    pub batches: Option<BatchLatency>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// The trace's file name (never a full path: outputs must not depend on where the workspace lives).
    pub file: String,
    /// `nsys` for Nsight Systems exports, `vitgraph` for traces vitgraph wrote.
    pub producer: Option<String>,
    pub producer_version: Option<String>,
    pub schema_version: Option<String>,
    pub gpus: Vec<GpuInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub id: u32,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// The NVTX range name asked for.
    pub name: String,
    /// Whether such a range exists; when not, the window is the whole trace.
    pub found: bool,
    /// Number of ranges with that name (the window spans from the first start to the last end).
    pub ranges: u64,
    pub start_ns: Option<i64>,
    pub end_ns: Option<i64>,
    pub duration_ns: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceMetrics {
    pub device: u32,
    pub kernel_count: u64,
    pub kernel_time_sum_ns: i64,
    pub span_ns: i64,
    pub busy_ns: i64,
    pub gpu_utilization: f64,
    pub busy_all_ns: i64,
    pub span_all_ns: i64,
    pub gpu_utilization_all: f64,
    pub kernel_time_ratio: f64,
    pub idle_time_ns: i64,
    pub gaps: Gaps,
    pub launch_latency_ns: LaunchLatency,
    pub memcpy: BTreeMap<String, MemcpyDirection>,
    pub kernels: Vec<KernelSummary>,
    /// Kernels cut by the window's edges (only their inside part counts in busy and span).
    pub clipped_kernels: u64,
    pub streams: u64,
    pub cpu_api: CpuApi,
    pub memset: Transfer,
    /// `nsys stats --report cuda_gpu_mem_time_sum` rows (durations in ns).
    pub memory_time: Vec<MemorySummary>,
    /// `nsys stats --report cuda_gpu_mem_size_sum` rows (sizes in bytes).
    pub memory_size: Vec<MemorySummary>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gaps {
    pub count_ge_1us: u64,
    pub count_ge_10us: u64,
    pub count_ge_100us: u64,
    /// The ten largest idle gaps, largest first.
    pub largest_ns: Vec<i64>,
    pub count: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchLatency {
    pub median: f64,
    pub p99: i64,
    /// Kernels whose launching API call was found.
    pub count: u64,
    pub mean: f64,
    pub min: i64,
    pub max: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuApi {
    /// Mean duration of the API calls that launched the window's kernels.
    pub launch_call_mean_ns: f64,
    pub launch_call_median_ns: f64,
    /// Σ durations of the launching calls ÷ kernel count.
    pub api_time_per_kernel_ns: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Transfer {
    pub count: u64,
    pub bytes: u64,
    pub time_ns: i64,
    /// bytes ÷ time_ns (GB/s, 10⁹ bytes per second); 0 when time is 0.
    pub bandwidth_gbps: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemcpyDirection {
    pub count: u64,
    pub bytes: u64,
    pub time_ns: i64,
    pub bandwidth_gbps: f64,
    /// Split by the host side's memory (`Pinned`, `Pageable`, …) for copies to or from the host.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub host_memory: BTreeMap<String, Transfer>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSummary {
    pub name: String,
    pub time_pct: f64,
    pub total_ns: i64,
    pub instances: u64,
    pub avg_ns: f64,
    pub med_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub stddev_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemorySummary {
    pub operation: String,
    /// Share of the total over the listed rows (time report only; 0 in the size report).
    pub time_pct: f64,
    pub total: i64,
    pub count: u64,
    pub avg: f64,
    pub med: f64,
    pub min: i64,
    pub max: i64,
    pub stddev: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchLatency {
    /// The NVTX name prefix that marks a batch range.
    pub prefix: String,
    pub count: u64,
    pub mean_ns: f64,
    pub median_ns: f64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub stddev_ns: f64,
}

/// A ratio that is 0 rather than NaN or infinite when the denominator is 0.
pub fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}
