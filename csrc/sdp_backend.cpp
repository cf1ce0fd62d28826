// Forces the backend of scaled_dot_product_attention, as Python's
// torch.nn.attention.sdpa_kernel does: libtorch keeps one process-wide flag per
// backend, and tch exposes no setter for them.
#include <ATen/Context.h>

extern "C" void vitgraph_set_sdp_backends(int flash, int mem_efficient, int math, int cudnn) {
    auto& ctx = at::globalContext();
    ctx.setSDPUseFlash(flash != 0);
    ctx.setSDPUseMemEfficient(mem_efficient != 0);
    ctx.setSDPUseMath(math != 0);
    ctx.setSDPUseCuDNN(cudnn != 0);
}

// c10::InferenceMode as a heap object, so Rust can hold it across calls (tch
// binds only no_grad). Inference mode skips autograd's bookkeeping (version
// counters, view tracking) on every op: what PyTorch's
// `torch.inference_mode()` does for the eager baseline. Thread-local: enter
// and exit on the same thread.
#include <c10/core/InferenceMode.h>

extern "C" void* vitgraph_inference_mode_enter() {
    return new c10::InferenceMode(true);
}

extern "C" void vitgraph_inference_mode_exit(void* guard) {
    delete static_cast<c10::InferenceMode*>(guard);
}

// A copy stream for the Async pipeline's host-to-device copies. libc10_cuda
// is not linked (a CPU build has none): its functions are looked up at run
// time in the copy libtorch_cuda.so brought in, by their mangled names.
// `CudaStream` has c10::cuda::CUDAStream's layout (a c10::Stream: device
// type and index, then the 64-bit stream id), which is trivially copyable,
// so it travels in registers exactly as the real class does.
#include <dlfcn.h>
#include <cstdint>

namespace {
struct CudaStream {
    int8_t device_type;
    int8_t device_index;
    int64_t id;
};
using GetStreamFromPool = CudaStream (*)(bool, int8_t);
using SetCurrentStream = void (*)(CudaStream);
using GetCurrentStream = CudaStream (*)(int8_t);
using RawStream = void* (*)(const CudaStream*);

void* c10_cuda_symbol(const char* name) {
    static void* lib = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    void* sym = lib ? dlsym(lib, name) : nullptr;
    return sym ? sym : dlsym(RTLD_DEFAULT, name);
}
}  // namespace

// Makes a stream from libtorch's pool the calling thread's current stream on
// `device`, so the copies and allocations this thread makes there run on it;
// returns its raw cudaStream_t, or null where libc10_cuda cannot be found.
extern "C" void* vitgraph_use_copy_stream(int device) {
    auto from_pool = reinterpret_cast<GetStreamFromPool>(
        c10_cuda_symbol("_ZN3c104cuda17getStreamFromPoolEba"));
    auto set_current = reinterpret_cast<SetCurrentStream>(
        c10_cuda_symbol("_ZN3c104cuda20setCurrentCUDAStreamENS0_10CUDAStreamE"));
    auto current = reinterpret_cast<GetCurrentStream>(
        c10_cuda_symbol("_ZN3c104cuda20getCurrentCUDAStreamEa"));
    auto raw = reinterpret_cast<RawStream>(
        c10_cuda_symbol("_ZNK3c104cuda10CUDAStream6streamEv"));
    if (!from_pool || !set_current || !current || !raw) {
        return nullptr;
    }
    CudaStream stream = from_pool(false, static_cast<int8_t>(device));
    set_current(stream);
    CudaStream now = current(static_cast<int8_t>(device));
    if (now.id != stream.id || now.device_index != stream.device_index) {
        return nullptr;
    }
    return raw(&now);
}
