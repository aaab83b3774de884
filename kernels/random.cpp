// Random fills and torch's default initialisers: argument checks, the CPU loops and the entry
// points that switch on the device. The CPU loop and the CUDA kernel (random.cu) both turn Philox
// block b into values b*V .. b*V+V-1 with the same core/philox.h functions, so the split of blocks
// over threads changes nothing in the result.

#include "kernels/random.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

namespace {

// Calls make(block, values) for each Philox block of an n-value draw and stores the values that
// fall inside [0, n): the last block of a draw may be partial.
template <typename T, typename MakeValues>
void fill_blocks_cpu(T* out, int64_t n, uint64_t seed, uint64_t offset, MakeValues make) {
  constexpr int64_t v = philox::values_per_block<T>::value;
  const int64_t blocks = static_cast<int64_t>(random_counters<T>(n));
  // ~40 integer ops a block: the elementwise grain, in blocks, pays for the fork/join.
  parallel_for(blocks, kElementwiseGrain / v, [&](int64_t begin, int64_t end) {
    T values[v];
    for (int64_t b = begin; b < end; ++b) {
      make(philox::random_block(seed, offset + static_cast<uint64_t>(b)), values);
      const int64_t first = b * v;
      const int64_t count = std::min<int64_t>(v, n - first);
      for (int64_t j = 0; j < count; ++j) out[first + j] = values[j];
    }
  });
}

template <typename T>
void check_bounds_fit(const char* op, double lo, double hi) {
  const T lo_t = static_cast<T>(lo), hi_t = static_cast<T>(hi);
  MT_CHECK_AS(ValueError, std::isfinite(lo_t) && std::isfinite(hi_t) && std::isfinite(hi_t - lo_t),
              op, ": the range [lo=", lo, ", hi=", hi, ") does not fit in ", dtype_of<T>::value,
              " (hi - lo overflows); use a float64 tensor or a narrower range");
}

Fans fans_for(const char* op, const Shape& shape) {
  MT_CHECK_AS(ValueError, shape.ndim() >= 2, op,
              ": fan in and fan out cannot be computed for a tensor with fewer than 2 dimensions "
              "(shape ",
              shape, "); initialise a bias with linear_bias_uniform_(b, fan_in, g)");
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < shape.ndim(); ++d) receptive_field *= shape[d];
  return Fans{shape[1] * receptive_field, shape[0] * receptive_field};
}

}  // namespace

// ---- CPU references ----

template <typename T>
void uniform_cpu(T* out, int64_t n, T lo, T hi, uint64_t seed, uint64_t offset) {
  const T range = hi - lo;
  fill_blocks_cpu(out, n, seed, offset, [&](const philox::Block& bits, T* values) {
    philox::uniform_values(bits, lo, range, hi, values);
  });
}

template <typename T>
void normal_cpu(T* out, int64_t n, T mean, T stddev, uint64_t seed, uint64_t offset) {
  fill_blocks_cpu(out, n, seed, offset, [&](const philox::Block& bits, T* values) {
    philox::normal_values(bits, mean, stddev, values);
  });
}

template void uniform_cpu<float>(float*, int64_t, float, float, uint64_t, uint64_t);
template void uniform_cpu<double>(double*, int64_t, double, double, uint64_t, uint64_t);
template void normal_cpu<float>(float*, int64_t, float, float, uint64_t, uint64_t);
template void normal_cpu<double>(double*, int64_t, double, double, uint64_t, uint64_t);

// ---- entry points ----

