#pragma once
// Fill, zero and copy: the simplest memory-bound ops, one write (and for copy one read) per
// element. Every entry point checks its operands with kernels/check.h and switches on the device.

#include <cstdint>
#include <vector>

#include "core/tensor.h"

struct CUstream_st;

namespace minitrain {

/// out[i] = value (converted to out's dtype) for every element.
void fill(Tensor& out, double value);
/// out[i] = 0.
void zero_(Tensor& out);
/// zero_ on every tensor; the CPU ones in one parallel region, in pieces across the tensors (a
/// model's gradients: one thread wake-up for all of them instead of one per large tensor).
void zero_all(std::vector<Tensor>& tensors);
/// out = in: same device, dtype and shape (cross-device copies: Tensor::copy_ or Tensor::to).
void copy(Tensor& out, const Tensor& in);

// ---- implementations (float and double are instantiated) ----
template <typename T>
void fill_cpu(T* out, T value, int64_t n);
template <typename T>
void fill_cuda(T* out, T value, int64_t n, CUstream_st* stream);

}  // namespace minitrain
