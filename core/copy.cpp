// Byte copies between devices. Host-to-host is memcpy; anything touching a GPU goes through
// cudaMemcpyAsync on the current stream of the GPU involved, so it is ordered after the kernels
// that produced the data, and waits only where the host needs the bytes.

#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/stream.h"
#include "core/tensor.h"

#if MINITRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#endif

namespace minitrain {

#if MINITRAIN_WITH_CUDA
namespace {
// Lets `dst` read `src`'s memory directly (NVLink or PCIe peer-to-peer) where the hardware
// allows, once per pair; where it does not, cudaMemcpyPeerAsync stages through the host.
void enable_peer_access(Device dst, Device src) {
  static std::mutex mu;
  static std::set<std::pair<int, int>> tried;
  std::lock_guard<std::mutex> lock(mu);
  if (!tried.insert({dst.index(), src.index()}).second) return;
  int can = 0;
  CHECK_CUDA(cudaDeviceCanAccessPeer(&can, dst.index(), src.index()));
  if (!can) return;
  DeviceGuard guard(dst);
  const cudaError_t e = cudaDeviceEnablePeerAccess(src.index(), 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // enabled by someone else: what we wanted
    return;
  }
  CHECK_CUDA(e);
}
}  // namespace
#endif

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if MINITRAIN_WITH_CUDA
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device != src_device) {
    // Between GPUs: queued on the destination's stream after the source's work is done, and
    // finished before we return (as Tensor::to promises): the source's block may go back to the
    // cache as soon as the caller drops it, and the next kernel on the source's stream may then
    // overwrite it while a copy on another stream still reads it.
    synchronize(src_device);
    enable_peer_access(dst_device, src_device);
    DeviceGuard guard(dst_device);
    const Stream& s = current_stream(dst_device);
    CHECK_CUDA(cudaMemcpyPeerAsync(dst, dst_device.index(), src, src_device.index(), bytes,
                                   s.native_handle()));
    s.synchronize();
    return;
  }
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  DeviceGuard guard(gpu);
  const Stream& s = current_stream(gpu);
  CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s.native_handle()));
  // To the host: the caller reads the bytes next. From the host: the source is pageable memory the
  // caller may free or overwrite as soon as we return. Pinned, overlapped copies belong to the
  // data loader, which manages its own buffers.
  s.synchronize();
#else
  MT_THROW(DeviceError, "cannot copy between ", src_device, " and ", dst_device,
           ": this is a CPU-only build");
#endif
}

void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device,
                      std::size_t bytes, const Stream& stream) {
  if (bytes == 0 || dst == src) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  MT_CHECK_AS(DeviceError, stream.device() == gpu, "copy_bytes_async: stream on ", stream.device(),
              " but the copy involves ", gpu);
  MT_CHECK_AS(DeviceError, dst_device.is_cpu() || src_device.is_cpu() || dst_device == src_device,
              "copy_bytes_async: ", src_device, " to ", dst_device,
              " is not supported; use copy_bytes");
#if MINITRAIN_WITH_CUDA
  DeviceGuard guard(gpu);
  CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream.native_handle()));
#else
  MT_THROW(DeviceError, "cannot copy between ", src_device, " and ", dst_device,
           ": this is a CPU-only build");
#endif
}

}  // namespace minitrain
