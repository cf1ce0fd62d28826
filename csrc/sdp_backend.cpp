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
