//! CUDA API calls recorded through CUPTI's callback API.
//!
//! CUPTI's activity API records API calls too, but on a launch-bound run it
//! costs about 3 µs per recorded call (a ViT forward pass at batch 1 makes
//! about 90 of them for 69 kernels). Here CUPTI calls [`on_call`] at the entry
//! and exit of the chosen functions only; each exit appends one plain record to
//! its thread's log. Timestamps come from CUPTI's clock and correlation ids
//! from CUPTI, so the calls join the kernel and memcpy activity records as the
//! activity API's own records do.
//!
//! Which functions: those that launch work, move or set memory, synchronize,
//! or allocate and free memory ([`worth_recording`]): the calls analyses read.
//! libtorch, cuBLAS and cuDNN make hundreds of state queries per forward pass
//! besides; those get no callback at all.

use std::cell::{Cell, OnceCell};
use std::sync::{Arc, Mutex};

use cudarc::cupti::{result, sys};

use super::cupti::{api_name, ApiCall, DRIVER_CBID_LIMIT, DRIVER_WORK_APIS};
use super::error::TaskError;

/// One call as the callback saw it; named after recording stops.
#[derive(Clone, Copy)]
struct RawCall {
    start: u64,
    end: u64,
    cbid: u32,
    driver: bool,
    thread_id: u32,
    correlation_id: u32,
    return_value: u32,
}

type Log = Arc<Mutex<Vec<RawCall>>>;

/// Every thread's log, for collecting at the end.
static LOGS: Mutex<Vec<Log>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's log and id, made at its first recorded call.
    static THREAD_LOG: OnceCell<(Log, u32)> = const { OnceCell::new() };
    /// Recorded functions this thread is inside. The driver calls that a
    /// runtime function makes for itself get callbacks too; only the
    /// outermost call is recorded, as the activity API does.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Above every runtime callback id CUPTI 13 knows (566).
const RUNTIME_CBID_LIMIT: u32 = 1024;

/// A subscription to CUPTI callbacks; one per process.
pub(super) struct CallRecorder {
    subscriber: sys::CUpti_SubscriberHandle,
}

impl CallRecorder {
    /// Subscribes and enables the callbacks of the functions worth a record.
    pub(super) fn start() -> Result<CallRecorder, TaskError> {
        let mut subscriber: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
        // SAFETY: CUPTI writes the handle; `on_call` has the callback's signature.
        unsafe { result::subscribe(&mut subscriber, Some(on_call), std::ptr::null_mut()) }
            .map_err(|e| TaskError::Cupti {
                message: format!("subscribing to API callbacks: {e:?}"),
            })?;
        let runtime = sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API;
        let driver = sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API;
        for cbid in 1..RUNTIME_CBID_LIMIT {
            if worth_recording(&api_name(cbid, false)) {
                // SAFETY: the subscriber exists until `stop`. Ids this CUPTI
                // does not know answer an error: nothing to record there.
                let _ = unsafe { result::enable_callback(1, subscriber, runtime, cbid) };
            }
        }
        for cbid in DRIVER_WORK_APIS
            .into_iter()
            .filter(|&c| c < DRIVER_CBID_LIMIT)
        {
            // SAFETY: as above.
            let _ = unsafe { result::enable_callback(1, subscriber, driver, cbid) };
        }
        Ok(CallRecorder { subscriber })
    }

    /// Unsubscribes and returns every call recorded, in start order.
    pub(super) fn stop(self) -> Vec<ApiCall> {
        // SAFETY: the handle came from `subscribe` and is released once.
        let _ = unsafe { result::unsubscribe(self.subscriber) };
        let logs = LOGS
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        let process_id = std::process::id();
        let mut names = std::collections::HashMap::new();
        let mut calls: Vec<ApiCall> = logs
            .iter()
            .flat_map(|log| {
                log.lock()
                    .map(|mut l| std::mem::take(&mut *l))
                    .unwrap_or_default()
            })
            .map(|c| ApiCall {
                start: c.start,
                end: c.end,
                cbid: c.cbid,
                process_id,
                thread_id: c.thread_id,
                correlation_id: c.correlation_id,
                return_value: c.return_value,
                name: names
                    .entry((c.cbid, c.driver))
                    .or_insert_with(|| api_name(c.cbid, c.driver))
                    .clone(),
                driver: c.driver,
            })
            .collect();
        calls.sort_by_key(|c| (c.start, c.correlation_id));
        calls
    }
}

