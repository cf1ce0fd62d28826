//! CUDA activity tracing from inside the task, through CUPTI (cudarc).
//!
//! [`Recorder::start`] enables kernel, memcpy and memset activity records
//! and the API-call recorder ([`CallRecorder`]) before the first CUDA call of
//! the run; CUPTI hands filled buffers to [`buffer_completed`], which copies
//! the records into plain structs ([`Activity`]). [`Recorder::finish`] flushes, adds the NVTX ranges the task
//! recorded on CUPTI's clock, and writes `trace.sqlite` in the nsys layout.

use std::ffi::CStr;
use std::path::Path;
use std::sync::Mutex;

use cudarc::cupti::{result, sys};

use super::cupti_calls::CallRecorder;
use super::error::TaskError;
use super::nvtx::Range;

/// One kernel execution.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers_per_thread: u16,
    pub static_shared_memory: i32,
    pub dynamic_shared_memory: i32,
    pub name: String,
}

/// One memcpy (`copy_kind` as CUPTI numbers it: 1 H2D, 2 D2H, 8 D2D…) or
/// memset (`copy_kind` 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    pub start: u64,
    pub end: u64,
    pub bytes: u64,
    pub copy_kind: u8,
    pub src_kind: u8,
    pub dst_kind: u8,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub value: u32,
}

/// One CUDA runtime API call.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    pub start: u64,
    pub end: u64,
    pub cbid: u32,
    pub process_id: u32,
    pub thread_id: u32,
    pub correlation_id: u32,
    pub return_value: u32,
    pub name: String,
    /// A driver API call (`cu…`) rather than a runtime one (`cuda…`).
    pub driver: bool,
}

/// Everything recorded, in the order CUPTI delivered it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Activity {
    pub kernels: Vec<Kernel>,
    pub memcpys: Vec<Memory>,
    pub memsets: Vec<Memory>,
    pub runtime: Vec<ApiCall>,
    pub ranges: Vec<Range>,
    pub dropped: usize,
}

static RECORDS: Mutex<Option<Activity>> = Mutex::new(None);

/// DRIVER too: cuBLAS and cuDNN launch their kernels through the driver API
/// (`cuLaunchKernelEx`), so without it half of a ViT's kernels have no
/// launching call to join on.
const KINDS: [sys::CUpti_ActivityKind; 5] = [
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME,
    sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER,
];

/// Runtime calls that only query state (cudaGetDevice, cudaGetLastError,
/// cudaStreamIsCapturing…), by CUPTI callback id. libtorch makes about a
/// thousand of them per ViT forward pass; recording them doubled the time of
/// a launch-bound forward pass, and no analysis uses them.
const QUIET_RUNTIME_APIS: [u32; 13] = [3, 10, 11, 12, 15, 16, 17, 138, 151, 200, 317, 324, 409];

/// Driver calls worth a record: those that launch work or move memory, by
/// CUPTI callback id (cupti_driver_cbid.h, CUDA 13.0). cuBLAS and cuDNN make
/// several query calls per kernel they launch; recording them slowed a
/// launch-bound forward pass by up to 89% and no analysis reads them.
pub(super) const DRIVER_WORK_APIS: [u32; 108] = [
    43, 45, 47, 49, 51, 53, 54, 55, 56, 57, 58, 60, 62, 64, 66, 67, 68, 69, 71, 73, 75, 77, 79, 81,
    216, 218, 220, 222, 224, 226, 248, 249, 250, 251, 252, 253, 254, 276, 277, 278, 279, 280, 281,
    282, 283, 284, 285, 286, 287, 288, 289, 290, 291, 292, 293, 305, 306, 307, 318, 319, 320, 321,
    397, 398, 399, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415,
    416, 418, 419, 420, 421, 422, 423, 424, 425, 426, 427, 428, 429, 430, 431, 432, 433, 442, 477,
    478, 480, 514, 515, 527, 528, 652, 653,
];

/// Above every driver callback id CUPTI 13 knows (656).
pub(super) const DRIVER_CBID_LIMIT: u32 = 1024;

const BUFFER_BYTES: usize = 8 << 20;
const BUFFER_ALIGN: usize = 8;

