//! The plain record types of a trace: what the writer takes and what importers
//! and the CUPTI recorder produce. Times are integer nanoseconds on one clock;
//! ids follow the Nsight Systems export (see `TraceWriter` for the table layout).

/// A CUDA kernel execution (`CUPTI_ACTIVITY_KIND_KERNEL`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kernel {
    pub start: i64,
    pub end: i64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    /// The launching process as an Nsight global id (see [`global_pid`]).
    pub global_pid: Option<i64>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub static_shared_memory: u32,
    pub dynamic_shared_memory: u32,
    pub registers_per_thread: u32,
    /// The demangled name, e.g. `void gemm<float>(float*, int)`.
    pub name: String,
    /// The base name; derived from `name` by [`short_name`] when `None`.
    pub short_name: Option<String>,
}

/// A memory copy (`CUPTI_ACTIVITY_KIND_MEMCPY`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memcpy {
    pub start: i64,
    pub end: i64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub global_pid: Option<i64>,
    pub bytes: u64,
    /// `ENUM_CUDA_MEMCPY_OPER`: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, 11–13 unified.
    pub copy_kind: u32,
    /// `ENUM_CUDA_MEM_KIND`: 0 pageable, 1 pinned, 2 device, 4 managed, 7 unknown.
    pub src_kind: u32,
    pub dst_kind: u32,
}

/// A memory set (`CUPTI_ACTIVITY_KIND_MEMSET`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memset {
    pub start: i64,
    pub end: i64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub global_pid: Option<i64>,
    pub bytes: u64,
    pub value: u32,
    /// `ENUM_CUDA_MEM_KIND` of the memory set.
    pub mem_kind: u32,
}

/// A CUDA runtime (or driver) API call (`CUPTI_ACTIVITY_KIND_RUNTIME`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Runtime {
    pub start: i64,
    pub end: i64,
    /// The calling thread as an Nsight global id (see [`global_tid`]).
    pub global_tid: i64,
    pub correlation_id: u32,
    /// The API name, e.g. `cudaLaunchKernel`.
    pub name: String,
    pub return_value: i32,
    /// A driver API call (`eventClass` 1) rather than a runtime one (0).
    pub driver: bool,
}

/// An NVTX range (or a mark when `end` is `None`) (`NVTX_EVENTS`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Nvtx {
    pub start: i64,
    pub end: Option<i64>,
    pub text: String,
    /// The NVTX domain; `None` is the default domain.
    pub domain: Option<String>,
    pub global_tid: i64,
}

/// A GPU of the traced machine (`TARGET_INFO_GPU`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gpu {
    pub id: u32,
    pub name: String,
    pub bus_location: Option<String>,
    pub total_memory: Option<u64>,
    pub sm_count: Option<u32>,
    pub compute_major: Option<u32>,
    pub compute_minor: Option<u32>,
    pub uuid: Option<String>,
}

/// Nsight's serialized global id of a process: the pid above bit 24.
pub fn global_pid(pid: u32) -> i64 {
    i64::from(pid) << 24
}

/// Nsight's serialized global id of a thread: the pid above bit 24, the low
/// 24 bits of the tid below.
pub fn global_tid(pid: u32, tid: u32) -> i64 {
    global_pid(pid) | i64::from(tid & 0x00FF_FFFF)
}

/// The process part of a global thread id, comparable with a `globalPid`.
pub fn process_of_tid(global_tid: i64) -> i64 {
    // The mask of the Nsight Systems documentation, 0xFFFFFFFFFF000000.
    global_tid & !0x00FF_FFFF
}

/// Copy kinds (`ENUM_CUDA_MEMCPY_OPER`) by number.
pub mod copy_kind {
    pub const HTOD: u32 = 1;
    pub const DTOH: u32 = 2;
    pub const DTOD: u32 = 8;
    pub const HTOH: u32 = 9;
    pub const PTOP: u32 = 10;
}

