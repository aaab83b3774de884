// The fused optimizer step of every row (Note [one row per optimizer] in optimizer_math.h): the
// entry point and the CPU loop. One pass over parameter, gradient and state; the variant is a
// template parameter, so the loop body is branch-free and the compiler vectorises it.

#include "kernels/optim/optimizer_step.h"

#include <vector>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"

namespace minitrain {

// ---- CPU reference ----

namespace {

static_assert(kMaxOptimizerStates == 3, "optimizer_range takes three state pointers");

// One range of elements. Each operand is a restrict pointer of its own (the state too, the
// unused ones null and never touched), so the compiler knows they do not overlap and vectorises.
// The state is copied into a small array for update() and back: loads and stores of what the
// variant uses, nothing else.
template <typename Row, typename V, typename T>
inline void optimizer_range(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ s0,
                            T* __restrict__ s1, T* __restrict__ s2, int64_t n,
                            const typename Row::template Coeffs<T>& c) {
  constexpr int K = Row::kStates;
  for (int64_t i = 0; i < n; ++i) {
    T s[kMaxOptimizerStates] = {};
    if constexpr (Row::template reads<V>(0)) s[0] = s0[i];
    if constexpr (K > 1 && Row::template reads<V>(1)) s[1] = s1[i];
    if constexpr (K > 2 && Row::template reads<V>(2)) s[2] = s2[i];
    Row::template update<V>(p[i], g[i], s, c);
    if constexpr (Row::template uses<V>(0)) s0[i] = s[0];
    if constexpr (K > 1 && Row::template uses<V>(1)) s1[i] = s[1];
    if constexpr (K > 2 && Row::template uses<V>(2)) s2[i] = s[2];
  }
}

// Note [AVX2 clones]: the build targets baseline x86-64 (SSE2, four floats a vector); the loop is
// compiled again for AVX2 (eight) and picked at run time. Adam's loop is bound by its square root
// and two divisions, not by memory: the AVX2 clone took 650 us against 1230 us for 1.3M floats on
// one core here. Both clones make the same IEEE operations in the same order (AVX2 without FMA,
// so nothing is contracted), hence the same bits (AdamStep.Avx2CloneMatchesScalarLoopBitForBit).
#if MINITRAIN_X86_CLONES
template <typename Row, typename V, typename T>
__attribute__((target("avx2"))) void optimizer_range_avx2(
    T* __restrict__ p, const T* __restrict__ g, T* __restrict__ s0, T* __restrict__ s1,
    T* __restrict__ s2, int64_t n, const typename Row::template Coeffs<T>& c) {
  optimizer_range<Row, V>(p, g, s0, s1, s2, n, c);
}
#endif

template <typename T>
T* at(T* p, int64_t offset) {
  return p == nullptr ? nullptr : p + offset;
}

}  // namespace

template <typename Row, typename T>
void optimizer_step_cpu(T* param, const T* grad, const std::array<T*, Row::kStates>& state,
                        int64_t n, const typename Row::Args& args) {
  const auto c = Row::template coeffs<T>(args);
  T* s[kMaxOptimizerStates] = {};
  for (int k = 0; k < Row::kStates; ++k) s[k] = state[std::size_t(k)];
  Row::dispatch(args, [&](auto variant) {
    using V = decltype(variant);
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
#if MINITRAIN_X86_CLONES
      if (cpu_has_avx2()) {
        optimizer_range_avx2<Row, V>(param + begin, grad + begin, at(s[0], begin), at(s[1], begin),
                                     at(s[2], begin), end - begin, c);
        return;
      }
#endif
      optimizer_range<Row, V>(param + begin, grad + begin, at(s[0], begin), at(s[1], begin),
                              at(s[2], begin), end - begin, c);
    });
  });
}

// ---- entry point ----

template <typename Row>
void optimizer_step(Tensor& param, const Tensor& grad, const StepState<Row>& state,
                    const typename Row::Args& args, const void* coeffs_on_device,
                    const Tensor* found_inf) {
  const char* op = Row::kName;
  MT_CHECK_AS(DeviceError, coeffs_on_device == nullptr || param.device().is_cuda(), op,
              ": step factors in device memory need a parameter on a CUDA device, not ",
              param.device(), "; on the CPU pass them by value (coeffs_on_device = nullptr)");
  // Which state operands this step's variant uses: the others may be null or undefined.
  bool used[Row::kStates] = {};
  Row::dispatch(args, [&](auto variant) {
    using V = decltype(variant);
    for (int k = 0; k < Row::kStates; ++k) used[k] = Row::template uses<V>(k);
  });
  // Each operand against param.
  std::vector<Operand> operands = {{"grad", grad}};
  const Tensor none;
  for (int k = 0; k < Row::kStates; ++k)
    if (used[k]) {
      const Tensor* t = state[std::size_t(k)];
      operands.push_back({Row::kStateNames[k], t != nullptr ? *t : none});
    }
  for (const Operand& o : operands) {
    check_compatible(op, {{"param", param}, o});
    check_same_shape(op, {{"param", param}, o});
  }
  if (found_inf != nullptr)
    MT_CHECK_AS(DeviceError,
                found_inf->defined() && found_inf->dtype() == DType::Float32 &&
                    found_inf->device() == param.device(),
                op, ": the inf flag must be a float32 tensor on the parameter's device ",
                param.device());
  const float* skip_flag = found_inf != nullptr ? found_inf->data<float>() : nullptr;
  const int64_t n = param.numel();
  auto pointers = [&](auto zero) {
    using T = decltype(zero);
    std::array<T*, Row::kStates> p{};
    for (int k = 0; k < Row::kStates; ++k)
      if (used[k]) p[std::size_t(k)] = state[std::size_t(k)]->template data<T>();
    return p;
  };
  dispatch_op(
      op, param.device(), param.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        if (skip_flag != nullptr && *skip_flag != 0.0f) return;  // the kernel's early return
        optimizer_step_cpu<Row, T>(param.data<T>(), grad.data<T>(), pointers(zero), n, args);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        optimizer_step_cuda<Row, T>(
            param.data<T>(), grad.data<T>(), pointers(zero), n, args,
            static_cast<const typename Row::template Coeffs<T>*>(coeffs_on_device), skip_flag,
            stream);
      });
}

// Every row of MT_OPTIMIZER_STEPS, for float and double.
#define MT_OPTIMIZER_STEP_CPU(Row)                                                                 \
  template void optimizer_step<Row>(Tensor&, const Tensor&, const StepState<Row>&,                 \
                                    const Row::Args&, const void*, const Tensor*);                 \
  template void optimizer_step_cpu<Row, float>(                                                    \
      float*, const float*, const std::array<float*, Row::kStates>&, int64_t, const Row::Args&);   \
  template void optimizer_step_cpu<Row, double>(double*, const double*,                            \
                                                const std::array<double*, Row::kStates>&, int64_t, \
                                                const Row::Args&);
MT_OPTIMIZER_STEPS(MT_OPTIMIZER_STEP_CPU)
#undef MT_OPTIMIZER_STEP_CPU

}  // namespace minitrain
