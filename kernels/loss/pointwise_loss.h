#pragma once
// The elementwise losses beside MSE, torch.nn semantics (L1Loss, HuberLoss, ...), one row each
// of MT_POINTWISE_LOSSES (kernels/loss/loss_math.h), each with every reduction (mean, the default;
// sum; none; batchmean: the sum over the first extent), its gradient, and a fused forward +
// backward. Memory-bound: two reads per element (and one write for none or the gradient); mean and
// sum add a deterministic reduction to one number, as mse_loss does.

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "kernels/loss/loss_math.h"
#include "kernels/loss/reduction.h"

struct CUstream_st;

namespace minitrain {

class BufferSlot;

#define MT_POINTWISE_LOSS_KIND(Kind, name, TorchClass, Math, setting) Kind,
/// One per row of MT_POINTWISE_LOSSES, in its order.
enum class PointwiseLossKind { MT_POINTWISE_LOSSES(MT_POINTWISE_LOSS_KIND) };
#undef MT_POINTWISE_LOSS_KIND

/// Which loss and its setting, valid by construction: its constructor is the one check of the
/// setting's range (issue 33: one check per setting), and the entry points below trust it. `param`
/// is the row's setting as a number (huber's delta; a bool as 0 or 1), unused for a loss without
/// one. `pos_weight` (bce_with_logits only) is undefined (all 1) or a 1-d tensor of pred's device
/// and dtype with pred's last extent of entries (or 1): that fit depends on pred, so the entry
/// points check it.
class PointwiseLossSpec {
 public:
  PointwiseLossSpec() = default;  ///< l1, which has no setting
  /// OptionError "<name>: <setting> must be <rule> but is <param>" (core/option_error.h, so a
  /// command line names its flag) for a setting outside the Math's param_ok.
  PointwiseLossSpec(PointwiseLossKind kind, double param, Tensor pos_weight = Tensor());
  /// The same loss and setting with other per-column weights (no second range check).
  PointwiseLossSpec with_pos_weight(Tensor pos_weight) const;

  PointwiseLossKind kind() const noexcept { return kind_; }
  double param() const noexcept { return param_; }
  const Tensor& pos_weight() const noexcept { return pos_weight_; }

 private:
  PointwiseLossKind kind_ = PointwiseLossKind::L1;
  double param_ = 1.0;
  Tensor pos_weight_;
};

/// The row's name: "l1", "smooth_l1", "huber", ...
const char* pointwise_loss_name(PointwiseLossKind kind);
/// The row's setting, as the LossOptions member is spelled ("delta"), or "none".
const char* pointwise_loss_setting(PointwiseLossKind kind);

/// pred and target of one shape. Mean/Sum/BatchMean: out is 0-d; None: out has pred's shape.
/// The sum is divided by reduction_divisor (kernels/loss/reduction.h). Sums accumulate in double
/// and combine in a fixed order (bit-identical run to run); the mean of zero elements is NaN, as
/// in torch. Throws ShapeError naming the shapes, ValueError for a setting out of range.
void pointwise_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target,
                            const PointwiseLossSpec& spec, Reduction reduction = Reduction::Mean);
/// grad_pred = dloss/dpred * g / reduction_divisor (1/n for Mean, 1/pred.size(0) for BatchMean);
/// g the 0-d grad_out for Mean/Sum/BatchMean, grad_out[i] (pred's shape) for None. grad_pred may
/// be pred.
void pointwise_loss_backward(Tensor& grad_pred, const Tensor& grad_out, const Tensor& pred,
                             const Tensor& target, const PointwiseLossSpec& spec,
                             Reduction reduction = Reduction::Mean);
/// Both from one read of pred and target, bit for bit equal to forward and to backward with a
/// grad_out of ones (the same per-element math and summation order). grad_pred may be pred.
void pointwise_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                                     const Tensor& target, const PointwiseLossSpec& spec,
                                     Reduction reduction = Reduction::Mean);
/// forward and forward_backward with the reduction's scratch on a GPU
/// (kPointwiseLossReduceBlocks doubles) from `workspace`, a slot its caller keeps across calls,
/// instead of a new buffer per call (Note [buffers that live across steps] in
/// core/buffer_slot.h). The same bits.
void pointwise_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target,
                            const PointwiseLossSpec& spec, Reduction reduction,
                            BufferSlot& workspace);
void pointwise_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                                     const Tensor& target, const PointwiseLossSpec& spec,
                                     Reduction reduction, BufferSlot& workspace);
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
  PointwiseLossParams<T> params;
};

/// f(math) with the row's Math built from the params: the launchers' and loops' one switch from
/// the runtime kind to a compile-time loss, generated from MT_POINTWISE_LOSSES.
template <typename T, typename F>
void visit_pointwise_math(const PointwiseLossArgs<T>& args, F&& f) {
  switch (args.kind) {
#define MT_POINTWISE_LOSS_CASE(Kind, name, TorchClass, Math, setting) \
  case PointwiseLossKind::Kind:                                       \
    return f(Math<T>(args.params));
    MT_POINTWISE_LOSSES(MT_POINTWISE_LOSS_CASE)
#undef MT_POINTWISE_LOSS_CASE
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
