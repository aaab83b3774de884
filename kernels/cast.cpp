// Cast entry points and the CPU loop. Memory-bound: the conversion (cvtps2pd / cvtpd2ps) is one
// instruction per few elements; the time is the read and write streams.

#include "kernels/cast.h"

#include <type_traits>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

template <typename To, typename From>
void cast_cpu(To* out, const From* in, int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = static_cast<To>(in[i]);
  });
}
template void cast_cpu<float, double>(float*, const double*, int64_t);
template void cast_cpu<double, float>(double*, const float*, int64_t);

void cast(Tensor& out, const Tensor& in) {
  // check_compatible insists on one dtype, so check each operand alone, then the pair's devices.
  check_compatible("cast", {{"out", out}});
  check_compatible("cast", {{"in", in}});
  MT_CHECK_AS(DeviceError, out.device() == in.device(),
              "cast: operands are on different devices: out on ", out.device(), " ", out.shape(),
              ", in on ", in.device(), " ", in.shape(), "; move them with .to(device) first");
  check_same_shape("cast", {{"out", out}, {"in", in}});
  if (out.dtype() == in.dtype()) {
    if (out.raw_data() != in.raw_data()) out.copy_(in);
    return;
  }
  const int64_t n = in.numel();
  dispatch_op(
      "cast", in.device(), in.dtype(),
      [&](auto from_zero) {
        using From = decltype(from_zero);
        dispatch_float(out.dtype(), [&](auto to_zero) {
          using To = decltype(to_zero);
          if constexpr (!std::is_same_v<To, From>)
            cast_cpu<To, From>(out.data<To>(), in.data<From>(), n);
        });
      },
      [&](auto from_zero, auto stream) {
        using From = decltype(from_zero);
        dispatch_float(out.dtype(), [&](auto to_zero) {
          using To = decltype(to_zero);
          if constexpr (!std::is_same_v<To, From>)
            cast_cuda<To, From>(out.data<To>(), in.data<From>(), n, stream);
        });
      });
}

Tensor cast(const Tensor& in, DType to) {
  check_compatible("cast", {{"in", in}});
  Tensor out = Tensor::empty(in.shape(), to, in.device());
  cast(out, in);
  return out;
}

}  // namespace minitrain
