// Multi-tensor optimizer steps: entry points and the CPU loop. The CPU version cuts the whole
// list into chunks of kElementwiseGrain elements (tensor boundaries respected) and runs the
// chunks in one parallel_for, each through the one-tensor loop (optimizer_step_cpu, which runs a
// chunk inline), so the math and the bits are those of the per-tensor path.

#include "kernels/optim/multi_tensor_optim.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/optim/optimizer_step.h"

namespace minitrain {

namespace {

struct Chunk {
  std::size_t tensor;
  int64_t begin, len;
};

template <typename T, typename F>
void for_each_chunk(const TensorTable<T>& t, F&& f) {
  std::vector<Chunk> chunks;
  int64_t total = 0;
  for (std::size_t k = 0; k < t.sizes.size(); ++k) {
    for (int64_t b = 0; b < t.sizes[k]; b += kElementwiseGrain)
      chunks.push_back({k, b, std::min(kElementwiseGrain, t.sizes[k] - b)});
    total += t.sizes[k];
  }
  // Below two grains one thread is faster than a fork/join (as parallel_for decides for one
  // tensor).
  const int64_t grain = total < 2 * kElementwiseGrain ? int64_t(chunks.size()) : 1;
  parallel_for(int64_t(chunks.size()), std::max<int64_t>(grain, 1),
               [&](int64_t begin, int64_t end) {
                 for (int64_t c = begin; c < end; ++c) f(chunks[size_t(c)]);
               });
}

template <typename T>
T* at(T* p, int64_t offset) {
  return p == nullptr ? nullptr : p + offset;
}

void check_list_size(const char* op, const char* what, std::size_t got, std::size_t want) {
  MT_CHECK_AS(ValueError, got == want, op, ": ", what, " has ", got, " tensors but params has ",
              want, "; give one per parameter");
}

void check_skip(const char* op, std::size_t n, const SkipOnDevice* skip) {
  if (skip == nullptr) return;
  MT_CHECK_AS(ValueError, skip->args.found_inf != nullptr && skip->counts.size() == n, op,
              ": a skippable step needs the inf flag and one count per tensor (", n, "), got ",
              skip->counts.size());
}

void check_coeffs_on_device(const char* op, const Device& device, const void* coeffs_on_device) {
  MT_CHECK_AS(DeviceError, coeffs_on_device == nullptr || device.is_cuda(), op,
              ": step factors in device memory need parameters on a CUDA device, not ", device,
              "; on the CPU pass them by value (coeffs_on_device = nullptr)");
}

}  // namespace

// ---- CPU ----

// With `skip` (Note [skip on the device]): the chunk starting a tensor writes its next count;
// every chunk reads the current one, so all of a tensor's chunks agree.

template <typename Row, typename T>
void optimizer_step_multi_cpu(const TensorTable<T>& t, const typename Row::Args& args,
                              const SkipOnDevice* skip) {
  for_each_chunk(t, [&](const Chunk& c) {
    const auto& p = t.ptrs[c.tensor];
    typename Row::Args a = args;
    if (skip != nullptr) {
      const int64_t taken = take_counted_step(skip->args, skip->counts[c.tensor], c.begin == 0);
      if (taken < 0) return;
      // The double factors of step taken + 1, rounded by coeffs() in the one-tensor loop.
      Row::counted(a, skip_lr(skip->args), skip->args.bias_table, taken);
    }
    std::array<T*, Row::kStates> state{};
    for (int k = 0; k < Row::kStates; ++k) state[std::size_t(k)] = at(p[2 + k], c.begin);
    optimizer_step_cpu<Row, T>(p[0] + c.begin, p[1] + c.begin, state, c.len, a);
  });
}

// ---- entry point ----

template <typename Row>
void optimizer_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const StepStateLists<Row>& state, const typename Row::Args& args,
                          const void* coeffs_on_device, const SkipOnDevice* skip) {
  const char* op = Row::kMultiName;
  const std::size_t n = params.size();
  if (n == 0) return;
  // Which state lists this step's variant uses: the others may be null or empty.
  bool used[Row::kStates] = {};
  Row::dispatch(args, [&](auto variant) {
    using V = decltype(variant);
    for (int k = 0; k < Row::kStates; ++k) used[k] = Row::template uses<V>(k);
  });
  check_list_size(op, "grads", grads.size(), n);
  for (int k = 0; k < Row::kStates; ++k)
    if (used[k]) {
      const std::string list = std::string(Row::kStateNames[k]) + "s";
      check_list_size(op, list.c_str(), state[std::size_t(k)] ? state[std::size_t(k)]->size() : 0,
                      n);
    }
  for (std::size_t k = 0; k < n; ++k) {
    const std::string who = std::string(op) + ": tensor " + std::to_string(k);
    // Each operand against the tensor's param, and the param against the list's first.
    std::vector<Operand> operands = {{"grad", grads[k]}};
    for (int s = 0; s < Row::kStates; ++s)
      if (used[s]) operands.push_back({Row::kStateNames[s], (*state[std::size_t(s)])[k]});
    check_compatible(who.c_str(), {{"param", params[k]}, {"params[0]", params[0]}});
    for (const Operand& o : operands) {
      check_compatible(who.c_str(), {{"param", params[k]}, o});
      check_same_shape(who.c_str(), {{"param", params[k]}, o});
    }
  }
  const Device device = params[0].device();
  check_coeffs_on_device(op, device, coeffs_on_device);
  check_skip(op, n, skip);
  MT_CHECK_AS(ValueError,
              !Row::kFactorsOfCount || skip == nullptr || skip->args.bias_table != nullptr, op,
              ": a skippable step of this optimizer needs the bias-correction table");
  // A captured step's rate must come from memory too: a replay would repeat skip->args.lr.
  MT_CHECK_AS(ValueError,
              !Row::kFactorsOfCount || skip == nullptr || coeffs_on_device == nullptr ||
                  skip->args.lr_on_device != nullptr,
              op,
              ": a skippable step with its factors on the device reads its rate there too "
              "(SkipArgs::lr_on_device)");
  dispatch_float(params[0].dtype(), [&](auto zero) {
    using T = decltype(zero);
    // Raw pointers of every operand: param, grad, then the state in the row's order.
    TensorTable<T> t;
    t.ptrs.resize(n);
    t.sizes.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      t.ptrs[k].fill(nullptr);
      t.ptrs[k][0] = params[k].template data<T>();
      t.ptrs[k][1] = const_cast<T*>(grads[k].template data<T>());
      for (int s = 0; s < Row::kStates; ++s)
        if (used[s]) t.ptrs[k][std::size_t(2 + s)] = (*state[std::size_t(s)])[k].template data<T>();
      t.sizes[k] = params[k].numel();
    }
    on_device(
        op, device, [&] { optimizer_step_multi_cpu<Row, T>(t, args, skip); },
        [&](auto stream) {
          optimizer_step_multi_cuda<Row, T>(
              t, args, static_cast<const typename Row::template Coeffs<T>*>(coeffs_on_device), skip,
              stream);
        });
  });
}

