#pragma once
// Fused optimizer steps over many tensors at once (multi-tensor apply,
// kernels/multi_tensor_apply.h): SGD (momentum, dampening, nesterov, weight decay) and Adam /
// AdamW (amsgrad, bias correction) applied to a list of tensors of one device and dtype that share
// one step's arguments. On the GPU one launch covers up to 30-64 tensors; on the CPU one
// fork/join covers the whole list (the one-tensor loops fork once per tensor and run small
// tensors on one thread). The per-element math is kernels/optim/optimizer_math.h, so results equal
// one sgd_step / adam_step per tensor bit for bit.

#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/optim/adam_step.h"
#include "kernels/optim/sgd_step.h"

struct CUstream_st;

namespace minitrain {

/// sgd_step(params[k], grads[k], momentum_bufs[k], args) for every k, in one pass. momentum_bufs
/// has params.size() entries with momentum and may be empty without. Every operand is checked
/// (one device, one dtype, matching shapes) before any is written; errors name the index.
void sgd_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    std::vector<Tensor>& momentum_bufs, const SGDStepArgs& args);

/// adam_step(params[k], grads[k], exp_avgs[k], exp_avg_sqs[k], max_exp_avg_sqs[k], args) for
/// every k, in one pass. max_exp_avg_sqs has params.size() entries with amsgrad and may be empty
/// without.
void adam_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     std::vector<Tensor>& exp_avgs, std::vector<Tensor>& exp_avg_sqs,
                     std::vector<Tensor>& max_exp_avg_sqs, const AdamStepArgs& args);

// ---- implementations (float and double are instantiated) ----

/// Raw operands of a tensor list: ptrs[k][s] is operand s of tensor k (SGD: param, grad, buf;
/// Adam: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq), null where unused. grad is stored
/// without const to keep one table type; the kernels only read it.
template <typename T>
struct TensorTable {
  std::vector<std::array<T*, 5>> ptrs;
  std::vector<int64_t> sizes;
};

template <typename T>
void sgd_step_multi_cpu(const TensorTable<T>& t, const SGDStepArgs& args);
template <typename T>
void adam_step_multi_cpu(const TensorTable<T>& t, const AdamStepArgs& args);
template <typename T>
void sgd_step_multi_cuda(const TensorTable<T>& t, const SGDStepArgs& args, CUstream_st* stream);
template <typename T>
void adam_step_multi_cuda(const TensorTable<T>& t, const AdamStepArgs& args, CUstream_st* stream);

}  // namespace minitrain
