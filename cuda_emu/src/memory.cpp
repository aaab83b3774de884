// Device and pinned memory, and copies. An allocation is host memory of exactly the requested
// size (so AddressSanitizer's redzone starts at its end), 256-byte aligned as cudaMalloc's is,
// filled with 0xff (NaN floats: a kernel reading memory nobody wrote shows), and counted against
// the device's fixed capacity so that out-of-memory happens where it would on a card that size.
// Copies are checked against the allocations they touch, then run on the stream's thread.

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda_emu/allocator_hooks.h"
#include "cuda_emu/api_counts.h"
#include "initcheck.h"
#include "race.h"
#include "routed_memory.h"
#include "runtime.h"
#include "sanitizer.h"

namespace mtemu::detail {

namespace {

constexpr std::size_t kDeviceAlignment = 256;
constexpr unsigned char kUninitialisedByte = 0xff;

struct Allocation {
  Space space;
  int device;
  std::size_t bytes;
};
std::mutex table_mutex;
std::map<uintptr_t, Allocation>& table() {
  static auto* t = new std::map<uintptr_t, Allocation>();
  return *t;
}

std::string where(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

cudaError_t allocate(void** ptr, std::size_t bytes, Space space, int dev) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue, "null result pointer");
  *ptr = nullptr;
  if (bytes == 0) return ok();
  if (space == Space::Device) {
    DeviceState& d = device(dev);
    std::size_t used = d.used.load();
    do {
      if (used + bytes > d.capacity)
        return fail(cudaErrorMemoryAllocation,
                    "cudaMalloc of " + std::to_string(bytes) +
                        " bytes on cuda:" + std::to_string(dev) + ": " +
                        std::to_string(d.capacity - used) + " of " + std::to_string(d.capacity) +
                        " bytes free (MINITRAIN_EMU_DEVICE_MEMORY sets the capacity)");
    } while (!d.used.compare_exchange_weak(used, used + bytes));
  }
  void* p = nullptr;
  if (posix_memalign(&p, kDeviceAlignment, bytes) != 0) {
    if (space == Space::Device) device(dev).used -= bytes;
    return fail(cudaErrorMemoryAllocation,
                "the host is out of memory for " + std::to_string(bytes) + " bytes");
  }
  std::memset(p, kUninitialisedByte, bytes);
  if (space == Space::Device) routed_allocation_added(p, bytes);
  std::lock_guard<std::mutex> lock(table_mutex);
  table()[reinterpret_cast<uintptr_t>(p)] = Allocation{space, dev, bytes};
  if (space == Space::Device) initcheck_allocated(p, bytes, dev, "cudaMalloc");
  *ptr = p;
  return ok();
}

cudaError_t release(void* p, Space space, const char* call) {
  if (p == nullptr) return ok();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(table_mutex);
    auto it = table().find(reinterpret_cast<uintptr_t>(p));
    if (it == table().end() || it->second.space != space)
      return fail(cudaErrorInvalidValue,
                  std::string(call) + "(" + where(p) + "): not the start of a live " +
                      (space == Space::Device ? "device" : "pinned") + " allocation");
    a = it->second;
    table().erase(it);
  }
  // cudaFree waits for the device: work still queued may use the memory.
  if (space == Space::Device) {
    synchronize_device(a.device);
    device(a.device).used -= a.bytes;
    initcheck_freed(p);
  }
  // limit_access may have poisoned parts of it, a checker routed it (routed_memory.h)
  if (space == Space::Device)
    routed_allocation_removed(p, a.bytes);
  else
    san::unpoison(p, a.bytes);
  std::free(p);
  return ok();
}

