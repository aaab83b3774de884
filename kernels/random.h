#pragma once
// Random fills from the counter-based Philox stream (core/philox.h) and torch's default
// initialisers. Memory-bound: one write per element, ten integer rounds per four elements; each
// block of values is independent, so the CPU loop is parallel and the GPU grid any shape, and the
// result depends only on (seed, offset), never on threads (Note [Philox stream layout]).
//
// Every draw advances the Generator by ceil(numel / V) counters, V = 4 for float32 and 2 for
// float64 (two 32-bit words a value), identically on the CPU and the GPU.

#include <cmath>
#include <cstdint>

#include "core/generator.h"
#include "core/philox.h"
#include "core/shape.h"
#include "core/tensor.h"

struct CUstream_st;

namespace minitrain {

/// Fills `t` with U(lo, hi) values in [lo, hi) (float32 or float64, any device). Throws
/// ValueError when lo > hi or either is not finite.
void uniform_(Tensor& t, double lo, double hi, Generator& g);
/// Fills `t` with N(mean, std^2) values (Box-Muller). Throws ValueError when std < 0 or either
/// is not finite. std = 0 fills `mean` (and still advances `g`, as every draw does).
void normal_(Tensor& t, double mean, double stddev, Generator& g);

struct Fans {
  int64_t fan_in;
  int64_t fan_out;
};
/// torch.nn.init's fans: shape[1] * receptive field and shape[0] * receptive field, where the
/// receptive field is the product of shape[2:] (1 for a 2-D [out, in] weight). Throws ValueError
/// for fewer than 2 dimensions.
Fans fan_in_fan_out(const Shape& shape);

/// He/Kaiming uniform, mode fan_in, leaky_relu gain sqrt(2 / (1 + a^2)): U(-bound, bound) with
/// bound = gain * sqrt(3 / fan_in). The default a = sqrt(5) gives bound = 1 / sqrt(fan_in),
/// torch.nn.Linear's weight init. A zero-element tensor is left alone (as torch does).
void kaiming_uniform_(Tensor& w, Generator& g, double a = std::sqrt(5.0));
/// torch.nn.Linear's bias init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in = 0 gives bound 0.
/// Throws ValueError for fan_in < 0.
void linear_bias_uniform_(Tensor& b, int64_t fan_in, Generator& g);
/// Glorot/Xavier uniform: bound = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(Tensor& w, Generator& g, double gain = 1.0);

// ---- CPU references and CUDA launchers (raw pointers; `offset` is the first Philox counter) ----

template <typename T>
void uniform_cpu(T* out, int64_t n, T lo, T hi, uint64_t seed, uint64_t offset);
template <typename T>
void normal_cpu(T* out, int64_t n, T mean, T stddev, uint64_t seed, uint64_t offset);
/// Queued on `stream` (a cudaStream_t); defined in CUDA builds only.
template <typename T>
void uniform_cuda(T* out, int64_t n, T lo, T hi, uint64_t seed, uint64_t offset,
                  CUstream_st* stream);
template <typename T>
void normal_cuda(T* out, int64_t n, T mean, T stddev, uint64_t seed, uint64_t offset,
                 CUstream_st* stream);

/// Philox counters a draw of n values of type T reserves: ceil(n / V).
template <typename T>
constexpr uint64_t random_counters(int64_t n) {
  constexpr int64_t v = philox::values_per_block<T>::value;
  return n <= 0 ? 0 : static_cast<uint64_t>((n + v - 1) / v);
}

}  // namespace minitrain
