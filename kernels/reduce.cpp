// Reductions: entry points and the CPU implementation. Memory-bound: one read per element.
// The input is cut into fixed chunks of kPartialChunk elements whose partial results (in double)
// are combined in chunk order, so the answer does not depend on how many threads ran them.

#include "kernels/reduce.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/convert.h"
#include "kernels/dispatch.h"

namespace minitrain {

namespace {

// 8192 elements: 32 KiB of float32, one L1-sized piece; large enough that a chunk costs far more
// than its bookkeeping, small enough that 2 to 64 threads all get chunks at 1M elements.
constexpr int64_t kPartialChunk = kReducePartialChunk;

// Four accumulators break the dependency chain of one running sum (a double add has a latency of
// about four cycles), and are combined in a fixed order.
template <typename Op, typename T>
double reduce_chunk(const T* x, int64_t n) {
  double acc[4] = {Op::identity(), Op::identity(), Op::identity(), Op::identity()};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int lane = 0; lane < 4; ++lane)
      acc[lane] = Op::combine(acc[lane], Op::map(static_cast<double>(x[i + lane])));
  for (; i < n; ++i) acc[0] = Op::combine(acc[0], Op::map(static_cast<double>(x[i])));
  return Op::combine(Op::combine(acc[0], acc[1]), Op::combine(acc[2], acc[3]));
}

template <typename Op, typename T>
double reduce_chunked(const T* x, int64_t n) {
  const int64_t chunks = (n + kPartialChunk - 1) / kPartialChunk;
  if (chunks <= 1) return reduce_chunk<Op>(x, n);
  std::vector<double> partials(static_cast<std::size_t>(chunks));
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / kPartialChunk);
  parallel_for(chunks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t start = c * kPartialChunk;
      partials[c] = reduce_chunk<Op>(x + start, std::min(kPartialChunk, n - start));
    }
  });
  double acc = Op::identity();
  for (double p : partials) acc = Op::combine(acc, p);
  return acc;
}

// mean divides by n (0/0 = NaN for an empty tensor, as torch); the others by 1.
double divisor_for(ReduceKind op, int64_t n) {
  return op == ReduceKind::Mean ? static_cast<double>(n) : 1.0;
}

const char* op_name(ReduceKind op) {
  switch (op) {
    case ReduceKind::Sum:
      return "sum";
    case ReduceKind::Mean:
      return "mean";
    case ReduceKind::MaxAbs:
      return "max_abs";
    case ReduceKind::SquaredNorm:
      return "squared_norm";
  }
  return "reduce";
}

void reduce_into(Tensor& out, const Tensor& x, ReduceKind op) {
  const char* name = op_name(op);
  check_compatible(name, {{"out", out}, {"x", x}});
  check_ndim(name, {"out", out}, 0);
  const int64_t n = x.numel();
  dispatch_op(
      "reduce_into", x.device(), x.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        reduce_cpu(out.data<T>(), x.data<T>(), n, op);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        Tensor partials = Tensor::empty(Shape{reduce_cuda_partials(n)}, DType::Float64, x.device());
        reduce_cuda(out.data<T>(), x.data<T>(), n, op, partials.data<double>(), stream);
      });
}

Tensor reduce_new(const Tensor& x, ReduceKind op) {
  check_compatible(op_name(op), {{"x", x}});
  Tensor out = Tensor::empty(Shape{}, x.dtype(), x.device());
  reduce_into(out, x, op);
  return out;
}

}  // namespace

// ---- CPU ----

template <typename T>
void reduce_cpu(T* out, const T* x, int64_t n, ReduceKind op) {
  using namespace reduce_detail;
  double r = 0.0;
  switch (op) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      r = reduce_chunked<SumOf>(x, n);
      break;
    case ReduceKind::SquaredNorm:
      r = reduce_chunked<SquaresOf>(x, n);
      break;
    case ReduceKind::MaxAbs:
      r = reduce_chunked<MaxAbsOf>(x, n);
      break;
  }
  *out = static_cast<T>(r / divisor_for(op, n));
}

template <typename T, typename X>
void sum_rows_columns_cpu(T* out, const X* x, int64_t rows, int64_t cols, int64_t begin,
                          int64_t end) {
  std::vector<double> acc(static_cast<std::size_t>(end - begin), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const X* row = x + i * cols + begin;
    for (int64_t j = 0; j < end - begin; ++j) acc[j] += convert<double>(row[j]);
  }
  for (int64_t j = 0; j < end - begin; ++j) out[begin + j] = static_cast<T>(acc[j]);
}

template <typename T, typename X>
void sum_rows_cpu(T* out, const X* x, int64_t rows, int64_t cols) {
  // Threads take column ranges; each walks the rows in order, so every column is summed in the
  // same order whatever the thread count, and reads stay sequential within a row.
  const int64_t grain = std::max<int64_t>(64, kElementwiseGrain / std::max<int64_t>(rows, 1));
  parallel_for(cols, grain, [&](int64_t begin, int64_t end) {
    sum_rows_columns_cpu(out, x, rows, cols, begin, end);
  });
}

template <typename T>
double squared_norm_chunk_cpu(const T* x, int64_t n) {
  return reduce_chunk<reduce_detail::SquaresOf>(x, n);
}
template double squared_norm_chunk_cpu<float>(const float*, int64_t);
template double squared_norm_chunk_cpu<double>(const double*, int64_t);