// `caller`: the return address into the program that made the call (racecheck names its line).
cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                 const char* call, uintptr_t caller) {
  const int dev = current_device();
  if (dev >= device_count()) return fail(cudaErrorInvalidDevice, call);
  if (bytes == 0) return ok();
  if (dst == nullptr || src == nullptr)
    return fail(cudaErrorInvalidValue, std::string(call) + ": null pointer");
  for (const std::string& problem :
       {check_range(dst, bytes, "destination"), check_range(src, bytes, "source")})
    if (!problem.empty()) return fail(cudaErrorInvalidValue, std::string(call) + ": " + problem);
  auto s = resolve_stream(stream, dev);
  if (!s) return fail(cudaErrorInvalidResourceHandle, std::string(call) + ": not a live stream");
  if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  // Pageable host memory (not from cudaHostAlloc) cannot be read or written by the GPU's copy
  // engines: CUDA stages it. From pageable memory, the call returns once the source is copied
  // to a staging buffer (the caller may reuse it at once); into pageable memory, and between two
  // host buffers, once the copy is complete. Pinned and device memory stay asynchronous.
  const Space to = find_region(dst).space, from = find_region(src).space;
  // A graph's copy node reads and writes its addresses at every replay, which the staging of
  // pageable memory cannot do: CUDA refuses such a copy during capture.
  if ((from == Space::Pageable || to == Space::Pageable) && is_capturing(*s))
    return fail_capture(*s, cudaErrorStreamCaptureUnsupported,
                        std::string(call) + " of " + std::to_string(bytes) + " bytes " +
                            (from == Space::Pageable ? "from" : "to") +
                            " pageable host memory on a capturing stream: use pinned memory "
                            "(cudaHostAlloc) for copies inside a graph");
  if (from == Space::Device && to != Space::Device) count_api(ApiEvent::DeviceToHostCopy);
  if (from == Space::Pageable && to == Space::Device) {
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    const cudaError_t e = enqueue(*s,
                                  [dst, staged] {
                                    raw_copy(dst, staged->data(), staged->size());
                                    initcheck_written(dst, staged->size());
                                  },
                                  {"memcpy"});
    // The staged source is the copy's own: only the destination can race.
    if (e == cudaSuccess && racecheck_on) racecheck_copy_queued(dst, nullptr, bytes, call, caller);
    return e;
  }
  if (cudaError_t e = enqueue(*s,
                              [dst, src, bytes, to, from, call, dev = s->device] {
                                // initcheck: a copy to the host reads its source (reported if
                                // unwritten); one between devices carries the bytes' state along;
                                // one from the host writes.
                                if (initcheck_on && from == Space::Device && to != Space::Device) {
                                  if (std::string report = initcheck_copy_source(src, bytes, call);
                                      !report.empty())
                                    device_fault(dev, cudaErrorLaunchFailure, report);
                                } else if (initcheck_on && to == Space::Device) {
                                  if (from == Space::Device)
                                    initcheck_copied(dst, src, bytes);
                                  else
                                    initcheck_written(dst, bytes);
                                }
                                raw_copy(dst, src, bytes);  // not libasan's: routed memory
                              },
                              {"memcpy"});
      e != cudaSuccess)
    return e;
  if (racecheck_on) racecheck_copy_queued(dst, src, bytes, call, caller);
  if (to == Space::Pageable || (from != Space::Device && to != Space::Device)) {
    BlockingCall blocking;
    wait_until_done(*s);
    if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  }
  return ok();
}

}  // namespace

Region find_region(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(table_mutex);
  auto it = table().upper_bound(a);
  if (it == table().begin()) return {};
  --it;
  if (a >= it->first + it->second.bytes) return {};
  return Region{it->second.space, it->second.device, reinterpret_cast<const char*>(it->first),
                it->second.bytes};
}

std::string check_range(const void* p, std::size_t bytes, const char* what) {
  const Region r = find_region(p);
  if (r.space == Space::Pageable) return {};
  const std::size_t offset = static_cast<const char*>(p) - r.base;
  if (offset + bytes <= r.bytes) return {};
  return std::string(what) + " " + where(p) + " + " + std::to_string(bytes) + " bytes runs " +
         std::to_string(offset + bytes - r.bytes) + " bytes past the end of its " +
         std::to_string(r.bytes) + "-byte allocation" +
         (r.space == Space::Device ? " on cuda:" + std::to_string(r.device) : std::string());
}

}  // namespace mtemu::detail

cudaError_t mtemu::limit_access(void* block, std::size_t usable, cudaStream_t stream) {
  using namespace mtemu::detail;
  const Region r = find_region(block);
  if (r.space != Space::Device || r.base != block || usable > r.bytes)
    return fail(cudaErrorInvalidValue,
                "limit_access(" + where(block) + ", " + std::to_string(usable) +
                    "): not the start of a live device allocation that large");
  auto mark = [base = r.base, bytes = r.bytes, usable] {
    routed_allocation_limit(base, bytes, usable);
    // initcheck: a block handed out again holds the last tensor's data, which the new tensor's
    // kernels must not read as theirs.
    if (usable > 0) initcheck_reissued(base, bytes);
  };
  auto s = resolve_stream(stream, r.device);
  if (s) return enqueue(*s, mark, {"access limit"});
  // The block's stream is gone (a thread's own stream ends with the thread, while tensors
  // allocated on it live on: a pipeline stage's gradients). minitrain's Stream waits for its
  // queue before it is destroyed (Note [streams and the caching allocator]), so nothing of the
  // block's earlier users is still queued: the marks apply now.
  mark();
  return ok();
}