/// An active CUPTI session; one per process.
pub struct Recorder {
    kinds: Vec<sys::CUpti_ActivityKind>,
    calls: Option<CallRecorder>,
}

/// How API calls are recorded: through CUPTI callbacks on the functions
/// worth a record ([`CallRecorder`], the default), as activity records
/// (`VITGRAPH_CUPTI_API=activity`: every runtime call but the quiet ones,
/// the driver's work calls), or not at all (`none`). A diagnostic, for
/// measuring what recording calls costs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CallMode {
    Callback,
    Activity,
    Off,
}

fn call_mode() -> Result<CallMode, TaskError> {
    match std::env::var("VITGRAPH_CUPTI_API").as_deref() {
        Err(_) | Ok("callback") => Ok(CallMode::Callback),
        Ok("activity") => Ok(CallMode::Activity),
        Ok("none") => Ok(CallMode::Off),
        Ok(other) => Err(TaskError::Cupti {
            message: format!(
                "VITGRAPH_CUPTI_API is `{other}`; it takes callback, activity or none"
            ),
        }),
    }
}

fn is_api_kind(kind: sys::CUpti_ActivityKind) -> bool {
    matches!(
        kind,
        sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME
            | sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER
    )
}

/// The activity kinds to enable: all of [`KINDS`], or those named in
/// `VITGRAPH_CUPTI_KINDS` (comma-separated `kernel`, `memcpy`, `memset`,
/// `runtime`, `driver`; empty records nothing). A diagnostic for measuring
/// what each kind costs a launch-bound run; a trace recorded with fewer kinds
/// lacks what the omitted kinds would have recorded.
fn enabled_kinds() -> Result<Vec<sys::CUpti_ActivityKind>, TaskError> {
    let Some(list) = std::env::var_os("VITGRAPH_CUPTI_KINDS") else {
        return Ok(KINDS.to_vec());
    };
    let list = list.to_string_lossy().into_owned();
    let mut kinds = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let index = ["kernel", "memcpy", "memset", "runtime", "driver"]
            .iter()
            .position(|k| *k == name)
            .ok_or_else(|| TaskError::Cupti {
                message: format!(
                    "VITGRAPH_CUPTI_KINDS names `{name}`; the kinds are kernel, memcpy, memset, runtime and driver"
                ),
            })?;
        kinds.push(KINDS[index]);
    }
    Ok(kinds)
}

fn trace_error(what: &str) -> impl Fn(result::CuptiError) -> TaskError + '_ {
    move |e| TaskError::Cupti {
        message: format!("{what}: {e:?}"),
    }
}

/// CUPTI's clock, in ns, for timing NVTX ranges on the trace's time base;
/// usable before recording starts. Fails with a clear error where libcupti
/// cannot be loaded.
pub fn clock() -> Result<Box<dyn Fn() -> u64 + Send>, TaskError> {
    let loaded = std::panic::catch_unwind(|| {
        let mut ts = 0u64;
        // SAFETY: writes one u64 through a valid pointer.
        unsafe { result::get_timestamp(&mut ts) }
    });
    match loaded {
        Err(_) => Err(TaskError::unavailable(
            "cupti",
            "`trace: Cupti` needs libcupti.so.13, which could not be loaded",
            "put PyTorch's `nvidia/cu13/lib` on LD_LIBRARY_PATH, or use `trace: None`",
        )),
        Ok(r) => {
            r.map_err(trace_error("reading CUPTI's clock"))?;
            Ok(Box::new(|| {
                let mut ts = 0u64;
                // SAFETY: writes one u64 through a valid pointer.
                let _ = unsafe { result::get_timestamp(&mut ts) };
                ts
            }))
        }
    }
}