/// Memory kinds (`ENUM_CUDA_MEM_KIND`) by number.
pub mod mem_kind {
    pub const PAGEABLE: u32 = 0;
    pub const PINNED: u32 = 1;
    pub const DEVICE: u32 = 2;
    pub const ARRAY: u32 = 3;
    pub const MANAGED: u32 = 4;
    pub const UNKNOWN: u32 = 7;
}

/// The short direction label of a copy kind, as used in `metrics.json`.
pub fn copy_kind_label(kind: u32) -> &'static str {
    match kind {
        1 => "HtoD",
        2 => "DtoH",
        3 => "HtoA",
        4 => "AtoH",
        5 => "AtoA",
        6 => "AtoD",
        7 => "DtoA",
        8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        11 => "UVM_HtoD",
        12 => "UVM_DtoH",
        13 => "UVM_DtoD",
        _ => "Unknown",
    }
}

/// The operation name `nsys stats` prints for a copy kind
/// (`cuda_gpu_mem_time_sum`), from the labels of `ENUM_CUDA_MEMCPY_OPER`.
pub fn copy_kind_operation(kind: u32) -> &'static str {
    match kind {
        1 => "[CUDA memcpy Host-to-Device]",
        2 => "[CUDA memcpy Device-to-Host]",
        3 => "[CUDA memcpy Host-to-Array]",
        4 => "[CUDA memcpy Array-to-Host]",
        5 => "[CUDA memcpy Array-to-Array]",
        6 => "[CUDA memcpy Array-to-Device]",
        7 => "[CUDA memcpy Device-to-Array]",
        8 => "[CUDA memcpy Device-to-Device]",
        9 => "[CUDA memcpy Host-to-Host]",
        10 => "[CUDA memcpy Peer-to-Peer]",
        11 => "[CUDA memcpy Unified Host-to-Device]",
        12 => "[CUDA memcpy Unified Device-to-Host]",
        13 => "[CUDA memcpy Unified Device-to-Device]",
        _ => "[CUDA memcpy Unknown]",
    }
}

/// The label of a memory kind (`ENUM_CUDA_MEM_KIND`).
pub fn mem_kind_label(kind: u32) -> &'static str {
    match kind {
        0 => "Pageable",
        1 => "Pinned",
        2 => "Device",
        3 => "Array",
        4 => "Managed",
        5 => "Device Static",
        6 => "Managed Static",
        _ => "Unknown",
    }
}

/// The base name of a demangled kernel name: no return type, template
/// arguments or parameter list (`void ns::gemm<float>(float*)` → `gemm`).
pub fn short_name(demangled: &str) -> &str {
    // Cut at the first `(` or `<` outside brackets, then keep the last path
    // segment of the last space-separated word (drops `void`, namespaces).
    let mut depth = 0i32;
    let mut cut = demangled.len();
    for (i, c) in demangled.char_indices() {
        match c {
            // `(anonymous namespace)::f` keeps going: a `(` after `::` is part of the path.
            '(' | '<' if depth == 0 && i > 0 && !demangled[..i].ends_with(':') => {
                cut = i;
                break;
            }
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            _ => {}
        }
    }
    let head = demangled[..cut].trim_end();
    let word = head.rsplit(' ').next().unwrap_or(head);
    let base = word.rsplit("::").next().unwrap_or(word);
    if base.is_empty() {
        demangled
    } else {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_drop_return_type_namespaces_and_templates() {
        assert_eq!(short_name("void ns::gemm<float, 4>(float*, int)"), "gemm");
        assert_eq!(
            short_name("ampere_sgemm_128x64_tn"),
            "ampere_sgemm_128x64_tn"
        );
        assert_eq!(short_name("vecAdd(float*, float*)"), "vecAdd");
        assert_eq!(short_name("(anonymous)"), "(anonymous)");
        assert_eq!(
            short_name("void at::(anonymous namespace)::fill<int>(at::Tensor&)"),
            "fill"
        );
    }

    #[test]
    fn global_ids_split_back_into_process() {
        let tid = global_tid(1234, 5678);
        assert_eq!(process_of_tid(tid), global_pid(1234));
        assert_ne!(process_of_tid(global_tid(1235, 5678)), global_pid(1234));
    }
}
