#pragma once
// Fused optimizer steps over many tensors at once (multi-tensor apply,
// kernels/multi_tensor_apply.h): SGD (momentum, dampening, nesterov, weight decay) and Adam /
// AdamW (amsgrad, bias correction) applied to a list of tensors of one device and dtype that share
// one step's arguments. On the GPU one launch covers up to 30-64 tensors; on the CPU one
// fork/join covers the whole list (the one-tensor loops fork once per tensor and run small
// tensors on one thread). The per-element math is kernels/optim/optimizer_math.h, so results equal
// one sgd_step / adam_step per tensor bit for bit.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/optim/adam_step.h"
#include "kernels/optim/sgd_step.h"
#include "kernels/optim/skip_on_device.h"

struct CUstream_st;

namespace minitrain {

// Note [step scalars on the device]: a kernel's arguments are copied when it is launched, and a
// CUDA graph records them once, at capture: a replayed optimizer launch would repeat the learning
// rate and bias corrections of the captured step. So the optimizers can keep a step's factors
// (SgdCoeffs / AdamCoeffs, rounded to the element type on the host exactly as for a launch) in a
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

/// sgd_step(params[k], grads[k], momentum_bufs[k], args) for every k, in one pass. momentum_bufs
/// has params.size() entries with momentum and may be empty without. Every operand is checked
/// (one device, one dtype, matching shapes) before any is written; errors name the index.
/// With `coeffs_on_device` (a CUDA device pointer to the SgdCoeffs<T> of this step, T the
/// parameters' type) the kernels read lr, weight decay, momentum and dampening there, and of
/// `args` only the variant (which terms exist, first step, nesterov): Note [step scalars on the
/// device]. It must be null on the CPU.
/// With `skip` the pass does nothing when *skip->args.found_inf is set, and a tensor whose count
/// is 0 takes the buffer's first step (buf = g) whatever args.first_step says.
void sgd_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    std::vector<Tensor>& momentum_bufs, const SGDStepArgs& args,
                    const void* coeffs_on_device = nullptr, const SkipOnDevice* skip = nullptr);

/// adam_step(params[k], grads[k], exp_avgs[k], exp_avg_sqs[k], max_exp_avg_sqs[k], args) for
/// every k, in one pass. max_exp_avg_sqs has params.size() entries with amsgrad and may be empty
/// without. `coeffs_on_device`: an AdamCoeffs<T> in device memory, as for sgd_step_multi.
/// With `skip` the pass does nothing when the flag is set, and tensor k's step_size and
/// sqrt(1 - beta2^t) are those of t = its count + 1 (skip->args.lr and bias_table), not args'.
/// Both (a captured skippable step): the other factors from `coeffs_on_device`, the rate from
/// skip->args.lr_on_device (ValueError without it).
void adam_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     std::vector<Tensor>& exp_avgs, std::vector<Tensor>& exp_avg_sqs,
                     std::vector<Tensor>& max_exp_avg_sqs, const AdamStepArgs& args,
                     const void* coeffs_on_device = nullptr, const SkipOnDevice* skip = nullptr);

/// Bytes stored into `dst` (a tensor of `dst.nbytes() >= bytes.size()`) at byte 0, queued on the
/// device's current stream as kernel launches that carry the bytes as their argument (one launch
/// per kStepScalarsLaunchBytes): Note [step scalars on the device]. On the CPU, a memcpy.
void store_step_scalars(Tensor& dst, const std::vector<unsigned char>& bytes);
constexpr std::size_t kStepScalarsLaunchBytes = 512;

// ---- implementations (float and double are instantiated) ----

/// Raw operands of a tensor list: ptrs[k][s] is operand s of tensor k (SGD: param, grad, buf;
/// Adam: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq), null where unused. grad is stored
/// without const to keep one table type; the kernels only read it.
template <typename T>
struct TensorTable {
  std::vector<std::array<T*, 5>> ptrs;
  std::vector<int64_t> sizes;
};

/// `skip` may be null (no skipping).
template <typename T>
void sgd_step_multi_cpu(const TensorTable<T>& t, const SGDStepArgs& args,
                        const SkipOnDevice* skip = nullptr);
template <typename T>
void adam_step_multi_cpu(const TensorTable<T>& t, const AdamStepArgs& args,
                         const SkipOnDevice* skip = nullptr);
template <typename T>
void sgd_step_multi_cuda(const TensorTable<T>& t, const SGDStepArgs& args,
                         const SgdCoeffs<T>* coeffs_on_device, const SkipOnDevice* skip,
                         CUstream_st* stream);
template <typename T>
void adam_step_multi_cuda(const TensorTable<T>& t, const AdamStepArgs& args,
                          const AdamCoeffs<T>* coeffs_on_device, const SkipOnDevice* skip,
                          CUstream_st* stream);
void store_step_scalars_cuda(unsigned char* dst, const unsigned char* bytes, std::size_t n,
                             CUstream_st* stream);

}  // namespace minitrain
