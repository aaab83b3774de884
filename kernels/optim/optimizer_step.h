#pragma once
// One fused optimizer update of one parameter tensor, for any row of MT_OPTIMIZER_STEPS
// (kernels/optim/optimizer_math.h, Note [one row per optimizer]): a single pass that reads the
// parameter, its gradient and the state the variant uses and writes them back, where torch's
// single-tensor path makes one pass per in-place op. Memory-bound: 12 bytes an element (float32)
// plus 8 per state tensor, against a handful of flops (a square root and a division for the
// adaptive ones). The CPU loop (optimizer_step.cpp) and the CUDA kernel (optimizer_step.cu) are
// written once, over the row; many tensors at once: multi_tensor_optim.h.

#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "kernels/optim/optimizer_math.h"

struct CUstream_st;

namespace minitrain {

/// The state operands of a row's step, in its kStateNames order; the ones its variant does not
/// use may be null (and their tensors undefined).
template <typename Row>
using StepState = std::array<Tensor*, Row::kStates>;

/// One update of `param` by the row (one of MT_OPTIMIZER_STEPS). Each state tensor the
/// variant uses has param's shape, dtype and device (torch's state starts at zero; SGD's buffer
/// need not be initialised at its first step). Throws the kernels/check.h errors for mismatched
/// operands, naming the operand (kStateNames), before writing.
/// With `coeffs_on_device` (a CUDA device pointer to this step's Row::Coeffs<T>) the kernel reads
/// the factors there and of `args` only the variant: Note [step scalars on the device] in
/// kernels/optim/multi_tensor_optim.h. It must be null on the CPU.
/// With `found_inf` (a float32 flag on param's device) the update does nothing when the flag is
/// non-zero, read by the kernel: Note [skip on the device] (kernels/optim/skip_on_device.h). Only
/// for rows whose factors do not depend on a step count the device would have to keep.
template <typename Row>
void optimizer_step(Tensor& param, const Tensor& grad, const StepState<Row>& state,
                    const typename Row::Args& args, const void* coeffs_on_device = nullptr,
                    const Tensor* found_inf = nullptr);

// ---- implementations (every row, float and double, is instantiated); state[k] may be null
// where the variant does not use it ----
template <typename Row, typename T>
void optimizer_step_cpu(T* param, const T* grad, const std::array<T*, Row::kStates>& state,
                        int64_t n, const typename Row::Args& args);
template <typename Row, typename T>
void optimizer_step_cuda(T* param, const T* grad, const std::array<T*, Row::kStates>& state,
                         int64_t n, const typename Row::Args& args,
                         const typename Row::template Coeffs<T>* coeffs_on_device,
                         const float* found_inf, CUstream_st* stream);

}  // namespace minitrain