using namespace mtemu::detail;

extern "C" {

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  const int dev = current_device();
  if (dev >= device_count()) return fail(cudaErrorInvalidDevice, "cudaMalloc: no such device");
  if (cudaError_t e = sticky_error(dev); e != cudaSuccess) return e;
  if (cudaError_t e = check_unsafe_call("cudaMalloc"); e != cudaSuccess) return e;
  const cudaError_t e = allocate(ptr, bytes, Space::Device, dev);
  if (e == cudaSuccess) count_api(ApiEvent::Malloc);
  return e;
}

cudaError_t cudaFree(void* ptr) {
  if (cudaError_t e = check_unsafe_call("cudaFree"); e != cudaSuccess) return e;
  const cudaError_t e = release(ptr, Space::Device, "cudaFree");
  if (e == cudaSuccess && ptr != nullptr) count_api(ApiEvent::Free);
  return e;
}

cudaError_t cudaHostAlloc(void** ptr, std::size_t bytes, unsigned int) {
  if (cudaError_t e = check_unsafe_call("cudaHostAlloc"); e != cudaSuccess) return e;
  return allocate(ptr, bytes, Space::Pinned, -1);
}
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
  if (cudaError_t e = check_unsafe_call("cudaMallocHost"); e != cudaSuccess) return e;
  return allocate(ptr, bytes, Space::Pinned, -1);
}
cudaError_t cudaFreeHost(void* ptr) {
  if (cudaError_t e = check_unsafe_call("cudaFreeHost"); e != cudaSuccess) return e;
  return release(ptr, Space::Pinned, "cudaFreeHost");
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  const int dev = current_device();
  if (dev >= device_count()) return fail(cudaErrorInvalidDevice, "cudaMemGetInfo: no such device");
  DeviceState& d = device(dev);
  *total_bytes = d.capacity;
  *free_bytes = d.capacity - d.used.load();
  return ok();
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  return copy(dst, src, bytes, stream, "cudaMemcpyAsync",
              reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = check_unsafe_call("cudaMemcpy"); e != cudaSuccess) return e;
  BlockingCall blocking;
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, nullptr); e != cudaSuccess) return e;
  return cudaStreamSynchronize(nullptr);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return ok();
  const Region d = find_region(dst), s = find_region(src);
  if (d.space != Space::Device || d.device != dst_device || s.space != Space::Device ||
      s.device != src_device)
    return fail(cudaErrorInvalidValue, "cudaMemcpyPeerAsync: destination " + where(dst) +
                                           " is not memory of cuda:" + std::to_string(dst_device) +
                                           " or source " + where(src) +
                                           " is not memory of cuda:" + std::to_string(src_device));
  return copy(dst, src, bytes, stream, "cudaMemcpyPeerAsync",
              reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream) {
  const int dev = current_device();
  if (dev >= device_count()) return fail(cudaErrorInvalidDevice, "cudaMemsetAsync");
  if (bytes == 0) return ok();
  if (std::string problem = check_range(ptr, bytes, "destination"); !problem.empty())
    return fail(cudaErrorInvalidValue, "cudaMemsetAsync: " + problem);
  auto s = resolve_stream(stream, dev);
  if (!s) return fail(cudaErrorInvalidResourceHandle, "cudaMemsetAsync: not a live stream");
  if (cudaError_t e = sticky_error(s->device); e != cudaSuccess) return e;
  const cudaError_t e = enqueue(*s,
                                [ptr, value, bytes] {
                                  raw_set(ptr, value, bytes);
                                  initcheck_written(ptr, bytes);
                                },
                                {"memset"});
  if (e == cudaSuccess) count_api(ApiEvent::Memset);
  if (e == cudaSuccess && racecheck_on)
    racecheck_copy_queued(ptr, nullptr, bytes, "cudaMemsetAsync",
                          reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
  return e;
}

cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes) {
  if (cudaError_t e = check_unsafe_call("cudaMemset"); e != cudaSuccess) return e;
  BlockingCall blocking;
  if (cudaError_t e = cudaMemsetAsync(ptr, value, bytes, nullptr); e != cudaSuccess) return e;
  return cudaStreamSynchronize(nullptr);
}

}  // extern "C"
