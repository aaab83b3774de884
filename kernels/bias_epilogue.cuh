#pragma once
// The bias-broadcast elementwise kernel shared by bias_add (identity epilogue) and the fused
// bias + activation forward: t = x[r, c] + bias[c]; pre[r, c] = t (optional); out[r, c] = epi(t).
// Memory-bound: the [cols] bias stays in L1/L2, so DRAM sees one read of x and one or two writes.
// With cols a multiple of the pack width and every pointer 16-byte aligned, a pack never crosses
// a row, so x, bias, pre and out all move in 16-byte packs; otherwise one element at a time.

#include "kernels/vectorized.cuh"

namespace minitrain {

struct IdentityEpilogue {
  template <typename T>
  MT_HOST_DEVICE T operator()(T t) const {
    return t;
  }
};

// ---- CUDA kernel ----

// pre may be null (not kept). No __restrict__: out or pre may be x (in place).
template <typename T, typename Epi>
__global__ void bias_epilogue_vec4_kernel(T* out, T* pre, const T* x, const T* bias, int64_t n,
                                          int64_t cols, Epi epi, bool vec) {
  constexpr int W = Pack<T>::kSize;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  if (vec) {
    for (int64_t p = tid; p < n / W; p += stride) {
      const Pack<T> xv = load_pack(x + p * W);
      const Pack<T> bv = load_pack(bias + (p * W) % cols);
      Pack<T> t, y;
#pragma unroll
      for (int j = 0; j < W; ++j) {
        t.v[j] = xv.v[j] + bv.v[j];
        y.v[j] = epi(t.v[j]);
      }
      if (pre != nullptr) store_pack(pre + p * W, t);
      store_pack(out + p * W, y);
    }
    return;  // vec implies cols % W == 0, hence n % W == 0: no tail
  }
  for (int64_t i = tid; i < n; i += stride) {
    const T t = x[i] + bias[i % cols];
    if (pre != nullptr) pre[i] = t;
    out[i] = epi(t);
  }
}

// ---- launcher ----

template <typename T, typename Epi>
void bias_epilogue_cuda(T* out, T* pre, const T* x, const T* bias, int64_t rows, int64_t cols,
                        Epi epi, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  const bool vec = cols % Pack<T>::kSize == 0 && all_aligned16(out, x, bias) &&
                   (pre == nullptr || is_aligned16(pre));
  const int64_t work = vec ? n / Pack<T>::kSize : n;
  bias_epilogue_vec4_kernel<T, Epi>
      <<<grid_for(work), kBlock, 0, stream>>>(out, pre, x, bias, n, cols, epi, vec);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain
