// Multi-tensor optimizer steps on the GPU: one launch per up to 30-64 tensors
// (kernels/multi_tensor_apply.cuh); block b updates one 16K-element chunk of one tensor with the
// same device loop as the one-tensor kernels (kernels/optim/optimizer_kernels.cuh: 16-byte packs
// when aligned). Memory-bound for large tensors; for a model's many small ones the launch count is
// what it saves (one launch is ~2-4 us of latency, a 1024-float bias takes nanoseconds to update).

#include <algorithm>
#include <type_traits>

#include "kernels/multi_tensor_apply.cuh"
#include "kernels/optim/multi_tensor_optim.h"
#include "kernels/optim/optimizer_kernels.cuh"

namespace minitrain {

// ---- CUDA kernels ----

// `on_device`, when not null, holds this step's factors (Note [step scalars on the device] in
// multi_tensor_optim.h) and replaces `c`, which a replayed graph would repeat. kSkip: the last
// operand is the tensor's count of steps taken (Note [skip on the device], skip_on_device.h); the
// block returns at once when the inf flag is set.
template <typename V, typename T, int kDepth, bool kSkip>
__global__ void sgd_multi_tensor_kernel(TensorListArgs<kDepth> args, SgdCoeffs<T> by_value,
                                        const SgdCoeffs<T>* on_device, SkipArgs skip) {
  const SgdCoeffs<T> c = on_device != nullptr ? *on_device : by_value;
  const ChunkOf<kDepth> chunk(args);
  T* buf = nullptr;
  if constexpr (kDepth - int(kSkip) > 2) buf = chunk.template ptr<T>(2);
  T* param = chunk.template ptr<T>(0);
  const T* grad = chunk.template ptr<T>(1);
  if constexpr (kSkip) {
    const int64_t taken = take_counted_step(skip, static_cast<float*>(chunk.base[kDepth - 1]),
                                            chunk.begin == 0 && threadIdx.x == 0);
    if (taken < 0) return;
    if constexpr (V::kMomentum) {
      if (taken == 0) {  // the buffer's first step taken: buf = g
        using First = SgdVariant<V::kWeightDecay, true, true, V::kNesterov>;
        sgd_apply_range<First>(param, grad, buf, chunk.len, int64_t(threadIdx.x),
                               int64_t(blockDim.x), c);
        return;
      }
    }
  }
  sgd_apply_range<V>(param, grad, buf, chunk.len, int64_t(threadIdx.x), int64_t(blockDim.x), c);
}

template <typename V, typename T, int kDepth, bool kSkip>
__global__ void adam_multi_tensor_kernel(TensorListArgs<kDepth> args, AdamCoeffs<T> by_value,
                                         const AdamCoeffs<T>* on_device, SkipArgs skip) {
  AdamCoeffs<T> c = on_device != nullptr ? *on_device : by_value;
  const ChunkOf<kDepth> chunk(args);
  if constexpr (kSkip) {
    const int64_t taken = take_counted_step(skip, static_cast<float*>(chunk.base[kDepth - 1]),
                                            chunk.begin == 0 && threadIdx.x == 0);
    if (taken < 0) return;
    adam_factors_at(c, skip, taken);
  }
  T* vmax = nullptr;
  if constexpr (kDepth - int(kSkip) > 4) vmax = chunk.template ptr<T>(4);
  adam_apply_range<V>(chunk.template ptr<T>(0), chunk.template ptr<T>(1), chunk.template ptr<T>(2),
                      chunk.template ptr<T>(3), vmax, chunk.len, int64_t(threadIdx.x),
                      int64_t(blockDim.x), c);
}

// The bytes of one store_step_scalars launch travel as its argument: a graph cannot replay them.
struct StepScalarBytes {
  unsigned char b[kStepScalarsLaunchBytes];
};

__global__ void store_step_scalars_kernel(unsigned char* dst, StepScalarBytes src, int n) {
  for (int i = int(threadIdx.x); i < n; i += int(blockDim.x)) dst[i] = src.b[i];
}

// ---- launchers ----

namespace {
// The launch's operands: the table's first kDepth - kSkip slots, then (kSkip) each tensor's count.
template <int kDepth, bool kSkip, typename T>
std::vector<std::array<void*, kDepth>> operands(const TensorTable<T>& t, const SkipOnDevice* skip) {
  std::vector<std::array<void*, kDepth>> out(t.ptrs.size());
  for (std::size_t k = 0; k < t.ptrs.size(); ++k) {
    for (int s = 0; s < kDepth - int(kSkip); ++s) out[k][s] = t.ptrs[k][s];
    if constexpr (kSkip) out[k][kDepth - 1] = skip->counts[k];
  }
  return out;
}

template <typename F>
void dispatch_skip(const SkipOnDevice* skip, F&& f) {
  if (skip != nullptr) return f(std::true_type{});
  return f(std::false_type{});
}
}  // namespace

template <typename T>
void sgd_step_multi_cuda(const TensorTable<T>& t, const SGDStepArgs& args,
                         const SgdCoeffs<T>* coeffs_on_device, const SkipOnDevice* skip,
                         CUstream_st* stream) {
  const SgdCoeffs<T> c = sgd_coeffs<T>(args);
  const SkipArgs skip_args = skip != nullptr ? skip->args : SkipArgs{};
  // With skip the device picks the first step (count 0) itself: the host's variant is the later
  // one.
  const bool first_step = args.first_step && skip == nullptr;
  dispatch_skip(skip, [&](auto skipping) {
    constexpr bool kSkip = decltype(skipping)::value;
    dispatch_sgd_variant(args.weight_decay != 0.0, args.momentum != 0.0, first_step, args.nesterov,
                         [&](auto variant) {
                           using V = decltype(variant);
                           constexpr int kDepth = (V::kMomentum ? 3 : 2) + int(kSkip);
                           multi_tensor_apply<kDepth>(
                               operands<kDepth, kSkip>(t, skip), t.sizes,
                               [&](const TensorListArgs<kDepth>& a, unsigned blocks) {
                                 sgd_multi_tensor_kernel<V, T, kDepth, kSkip>
                                     <<<blocks, kBlock, 0, as_cuda(stream)>>>(
                                         a, c, coeffs_on_device, skip_args);
                               });
                         });
  });
}

template <typename T>
void adam_step_multi_cuda(const TensorTable<T>& t, const AdamStepArgs& args,
                          const AdamCoeffs<T>* coeffs_on_device, const SkipOnDevice* skip,
                          CUstream_st* stream) {
  const AdamCoeffs<T> c = adam_coeffs<T>(args);
  const SkipArgs skip_args = skip != nullptr ? skip->args : SkipArgs{};
  dispatch_skip(skip, [&](auto skipping) {
    constexpr bool kSkip = decltype(skipping)::value;
    dispatch_adam_variant(args.decay, args.amsgrad, [&](auto variant) {
      using V = decltype(variant);
      constexpr int kDepth = (V::kAmsgrad ? 5 : 4) + int(kSkip);
      multi_tensor_apply<kDepth>(operands<kDepth, kSkip>(t, skip), t.sizes,
                                 [&](const TensorListArgs<kDepth>& a, unsigned blocks) {
                                   adam_multi_tensor_kernel<V, T, kDepth, kSkip>
                                       <<<blocks, kBlock, 0, as_cuda(stream)>>>(
                                           a, c, coeffs_on_device, skip_args);
                                 });
    });
  });
}

void store_step_scalars_cuda(unsigned char* dst, const unsigned char* bytes, std::size_t n,
                             CUstream_st* stream) {
  for (std::size_t at = 0; at < n; at += kStepScalarsLaunchBytes) {
    StepScalarBytes src{};
    const std::size_t len = std::min(kStepScalarsLaunchBytes, n - at);
    for (std::size_t i = 0; i < len; ++i) src.b[i] = bytes[at + i];
    store_step_scalars_kernel<<<1, kBlock, 0, as_cuda(stream)>>>(dst + at, src, int(len));
    CHECK_CUDA_LAUNCH();
  }
}

template void sgd_step_multi_cuda<float>(const TensorTable<float>&, const SGDStepArgs&,
                                         const SgdCoeffs<float>*, const SkipOnDevice*,
                                         CUstream_st*);
template void sgd_step_multi_cuda<double>(const TensorTable<double>&, const SGDStepArgs&,
                                          const SgdCoeffs<double>*, const SkipOnDevice*,
                                          CUstream_st*);
template void adam_step_multi_cuda<float>(const TensorTable<float>&, const AdamStepArgs&,
                                          const AdamCoeffs<float>*, const SkipOnDevice*,
                                          CUstream_st*);
template void adam_step_multi_cuda<double>(const TensorTable<double>&, const AdamStepArgs&,
                                           const AdamCoeffs<double>*, const SkipOnDevice*,
                                           CUstream_st*);

}  // namespace minitrain
