#pragma once
// Vectorized access for memory-bound kernels: one 16-byte load or store (LDG.128 / STG.128: four
// floats or two doubles) instead of four or two 4/8-byte ones, so fewer instructions and memory
// transactions are in flight per byte. A pointer can be read this way only when 16-byte aligned,
// which a view (narrow) or an odd offset need not be; launchers check alignment on the host and
// take the scalar path otherwise. The bulk goes in packs, the last n % width elements one by one.
//
// map_cuda(out, n, stream, f, in...) is the shared elementwise launcher: out[i] = f(in[i]...),
// grid-stride over packs, per-element math in the caller's __host__ __device__ functor.

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/host_device.h"
#include "kernels/cuda_launch.cuh"

namespace minitrain {

/// 16 bytes of T, aligned so that a copy compiles to one vector load/store (as PyTorch's
/// aligned_vector).
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

inline constexpr int64_t kVecBytes = 16;

MT_HOST_DEVICE bool is_aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) % kVecBytes) == 0;
}

/// True when every pointer can be accessed in packs.
template <typename... Ptrs>
bool all_aligned16(const Ptrs*... ptrs) {
  return (is_aligned16(ptrs) && ...);
}

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  *reinterpret_cast<Pack<T>*>(p) = v;
}

/// Up to three input pointers of one element type, passed by value to a kernel.
template <typename T, int kArity>
struct InputPtrs {
  const T* p[kArity];
};

namespace vec_detail {
template <typename F, typename T, int kArity, std::size_t... I>
__device__ __forceinline__ T apply(const F& f, const T (&v)[kArity], std::index_sequence<I...>) {
  return f(v[I]...);
}
}  // namespace vec_detail

// ---- CUDA kernel ----

// vec: every pointer 16-byte aligned (uniform over the grid, so no divergence). No __restrict__:
// out may be one of the inputs (in-place ops); each thread reads its pack before writing it.
template <int kArity, typename T, typename F>
__global__ void map_vec4_kernel(T* out, InputPtrs<T, kArity> in, int64_t n, F f, bool vec) {
  constexpr int W = Pack<T>::kSize;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t scalar_begin = 0;
  if (vec) {
    const int64_t packs = n / W;
    for (int64_t p = tid; p < packs; p += stride) {
      Pack<T> a[kArity];
#pragma unroll
      for (int k = 0; k < kArity; ++k) a[k] = load_pack(in.p[k] + p * W);
      Pack<T> r;
#pragma unroll
      for (int j = 0; j < W; ++j) {
        T vals[kArity];
#pragma unroll
        for (int k = 0; k < kArity; ++k) vals[k] = a[k].v[j];
        r.v[j] = vec_detail::apply(f, vals, std::make_index_sequence<kArity>{});
      }
      store_pack(out + p * W, r);
    }
    scalar_begin = packs * W;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride) {
    T vals[kArity];
#pragma unroll
    for (int k = 0; k < kArity; ++k) vals[k] = in.p[k][i];
    out[i] = vec_detail::apply(f, vals, std::make_index_sequence<kArity>{});
  }
}

// ---- launcher ----

/// out[i] = f(in[0][i], ...), i in [0, n). Packs when out and every input are 16-byte aligned.
template <typename T, typename F, typename... In>
void map_cuda(T* out, int64_t n, cudaStream_t stream, F f, const In*... in) {
  constexpr int kArity = sizeof...(In);
  if (n == 0) return;
  const bool vec = all_aligned16(out, in...);
  const int64_t work = vec ? (n + Pack<T>::kSize - 1) / Pack<T>::kSize : n;
  map_vec4_kernel<kArity, T, F>
      <<<grid_for(work), kBlock, 0, stream>>>(out, InputPtrs<T, kArity>{{in...}}, n, f, vec);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain
