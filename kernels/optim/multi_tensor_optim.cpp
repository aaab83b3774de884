// Multi-tensor optimizer steps: entry points and the CPU loop. The CPU version cuts the whole
// list into chunks of kElementwiseGrain elements (tensor boundaries respected) and runs the
// chunks in one parallel_for, each through the one-tensor loop (sgd_step_cpu / adam_step_cpu,
// which runs a chunk inline), so the math and the bits are those of the per-tensor path.

#include "kernels/optim/multi_tensor_optim.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

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

// Raw pointers of every operand; slots beyond `lists` stay null.
template <typename T>
TensorTable<T> table_of(std::initializer_list<const std::vector<Tensor>*> lists, std::size_t n) {
  TensorTable<T> t;
  t.ptrs.resize(n);
  t.sizes.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    t.ptrs[k].fill(nullptr);
    int s = 0;
    for (const std::vector<Tensor>* list : lists) {
      if (list != nullptr) t.ptrs[k][s] = (*list)[k].template data<T>();
      ++s;
    }
    t.sizes[k] = (*lists.begin())->at(k).numel();
  }
  return t;
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

template <typename T>
void sgd_step_multi_cpu(const TensorTable<T>& t, const SGDStepArgs& args,
                        const SkipOnDevice* skip) {
  for_each_chunk(t, [&](const Chunk& c) {
    const auto& p = t.ptrs[c.tensor];
    SGDStepArgs a = args;
    if (skip != nullptr) {
      const int64_t taken = take_counted_step(skip->args, skip->counts[c.tensor], c.begin == 0);
      if (taken < 0) return;
      a.first_step = taken == 0;
    }
    sgd_step_cpu<T>(p[0] + c.begin, p[1] + c.begin, at(p[2], c.begin), c.len, a);
  });
}

template <typename T>
void adam_step_multi_cpu(const TensorTable<T>& t, const AdamStepArgs& args,
                         const SkipOnDevice* skip) {
  for_each_chunk(t, [&](const Chunk& c) {
    const auto& p = t.ptrs[c.tensor];
    AdamStepArgs a = args;
    if (skip != nullptr) {
      const int64_t taken = take_counted_step(skip->args, skip->counts[c.tensor], c.begin == 0);
      if (taken < 0) return;
      // The double factors of step taken + 1 (adam_factors_at's arithmetic, rounded by
      // adam_coeffs in the one-tensor loop).
      a.step_size = skip_lr(skip->args) / skip->args.bias_table[2 * taken];
      a.bias_correction2_sqrt = optmath::sqrt(skip->args.bias_table[2 * taken + 1]);
    }
    adam_step_cpu<T>(p[0] + c.begin, p[1] + c.begin, p[2] + c.begin, p[3] + c.begin,
                     at(p[4], c.begin), c.len, a);
  });
}

template void sgd_step_multi_cpu<float>(const TensorTable<float>&, const SGDStepArgs&,
                                        const SkipOnDevice*);
template void sgd_step_multi_cpu<double>(const TensorTable<double>&, const SGDStepArgs&,
                                         const SkipOnDevice*);
template void adam_step_multi_cpu<float>(const TensorTable<float>&, const AdamStepArgs&,
                                         const SkipOnDevice*);
template void adam_step_multi_cpu<double>(const TensorTable<double>&, const AdamStepArgs&,
                                          const SkipOnDevice*);

// ---- entry points ----

