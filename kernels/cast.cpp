// Cast entry points and the CPU loops. Memory-bound: the conversion is one instruction
// (cvtps2pd / cvtpd2ps) or a few integer operations (16-bit types) per element; the time is the
// read and write streams.

#include "kernels/cast.h"

#include <type_traits>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/cast_multi.h"
#include "kernels/cast_pairs.h"
#include "kernels/check.h"
#include "kernels/convert.h"
#include "kernels/dispatch.h"

namespace minitrain {

template <typename To, typename From>
void cast_cpu(To* out, const From* in, int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = convert<To>(in[i]);
  });
}
#define MT_INSTANTIATE_CAST_CPU(To, From) \
  template void cast_cpu<To, From>(To*, const From*, int64_t);
MT_CAST_PAIRS(MT_INSTANTIATE_CAST_CPU)

template <typename T>
void round_to_precision_cpu(float* out, const float* in, int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = round_to<T>(in[i]);
  });
}
template void round_to_precision_cpu<BFloat16>(float*, const float*, int64_t);
template void round_to_precision_cpu<Half>(float*, const float*, int64_t);

template <typename T>
void round_into_cpu(void* out, const float* in, int64_t n, RoundedInto how) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (how == RoundedInto::Narrow) {
      T* narrow_out = static_cast<T*>(out);
      for (int64_t i = begin; i < end; ++i) narrow_out[i] = narrow<T>(in[i]);
      return;
    }
    float* wide_out = static_cast<float*>(out);
    for (int64_t i = begin; i < end; ++i) wide_out[i] = rounded_into<T>(wide_out + i, in[i], how);
  });
}
template void round_into_cpu<BFloat16>(void*, const float*, int64_t, RoundedInto);
template void round_into_cpu<Half>(void*, const float*, int64_t, RoundedInto);

namespace {
// The device, shape and definedness checks of both entry points (check_compatible insists on one
// dtype, so each operand is checked alone, then the pair).
void check_pair(const char* op, const Tensor& out, const Tensor& in) {
  check_compatible(op, {{"out", out}});
  check_compatible(op, {{"in", in}});
  MT_CHECK_AS(DeviceError, out.device() == in.device(), op,
              ": operands are on different devices: out on ", out.device(), " ", out.shape(),
              ", in on ", in.device(), " ", in.shape(), "; move them with .to(device) first");
  check_same_shape(op, {{"out", out}, {"in", in}});
}
}  // namespace

void cast(Tensor& out, const Tensor& in) {
  check_pair("cast", out, in);
  if (out.dtype() == in.dtype()) {
    if (out.raw_data() != in.raw_data()) out.copy_(in);
    return;
  }
  const int64_t n = in.numel();
  on_device(
      "cast", in.device(),
      [&] {
        dispatch_any(in.dtype(), [&](auto from_zero) {
          using From = decltype(from_zero);
          dispatch_any(out.dtype(), [&](auto to_zero) {
            using To = decltype(to_zero);
            if constexpr (!std::is_same_v<To, From>)
              cast_cpu<To, From>(out.data<To>(), in.data<From>(), n);
          });
        });
      },
      [&](auto stream) {
        dispatch_any(in.dtype(), [&](auto from_zero) {
          using From = decltype(from_zero);
          dispatch_any(out.dtype(), [&](auto to_zero) {
            using To = decltype(to_zero);
            if constexpr (!std::is_same_v<To, From>)
              cast_cuda<To, From>(out.data<To>(), in.data<From>(), n, stream);
          });
        });
      });
}

Tensor cast(const Tensor& in, DType to) {
  check_compatible("cast", {{"in", in}});
  Tensor out = Tensor::empty(in.shape(), to, in.device());
  cast(out, in);
  return out;
}

void round_to_precision(Tensor& out, const Tensor& in, DType precision) {
  check_pair("round_to_precision", out, in);
  MT_CHECK_AS(DTypeError, out.dtype() == DType::Float32 && in.dtype() == DType::Float32,
              "round_to_precision: takes float32 tensors, got out ", out.dtype(), " and in ",
              in.dtype());
  if (precision == DType::Float32) {
    if (out.raw_data() != in.raw_data()) out.copy_(in);
    return;
  }
  MT_CHECK_AS(DTypeError, is_half(precision),
              "round_to_precision: precision must be bfloat16 or float16, got ", precision);
  const int64_t n = in.numel();
  on_device(
      "round_to_precision", in.device(),
      [&] {
        dispatch_any(precision, [&](auto zero) {
          using T = decltype(zero);
          if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
            round_to_precision_cpu<T>(out.data<float>(), in.data<float>(), n);
        });
      },
      [&](auto stream) {
        dispatch_any(precision, [&](auto zero) {
          using T = decltype(zero);
          if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
            round_to_precision_cuda<T>(out.data<float>(), in.data<float>(), n, stream);
        });
      });
}

void round_to_precision_multi(const std::vector<RoundedCast>& items, DType precision) {
  if (items.empty()) return;
  MT_CHECK_AS(DTypeError, is_half(precision),
              "round_to_precision_multi: precision must be bfloat16 or float16, got ", precision);
  const Device device = items.front().in->device();
  std::vector<void*> outs;
  std::vector<const float*> ins;
  std::vector<int64_t> sizes;
  std::vector<RoundedInto> how;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const Tensor& out = *items[k].out;
    const Tensor& in = *items[k].in;
    check_pair("round_to_precision_multi", out, in);
    const bool narrow = items[k].how == RoundedInto::Narrow;
    const DType out_dtype = narrow ? precision : DType::Float32;
    MT_CHECK_AS(DTypeError, out.dtype() == out_dtype && in.dtype() == DType::Float32,
                "round_to_precision_multi: item ", k, " is out ", out.dtype(), " and in ",
                in.dtype(), "; it takes in float32 and out ", out_dtype,
                narrow ? " (a Narrow item's out is of the precision)" : "");
    MT_CHECK_AS(DeviceError, in.device() == device, "round_to_precision_multi: item ", k, " is on ",
                in.device(), " but item 0 on ", device, "; one call per device (one launch each)");
    outs.push_back(items[k].out->raw_data());
    ins.push_back(in.data<float>());
    sizes.push_back(in.numel());
    how.push_back(items[k].how);
  }
  on_device(
      "round_to_precision_multi", device,
      [&] {
        dispatch_any(precision, [&](auto zero) {
          using T = decltype(zero);
          if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
            for (std::size_t k = 0; k < outs.size(); ++k)
              round_into_cpu<T>(outs[k], ins[k], sizes[k], how[k]);
        });
      },
      [&](auto stream) {
        dispatch_any(precision, [&](auto zero) {
          using T = decltype(zero);
          if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
            round_to_precision_multi_cuda<T>(outs, ins, sizes, how, stream);
        });
      });
}

}  // namespace minitrain
