// CUDA Philox fills: one thread computes one Philox block (four float32 or two float64 values)
// from its block index alone, grid-stride over 64-bit indices, so no state lives between threads
// or launches. Ten rounds of two wide multiplies per 16 bytes written put it near the balance of
// integer throughput and memory bandwidth; the values equal random.cpp's (core/philox.h).

#include <cuda_runtime.h>

#include "kernels/cuda_launch.cuh"
#include "kernels/random.h"

namespace minitrain {

namespace {

// Block b's values go to out[b*V .. b*V+V-1]; a partial last block writes only its valid part.
// Each thread's V stores are contiguous, so a warp covers 32*V consecutive values per loop trip.
template <typename T>
__device__ __forceinline__ void store_block(T* out, int64_t n, int64_t b, const T* values) {
  constexpr int v = philox::values_per_block<T>::value;
  const int64_t first = b * v;
  if (first + v <= n) {
#pragma unroll
    for (int j = 0; j < v; ++j) out[first + j] = values[j];
  } else {
    for (int j = 0; first + j < n; ++j) out[first + j] = values[j];
  }
}

}  // namespace

// ---- CUDA kernels ----

template <typename T>
__global__ void uniform_kernel(T* out, int64_t n, int64_t blocks, T lo, T range, T hi,
                               uint64_t seed, uint64_t offset) {
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += int64_t(gridDim.x) * blockDim.x) {
    T values[philox::values_per_block<T>::value];
    philox::uniform_values(philox::random_block(seed, offset + uint64_t(b)), lo, range, hi, values);
    store_block(out, n, b, values);
  }
}

template <typename T>
__global__ void normal_kernel(T* out, int64_t n, int64_t blocks, T mean, T stddev, uint64_t seed,
                              uint64_t offset) {
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += int64_t(gridDim.x) * blockDim.x) {
    T values[philox::values_per_block<T>::value];
    philox::normal_values(philox::random_block(seed, offset + uint64_t(b)), mean, stddev, values);
    store_block(out, n, b, values);
  }
}

// ---- launchers ----

template <typename T>
void uniform_cuda(T* out, int64_t n, T lo, T hi, uint64_t seed, uint64_t offset,
                  CUstream_st* stream) {
  if (n <= 0) return;
  const int64_t blocks = static_cast<int64_t>(random_counters<T>(n));
  const T range = hi - lo;  // on the host, as uniform_cpu computes it
  uniform_kernel<T><<<grid_for(blocks, kBlock), kBlock, 0, as_cuda(stream)>>>(
      out, n, blocks, lo, range, hi, seed, offset);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void normal_cuda(T* out, int64_t n, T mean, T stddev, uint64_t seed, uint64_t offset,
                 CUstream_st* stream) {
  if (n <= 0) return;
  const int64_t blocks = static_cast<int64_t>(random_counters<T>(n));
  normal_kernel<T><<<grid_for(blocks, kBlock), kBlock, 0, as_cuda(stream)>>>(out, n, blocks, mean,
                                                                             stddev, seed, offset);
  CHECK_CUDA_LAUNCH();
}

template void uniform_cuda<float>(float*, int64_t, float, float, uint64_t, uint64_t, CUstream_st*);
template void uniform_cuda<double>(double*, int64_t, double, double, uint64_t, uint64_t,
                                   CUstream_st*);
template void normal_cuda<float>(float*, int64_t, float, float, uint64_t, uint64_t, CUstream_st*);
template void normal_cuda<double>(double*, int64_t, double, double, uint64_t, uint64_t,
                                  CUstream_st*);

}  // namespace minitrain
