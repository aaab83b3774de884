#pragma once
// Reductions: sum, mean, max |x|, sum of squares (the squared L2 norm, for gradient clipping),
// and sum_rows (column sums of a matrix: the bias gradient of a linear layer).
//
// Results stay on the tensor's device as 0-d tensors (read them with .item()), so a training
// step never waits for the GPU unless it asks. Accumulation is in double on both devices and in
// a fixed order, so results are the same run after run and whatever the thread count.
// Empty input, as in torch: sum = 0, squared_norm = 0, max_abs = 0, mean = NaN.

#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/tensor.h"

struct CUstream_st;

namespace minitrain {

// ---- entry points: `out` is 0-d (sum_rows: 1-d), same device and dtype as `x` ----
void sum(Tensor& out, const Tensor& x);
void mean(Tensor& out, const Tensor& x);
void max_abs(Tensor& out, const Tensor& x);
void squared_norm(Tensor& out, const Tensor& x);
/// x [rows, cols] -> out [cols], out[j] = sum_i x[i, j].
void sum_rows(Tensor& out, const Tensor& x);

// ---- convenience: a new tensor on x's device ----
// (tests: minitrain::testing::host_max_abs(const Tensor&) returns a double; qualify one of the
// two.)
Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);
Tensor max_abs(const Tensor& x);
Tensor squared_norm(const Tensor& x);
Tensor sum_rows(const Tensor& x);

// ---- gradient clipping's scale, decided on the device (optim/clip.h, issue 35) ----
/// torch clip_grad_norm_'s factor from the sum of squares of every gradient: max_norm /
/// (sqrt(sum_sq) + 1e-6), in double. Shared by the CPU loop and the CUDA kernel.
MT_HOST_DEVICE double clip_coefficient(double sum_sq, double max_norm) {
  return max_norm / (sqrt(sum_sq) + 1e-6);
}
/// x *= T(clip_coefficient(*sum_sq, max_norm)) when that factor is below 1 or NaN; otherwise x is
/// left untouched (bit for bit, as torch's clamp to 1 does). `sum_sq` is a 0-d float64 tensor on
/// x's device, read by the kernel: the host never waits for it.
void clip_scale_(Tensor& x, const Tensor& sum_sq, double max_norm);

// ---- CPU and CUDA implementations (raw pointers, contiguous) ----
enum class ReduceKind : uint8_t { Sum, Mean, MaxAbs, SquaredNorm };

namespace reduce_detail {
// What each reduction does to one element (map) and to two partial results (combine), shared by
// the CPU loops and the CUDA kernels. Everything is accumulated in double.
struct SumOf {
  MT_HOST_DEVICE static double identity() { return 0.0; }
  MT_HOST_DEVICE static double map(double v) { return v; }
  MT_HOST_DEVICE static double combine(double a, double b) { return a + b; }
};
struct SquaresOf {
  MT_HOST_DEVICE static double identity() { return 0.0; }
  MT_HOST_DEVICE static double map(double v) { return v * v; }
  MT_HOST_DEVICE static double combine(double a, double b) { return a + b; }
};
struct MaxAbsOf {
  MT_HOST_DEVICE static double identity() { return 0.0; }
  // v < 0 ? -v : v + 0.0 maps -0.0 to +0.0 and keeps NaN a NaN.
  MT_HOST_DEVICE static double map(double v) { return v < 0.0 ? -v : v + 0.0; }
  // NaN wins, as in torch (a != a is the portable isnan).
  MT_HOST_DEVICE static double combine(double a, double b) { return (a != a || a > b) ? a : b; }
};
}  // namespace reduce_detail

template <typename T>
void reduce_cpu(T* out, const T* x, int64_t n, ReduceKind op);
/// X = T, or X = BFloat16/Half with T = float (a 16-bit matrix read widened, exact).
template <typename T, typename X = T>
void sum_rows_cpu(T* out, const X* x, int64_t rows, int64_t cols);
/// Columns [begin, end) of sum_rows_cpu on the calling thread, with its per-column math (each
/// column summed over the rows in order, in double): any split of the columns gives its bits.
template <typename T, typename X = T>
void sum_rows_columns_cpu(T* out, const X* x, int64_t rows, int64_t cols, int64_t begin,
                          int64_t end);

/// The CPU reductions cut the input into chunks of this many elements whose results (in double)
/// are combined in chunk order: reduce_cpu(SquaredNorm) is squared_norm_chunk_cpu of the only
/// chunk when there is one, else 0.0 + the chunks' results in order (multi_tensor_norm.h reuses
/// the chunks to reproduce its bits).
inline constexpr int64_t kReducePartialChunk = 8192;
/// The sum of squares of x[0, n) in double, as reduce_cpu folds one chunk (four accumulators).
template <typename T>
double squared_norm_chunk_cpu(const T* x, int64_t n);

/// Per-block partials the CUDA reduction needs (doubles) for n elements; the caller allocates
/// them on the device, on the stream `s` (see Note [streams and the caching allocator]). It is
/// also pass 1's grid for n > 0 (n == 0 launches no pass 1).
int64_t reduce_cuda_partials(int64_t n);
template <typename T>
void clip_scale_cpu(T* x, int64_t n, const double* sum_sq, double max_norm);
template <typename T>
void clip_scale_cuda(T* x, int64_t n, const double* sum_sq, double max_norm, CUstream_st* s);
template <typename T>
void reduce_cuda(T* out, const T* x, int64_t n, ReduceKind op, double* partials, CUstream_st* s);
template <typename T, typename X = T>
void sum_rows_cuda(T* out, const X* x, int64_t rows, int64_t cols, CUstream_st* s);

}  // namespace minitrain
