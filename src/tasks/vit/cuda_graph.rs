//! `graph: Cuda`: the forward pass captured once into a CUDA graph and
//! replayed, through libtorch's `at::cuda::CUDAGraph`.
//!
//! The C++ side (`csrc/cuda_graph.cpp`) is a shared object of its own,
//! embedded in this binary by build.rs: it names libtorch_cuda's symbols,
//! which a binary that also runs on CPU-only machines cannot link. It is
//! loaded from memory (a memfd) once libtorch_cuda.so is loaded
//! `RTLD_GLOBAL`, and its symbols resolve against that copy.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;
use std::time::Instant;

use super::results::CudaGraphUse;
use crate::tasks::cuda;
use crate::tasks::error::TaskError;

/// The compiled shim; empty when build.rs could not compile it.
static SHIM: &[u8] = include_bytes!(env!("VITGRAPH_CUDA_GRAPH_SHIM"));
/// Why the shim is empty (build.rs's message), or empty.
const SHIM_MISSING: &str = env!("VITGRAPH_CUDA_GRAPH_SHIM_MISSING");

/// Forward passes on the capture stream before the capture (new streams
/// get their cuBLAS workspaces and kernels' lazy set-up outside it).
pub const SIDE_STREAM_WARMUP: usize = 2;

type Status = *const c_char;
type NewFn = unsafe extern "C" fn(*mut *mut c_void) -> Status;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type StreamFn = unsafe extern "C" fn(*mut c_void, c_int) -> Status;
type GraphFn = unsafe extern "C" fn(*mut c_void) -> Status;

/// The shim's functions (see csrc/cuda_graph.cpp).
struct Api {
    new: NewFn,
    free: FreeFn,
    use_side_stream: StreamFn,
    capture_begin: GraphFn,
    capture_end: GraphFn,
    replay: GraphFn,
}

fn unavailable(message: String) -> TaskError {
    TaskError::unavailable(
        "cuda graph",
        message,
        "run on a GPU host with PyTorch's CUDA libraries on LD_LIBRARY_PATH, from a vitgraph built with `--features torch` after scripts/setup-libtorch.sh; or remove `graph: Cuda`",
    )
}

fn dl_error(what: &str) -> String {
    // SAFETY: dlerror returns null or a C string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    let why = if e.is_null() {
        "no reason given".to_owned()
    } else {
        // SAFETY: non-null, NUL-terminated, read before any other dl call.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    };
    format!("{what}: {why}")
}

/// Loads the shim once; the error says why it cannot be used here.
fn api() -> Result<&'static Api, TaskError> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load)
        .as_ref()
        .map_err(|message| unavailable(message.clone()))
}

