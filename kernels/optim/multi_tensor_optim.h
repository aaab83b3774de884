#pragma once
// Fused optimizer steps over many tensors at once (multi-tensor apply,
// kernels/multi_tensor_apply.h), for every row of MT_OPTIMIZER_STEPS (Note [one row per optimizer]
// in kernels/optim/optimizer_math.h): one row's step applied to a list of tensors of one device
// and dtype that share one step's arguments. On the GPU one launch covers up to 30-64 tensors; on
// the CPU one fork/join covers the whole list (the one-tensor loops fork once per tensor and run
// small tensors on one thread). The per-element math is the row's, so results equal one
// optimizer_step per tensor bit for bit.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/optim/optimizer_math.h"
#include "kernels/optim/skip_on_device.h"

struct CUstream_st;

namespace minitrain {

// Note [step scalars on the device]: a kernel's arguments are copied when it is launched, and a
// CUDA graph records them once, at capture: a replayed optimizer launch would repeat the learning
// rate and bias corrections of the captured step. So the optimizers can keep a step's factors
// (the row's Coeffs<T>, rounded to the element type on the host exactly as for a launch) in a
// small device buffer, written before each step by store_step_scalars (one launch whose argument
// is the bytes), and the update kernels read them there (`coeffs_on_device`). The kernel that
// stores them is launched eagerly before each replay, so each replay reads its own step's values;
// as a kernel argument the values need no pinned buffer that the host would have to keep alive
// and unchanged until the copy has run. The factors are the host's, so the bits are those of the
// by-value launch. (torch's capturable Adam computes the bias corrections on the device instead,
// from a step count there; CUDA's pow may then differ from the host's in the last bit.)

/// A step that the device skips when an inf flag is set: Note [skip on the device]
/// (kernels/optim/skip_on_device.h). `counts[k]` points at tensor k's current count of steps taken
/// (one element of its float pair, host memory on the CPU, device memory on a GPU).
struct SkipOnDevice {
  SkipArgs args;
  std::vector<float*> counts;
};

/// The state lists of a row's multi-tensor step, in its kStateNames order: list k has one tensor
/// per parameter where the variant uses state k, and may be null (or empty) where it does not.
template <typename Row>
using StepStateLists = std::array<std::vector<Tensor>*, Row::kStates>;

/// optimizer_step<Row>(params[k], grads[k], {state[0][k], ...}, args) for every k, in one pass.
/// Every operand is checked (one device, one dtype, matching shapes) before any is written;
/// errors name the index and the list ("adam_step_multi: max_exp_avg_sqs has 0 tensors but
/// params has 2").
/// With `coeffs_on_device` (a CUDA device pointer to the Row::Coeffs<T> of this step, T the
/// parameters' type) the kernels read the factors there, and of `args` only the variant: Note
/// [step scalars on the device]. It must be null on the CPU.
/// With `skip` the pass does nothing when *skip->args.found_inf is set, and what depends on a
/// tensor's count of steps taken is that count's (the row's counted(): SGD's first step takes
/// buf = g whatever args.first_step says; Adam's step_size and sqrt(1 - beta2^t) are those of
/// t = count + 1, from skip->args.lr and bias_table). Both (a captured skippable step): the
/// other factors from `coeffs_on_device`, Adam's rate from skip->args.lr_on_device (ValueError
/// without it).
template <typename Row>
void optimizer_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const StepStateLists<Row>& state, const typename Row::Args& args,
                          const void* coeffs_on_device = nullptr,
                          const SkipOnDevice* skip = nullptr);

/// Bytes stored into `dst` (a tensor of `dst.nbytes() >= bytes.size()`) at byte 0, queued on the
/// device's current stream as kernel launches that carry the bytes as their argument (one launch
/// per kStepScalarsLaunchBytes): Note [step scalars on the device]. On the CPU, a memcpy.
void store_step_scalars(Tensor& dst, const std::vector<unsigned char>& bytes);
constexpr std::size_t kStepScalarsLaunchBytes = 512;

// ---- implementations (float and double are instantiated) ----

/// Raw operands of a tensor list: ptrs[k][s] is operand s of tensor k (param, grad, then the row's
/// state in its order), null where unused. grad is stored without const to keep one table type;
/// the kernels only read it.
template <typename T>
struct TensorTable {
  std::vector<std::array<T*, 2 + kMaxOptimizerStates>> ptrs;
  std::vector<int64_t> sizes;
};

/// `skip` may be null (no skipping).
template <typename Row, typename T>
void optimizer_step_multi_cpu(const TensorTable<T>& t, const typename Row::Args& args,
                              const SkipOnDevice* skip = nullptr);
template <typename Row, typename T>
void optimizer_step_multi_cuda(const TensorTable<T>& t, const typename Row::Args& args,
                               const typename Row::template Coeffs<T>* coeffs_on_device,
                               const SkipOnDevice* skip, CUstream_st* stream);
void store_step_scalars_cuda(unsigned char* dst, const unsigned char* bytes, std::size_t n,
                             CUstream_st* stream);

}  // namespace minitrain
