// Multi-tensor optimizer steps on the GPU, for every row of MT_OPTIMIZER_STEPS (Note [one row
// per optimizer] in optimizer_math.h): one launch per up to 30-64 tensors
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

/// The state operands variant V of a row uses (they follow param and grad in a launch's operands).
template <typename Row, typename V>
constexpr int used_states() {
  int n = 0;
  for (int k = 0; k < Row::kStates; ++k) n += Row::template uses<V>(k) ? 1 : 0;
  return n;
}

// `on_device`, when not null, holds this step's factors (Note [step scalars on the device] in
// multi_tensor_optim.h) and replaces `c`, which a replayed graph would repeat. The operands are
// param, grad, the state V uses in the row's order, and (kSkip) the tensor's count of steps
// taken (Note [skip on the device], skip_on_device.h): the block returns at once when the inf
// flag is set, and what depends on the count is the row's at_count() and AtFirstCount.
template <typename Row, typename V, typename T, int kDepth, bool kSkip>
__global__ void optimizer_multi_tensor_kernel(TensorListArgs<kDepth> args,
                                              typename Row::template Coeffs<T> by_value,
                                              const typename Row::template Coeffs<T>* on_device,
                                              SkipArgs skip) {
  typename Row::template Coeffs<T> c = on_device != nullptr ? *on_device : by_value;
  const ChunkOf<kDepth> chunk(args);
  T* param = chunk.template ptr<T>(0);
  const T* grad = chunk.template ptr<T>(1);
  StatePointers<T> state{};
  int slot = 2;
#pragma unroll
  for (int k = 0; k < Row::kStates; ++k)
    if (Row::template uses<V>(k)) state.s[k] = chunk.template ptr<T>(slot++);
  if constexpr (kSkip) {
    const int64_t taken = take_counted_step(skip, static_cast<float*>(chunk.base[kDepth - 1]),
                                            chunk.begin == 0 && threadIdx.x == 0);
    if (taken < 0) return;
    Row::at_count(c, skip_lr(skip), skip.bias_table, taken);
    using First = typename Row::template AtFirstCount<V>;
    if constexpr (!std::is_same<First, V>::value) {
      if (taken == 0) {  // the first step taken (SGD: buf = g)
        optimizer_apply_range<Row, First>(param, grad, state, chunk.len, int64_t(threadIdx.x),
                                          int64_t(blockDim.x), c);
        return;
      }
    }
  }
  optimizer_apply_range<Row, V>(param, grad, state, chunk.len, int64_t(threadIdx.x),
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
// The launch's operands: param, grad, the state V uses (in the row's order), then (kSkip) each
// tensor's count.
template <typename Row, typename V, int kDepth, bool kSkip, typename T>
std::vector<std::array<void*, kDepth>> operands(const TensorTable<T>& t, const SkipOnDevice* skip) {
  std::vector<std::array<void*, kDepth>> out(t.ptrs.size());
  for (std::size_t k = 0; k < t.ptrs.size(); ++k) {
    int s = 0;
    out[k][s++] = t.ptrs[k][0];
    out[k][s++] = t.ptrs[k][1];
    for (int j = 0; j < Row::kStates; ++j)
      if (Row::template uses<V>(j)) out[k][s++] = t.ptrs[k][std::size_t(2 + j)];
    if constexpr (kSkip) out[k][s] = skip->counts[k];
  }
  return out;
}

template <typename F>
void dispatch_skip(const SkipOnDevice* skip, F&& f) {
  if (skip != nullptr) return f(std::true_type{});
  return f(std::false_type{});
}
}  // namespace

template <typename Row, typename T>
void optimizer_step_multi_cuda(const TensorTable<T>& t, const typename Row::Args& args,
                               const typename Row::template Coeffs<T>* coeffs_on_device,
                               const SkipOnDevice* skip, CUstream_st* stream) {
  typename Row::Args a = args;
  // With skip the device picks what depends on the count itself (SGD: the first step, count 0;
  // the host's variant is the later one).
  if (skip != nullptr) Row::counted(a, 0.0, nullptr, -1);
  const auto c = Row::template coeffs<T>(a);
  const SkipArgs skip_args = skip != nullptr ? skip->args : SkipArgs{};
  dispatch_skip(skip, [&](auto skipping) {
    constexpr bool kSkip = decltype(skipping)::value;
    Row::dispatch(a, [&](auto variant) {
      using V = decltype(variant);
      constexpr int kDepth = 2 + used_states<Row, V>() + int(kSkip);
      multi_tensor_apply<kDepth>(operands<Row, V, kDepth, kSkip>(t, skip), t.sizes,
                                 [&](const TensorListArgs<kDepth>& la, unsigned blocks) {
                                   optimizer_multi_tensor_kernel<Row, V, T, kDepth, kSkip>
                                       <<<blocks, kBlock, 0, as_cuda(stream)>>>(
                                           la, c, coeffs_on_device, skip_args);
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

// Every row of MT_OPTIMIZER_STEPS, for float and double.
#define MT_OPTIMIZER_STEP_MULTI_CUDA(Row)                                                          \
  template void optimizer_step_multi_cuda<Row, float>(const TensorTable<float>&, const Row::Args&, \
                                                      const Row::Coeffs<float>*,                   \
                                                      const SkipOnDevice*, CUstream_st*);          \
  template void optimizer_step_multi_cuda<Row, double>(                                            \
      const TensorTable<double>&, const Row::Args&, const Row::Coeffs<double>*,                    \
      const SkipOnDevice*, CUstream_st*);
MT_OPTIMIZER_STEPS(MT_OPTIMIZER_STEP_MULTI_CUDA)
#undef MT_OPTIMIZER_STEP_MULTI_CUDA

}  // namespace minitrain
