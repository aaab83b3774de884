// Fill and copy entry points and the CPU loop. Memory-bound: the CPU fill is a store stream that
// the compiler vectorises; two threads help only once the tensor outgrows the caches.

#include "kernels/fill.h"

#include <algorithm>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

template <typename T>
void fill_cpu(T* out, T value, int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = value;
  });
}
template void fill_cpu<float>(float*, float, int64_t);
template void fill_cpu<double>(double*, double, int64_t);

void fill(Tensor& out, double value) {
  check_compatible("fill", {{"out", out}});
  const int64_t n = out.numel();
  dispatch_op(
      "fill", out.device(), out.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        fill_cpu<T>(out.data<T>(), static_cast<T>(value), n);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        fill_cuda<T>(out.data<T>(), static_cast<T>(value), n, stream);
      });
}

void zero_(Tensor& out) { fill(out, 0.0); }

void zero_all(std::vector<Tensor>& tensors) {
  struct Piece {
    Tensor* t;
    int64_t begin, end;  // elements
  };
  std::vector<Piece> pieces;
  int64_t total = 0;
  for (const Tensor& t : tensors) check_compatible("zero_all", {{"tensor", t}});  // all first
  for (Tensor& t : tensors) {
    if (!t.device().is_cpu() || (t.dtype() != DType::Float32 && t.dtype() != DType::Float64)) {
      zero_(t);
      continue;
    }
    for (int64_t b = 0; b < t.numel(); b += kElementwiseGrain)
      pieces.push_back({&t, b, std::min(t.numel(), b + kElementwiseGrain)});
    total += t.numel();
  }
  auto zero_piece = [&](const Piece& p) {
    dispatch_float(p.t->dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* out = p.t->data<T>();
      for (int64_t i = p.begin; i < p.end; ++i) out[i] = T(0);  // fill_cpu's store, value 0
    });
  };
  // Below two grains one thread is faster than a fork/join (as parallel_for decides for one).
  const int64_t grain = total < 2 * kElementwiseGrain ? int64_t(pieces.size()) : 1;
  parallel_for(int64_t(pieces.size()), std::max<int64_t>(grain, 1),
               [&](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) zero_piece(pieces[size_t(i)]);
               });
}

void copy(Tensor& out, const Tensor& in) {
  check_compatible("copy", {{"out", out}, {"in", in}});
  check_same_shape("copy", {{"out", out}, {"in", in}});
  if (out.raw_data() == in.raw_data()) return;  // copying a tensor onto itself changes nothing
  out.copy_(in);
}

}  // namespace minitrain
