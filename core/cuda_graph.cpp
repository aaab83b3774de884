#include "core/cuda_graph.h"

#include "core/caching_allocator.h"
#include "core/error.h"
#include "core/stream.h"

#if MINITRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#endif

namespace minitrain {

namespace {

// The device's caching allocator, where it has one (a real or emulated GPU's).
CachingAllocator* caching_allocator_of(Device device) {
  return dynamic_cast<CachingAllocator*>(&allocator_for(device));
}

}  // namespace

#if MINITRAIN_WITH_CUDA
namespace {

const char* capture_advice(cudaError_t e) {
  switch (e) {
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
      return "the captured work synchronised with the device, allocated device memory or copied "
             "from pageable host memory (reading a value on the host, a blocking copy, a first "
             "allocation of a size); run it once before capturing so that the caching allocator "
             "holds its memory, and copy through pinned buffers";
    case cudaErrorStreamCaptureUnjoined:
      return "a stream forked into the capture (it waited for an event of the capturing stream) "
             "must join back: record an event on it and make the capturing stream wait for it";
    case cudaErrorStreamCaptureImplicit:
      return "work went to the legacy default stream while a blocking stream captured; queue it "
             "on the capturing stream (minitrain's streams are non-blocking)";
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureMerge:
      return "the captured work waited for an event recorded outside this capture; order that "
             "work before the capture begins";
    default:
      return "see the CUDA error above";
  }
}

}  // namespace
#endif

CudaGraph CudaGraph::capture(const Stream& stream, const std::function<void()>& work,
                             CaptureMode mode) {
  const Device device = stream.device();
  MT_CHECK_AS(DeviceError, device.is_cuda(), "CudaGraph::capture: a CUDA graph needs a stream of ",
              "a CUDA device, not ", device, "; on the CPU run the work directly");
#if MINITRAIN_WITH_CUDA
  DeviceGuard guard(device);
  cudaStream_t s = stream.native_handle();
  CachingAllocator* alloc = caching_allocator_of(device);
  // Opened before the capture: a request on `s` from now on is the graph's (the pool is keyed by
  // the stream the allocator sees as current, which StreamGuard makes `s` below).
  const uint64_t pool = alloc != nullptr ? alloc->begin_pool(s) : 0;
  auto close_pool = [&](bool release) noexcept {
    if (alloc == nullptr) return;
    alloc->end_pool_capture(pool);
    if (release) alloc->release_pool(pool);
  };
  const cudaStreamCaptureMode cuda_mode =
      mode == CaptureMode::Global ? cudaStreamCaptureModeGlobal : cudaStreamCaptureModeThreadLocal;
  if (const cudaError_t e = cudaStreamBeginCapture(s, cuda_mode); e != cudaSuccess) {
    close_pool(true);
    CHECK_CUDA(e);
  }
  cudaGraph_t graph = nullptr;
  try {
    StreamGuard current(stream);
    work();
  } catch (const std::exception& failure) {
    const cudaError_t end = cudaStreamEndCapture(s, &graph);  // leaves capture whatever happened
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    close_pool(true);  // nothing will replay: the blocks may serve eager work again
    if (dynamic_cast<const DeviceError*>(&failure) == nullptr) throw;
    // Advice only where the failure broke the capture; another DeviceError speaks for itself.
    MT_THROW(DeviceError, "CudaGraph::capture on ", device,
             ": the captured work failed and the capture was abandoned (cudaStreamEndCapture: ",
             cudaGetErrorName(end), "): ", failure.what(),
             end == cudaSuccess ? "" : detail::concat("; ", capture_advice(end)));
  }
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  close_pool(end != cudaSuccess);
  if (end != cudaSuccess) {
    const char* words = cudaGetErrorString(end);
    (void)cudaGetLastError();
    MT_THROW(DeviceError, "CudaGraph::capture on ", device, ": CUDA error ", cudaGetErrorName(end),
             " (", words, ") from cudaStreamEndCapture; ", capture_advice(end));
  }
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0); e != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    close_pool(true);
    CHECK_CUDA(e);
  }
  return CudaGraph(device, graph, exec, pool);
#else
  (void)work;
  (void)mode;
  MT_THROW(DeviceError, "CudaGraph::capture(", device, "): this is a CPU-only build");
#endif
}

CudaGraph::CudaGraph(CudaGraph&& o) noexcept
    : device_(o.device_), graph_(o.graph_), exec_(o.exec_), pool_(o.pool_) {
  o.graph_ = nullptr;
  o.exec_ = nullptr;
  o.pool_ = 0;
}

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    graph_ = o.graph_;
    exec_ = o.exec_;
    pool_ = o.pool_;
    o.graph_ = nullptr;
    o.exec_ = nullptr;
    o.pool_ = 0;
  }
  return *this;
}

CudaGraph::~CudaGraph() { release(); }

void CudaGraph::release() noexcept {
#if MINITRAIN_WITH_CUDA
  if (exec_ == nullptr && graph_ == nullptr) return;
  DeviceGuard guard(device_, std::nothrow);
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
#endif
  // Replays still queued on the capturing stream come before any later use of the blocks there
  // (Note [streams and the caching allocator]).
  if (pool_ != 0)
    if (CachingAllocator* alloc = caching_allocator_of(device_)) alloc->release_pool(pool_);
  exec_ = nullptr;
  graph_ = nullptr;
  pool_ = 0;
}

void CudaGraph::replay(const Stream& stream) const {
  MT_CHECK_AS(DeviceError, exec_ != nullptr, "CudaGraph::replay: the graph was moved from");
  MT_CHECK_AS(DeviceError, stream.device() == device_, "CudaGraph::replay: graph captured on ",
              device_, " but the stream is on ", stream.device());
#if MINITRAIN_WITH_CUDA
  DeviceGuard guard(device_);
  CHECK_CUDA(cudaGraphLaunch(exec_, stream.native_handle()));
#endif
}

uint64_t CudaGraph::pool_bytes() const {
  if (pool_ == 0) return 0;
  CachingAllocator* alloc = caching_allocator_of(device_);
  return alloc != nullptr ? alloc->pool_bytes(pool_) : 0;
}

std::size_t CudaGraph::node_count() const {
  MT_CHECK_AS(DeviceError, graph_ != nullptr, "CudaGraph::node_count: the graph was moved from");
  std::size_t n = 0;
#if MINITRAIN_WITH_CUDA
  CHECK_CUDA(cudaGraphGetNodes(graph_, nullptr, &n));
#endif
  return n;
}

}  // namespace minitrain
