#pragma once
// Bias add: out[r, c] = x[r, c] + bias[c], the bias broadcast over rows (a Linear layer's "+ b").
// Memory-bound: the bias row stays in cache, so the cost is one read and one write of x.
// Its gradient (a sum over rows) is sum_rows in kernels/reduce.h.

#include <cstdint>

#include "core/tensor.h"

struct CUstream_st;

namespace minitrain {

/// x [rows, cols], bias [cols], out [rows, cols]; out may be x (in place).
void bias_add(Tensor& out, const Tensor& x, const Tensor& bias);
/// The same into a new tensor.
Tensor bias_add(const Tensor& x, const Tensor& bias);

// ---- implementations (float and double are instantiated) ----

/// Columns [begin, end) of one row: the per-element math of bias_add_cpu, shared with the GEMM's
/// tile epilogue (kernels/linear_layer.cpp), so that both give the same bits.
template <typename T>
inline void bias_add_row_cpu(T* out, const T* x, const T* bias, int64_t begin, int64_t end) {
  for (int64_t c = begin; c < end; ++c) out[c] = x[c] + bias[c];
}

template <typename T>
void bias_add_cpu(T* out, const T* x, const T* bias, int64_t rows, int64_t cols);
template <typename T>
void bias_add_cuda(T* out, const T* x, const T* bias, int64_t rows, int64_t cols,
                   CUstream_st* stream);

}  // namespace minitrain
