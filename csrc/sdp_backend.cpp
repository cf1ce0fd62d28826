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