fn load() -> Result<Api, String> {
    if SHIM.is_empty() {
        return Err(format!(
            "this vitgraph has no CUDA-graph support: {SHIM_MISSING}"
        ));
    }
    if !cuda::load_torch_cuda() {
        return Err(
            "`graph: Cuda` needs libtorch_cuda.so, which is not on the library path".into(),
        );
    }
    // SAFETY: a name and flags; the descriptor is owned below.
    let fd = unsafe { libc::memfd_create(c"vitgraph-cuda-graph".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!(
            "cannot create the in-memory file for the CUDA-graph shim: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: a fresh descriptor this function owns from here on.
    let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    std::io::Write::write_all(&mut file, SHIM)
        .map_err(|e| format!("cannot write the CUDA-graph shim to memory: {e}"))?;
    let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL");
    // SAFETY: dlopen of a complete shared object; the handle lives for the
    // process (never closed), so the function pointers below stay valid.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    drop(file);
    if handle.is_null() {
        return Err(dl_error(
            "loading the CUDA-graph shim against this libtorch failed",
        ));
    }
    let symbol = |name: &CStr| -> Result<*mut c_void, String> {
        // SAFETY: a valid handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if p.is_null() {
            Err(dl_error(&format!("the CUDA-graph shim lacks {name:?}")))
        } else {
            Ok(p)
        }
    };
    // SAFETY: each symbol is the extern "C" function of csrc/cuda_graph.cpp
    // with exactly the signature of the field it is stored in.
    unsafe {
        Ok(Api {
            new: std::mem::transmute::<*mut c_void, NewFn>(symbol(c"vitgraph_graph_new")?),
            free: std::mem::transmute::<*mut c_void, FreeFn>(symbol(c"vitgraph_graph_free")?),
            use_side_stream: std::mem::transmute::<*mut c_void, StreamFn>(symbol(
                c"vitgraph_graph_use_side_stream",
            )?),
            capture_begin: std::mem::transmute::<*mut c_void, GraphFn>(symbol(
                c"vitgraph_graph_capture_begin",
            )?),
            capture_end: std::mem::transmute::<*mut c_void, GraphFn>(symbol(
                c"vitgraph_graph_capture_end",
            )?),
            replay: std::mem::transmute::<*mut c_void, GraphFn>(symbol(c"vitgraph_graph_replay")?),
        })
    }
}

/// The shim's status as a result: null is success, else its message.
fn check(status: Status, during: &str) -> Result<(), TaskError> {
    if status.is_null() {
        return Ok(());
    }
    // SAFETY: a message the shim keeps alive until its next call on this thread.
    let message = unsafe { CStr::from_ptr(status) }
        .to_string_lossy()
        .into_owned();
    Err(TaskError::Torch {
        during: during.to_owned(),
        message,
    })
}

/// A captured CUDA graph. Replays on the calling thread's current stream.
pub struct CudaGraph {
    api: &'static Api,
    raw: *mut c_void,
}

impl CudaGraph {
    /// Runs `forward` [`SIDE_STREAM_WARMUP`] times on a side stream of GPU
    /// `device`, then once more while capturing it; `forward` must read
    /// and write only tensors that outlive the graph (the static input and
    /// the output it returns, kept by the caller).
    pub fn capture(
        device: usize,
        mut forward: impl FnMut() -> Result<(), TaskError>,
    ) -> Result<(CudaGraph, CudaGraphUse), TaskError> {
        let api = api()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `new` stores a fresh graph in `raw`.
        check(unsafe { (api.new)(&mut raw) }, "creating a CUDA graph")?;
        let graph = CudaGraph { api, raw };
        // SAFETY: a live graph, on the thread that runs the forward passes.
        check(
            unsafe { (api.use_side_stream)(graph.raw, device as c_int) },
            "switching to the capture stream",
        )?;
        let start = Instant::now();
        for _ in 0..SIDE_STREAM_WARMUP {
            forward()?;
        }
        let warmup_ms = start.elapsed().as_secs_f64() * 1e3;
        let start = Instant::now();
        // SAFETY: as above; the side stream is current.
        check(
            unsafe { (api.capture_begin)(graph.raw) },
            "beginning the CUDA-graph capture",
        )?;
        let captured = forward();
        // SAFETY: ends the capture begun above (also after a failed forward,
        // so the stream leaves capture mode) and restores the stream.
        let ended = check(
            unsafe { (api.capture_end)(graph.raw) },
            "capturing the forward pass into a CUDA graph",
        );
        captured?;
        ended?;
        let capture_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok((
            graph,
            CudaGraphUse {
                replayed: true,
                side_stream_warmup: SIDE_STREAM_WARMUP as u32,
                side_stream_warmup_ms: warmup_ms,
                capture_ms,
            },
        ))
    }

    /// Launches the captured forward pass.
    pub fn replay(&self) -> Result<(), TaskError> {
        // SAFETY: a captured graph, replayed on this thread.
        check(
            unsafe { (self.api.replay)(self.raw) },
            "replaying the CUDA graph",
        )
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: freed once; the graph's pool goes back to the allocator.
        unsafe { (self.api.free)(self.raw) }
    }
}
