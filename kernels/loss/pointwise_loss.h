#pragma once
// The elementwise losses beside MSE, torch.nn semantics: L1Loss, SmoothL1Loss (beta), HuberLoss
// (delta), BCEWithLogitsLoss (pos_weight) and KLDivLoss (log_target), each with reduction mean
// (the default), sum or none (kl_div also batchmean: the sum over the first extent), its
// gradient, and a fused forward + backward. The per-element formulas are in
// kernels/loss/loss_math.h. Memory-bound: two reads per element (and one write for none or the
// gradient); mean and sum add a deterministic reduction to one number, as mse_loss does.

#include <cstdint>

#include "core/tensor.h"
#include "kernels/loss/loss_math.h"
#include "kernels/loss/reduction.h"

struct CUstream_st;

namespace minitrain {

enum class PointwiseLossKind { L1, SmoothL1, Huber, BceWithLogits, KlDiv };

/// Which loss and its setting. `param` is smooth_l1's beta (>= 0; 0 is exactly l1, as torch),
/// huber's delta (> 0) or kl_div's log_target (1: the target holds log-probabilities, 0: not),
/// unused otherwise. `pos_weight` (bce_with_logits only) is undefined (all
/// 1) or a 1-d tensor of pred's device and dtype with pred's last extent of entries (or 1).
struct PointwiseLossSpec {
  PointwiseLossKind kind = PointwiseLossKind::L1;
  double param = 1.0;
  Tensor pos_weight;
};

/// "l1", "smooth_l1", "huber", "bce_with_logits", "kl_div".
const char* pointwise_loss_name(PointwiseLossKind kind);

/// pred and target of one shape. Mean/Sum/BatchMean: out is 0-d; None: out has pred's shape.
/// BatchMean (kl_div only, ValueError for the others) divides the sum by pred's first extent
/// (a 0-d pred: by 1, as torch). Sums
/// accumulate in double and combine in a fixed order (bit-identical run to run); the mean of zero
/// elements is NaN, as in torch. Throws ShapeError naming the shapes, ValueError for a setting
/// out of range.
void pointwise_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target,
                            const PointwiseLossSpec& spec, Reduction reduction = Reduction::Mean);
/// grad_pred = norm * dloss/dpred * g, norm = 1/n for Mean, 1/pred.size(0) for BatchMean, 1
/// otherwise; g the 0-d grad_out for
/// Mean/Sum, grad_out[i] (pred's shape) for None. grad_pred may be pred.
void pointwise_loss_backward(Tensor& grad_pred, const Tensor& grad_out, const Tensor& pred,
                             const Tensor& target, const PointwiseLossSpec& spec,
                             Reduction reduction = Reduction::Mean);
/// Both from one read of pred and target, bit for bit equal to forward and to backward with a
/// grad_out of ones (the same per-element math and summation order). grad_pred may be pred.
void pointwise_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                                     const Tensor& target, const PointwiseLossSpec& spec,
                                     Reduction reduction = Reduction::Mean);
/// The same into new tensors.
Tensor pointwise_loss_forward(const Tensor& pred, const Tensor& target,
                              const PointwiseLossSpec& spec, Reduction reduction = Reduction::Mean);
Tensor pointwise_loss_backward(const Tensor& grad_out, const Tensor& pred, const Tensor& target,
                               const PointwiseLossSpec& spec,
                               Reduction reduction = Reduction::Mean);

// ---- implementations (float and double are instantiated) ----

/// The loss and its setting as the loops see them: pos_weight a pointer on pred's device.
template <typename T>
struct PointwiseLossArgs {
  PointwiseLossKind kind;
  T param;
  const T* pos_weight;  ///< nullptr for all 1
  int64_t cols;         ///< pos_weight's entries
};

/// f(math) with the loss's math type of kernels/loss/loss_math.h: the launchers' and loops' one
/// switch from the runtime kind to a compile-time loss. smooth_l1 with beta 0 is l1, as in torch.
template <typename T, typename F>
void visit_pointwise_math(const PointwiseLossArgs<T>& args, F&& f) {
  switch (args.kind) {
    case PointwiseLossKind::L1:
      return f(L1Math<T>{});
    case PointwiseLossKind::SmoothL1:
      if (args.param == T(0)) return f(L1Math<T>{});
      return f(SmoothL1Math<T>{args.param});
    case PointwiseLossKind::Huber:
      return f(HuberMath<T>{args.param});
    case PointwiseLossKind::BceWithLogits:
      return f(BceWithLogitsMath<T>{args.pos_weight, args.cols});
    case PointwiseLossKind::KlDiv:
      if (args.param != T(0)) return f(KlDivLogTargetMath<T>{});
      return f(KlDivMath<T>{});
  }
}

/// Mean/Sum (per_element false): out[0] = sum(loss) / divisor; None: out[i] = loss[i].
template <typename T>
void pointwise_loss_forward_cpu(T* out, const T* pred, const T* target, int64_t n,
                                const PointwiseLossArgs<T>& args, double divisor, bool per_element);
/// grad_pred[i] = norm * dloss/dpred[i] * grad_out[per_element ? i : 0].
template <typename T>
void pointwise_loss_backward_cpu(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                                 int64_t n, const PointwiseLossArgs<T>& args, T norm,
                                 bool per_element);
/// forward and backward (grad_out = 1) in one pass.
template <typename T>
void pointwise_loss_forward_backward_cpu(T* out, T* grad_pred, const T* pred, const T* target,
                                         int64_t n, const PointwiseLossArgs<T>& args,
                                         double divisor, T norm, bool per_element);

/// Partial sums the CUDA reduction leaves in its workspace (doubles), one per block of pass 1.
inline constexpr int kPointwiseLossReduceBlocks = 1024;
/// `workspace`: kPointwiseLossReduceBlocks doubles on the same device (unused for per_element).
template <typename T>
void pointwise_loss_forward_cuda(T* out, const T* pred, const T* target, int64_t n,
                                 const PointwiseLossArgs<T>& args, double divisor, bool per_element,
                                 double* workspace, CUstream_st* stream);
template <typename T>
void pointwise_loss_backward_cuda(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                                  int64_t n, const PointwiseLossArgs<T>& args, T norm,
                                  bool per_element, CUstream_st* stream);
template <typename T>
void pointwise_loss_forward_backward_cuda(T* out, T* grad_pred, const T* pred, const T* target,
                                          int64_t n, const PointwiseLossArgs<T>& args,
                                          double divisor, T norm, bool per_element,
                                          double* workspace, CUstream_st* stream);

}  // namespace minitrain
