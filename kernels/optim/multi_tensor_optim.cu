// Multi-tensor optimizer steps on the GPU: one launch per up to 30-64 tensors
// (kernels/multi_tensor_apply.cuh); block b updates one 64K-element chunk of one tensor with the
// same device loop as the one-tensor kernels (kernels/optim/optimizer_kernels.cuh: 16-byte packs
// when aligned). Memory-bound for large tensors; for a model's many small ones the launch count is
// what it saves (one launch is ~2-4 us of latency, a 1024-float bias takes nanoseconds to update).

#include <algorithm>

#include "kernels/multi_tensor_apply.cuh"
#include "kernels/optim/multi_tensor_optim.h"
#include "kernels/optim/optimizer_kernels.cuh"

namespace minitrain {

// ---- CUDA kernels ----

// `on_device`, when not null, holds this step's factors (Note [step scalars on the device] in
// multi_tensor_optim.h) and replaces `c`, which a replayed graph would repeat.
template <typename V, typename T, int kDepth>
__global__ void sgd_multi_tensor_kernel(TensorListArgs<kDepth> args, SgdCoeffs<T> by_value,
                                        const SgdCoeffs<T>* on_device) {
  const SgdCoeffs<T> c = on_device != nullptr ? *on_device : by_value;
  const ChunkOf<kDepth> chunk(args);
  T* buf = nullptr;
  if constexpr (kDepth > 2) buf = chunk.template ptr<T>(2);
  sgd_apply_range<V>(chunk.template ptr<T>(0), chunk.template ptr<T>(1), buf, chunk.len,
                     int64_t(threadIdx.x), int64_t(blockDim.x), c);
}

template <typename V, typename T, int kDepth>
__global__ void adam_multi_tensor_kernel(TensorListArgs<kDepth> args, AdamCoeffs<T> by_value,
                                         const AdamCoeffs<T>* on_device) {
  const AdamCoeffs<T> c = on_device != nullptr ? *on_device : by_value;
  const ChunkOf<kDepth> chunk(args);
  T* vmax = nullptr;
  if constexpr (kDepth > 4) vmax = chunk.template ptr<T>(4);
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
template <int kDepth, typename T>
std::vector<std::array<void*, kDepth>> operands(const TensorTable<T>& t) {
  std::vector<std::array<void*, kDepth>> out(t.ptrs.size());
  for (std::size_t k = 0; k < t.ptrs.size(); ++k)
    for (int s = 0; s < kDepth; ++s) out[k][s] = t.ptrs[k][s];
  return out;
}
}  // namespace

template <typename T>
void sgd_step_multi_cuda(const TensorTable<T>& t, const SGDStepArgs& args,
                         const SgdCoeffs<T>* coeffs_on_device, CUstream_st* stream) {
  const SgdCoeffs<T> c = sgd_coeffs<T>(args);
  dispatch_sgd_variant(args.weight_decay != 0.0, args.momentum != 0.0, args.first_step,
                       args.nesterov, [&](auto variant) {
                         using V = decltype(variant);
                         constexpr int kDepth = V::kMomentum ? 3 : 2;
                         multi_tensor_apply<kDepth>(
                             operands<kDepth>(t), t.sizes,
                             [&](const TensorListArgs<kDepth>& a, unsigned blocks) {
                               sgd_multi_tensor_kernel<V, T, kDepth>
                                   <<<blocks, kBlock, 0, as_cuda(stream)>>>(a, c, coeffs_on_device);
                             });
                       });
}

template <typename T>
void adam_step_multi_cuda(const TensorTable<T>& t, const AdamStepArgs& args,
                          const AdamCoeffs<T>* coeffs_on_device, CUstream_st* stream) {
  const AdamCoeffs<T> c = adam_coeffs<T>(args);
  dispatch_adam_variant(args.decay, args.amsgrad, [&](auto variant) {
    using V = decltype(variant);
    constexpr int kDepth = V::kAmsgrad ? 5 : 4;
    multi_tensor_apply<kDepth>(
        operands<kDepth>(t), t.sizes, [&](const TensorListArgs<kDepth>& a, unsigned blocks) {
          adam_multi_tensor_kernel<V, T, kDepth>
              <<<blocks, kBlock, 0, as_cuda(stream)>>>(a, c, coeffs_on_device);
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
                                         const SgdCoeffs<float>*, CUstream_st*);
template void sgd_step_multi_cuda<double>(const TensorTable<double>&, const SGDStepArgs&,
                                          const SgdCoeffs<double>*, CUstream_st*);
template void adam_step_multi_cuda<float>(const TensorTable<float>&, const AdamStepArgs&,
                                          const AdamCoeffs<float>*, CUstream_st*);
template void adam_step_multi_cuda<double>(const TensorTable<double>&, const AdamStepArgs&,
                                           const AdamCoeffs<double>*, CUstream_st*);

}  // namespace minitrain