impl Recorder {
    /// Enables activity recording. Fails with a clear error where libcupti
    /// cannot be loaded (cudarc panics then; the panic is caught here).
    pub fn start() -> Result<Recorder, TaskError> {
        *RECORDS.lock().map_err(|_| TaskError::Cupti {
            message: "the record store is poisoned".into(),
        })? = Some(Activity::default());
        let registered = std::panic::catch_unwind(|| {
            result::activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
        });
        match registered {
            Err(_) => {
                return Err(TaskError::unavailable(
                    "cupti",
                    "`trace: Cupti` needs libcupti.so.13, which could not be loaded",
                    "put PyTorch's `nvidia/cu13/lib` on LD_LIBRARY_PATH, or use `trace: None`",
                ))
            }
            Ok(r) => r.map_err(trace_error("registering the activity buffers"))?,
        }
        let mode = call_mode()?;
        let mut kinds = enabled_kinds()?;
        if mode != CallMode::Activity {
            kinds.retain(|&k| !is_api_kind(k));
        }
        for &kind in &kinds {
            result::activity::enable(kind).map_err(trace_error("enabling an activity kind"))?;
        }
        if mode == CallMode::Activity {
            // Per-API switches record their API's calls even with the kind
            // off, so they are set only where the kinds record calls.
            for cbid in QUIET_RUNTIME_APIS {
                // An older CUPTI without per-API control records them all;
                // that costs time, not correctness.
                let _ = result::activity::enable_runtime_api(cbid, 0);
            }
            for cbid in 1..DRIVER_CBID_LIMIT {
                // Ids CUPTI does not know answer an error: nothing to record.
                let on = DRIVER_WORK_APIS.contains(&cbid);
                let _ = result::activity::enable_driver_api(cbid, u8::from(on));
            }
        }
        let calls = match mode {
            CallMode::Callback => Some(CallRecorder::start()?),
            CallMode::Activity | CallMode::Off => None,
        };
        Ok(Recorder { kinds, calls })
    }

    /// CUPTI's clock, in ns, for timing NVTX ranges on the trace's time base.
    pub fn clock(&self) -> Box<dyn Fn() -> u64 + Send> {
        Box::new(|| {
            let mut ts = 0u64;
            // SAFETY: writes one u64 through a valid pointer.
            let _ = unsafe { result::get_timestamp(&mut ts) };
            ts
        })
    }

    /// Flushes and stops recording; returns everything recorded.
    pub fn stop(self, ranges: Vec<Range>) -> Result<Activity, TaskError> {
        result::activity::flush_all(1).map_err(trace_error("flushing activity buffers"))?;
        let mut dropped = 0usize;
        // SAFETY: a null context asks for the records dropped in every
        // context; CUPTI writes one usize.
        let _ = unsafe {
            result::activity::get_num_dropped_records(std::ptr::null_mut(), 0, &mut dropped)
        };
        for &kind in &self.kinds {
            result::activity::disable(kind).map_err(trace_error("disabling an activity kind"))?;
        }
        let mut activity = RECORDS
            .lock()
            .map_err(|_| TaskError::Cupti {
                message: "the record store is poisoned".into(),
            })?
            .take()
            .unwrap_or_default();
        if let Some(calls) = self.calls {
            activity.runtime.extend(calls.stop());
        }
        activity.ranges = ranges;
        activity.dropped = dropped;
        Ok(activity)
    }

    /// Stops recording and writes `trace.sqlite` at `path`.
    pub fn finish(self, ranges: Vec<Range>, path: &Path) -> Result<Activity, TaskError> {
        let activity = self.stop(ranges)?;
        super::cupti_sqlite::write(&activity, &visible_gpus(), path)?;
        Ok(activity)
    }
}

extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let layout = std::alloc::Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN);
    // SAFETY: CUPTI passes valid out-pointers; the buffer is freed in
    // `buffer_completed` with the same layout.
    unsafe {
        let ptr = layout
            .map(|l| std::alloc::alloc(l))
            .unwrap_or(std::ptr::null_mut());
        *buffer = ptr;
        *size = if ptr.is_null() { 0 } else { BUFFER_BYTES };
        *max_records = 0;
    }
}

extern "C" fn buffer_completed(
    _context: cudarc::driver::sys::CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    if let Ok(mut guard) = RECORDS.lock() {
        if let Some(activity) = guard.as_mut() {
            // SAFETY: `buffer` holds `valid` bytes of records written by CUPTI.
            unsafe { parse_buffer(buffer, valid, activity) };
        }
    }
    if let Ok(layout) = std::alloc::Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN) {
        // SAFETY: allocated in `buffer_requested` with this layout.
        unsafe { std::alloc::dealloc(buffer, layout) };
    }
}

/// Copies every record of a completed buffer into `activity`.
///
/// # Safety
/// `buffer` must hold `valid` bytes of CUPTI activity records.
unsafe fn parse_buffer(buffer: *mut u8, valid: usize, activity: &mut Activity) {
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    while unsafe { result::activity::get_next_record(buffer, valid, &mut record) }.is_ok() {
        let kind = unsafe { std::ptr::read_unaligned(record) }.kind;
        match kind {
            sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
            | sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL => {
                let k = unsafe {
                    std::ptr::read_unaligned(record as *const sys::CUpti_ActivityKernel10)
                };
                activity.kernels.push(Kernel {
                    start: k.start,
                    end: k.end,
                    device_id: k.deviceId,
                    context_id: k.contextId,
                    stream_id: k.streamId,
                    correlation_id: k.correlationId,
                    grid: [k.gridX, k.gridY, k.gridZ],
                    block: [k.blockX, k.blockY, k.blockZ],
                    registers_per_thread: k.registersPerThread,
                    static_shared_memory: k.staticSharedMemory,
                    dynamic_shared_memory: k.dynamicSharedMemory,
                    name: unsafe { c_string(k.name) },
                });
            }
            sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY => {
                let m = unsafe {
                    std::ptr::read_unaligned(record as *const sys::CUpti_ActivityMemcpy6)
                };
                activity.memcpys.push(Memory {
                    start: m.start,
                    end: m.end,
                    bytes: m.bytes,
                    copy_kind: m.copyKind,
                    src_kind: m.srcKind,
                    dst_kind: m.dstKind,
                    device_id: m.deviceId,
                    context_id: m.contextId,
                    stream_id: m.streamId,
                    correlation_id: m.correlationId,
                    value: 0,
                });
            }
            sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET => {
                let m = unsafe {
                    std::ptr::read_unaligned(record as *const sys::CUpti_ActivityMemset4)
                };
                activity.memsets.push(Memory {
                    start: m.start,
                    end: m.end,
                    bytes: m.bytes,
                    copy_kind: 0,
                    src_kind: 0,
                    dst_kind: m.memoryKind as u8,
                    device_id: m.deviceId,
                    context_id: m.contextId,
                    stream_id: m.streamId,
                    correlation_id: m.correlationId,
                    value: m.value,
                });
            }
            sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME
            | sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER => {
                let driver = kind == sys::CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER;
                let a =
                    unsafe { std::ptr::read_unaligned(record as *const sys::CUpti_ActivityAPI) };
                activity.runtime.push(ApiCall {
                    start: a.start,
                    end: a.end,
                    cbid: a.cbid,
                    process_id: a.processId,
                    thread_id: a.threadId,
                    correlation_id: a.correlationId,
                    return_value: a.returnValue,
                    name: api_name(a.cbid, driver),
                    driver,
                });
            }
            _ => {}
        }
    }
}

impl Activity {
    /// Counts for `results.json`: records of each kind, and kernels per
    /// `forward` NVTX range inside `measure` (the figure to compare with
    /// torch.profiler's count for one forward pass).
    pub fn summary(&self) -> serde_json::Value {
        let measure = self.ranges.iter().find(|r| r.name == "measure");
        let forwards: Vec<&Range> = self
            .ranges
            .iter()
            .filter(|r| r.name == "forward")
            .filter(|r| measure.is_none_or(|m| r.start_ns >= m.start_ns && r.end_ns <= m.end_ns))
            .collect();
        let in_forward: Vec<&Kernel> = self
            .kernels
            .iter()
            .filter(|k| {
                forwards
                    .iter()
                    .any(|r| k.start >= r.start_ns && k.start <= r.end_ns)
            })
            .collect();
        let per_forward =
            (!forwards.is_empty()).then(|| in_forward.len() as f64 / forwards.len() as f64);
        // The floor of a forward pass: its kernels' GPU time, launch gaps left out.
        let kernel_ns: u64 = in_forward
            .iter()
            .map(|k| k.end.saturating_sub(k.start))
            .sum();
        let kernel_ms_per_forward =
            (!forwards.is_empty()).then(|| kernel_ns as f64 / 1e6 / forwards.len() as f64);
        // From a forward pass's first kernel start to its last kernel end:
        // the kernels and the gaps between them, the host's part left out.
        let span_ns: u64 = forwards
            .iter()
            .filter_map(|r| {
                let inside = in_forward
                    .iter()
                    .filter(|k| k.start >= r.start_ns && k.start <= r.end_ns);
                let first = inside.clone().map(|k| k.start).min()?;
                let last = inside.map(|k| k.end).max()?;
                Some(last.saturating_sub(first))
            })
            .sum();
        let kernel_span_ms_per_forward =
            (!forwards.is_empty()).then(|| span_ns as f64 / 1e6 / forwards.len() as f64);
        serde_json::json!({
            "kernels": self.kernels.len(),
            "memcpys": self.memcpys.len(),
            "memsets": self.memsets.len(),
            "runtime_calls": self.runtime.len(),
            "nvtx_ranges": self.ranges.len(),
            "dropped_records": self.dropped,
            "measured_forwards": forwards.len(),
            "kernels_per_forward": per_forward,
            "kernel_ms_per_forward": kernel_ms_per_forward,
            "kernel_span_ms_per_forward": kernel_span_ms_per_forward,
        })
    }
}

/// (CUDA device id, name, UUID) of the GPUs this process sees, from the
/// environment probe.
fn visible_gpus() -> Vec<(u32, String, String)> {
    let env = crate::host::env::probe();
    let gpus = env.record["gpus"].as_array().cloned().unwrap_or_default();
    gpus.iter()
        .enumerate()
        .map(|(i, g)| {
            let text = |k: &str| g[k].as_str().unwrap_or_default().to_owned();
            (i as u32, text("name"), text("uuid"))
        })
        .collect()
}

/// The API function's name for a callback id (`cudaLaunchKernel_v7000`,
/// `cuLaunchKernelEx`…).
pub(super) fn api_name(cbid: u32, driver: bool) -> String {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    let domain = if driver {
        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API
    } else {
        sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API
    };
    // SAFETY: CUPTI writes a pointer to a static string.
    match unsafe { result::get_callback_name(domain, cbid, &mut name) } {
        Ok(()) => unsafe { c_string(name) },
        Err(_) => format!("{}_api_{cbid}", if driver { "driver" } else { "runtime" }),
    }
}

/// # Safety
/// `ptr` is null or a NUL-terminated string.
unsafe fn c_string(ptr: *const std::ffi::c_char) -> String {
    if ptr.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_at(start: u64) -> Kernel {
        Kernel {
            start,
            end: start + 1,
            device_id: 0,
            context_id: 1,
            stream_id: 7,
            correlation_id: 0,
            grid: [1, 1, 1],
            block: [1, 1, 1],
            registers_per_thread: 0,
            static_shared_memory: 0,
            dynamic_shared_memory: 0,
            name: "k".into(),
        }
    }

    fn range(name: &str, start_ns: u64, end_ns: u64) -> Range {
        Range {
            name: name.into(),
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn kernels_per_forward_counts_only_measured_forward_ranges() {
        let activity = Activity {
            // 2 kernels in the warm-up forward, 3 and 3 in the measured ones, 1 outside.
            kernels: [5, 6, 105, 106, 107, 150, 201, 205, 209]
                .into_iter()
                .map(kernel_at)
                .collect(),
            ranges: vec![
                range("forward", 0, 10),
                range("warmup", 0, 20),
                range("forward", 100, 110),
                range("forward", 200, 210),
                range("measure", 90, 300),
            ],
            ..Activity::default()
        };
        let s = activity.summary();
        assert_eq!(s["measured_forwards"], 2);
        assert_eq!(s["kernels_per_forward"], 3.0);
        assert_eq!(s["kernels"], 9);
        // Each kernel lasts 1 ns: 6 ns over 2 measured forwards, spanning
        // 105 → 108 ns and 201 → 210 ns (gaps between kernels included).
        assert_eq!(s["kernel_ms_per_forward"], 3e-6);
        assert_eq!(s["kernel_span_ms_per_forward"], 6e-6);
    }
}