void sgd_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    std::vector<Tensor>& momentum_bufs, const SGDStepArgs& args,
                    const void* coeffs_on_device, const SkipOnDevice* skip) {
  const char* op = "sgd_step_multi";
  const std::size_t n = params.size();
  if (n == 0) return;
  const bool momentum = args.momentum != 0.0;
  check_list_size(op, "grads", grads.size(), n);
  if (momentum) check_list_size(op, "momentum_bufs", momentum_bufs.size(), n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::string who = std::string(op) + ": tensor " + std::to_string(k);
    if (momentum) {
      check_compatible(who.c_str(), {{"param", params[k]},
                                     {"grad", grads[k]},
                                     {"momentum_buf", momentum_bufs[k]},
                                     {"params[0]", params[0]}});
      check_same_shape(
          who.c_str(),
          {{"param", params[k]}, {"grad", grads[k]}, {"momentum_buf", momentum_bufs[k]}});
    } else {
      check_compatible(who.c_str(),
                       {{"param", params[k]}, {"grad", grads[k]}, {"params[0]", params[0]}});
      check_same_shape(who.c_str(), {{"param", params[k]}, {"grad", grads[k]}});
    }
  }
  const Device device = params[0].device();
  check_coeffs_on_device(op, device, coeffs_on_device);
  check_skip(op, n, skip);
  dispatch_float(params[0].dtype(), [&](auto zero) {
    using T = decltype(zero);
    const TensorTable<T> t = table_of<T>({&params, &grads, momentum ? &momentum_bufs : nullptr}, n);
    on_device(
        op, device, [&] { sgd_step_multi_cpu<T>(t, args, skip); },
        [&](auto stream) {
          sgd_step_multi_cuda<T>(t, args, static_cast<const SgdCoeffs<T>*>(coeffs_on_device), skip,
                                 stream);
        });
  });
}

void adam_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     std::vector<Tensor>& exp_avgs, std::vector<Tensor>& exp_avg_sqs,
                     std::vector<Tensor>& max_exp_avg_sqs, const AdamStepArgs& args,
                     const void* coeffs_on_device, const SkipOnDevice* skip) {
  const char* op = "adam_step_multi";
  const std::size_t n = params.size();
  if (n == 0) return;
  check_list_size(op, "grads", grads.size(), n);
  check_list_size(op, "exp_avgs", exp_avgs.size(), n);
  check_list_size(op, "exp_avg_sqs", exp_avg_sqs.size(), n);
  if (args.amsgrad) check_list_size(op, "max_exp_avg_sqs", max_exp_avg_sqs.size(), n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::string who = std::string(op) + ": tensor " + std::to_string(k);
    check_compatible(who.c_str(), {{"param", params[k]},
                                   {"grad", grads[k]},
                                   {"exp_avg", exp_avgs[k]},
                                   {"exp_avg_sq", exp_avg_sqs[k]},
                                   {"params[0]", params[0]}});
    check_same_shape(who.c_str(), {{"param", params[k]},
                                   {"grad", grads[k]},
                                   {"exp_avg", exp_avgs[k]},
                                   {"exp_avg_sq", exp_avg_sqs[k]}});
    if (args.amsgrad) {
      check_compatible(who.c_str(), {{"param", params[k]}, {"max_exp_avg_sq", max_exp_avg_sqs[k]}});
      check_same_shape(who.c_str(), {{"param", params[k]}, {"max_exp_avg_sq", max_exp_avg_sqs[k]}});
    }
  }
  const Device device = params[0].device();
  check_coeffs_on_device(op, device, coeffs_on_device);
  check_skip(op, n, skip);
  MT_CHECK_AS(ValueError, skip == nullptr || skip->args.bias_table != nullptr, op,
              ": a skippable Adam step needs the bias-correction table");
  // A captured step's rate must come from memory too: a replay would repeat skip->args.lr.
  MT_CHECK_AS(ValueError,
              skip == nullptr || coeffs_on_device == nullptr || skip->args.lr_on_device != nullptr,
              op,
              ": a skippable step with its factors on the device reads its rate there too "
              "(SkipArgs::lr_on_device)");
  dispatch_float(params[0].dtype(), [&](auto zero) {
    using T = decltype(zero);
    const TensorTable<T> t = table_of<T>(
        {&params, &grads, &exp_avgs, &exp_avg_sqs, args.amsgrad ? &max_exp_avg_sqs : nullptr}, n);
    on_device(
        op, device, [&] { adam_step_multi_cpu<T>(t, args, skip); },
        [&](auto stream) {
          adam_step_multi_cuda<T>(t, args, static_cast<const AdamCoeffs<T>*>(coeffs_on_device),
                                  skip, stream);
        });
  });
}

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
