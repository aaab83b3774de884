// Multi-tensor optimizer steps on the GPU: one launch per up to 30-64 tensors
// (kernels/multi_tensor_apply.cuh); block b updates one 64K-element chunk of one tensor with the
// same device loop as the one-tensor kernels (kernels/optim/optimizer_kernels.cuh: 16-byte packs
// when aligned). Memory-bound for large tensors; for a model's many small ones the launch count is
// what it saves (one launch is ~2-4 us of latency, a 1024-float bias takes nanoseconds to update).

#include "kernels/multi_tensor_apply.cuh"
#include "kernels/optim/multi_tensor_optim.h"
#include "kernels/optim/optimizer_kernels.cuh"

namespace minitrain {

// ---- CUDA kernels ----

template <typename V, typename T, int kDepth>
__global__ void sgd_multi_tensor_kernel(TensorListArgs<kDepth> args, SgdCoeffs<T> c) {
  const ChunkOf<kDepth> chunk(args);
  T* buf = nullptr;
  if constexpr (kDepth > 2) buf = chunk.template ptr<T>(2);
  sgd_apply_range<V>(chunk.template ptr<T>(0), chunk.template ptr<T>(1), buf, chunk.len,
                     int64_t(threadIdx.x), int64_t(blockDim.x), c);
}

template <typename V, typename T, int kDepth>
__global__ void adam_multi_tensor_kernel(TensorListArgs<kDepth> args, AdamCoeffs<T> c) {
  const ChunkOf<kDepth> chunk(args);
  T* vmax = nullptr;
  if constexpr (kDepth > 4) vmax = chunk.template ptr<T>(4);
  adam_apply_range<V>(chunk.template ptr<T>(0), chunk.template ptr<T>(1), chunk.template ptr<T>(2),
                      chunk.template ptr<T>(3), vmax, chunk.len, int64_t(threadIdx.x),
                      int64_t(blockDim.x), c);
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
void sgd_step_multi_cuda(const TensorTable<T>& t, const SGDStepArgs& args, CUstream_st* stream) {
  const SgdCoeffs<T> c{static_cast<T>(args.lr), static_cast<T>(args.weight_decay),
                       static_cast<T>(args.momentum), static_cast<T>(1.0 - args.dampening)};
  dispatch_sgd_variant(
      args.weight_decay != 0.0, args.momentum != 0.0, args.first_step, args.nesterov,
      [&](auto variant) {
        using V = decltype(variant);
        constexpr int kDepth = V::kMomentum ? 3 : 2;
        multi_tensor_apply<kDepth>(
            operands<kDepth>(t), t.sizes, [&](const TensorListArgs<kDepth>& a, unsigned blocks) {
              sgd_multi_tensor_kernel<V, T, kDepth><<<blocks, kBlock, 0, as_cuda(stream)>>>(a, c);
            });
      });
}

template <typename T>
void adam_step_multi_cuda(const TensorTable<T>& t, const AdamStepArgs& args, CUstream_st* stream) {
  const AdamCoeffs<T> c = adam_coeffs<T>(args);
  dispatch_adam_variant(args.decay, args.amsgrad, [&](auto variant) {
    using V = decltype(variant);
    constexpr int kDepth = V::kAmsgrad ? 5 : 4;
    multi_tensor_apply<kDepth>(
        operands<kDepth>(t), t.sizes, [&](const TensorListArgs<kDepth>& a, unsigned blocks) {
          adam_multi_tensor_kernel<V, T, kDepth><<<blocks, kBlock, 0, as_cuda(stream)>>>(a, c);
        });
  });
}

template void sgd_step_multi_cuda<float>(const TensorTable<float>&, const SGDStepArgs&,
                                         CUstream_st*);
template void sgd_step_multi_cuda<double>(const TensorTable<double>&, const SGDStepArgs&,
                                          CUstream_st*);
template void adam_step_multi_cuda<float>(const TensorTable<float>&, const AdamStepArgs&,
                                          CUstream_st*);
template void adam_step_multi_cuda<double>(const TensorTable<double>&, const AdamStepArgs&,
                                           CUstream_st*);

}  // namespace minitrain
