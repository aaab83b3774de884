// Fill and copy entry points and the CPU loop. Memory-bound: the CPU fill is a store stream that
// the compiler vectorises; two threads help only once the tensor outgrows the caches.

#include "kernels/fill.h"

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

void copy(Tensor& out, const Tensor& in) {
  check_compatible("copy", {{"out", out}, {"in", in}});
  check_same_shape("copy", {{"out", out}, {"in", in}});
  if (out.raw_data() == in.raw_data()) return;  // copying a tensor onto itself changes nothing
  out.copy_(in);
}

}  // namespace minitrain