template void reduce_cpu<float>(float*, const float*, int64_t, ReduceKind);
template void reduce_cpu<double>(double*, const double*, int64_t, ReduceKind);
template void sum_rows_cpu<float>(float*, const float*, int64_t, int64_t);
template void sum_rows_cpu<double>(double*, const double*, int64_t, int64_t);
template void sum_rows_columns_cpu<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void sum_rows_columns_cpu<double>(double*, const double*, int64_t, int64_t, int64_t,
                                           int64_t);
template void sum_rows_cpu<float, BFloat16>(float*, const BFloat16*, int64_t, int64_t);
template void sum_rows_cpu<float, Half>(float*, const Half*, int64_t, int64_t);

// ---- entry points ----

template <typename T>
void clip_scale_cpu(T* x, int64_t n, const double* sum_sq, double max_norm) {
  const double coef = clip_coefficient(*sum_sq, max_norm);
  if (coef >= 1.0) return;
  const T alpha = static_cast<T>(coef);
  parallel_for(n, kPartialChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] = alpha * x[i];
  });
}
template void clip_scale_cpu<float>(float*, int64_t, const double*, double);
template void clip_scale_cpu<double>(double*, int64_t, const double*, double);

void clip_scale_(Tensor& x, const Tensor& sum_sq, double max_norm) {
  check_compatible("clip_scale_", {{"x", x}});
  check_ndim("clip_scale_", {"sum_sq", sum_sq}, 0);
  MT_CHECK_AS(DTypeError, sum_sq.dtype() == DType::Float64,
              "clip_scale_: sum_sq must be float64, got ", sum_sq.dtype());
  MT_CHECK_AS(DeviceError, sum_sq.device() == x.device(), "clip_scale_: sum_sq is on ",
              sum_sq.device(), " but x on ", x.device());
  const int64_t n = x.numel();
  const double* s = sum_sq.data<double>();
  dispatch_op(
      "clip_scale_", x.device(), x.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        clip_scale_cpu(x.data<T>(), n, s, max_norm);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        clip_scale_cuda(x.data<T>(), n, s, max_norm, stream);
      });
}

void sum(Tensor& out, const Tensor& x) { reduce_into(out, x, ReduceKind::Sum); }
void mean(Tensor& out, const Tensor& x) { reduce_into(out, x, ReduceKind::Mean); }
void max_abs(Tensor& out, const Tensor& x) { reduce_into(out, x, ReduceKind::MaxAbs); }
void squared_norm(Tensor& out, const Tensor& x) { reduce_into(out, x, ReduceKind::SquaredNorm); }

Tensor sum(const Tensor& x) { return reduce_new(x, ReduceKind::Sum); }
Tensor mean(const Tensor& x) { return reduce_new(x, ReduceKind::Mean); }
Tensor max_abs(const Tensor& x) { return reduce_new(x, ReduceKind::MaxAbs); }
Tensor squared_norm(const Tensor& x) { return reduce_new(x, ReduceKind::SquaredNorm); }

namespace {
// sum_rows' shapes, whatever the dtypes: x [rows, cols] into out [cols].
void check_sum_rows_shapes(const Tensor& out, const Tensor& x) {
  check_ndim("sum_rows", {"x", x}, 2);
  check_ndim("sum_rows", {"out", out}, 1);
  MT_CHECK_AS(ShapeError, out.size(0) == x.size(1), "sum_rows: out has ", out.size(0),
              " entries but x has ", x.size(1), " columns (out ", out.shape(), ", x ", x.shape(),
              "); out must be [cols]");
}
}  // namespace

void sum_rows(Tensor& out, const Tensor& x) {
  if (x.defined() && is_half(x.dtype()) && out.defined() && out.dtype() == DType::Float32) {
    // Mixed precision's bias gradient (Note [16-bit GEMM operands] in nn/linear.cpp): a 16-bit
    // matrix's column sums into float32, each element read widened (exact), so the bits of
    // summing its float32 copy.
    check_compatible("sum_rows", {{"x", x}});
    MT_CHECK_AS(DeviceError, out.device() == x.device(), "sum_rows: out is on ", out.device(),
                " but x on ", x.device());
    check_sum_rows_shapes(out, x);
    const int64_t rows = x.size(0), cols = x.size(1);
    const bool bf16 = x.dtype() == DType::BFloat16;
    dispatch_op(
        "sum_rows", x.device(), DType::Float32,
        [&](auto) {
          if (bf16)
            sum_rows_cpu(out.data<float>(), x.data<BFloat16>(), rows, cols);
          else
            sum_rows_cpu(out.data<float>(), x.data<Half>(), rows, cols);
        },
        [&](auto, auto stream) {
          if (bf16)
            sum_rows_cuda(out.data<float>(), x.data<BFloat16>(), rows, cols, stream);
          else
            sum_rows_cuda(out.data<float>(), x.data<Half>(), rows, cols, stream);
        });
    return;
  }
  check_compatible("sum_rows", {{"out", out}, {"x", x}});
  check_sum_rows_shapes(out, x);
  const int64_t rows = x.size(0), cols = x.size(1);
  dispatch_op(
      "sum_rows", x.device(), x.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        sum_rows_cpu(out.data<T>(), x.data<T>(), rows, cols);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        sum_rows_cuda(out.data<T>(), x.data<T>(), rows, cols, stream);
      });
}

Tensor sum_rows(const Tensor& x) {
  check_compatible("sum_rows", {{"x", x}});
  check_ndim("sum_rows", {"x", x}, 2);
  Tensor out = Tensor::empty(Shape{x.size(1)}, x.dtype(), x.device());
  sum_rows(out, x);
  return out;
}

}  // namespace minitrain
