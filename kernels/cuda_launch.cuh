#pragma once
// Launch geometry shared by the elementwise-style kernels: grid-stride loops over 64-bit indices,
// 256 threads a block (8 warps: enough to hide memory latency, small enough for full occupancy),
// and a grid capped at a few waves of the device so each thread handles several elements.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"

namespace minitrain {

inline constexpr int kBlock = 256;

inline unsigned grid_for(int64_t n, int block = kBlock) {
  // 65535 blocks of 256 cover 16M elements per wave; larger n loops inside the kernel.
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65535));
}

inline cudaStream_t as_cuda(CUstream_st* s) { return s; }

}  // namespace minitrain
