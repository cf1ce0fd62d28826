//! The CUDA side of the measurement loop that libtorch's Rust API does not
//! reach: the workers' copy streams (from libtorch's pool, through the C++
//! shim) and libtorch's inference mode.

extern "C" {
    fn vitgraph_inference_mode_enter() -> *mut std::ffi::c_void;
    fn vitgraph_inference_mode_exit(guard: *mut std::ffi::c_void);
    fn vitgraph_use_copy_stream(device: i32) -> *mut std::ffi::c_void;
}

thread_local! {
    /// This thread's copy stream (see [`copy_stream`]).
    static COPY_STREAM: std::cell::Cell<Option<Option<usize>>> = const { std::cell::Cell::new(None) };
}

/// Makes a stream of libtorch's pool the calling thread's current stream on
/// GPU `index` (once per thread) and returns it, or None where libc10_cuda's
/// stream functions cannot be found. The stream does not synchronize with
/// the default stream, on which the forward pass runs.
pub(super) fn copy_stream(index: usize) -> Option<cudarc::driver::sys::CUstream> {
    let raw = COPY_STREAM.with(|cell| {
        let raw = cell.get().unwrap_or_else(|| {
            // SAFETY: the shim only looks up and calls libc10_cuda functions.
            let p = unsafe { vitgraph_use_copy_stream(index as i32) };
            (!p.is_null()).then_some(p as usize)
        });
        cell.set(Some(raw));
        raw
    })?;
    Some(raw as cudarc::driver::sys::CUstream)
}

/// Waits for `stream`'s work; false (said once on stderr) when the driver
/// cannot be asked, and the caller synchronizes the whole device instead.
pub(super) fn synchronize_stream(stream: cudarc::driver::sys::CUstream) -> bool {
    // cudarc panics when it cannot load libcuda.
    let result = std::panic::catch_unwind(|| {
        // SAFETY: a stream of this process's current context, or the default stream.
        unsafe { cudarc::driver::result::stream::synchronize(stream) }.map_err(|e| e.to_string())
    })
    .unwrap_or_else(|_| Err("the CUDA driver library cannot be loaded".to_owned()));
    if let Err(e) = &result {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "vit: synchronizing one stream failed ({e}); synchronizing the device instead"
            )
        });
    }
    result.is_ok()
}

/// Whether the async flow copies on copy streams: yes unless
/// `VITGRAPH_COPY_STREAMS=0` (for measuring what they bring).
pub(super) fn copy_streams_wanted() -> bool {
    std::env::var_os("VITGRAPH_COPY_STREAMS").is_none_or(|v| v != "0")
}

/// libtorch's inference mode on this thread while the value lives, as the
/// eager PyTorch baseline runs under `torch.inference_mode()`.
pub(super) struct InferenceMode(*mut std::ffi::c_void);

impl InferenceMode {
    pub(super) fn enter() -> InferenceMode {
        // SAFETY: the shim allocates a c10::InferenceMode guard; it is freed by Drop.
        InferenceMode(unsafe { vitgraph_inference_mode_enter() })
    }
}

impl Drop for InferenceMode {
    fn drop(&mut self) {
        // SAFETY: the pointer came from the shim's enter, on this thread, and is freed once.
        unsafe { vitgraph_inference_mode_exit(self.0) }
    }
}