// Every row of MT_OPTIMIZER_STEPS, for float and double.
#define MT_OPTIMIZER_STEP_MULTI_CPU(Row)                                                          \
  template void optimizer_step_multi<Row>(std::vector<Tensor>&, const std::vector<Tensor>&,       \
                                          const StepStateLists<Row>&, const Row::Args&,           \
                                          const void*, const SkipOnDevice*);                      \
  template void optimizer_step_multi_cpu<Row, float>(const TensorTable<float>&, const Row::Args&, \
                                                     const SkipOnDevice*);                        \
  template void optimizer_step_multi_cpu<Row, double>(const TensorTable<double>&,                 \
                                                      const Row::Args&, const SkipOnDevice*);
MT_OPTIMIZER_STEPS(MT_OPTIMIZER_STEP_MULTI_CPU)
#undef MT_OPTIMIZER_STEP_MULTI_CPU

void store_step_scalars(Tensor& dst, const std::vector<unsigned char>& bytes) {
  MT_CHECK_AS(ValueError, dst.defined() && dst.nbytes() >= bytes.size(),
              "store_step_scalars: ", bytes.size(), " bytes do not fit the destination of ",
              dst.defined() ? dst.nbytes() : 0, " bytes");
  if (bytes.empty()) return;
  auto* out = static_cast<unsigned char*>(dst.raw_data());
  on_device(
      "store_step_scalars", dst.device(), [&] { std::memcpy(out, bytes.data(), bytes.size()); },
      [&](auto stream) { store_step_scalars_cuda(out, bytes.data(), bytes.size(), stream); });
}

}  // namespace minitrain
