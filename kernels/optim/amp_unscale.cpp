// Loss-scale unscaling: the entry point and the CPU loop.

#include "kernels/optim/amp_unscale.h"

#include <atomic>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/optim/amp_math.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

void unscale_multi_cpu(const std::vector<float*>& ptrs, const std::vector<int64_t>& sizes,
                       float inv_scale, float* found) {
  std::atomic<bool> any{false};
  for (std::size_t k = 0; k < ptrs.size(); ++k) {
    float* g = ptrs[k];
    parallel_for(sizes[k], kElementwiseGrain, [&](int64_t begin, int64_t end) {
      bool bad = false;
      for (int64_t i = begin; i < end; ++i) bad |= unscale_element(g[i], inv_scale);
      if (bad) any.store(true, std::memory_order_relaxed);
    });
  }
  if (any.load()) *found = 1.0f;
}

bool unscale_and_check_finite(std::vector<Tensor>& grads, double inv_scale) {
  if (grads.empty()) return false;
  const Device device = grads.front().device();
  std::vector<float*> ptrs;
  std::vector<int64_t> sizes;
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const Tensor& g = grads[k];
    MT_CHECK_AS(DTypeError, g.defined() && g.dtype() == DType::Float32,
                "unscale_and_check_finite: gradient ", k, " is ",
                g.defined() ? dtype_name(g.dtype()) : "undefined", ", not float32");
    MT_CHECK_AS(DeviceError, g.device() == device, "unscale_and_check_finite: gradient ", k,
                " is on ", g.device(), " but gradient 0 is on ", device);
    ptrs.push_back(g.data<float>());
    sizes.push_back(g.numel());
  }
  const float inv = static_cast<float>(inv_scale);
  Tensor found = Tensor::zeros(Shape{1}, DType::Float32, device);
  on_device(
      "unscale_and_check_finite", device,
      [&] { unscale_multi_cpu(ptrs, sizes, inv, found.data<float>()); },
      [&](auto stream) { unscale_multi_cuda(ptrs, sizes, inv, found.data<float>(), stream); });
  return found.item() != 0.0;
}

}  // namespace minitrain
