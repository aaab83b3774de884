#pragma once
// General matrix multiply on row-major 2-D tensors, the one compute-bound op of an MLP:
//   C[m, n] = alpha * op(A) op(B) + beta * C,   op(X) = X or X^T,   op(A) is [m, k].
// A linear layer is three of them: forward y = x W^T (trans_b), backward dx = dy W and
// dW = dy^T x (trans_a). CPU: OpenBLAS kernels on OpenMP threads; CUDA: cuBLAS in full FP32.

#include <cstdint>
#include <functional>

#include "core/device.h"
#include "core/tensor.h"

namespace minitrain {

/// C = alpha * op(A) op(B) + beta * C. All three on one device with one dtype (float32/float64);
/// `c` must not overlap `a` or `b`. With beta == 0, C's old contents are ignored (NaN included);
/// k == 0 gives beta * C; m == 0 or n == 0 does nothing. Throws ShapeError naming all shapes.
void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
          double alpha = 1.0, double beta = 0.0);

/// op(A) op(B) as a new [m, n] tensor on A's device.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// ---- implementations on raw, contiguous row-major pointers ----

template <typename T>
void gemm_cpu(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m, int64_t n,
              int64_t k, T alpha, T beta);

/// Work that gemm_cpu does inside its own parallel region, besides the product, so that it costs
/// no region of its own (with passive waiting each region is a thread wake-up: Note [passive
/// thread waiting] in core/thread_policy.h) and, for the epilogue, no pass over memory of its own.
struct GemmCpuExtras {
  /// Called on each tile of C right after the tile's product, on the thread that computed it,
  /// while the tile is in cache: rows [r0, r1), columns [c0, c1) of C. Element-wise work only
  /// (a bias add): the tiles are fixed by the shape, so the result does not depend on them.
  std::function<void(int64_t r0, int64_t r1, int64_t c0, int64_t c1)> tile_epilogue;
  /// Independent tasks 0..side_tasks-1 the threads take after the tiles (a bias gradient's
  /// column sums beside dW's product); each task's result must not depend on its thread.
  int64_t side_tasks = 0;
  std::function<void(int64_t task)> side_task;
};

/// gemm_cpu with `extras` in the same parallel region. The product's bits are gemm_cpu's.
template <typename T>
void gemm_cpu(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m, int64_t n,
              int64_t k, T alpha, T beta, const GemmCpuExtras& extras);

/// cuBLAS on the calling thread's handle and current stream for `device` (CUDA builds only;
/// defined in gemm_cublas.cpp).
template <typename T>
void gemm_cublas(Device device, T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m,
                 int64_t n, int64_t k, T alpha, T beta);

}  // namespace minitrain