/// The runtime functions recorded, by name (`cudaLaunchKernel_v7000`…):
/// launches, copies and sets, synchronizations, allocations. Version and
/// per-thread-stream suffixes do not matter.
pub(super) fn worth_recording(name: &str) -> bool {
    let base = name.split("_v").next().unwrap_or(name);
    let base = base.trim_end_matches("_ptsz").trim_end_matches("_ptds");
    const PREFIXES: [&str; 8] = [
        "cudaLaunch",
        "cudaGraphLaunch",
        "cudaMemcpy",
        "cudaMemset",
        "cudaMalloc",
        "cudaFree",
        "cudaHostAlloc",
        "cudaHostRegister",
    ];
    const SYNCS: [&str; 7] = [
        "cudaDeviceSynchronize",
        "cudaThreadSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "cudaEventRecord",
        "cudaEventRecordWithFlags",
    ];
    PREFIXES.iter().any(|p| base.starts_with(p)) || SYNCS.contains(&base)
}

/// CUPTI's callback: the entry stores the start time in the call's own
/// correlation slot, the exit appends the record. Never panics (it runs
/// inside CUDA calls): a failure to log drops the record.
unsafe extern "C" fn on_call(
    _userdata: *mut std::ffi::c_void,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
    cbdata: *const std::ffi::c_void,
) {
    if cbdata.is_null() {
        return;
    }
    // SAFETY: for the runtime and driver domains CUPTI passes a
    // `CUpti_CallbackData` valid for the duration of the callback.
    let data = unsafe { &*(cbdata as *const sys::CUpti_CallbackData) };
    let driver = domain == sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API;
    let entering = data.callbackSite == sys::CUpti_ApiCallbackSite::CUPTI_API_ENTER;
    // Only the outermost call of a thread is recorded.
    let depth = DEPTH
        .try_with(|d| {
            if entering {
                d.set(d.get() + 1);
                d.get()
            } else {
                d.set(d.get().saturating_sub(1));
                d.get() + 1
            }
        })
        .unwrap_or(1);
    if depth > 1 {
        return;
    }
    let mut now = 0u64;
    // SAFETY: writes one u64.
    let _ = unsafe { result::get_timestamp(&mut now) };
    if data.correlationData.is_null() {
        return;
    }
    if entering {
        // SAFETY: CUPTI's per-call scratch u64, kept from entry to exit.
        unsafe { *data.correlationData = now };
        return;
    }
    // SAFETY: as above; the return value is an `int`-sized enum
    // (`cudaError_t` or `CUresult`) once the function has returned.
    let start = unsafe { *data.correlationData };
    let return_value = if data.functionReturnValue.is_null() {
        0
    } else {
        unsafe { *(data.functionReturnValue as *const u32) }
    };
    let _ = THREAD_LOG.try_with(|cell| {
        let (log, thread_id) = cell.get_or_init(|| {
            let log = Log::default();
            if let Ok(mut logs) = LOGS.lock() {
                logs.push(log.clone());
            }
            (log, thread_id())
        });
        if let Ok(mut log) = log.lock() {
            log.push(RawCall {
                start,
                end: now,
                cbid,
                driver,
                thread_id: *thread_id,
                correlation_id: data.correlationId,
                return_value,
            });
        }
    });
}

/// The kernel's id of the calling thread.
fn thread_id() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

#[cfg(test)]
mod tests {
    use super::worth_recording;

    #[test]
    fn launches_copies_syncs_and_allocations_are_recorded_queries_are_not() {
        for name in [
            "cudaLaunchKernel_v7000",
            "cudaLaunchKernel_ptsz_v7000",
            "cudaLaunchKernelExC_v11060",
            "cudaGraphLaunch_v10000",
            "cudaMemcpyAsync_v3020",
            "cudaMemsetAsync_ptsz_v7000",
            "cudaStreamSynchronize_v3020",
            "cudaDeviceSynchronize_v3020",
            "cudaEventRecordWithFlags_v11010",
            "cudaMalloc_v3020",
            "cudaFreeAsync_v11020",
            "cudaHostAlloc_v3020",
        ] {
            assert!(worth_recording(name), "{name}");
        }
        for name in [
            "cudaGetDevice_v3020",
            "cudaGetLastError_v3020",
            "cudaStreamIsCapturing_v10000",
            "cudaEventQuery_v3020",
            "cudaGraphAddMemcpyNode_v10000",
            "cudaFuncSetAttribute_v9000",
            "cudaOccupancyMaxActiveClusters_v11070",
            "cudaStreamGetCaptureInfo_v10010",
        ] {
            assert!(!worth_recording(name), "{name}");
        }
    }
}
