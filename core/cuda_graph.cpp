#include "core/cuda_graph.h"

#include "core/error.h"
#include "core/stream.h"

#if MINITRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#endif

namespace minitrain {

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

CudaGraph CudaGraph::capture(const Stream& stream, const std::function<void()>& work) {
  const Device device = stream.device();
  MT_CHECK_AS(DeviceError, device.is_cuda(), "CudaGraph::capture: a CUDA graph needs a stream of ",
              "a CUDA device, not ", device, "; on the CPU run the work directly");
#if MINITRAIN_WITH_CUDA
  DeviceGuard guard(device);
  cudaStream_t s = stream.native_handle();
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaGraph_t graph = nullptr;
  try {
    StreamGuard current(stream);
    work();
  } catch (const std::exception& failure) {
    const cudaError_t end = cudaStreamEndCapture(s, &graph);  // leaves capture whatever happened
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    if (dynamic_cast<const DeviceError*>(&failure) == nullptr) throw;
    // Advice only where the failure broke the capture; another DeviceError speaks for itself.
    MT_THROW(DeviceError, "CudaGraph::capture on ", device,
             ": the captured work failed and the capture was abandoned (cudaStreamEndCapture: ",
             cudaGetErrorName(end), "): ", failure.what(),
             end == cudaSuccess ? "" : detail::concat("; ", capture_advice(end)));
  }
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (end != cudaSuccess) {
    const char* words = cudaGetErrorString(end);
    (void)cudaGetLastError();
    MT_THROW(DeviceError, "CudaGraph::capture on ", device, ": CUDA error ", cudaGetErrorName(end),
             " (", words, ") from cudaStreamEndCapture; ", capture_advice(end));
  }
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0); e != cudaSuccess) {
    (void)cudaGraphDestroy(graph);
    CHECK_CUDA(e);
  }
  return CudaGraph(device, graph, exec);
#else
  (void)work;
  MT_THROW(DeviceError, "CudaGraph::capture(", device, "): this is a CPU-only build");
#endif
}

CudaGraph::CudaGraph(CudaGraph&& o) noexcept
    : device_(o.device_), graph_(o.graph_), exec_(o.exec_) {
  o.graph_ = nullptr;
  o.exec_ = nullptr;
}

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    graph_ = o.graph_;
    exec_ = o.exec_;
    o.graph_ = nullptr;
    o.exec_ = nullptr;
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
  exec_ = nullptr;
  graph_ = nullptr;
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

std::size_t CudaGraph::node_count() const {
  MT_CHECK_AS(DeviceError, graph_ != nullptr, "CudaGraph::node_count: the graph was moved from");
  std::size_t n = 0;
#if MINITRAIN_WITH_CUDA
  CHECK_CUDA(cudaGraphGetNodes(graph_, nullptr, &n));
#endif
  return n;
}

}  // namespace minitrain
