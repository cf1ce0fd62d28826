// CUDA-graph capture and replay for the `Vit` task (`graph: Cuda`), through
// libtorch's at::cuda::CUDAGraph: the caching allocator gives the capture a
// private memory pool, so the buffers the graph reads and writes stay its own
// between replays.
//
// Built as a shared object of its own (see build.rs), against libtorch's CUDA
// headers: the vitgraph binary does not link libtorch_cuda (a CPU build has
// none), so this object is loaded at run time, after libtorch_cuda.so was
// loaded RTLD_GLOBAL, and its undefined symbols resolve against it then.
//
// Each call returns null on success, or a message that stays valid until the
// next call on the same thread; no C++ exception crosses into Rust.

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <optional>
#include <string>

namespace {

thread_local std::string last_error;

// Runs `body`, turning an exception into the message returned.
template <typename F>
const char* guarded(F&& body) {
    try {
        body();
        return nullptr;
    } catch (const c10::Error& e) {
        last_error = e.what_without_backtrace();
    } catch (const std::exception& e) {
        last_error = e.what();
    } catch (...) {
        last_error = "an unknown C++ exception";
    }
    return last_error.c_str();
}

struct Graph {
    at::cuda::CUDAGraph graph;
    // The side stream is the thread's current stream from `use_side_stream`
    // until `capture_end` (the default stream cannot be captured).
    std::optional<c10::cuda::CUDAStreamGuard> side;
};

}  // namespace

// A new, empty graph in `*out`.
extern "C" const char* vitgraph_graph_new(void** out) {
    return guarded([&] { *out = new Graph(); });
}

extern "C" void vitgraph_graph_free(void* graph) {
    delete static_cast<Graph*>(graph);
}

// Waits for the device, then makes a stream of libtorch's pool the calling
// thread's current stream on `device`: the forward passes that warm up on
// it before the capture, and the captured one, run there.
extern "C" const char* vitgraph_graph_use_side_stream(void* graph, int device) {
    return guarded([&] {
        auto* g = static_cast<Graph*>(graph);
        auto index = static_cast<c10::DeviceIndex>(device);
        c10::cuda::device_synchronize();
        g->side.emplace(c10::cuda::getStreamFromPool(false, index));
    });
}

// Starts capturing the current (side) stream's work. Thread-local capture
// mode: another thread's CUDA calls (a preprocessing worker pinning memory)
// do not invalidate the capture.
extern "C" const char* vitgraph_graph_capture_begin(void* graph) {
    return guarded([&] {
        auto* g = static_cast<Graph*>(graph);
        c10::cuda::getCurrentCUDAStream().synchronize();
        g->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    });
}

// Ends the capture, instantiates the graph, and gives the thread its
// previous stream back.
extern "C" const char* vitgraph_graph_capture_end(void* graph) {
    auto* g = static_cast<Graph*>(graph);
    const char* error = guarded([&] { g->graph.capture_end(); });
    g->side.reset();
    return error;
}

// Launches the whole captured forward pass on the current stream.
extern "C" const char* vitgraph_graph_replay(void* graph) {
    return guarded([&] { static_cast<Graph*>(graph)->graph.replay(); });
}
