// The host-side schedule of multi-tensor apply (see kernels/multi_tensor_apply.h).

#include "kernels/multi_tensor_apply.h"

#include "core/error.h"

namespace minitrain {

std::vector<MultiTensorLaunch> plan_multi_tensor_launches(const std::vector<int64_t>& sizes,
                                                          int max_tensors, int max_blocks,
                                                          int64_t chunk) {
  MT_CHECK_AS(ValueError, max_tensors >= 1 && max_blocks >= 1 && chunk >= 1,
              "plan_multi_tensor_launches: max_tensors = ", max_tensors,
              ", max_blocks = ", max_blocks, " and chunk = ", chunk, " must all be >= 1");
  std::vector<MultiTensorLaunch> launches;
  MultiTensorLaunch cur;
  auto flush = [&] {
    if (!cur.block_tensor.empty()) launches.push_back(std::move(cur));
    cur = MultiTensorLaunch{};
  };
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    MT_CHECK_AS(ValueError, sizes[k] >= 0, "plan_multi_tensor_launches: tensor ", k, " has size ",
                sizes[k], "; sizes must be >= 0");
    const int64_t chunks = (sizes[k] + chunk - 1) / chunk;
    for (int64_t c = 0; c < chunks; ++c) {
      if (cur.tensors.empty() || cur.tensors.back() != static_cast<int64_t>(k)) {
        if (static_cast<int>(cur.tensors.size()) == max_tensors) flush();
        cur.tensors.push_back(static_cast<int64_t>(k));
      }
      cur.block_tensor.push_back(static_cast<int32_t>(cur.tensors.size() - 1));
      cur.block_chunk.push_back(static_cast<int32_t>(c));
      if (static_cast<int>(cur.block_tensor.size()) == max_blocks) flush();
    }
  }
  flush();
  return launches;
}

}  // namespace minitrain