void uniform_(Tensor& t, double lo, double hi, Generator& g) {
  check_compatible("uniform_", {{"t", t}});
  MT_CHECK_AS(ValueError, std::isfinite(lo) && std::isfinite(hi),
              "uniform_: bounds must be finite, got lo=", lo, ", hi=", hi);
  MT_CHECK_AS(ValueError, lo <= hi, "uniform_: expects lo <= hi, got lo=", lo, ", hi=", hi,
              "; swap the bounds");
  const int64_t n = t.numel();
  dispatch_float(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    check_bounds_fit<T>("uniform_", lo, hi);
    const uint64_t offset = g.advance(random_counters<T>(n));
    if (n == 0) return;
    const T lo_t = static_cast<T>(lo), hi_t = static_cast<T>(hi);
    on_device(
        "uniform_", t.device(),
        [&] { uniform_cpu<T>(t.data<T>(), n, lo_t, hi_t, g.seed(), offset); },
        [&](auto stream) {
          uniform_cuda<T>(t.data<T>(), n, lo_t, hi_t, g.seed(), offset, stream);
        });
  });
}

void normal_(Tensor& t, double mean, double stddev, Generator& g) {
  check_compatible("normal_", {{"t", t}});
  MT_CHECK_AS(ValueError, std::isfinite(mean) && std::isfinite(stddev),
              "normal_: mean and std must be finite, got mean=", mean, ", std=", stddev);
  MT_CHECK_AS(ValueError, stddev >= 0.0, "normal_: expects std >= 0, got std=", stddev,
              " (mean=", mean, ")");
  const int64_t n = t.numel();
  dispatch_float(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T mean_t = static_cast<T>(mean), std_t = static_cast<T>(stddev);
    MT_CHECK_AS(ValueError, std::isfinite(mean_t) && std::isfinite(std_t), "normal_: mean=", mean,
                ", std=", stddev, " overflow ", dtype_of<T>::value, "; use a float64 tensor");
    const uint64_t offset = g.advance(random_counters<T>(n));
    if (n == 0) return;
    on_device(
        "normal_", t.device(),
        [&] { normal_cpu<T>(t.data<T>(), n, mean_t, std_t, g.seed(), offset); },
        [&](auto stream) {
          normal_cuda<T>(t.data<T>(), n, mean_t, std_t, g.seed(), offset, stream);
        });
  });
}

Fans fan_in_fan_out(const Shape& shape) { return fans_for("fan_in_fan_out", shape); }

void kaiming_uniform_(Tensor& w, Generator& g, double a) {
  check_compatible("kaiming_uniform_", {{"w", w}});
  MT_CHECK_AS(ValueError, std::isfinite(a),
              "kaiming_uniform_: negative slope a must be finite, got a=", a);
  const Fans fans = fans_for("kaiming_uniform_", w.shape());
  if (w.numel() == 0) return;  // torch: "Initializing zero-element tensors is a no-op"
  // torch.nn.init.kaiming_uniform_'s expression order, so the double bound is torch's bit for bit.
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double stddev = gain / std::sqrt(static_cast<double>(fans.fan_in));
  const double bound = std::sqrt(3.0) * stddev;
  uniform_(w, -bound, bound, g);
}

void linear_bias_uniform_(Tensor& b, int64_t fan_in, Generator& g) {
  check_compatible("linear_bias_uniform_", {{"b", b}});
  MT_CHECK_AS(ValueError, fan_in >= 0,
              "linear_bias_uniform_: fan_in must be >= 0, got fan_in=", fan_in, " (bias ",
              b.shape(), ")");
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  uniform_(b, -bound, bound, g);
}

void xavier_uniform_(Tensor& w, Generator& g, double gain) {
  check_compatible("xavier_uniform_", {{"w", w}});
  MT_CHECK_AS(ValueError, std::isfinite(gain) && gain >= 0.0,
              "xavier_uniform_: gain must be finite and >= 0, got gain=", gain);
  const Fans fans = fans_for("xavier_uniform_", w.shape());
  if (w.numel() == 0) return;
  const double stddev = gain * std::sqrt(2.0 / static_cast<double>(fans.fan_in + fans.fan_out));
  const double bound = std::sqrt(3.0) * stddev;
  uniform_(w, -bound, bound, g);
}

}  // namespace minitrain
