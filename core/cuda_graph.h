#pragma once
// A CUDA graph: the device work of a piece of code, recorded once from a stream and then replayed
// with one launch. A replay costs one launch however many kernels the graph holds, which removes
// the host's per-kernel cost (a few microseconds each) from a step that repeats. Capture records,
// it does not run: the captured code may not synchronise (a blocking copy, reading a value on the
// host), allocate device memory, or copy from pageable host memory. CUDA refuses these during a
// capture, and so do the emulated GPUs (docs/emulator_graphs.md).

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/device.h"

// The CUDA runtime's own handle types (cudaGraph_t is CUgraph_st*), declared here so that
// CPU-only code can name them without the CUDA headers.
struct CUgraph_st;
struct CUgraphExec_st;

namespace minitrain {

class Stream;

/// Which other calls a capture forbids (CUDA's stream capture modes). Global: a potentially
/// unsafe call (cudaMalloc, a synchronous copy) from any thread of the process invalidates the
/// capture. ThreadLocal: only the capturing thread's own; a data loader's worker may allocate.
enum class CaptureMode { Global, ThreadLocal };

/// An instantiated CUDA graph. Move-only; destroying it does not wait for replays still queued
/// (CUDA keeps what they need alive).
class CudaGraph {
 public:
  /// Runs `work` with `stream` current and capturing (cudaStreamCaptureModeGlobal): the kernels,
  /// copies and event waits it queues are recorded in order, with their arguments' values of
  /// now, and not run. The memory `work` allocates on `stream` comes from a pool private to the
  /// graph (Note [graph memory pool]): a tensor freed inside or after the capture keeps its
  /// block out of everyone else's hands while the graph lives, because each replay writes it.
  /// Replay on `stream`: the pool's blocks return to the cache keyed by it. Throws DeviceError
  /// naming the CUDA error when the capture fails (`work` synchronised, allocated or copied from
  /// pageable memory, or left a forked stream unjoined); an exception from `work` ends the capture
  /// and propagates, a DeviceError with this context.
  static CudaGraph capture(const Stream& stream, const std::function<void()>& work,
                           CaptureMode mode = CaptureMode::Global);

  CudaGraph(CudaGraph&& o) noexcept;
  CudaGraph& operator=(CudaGraph&& o) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();

  /// Queues one replay on `stream` (any stream of the graph's device) and returns at once.
  void replay(const Stream& stream) const;
  /// Nodes in the graph: kernels, copies, memsets and host functions (events make edges).
  std::size_t node_count() const;
  Device device() const noexcept { return device_; }
  /// Device memory the graph owns: the blocks its capture took from the caching allocator
  /// (Note [graph memory pool] in core/caching_allocator.h), held until the graph is destroyed.
  uint64_t pool_bytes() const;

 private:
  CudaGraph(Device device, CUgraph_st* graph, CUgraphExec_st* exec, uint64_t pool)
      : device_(device), graph_(graph), exec_(exec), pool_(pool) {}
  void release() noexcept;
  Device device_;
  CUgraph_st* graph_ = nullptr;
  CUgraphExec_st* exec_ = nullptr;
  uint64_t pool_ = 0;  // the caching allocator's pool of this graph; 0: none
};

}  // namespace minitrain
