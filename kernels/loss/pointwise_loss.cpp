// The elementwise losses (the rows of MT_POINTWISE_LOSSES): entry points and CPU loops.
// Memory-bound. Mean and sum accumulate the per-element losses in double over fixed 16K-element
// chunks combined in chunk order, so the result does not depend on the thread count; the fused
// forward + backward is the same loop storing the gradient on the way, hence the same loss.

#include "kernels/loss/pointwise_loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/buffer_slot.h"
#include "core/option_error.h"
#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

const char* pointwise_loss_name(PointwiseLossKind kind) {
  switch (kind) {
#define MT_POINTWISE_LOSS_NAME(Kind, name, TorchClass, Math, setting) \
  case PointwiseLossKind::Kind:                                       \
    return #name;
    MT_POINTWISE_LOSSES(MT_POINTWISE_LOSS_NAME)
#undef MT_POINTWISE_LOSS_NAME
  }
  return "unknown";
}

const char* pointwise_loss_setting(PointwiseLossKind kind) {
  switch (kind) {
#define MT_POINTWISE_LOSS_SETTING(Kind, name, TorchClass, Math, setting) \
  case PointwiseLossKind::Kind:                                          \
    return #setting;
    MT_POINTWISE_LOSSES(MT_POINTWISE_LOSS_SETTING)
#undef MT_POINTWISE_LOSS_SETTING
  }
  return "none";
}

PointwiseLossSpec::PointwiseLossSpec(PointwiseLossKind kind, double param, Tensor pos_weight)
    : kind_(kind), param_(param), pos_weight_(std::move(pos_weight)) {
  const std::string who = pointwise_loss_name(kind);
  switch (kind) {
#define MT_POINTWISE_LOSS_CHECK(Kind, name, TorchClass, Math, setting)                           \
  case PointwiseLossKind::Kind:                                                                  \
    if (!Math<double>::param_ok(param))                                                          \
      throw OptionError(                                                                         \
          who, #setting,                                                                         \
          ::minitrain::detail::concat("must be ", Math<double>::kParamRule, " but is ", param)); \
    return;
    MT_POINTWISE_LOSSES(MT_POINTWISE_LOSS_CHECK)
#undef MT_POINTWISE_LOSS_CHECK
  }
}

PointwiseLossSpec PointwiseLossSpec::with_pos_weight(Tensor pos_weight) const {
  PointwiseLossSpec spec = *this;
  spec.pos_weight_ = std::move(pos_weight);
  return spec;
}

// ---- CPU reference ----

namespace {
// Elements per partial sum. Fixed, not derived from the thread count, for determinism.
constexpr int64_t kReduceChunk = 1 << 14;

// Sum of the losses of [begin, end) in double; with kGrad also grad[i] = norm * dloss/dpred * 1
// (pointwise_loss_backward's expression with grad_out = 1), each element read before its gradient
// is stored (grad may be pred).
template <bool kGrad, typename T, typename Math>
double loss_sum(const Math& math, const T* pred, const T* target, int64_t begin, int64_t end,
                T* grad, T norm) {
  double acc = 0;
  for (int64_t i = begin; i < end; ++i) {
    const T p = pred[i], t = target[i];
    acc += double(math.loss(p, t, i));
    if constexpr (kGrad) grad[i] = norm * math.derivative(p, t, i) * T(1);
  }
  return acc;
}

template <bool kGrad, typename T, typename Math>
double chunked_loss_sum(const Math& math, const T* pred, const T* target, int64_t n, T* grad,
                        T norm) {
  const int64_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(chunks, std::max<int64_t>(1, kElementwiseGrain / kReduceChunk),
               [&](int64_t begin, int64_t end) {
                 for (int64_t c = begin; c < end; ++c)
                   partial[size_t(c)] =
                       loss_sum<kGrad>(math, pred, target, c * kReduceChunk,
                                       std::min(n, (c + 1) * kReduceChunk), grad, norm);
               });
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}
}  // namespace

template <typename T>
void pointwise_loss_forward_cpu(T* out, const T* pred, const T* target, int64_t n,
                                const PointwiseLossArgs<T>& args, double divisor,
                                bool per_element) {
  visit_pointwise_math(args, [&](const auto& math) {
    if (!per_element) {
      out[0] = static_cast<T>(chunked_loss_sum<false>(math, pred, target, n, (T*)nullptr, T(0)) /
                              divisor);
      return;
    }
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = math.loss(pred[i], target[i], i);
    });
  });
}

template <typename T>
void pointwise_loss_backward_cpu(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                                 int64_t n, const PointwiseLossArgs<T>& args, T norm,
                                 bool per_element) {
  visit_pointwise_math(args, [&](const auto& math) {
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T g = grad_out[per_element ? i : 0];
        grad_pred[i] = norm * math.derivative(pred[i], target[i], i) * g;
      }
    });
  });
}

template <typename T>
void pointwise_loss_forward_backward_cpu(T* out, T* grad_pred, const T* pred, const T* target,
                                         int64_t n, const PointwiseLossArgs<T>& args,
                                         double divisor, T norm, bool per_element) {
  visit_pointwise_math(args, [&](const auto& math) {
    if (!per_element) {
      out[0] =
          static_cast<T>(chunked_loss_sum<true>(math, pred, target, n, grad_pred, norm) / divisor);
      return;
    }
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T p = pred[i], t = target[i];
        out[i] = math.loss(p, t, i);
        grad_pred[i] = norm * math.derivative(p, t, i) * T(1);
      }
    });
  });
}

#define MT_INSTANTIATE_POINTWISE_LOSS_CPU(T)                                              \
  template void pointwise_loss_forward_cpu<T>(T*, const T*, const T*, int64_t,            \
                                              const PointwiseLossArgs<T>&, double, bool); \
  template void pointwise_loss_backward_cpu<T>(T*, const T*, const T*, const T*, int64_t, \
                                               const PointwiseLossArgs<T>&, T, bool);     \
  template void pointwise_loss_forward_backward_cpu<T>(                                   \
      T*, T*, const T*, const T*, int64_t, const PointwiseLossArgs<T>&, double, T, bool);
MT_INSTANTIATE_POINTWISE_LOSS_CPU(float)
MT_INSTANTIATE_POINTWISE_LOSS_CPU(double)
#undef MT_INSTANTIATE_POINTWISE_LOSS_CPU

// ---- entry points ----

namespace {
// pos_weight's fit to pred, checked by every entry point (the setting's range was checked when
// the spec was made): the kernels trust them.
void check_spec(const char* op, const PointwiseLossSpec& spec, const Tensor& pred) {
  if (!spec.pos_weight().defined()) return;
  MT_CHECK_AS(ValueError, spec.kind() == PointwiseLossKind::BceWithLogits, op,
              ": pos_weight belongs to bce_with_logits, not ", pointwise_loss_name(spec.kind()));
  check_compatible(op, {{"pos_weight", spec.pos_weight()}, {"pred", pred}});
  const int64_t cols = pred.ndim() == 0 ? 1 : pred.size(pred.ndim() - 1);
  MT_CHECK_AS(ShapeError,
              spec.pos_weight().ndim() == 1 &&
                  (spec.pos_weight().numel() == cols || spec.pos_weight().numel() == 1),
              op, ": pos_weight ", spec.pos_weight().shape(),
              " must have one entry per column of pred ", pred.shape(), " (", cols,
              ") or a single entry");
}

template <typename T>
PointwiseLossArgs<T> loop_args(const PointwiseLossSpec& spec) {
  const bool has_pw = spec.pos_weight().defined();
  return {spec.kind(),
          {static_cast<T>(spec.param()), has_pw ? spec.pos_weight().data<T>() : nullptr,
           has_pw ? spec.pos_weight().numel() : 1}};
}

// pred and target of one shape on one device, out (0-d, or pred's shape for none), grad_pred
// (if given) of pred's shape, and the spec.
void check_operands(const char* op, const Tensor& out, const char* out_name, const Tensor& pred,
                    const Tensor& target, Reduction reduction, const PointwiseLossSpec& spec,
                    const Tensor* grad_pred = nullptr) {
  if (grad_pred != nullptr) {
    check_compatible(op, {{"grad_pred", *grad_pred}, {"pred", pred}});
    check_same_shape(op, {{"grad_pred", *grad_pred}, {"pred", pred}});
  }
  check_compatible(op, {{out_name, out}, {"pred", pred}, {"target", target}});
  check_same_shape(op, {{"pred", pred}, {"target", target}});
  if (reduction == Reduction::None)
    check_same_shape(op, {{out_name, out}, {"pred", pred}});
  else
    MT_CHECK_AS(ShapeError, out.ndim() == 0, op, ": with reduction '", reduction_name(reduction),
                "' ", out_name, " must be 0-d (shape []) but has shape ", out.shape());
  check_spec(op, spec, pred);
}

// The reduction's scratch on a GPU: from the caller's slot, or (null) new per call, freed on
// return while the kernel may still run: safe, as the caching allocator hands the block only to
// later work on this same stream (Note [streams and the caching allocator]); a slot hands it out
// again only on this stream too.
Tensor reduce_scratch(BufferSlot* workspace, Device device) {
  const Shape shape{kPointwiseLossReduceBlocks};
  return workspace != nullptr ? workspace->get(shape, DType::Float64, device)
                              : Tensor::empty(shape, DType::Float64, device);
}

void forward_into(Tensor& out, const Tensor& pred, const Tensor& target,
                  const PointwiseLossSpec& spec, Reduction reduction, BufferSlot* workspace_slot) {
  const char* op = "pointwise_loss_forward";
  check_operands(op, out, "out", pred, target, reduction, spec);
  const int64_t n = pred.numel();
  const bool per_element = reduction == Reduction::None;
  const double divisor = reduction_divisor(reduction, pred.shape());
  dispatch_op(
      op, pred.device(), pred.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        pointwise_loss_forward_cpu<T>(out.data<T>(), pred.data<T>(), target.data<T>(), n,
                                      loop_args<T>(spec), divisor, per_element);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        Tensor workspace;
        if (!per_element) workspace = reduce_scratch(workspace_slot, pred.device());
        pointwise_loss_forward_cuda<T>(out.data<T>(), pred.data<T>(), target.data<T>(), n,
                                       loop_args<T>(spec), divisor, per_element,
                                       per_element ? nullptr : workspace.data<double>(), stream);
      });
}

void forward_backward_into(Tensor& out, Tensor& grad_pred, const Tensor& pred, const Tensor& target,
                           const PointwiseLossSpec& spec, Reduction reduction,
                           BufferSlot* workspace_slot) {
  const char* op = "pointwise_loss_forward_backward";
  check_operands(op, out, "out", pred, target, reduction, spec, &grad_pred);
  const int64_t n = pred.numel();
  const bool per_element = reduction == Reduction::None;
  // forward's divisor and backward's norm, computed the same way
  const double divisor = reduction_divisor(reduction, pred.shape());
  const double norm = 1.0 / divisor;
  dispatch_op(
      op, pred.device(), pred.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        pointwise_loss_forward_backward_cpu<T>(out.data<T>(), grad_pred.data<T>(), pred.data<T>(),
                                               target.data<T>(), n, loop_args<T>(spec), divisor,
                                               static_cast<T>(norm), per_element);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        Tensor workspace;
        if (!per_element) workspace = reduce_scratch(workspace_slot, pred.device());
        pointwise_loss_forward_backward_cuda<T>(
            out.data<T>(), grad_pred.data<T>(), pred.data<T>(), target.data<T>(), n,
            loop_args<T>(spec), divisor, static_cast<T>(norm), per_element,
            per_element ? nullptr : workspace.data<double>(), stream);
      });
}

}  // namespace

void pointwise_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target,
                            const PointwiseLossSpec& spec, Reduction reduction) {
  forward_into(out, pred, target, spec, reduction, nullptr);
}

void pointwise_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target,
                            const PointwiseLossSpec& spec, Reduction reduction,
                            BufferSlot& workspace) {
  forward_into(out, pred, target, spec, reduction, &workspace);
}

void pointwise_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                                     const Tensor& target, const PointwiseLossSpec& spec,
                                     Reduction reduction) {
  forward_backward_into(out, grad_pred, pred, target, spec, reduction, nullptr);
}

void pointwise_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                                     const Tensor& target, const PointwiseLossSpec& spec,
                                     Reduction reduction, BufferSlot& workspace) {
  forward_backward_into(out, grad_pred, pred, target, spec, reduction, &workspace);
}

void pointwise_loss_backward(Tensor& grad_pred, const Tensor& grad_out, const Tensor& pred,
                             const Tensor& target, const PointwiseLossSpec& spec,
                             Reduction reduction) {
  const char* op = "pointwise_loss_backward";
  check_operands(op, grad_out, "grad_out", pred, target, reduction, spec, &grad_pred);
  const int64_t n = pred.numel();
  const bool per_element = reduction == Reduction::None;
  const double norm = 1.0 / reduction_divisor(reduction, pred.shape());
  dispatch_op(
      op, pred.device(), pred.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        pointwise_loss_backward_cpu<T>(grad_pred.data<T>(), grad_out.data<T>(), pred.data<T>(),
                                       target.data<T>(), n, loop_args<T>(spec),
                                       static_cast<T>(norm), per_element);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        pointwise_loss_backward_cuda<T>(grad_pred.data<T>(), grad_out.data<T>(), pred.data<T>(),
                                        target.data<T>(), n, loop_args<T>(spec),
                                        static_cast<T>(norm), per_element, stream);
      });
}

Tensor pointwise_loss_forward(const Tensor& pred, const Tensor& target,
                              const PointwiseLossSpec& spec, Reduction reduction) {
  check_compatible("pointwise_loss_forward", {{"pred", pred}, {"target", target}});
  Tensor out = Tensor::empty(reduction == Reduction::None ? pred.shape() : Shape{}, pred.dtype(),
                             pred.device());
  pointwise_loss_forward(out, pred, target, spec, reduction);
  return out;
}

Tensor pointwise_loss_backward(const Tensor& grad_out, const Tensor& pred, const Tensor& target,
                               const PointwiseLossSpec& spec, Reduction reduction) {
  check_compatible("pointwise_loss_backward", {{"pred", pred}, {"target", target}});
  Tensor grad_pred = Tensor::empty(pred.shape(), pred.dtype(), pred.device());
  pointwise_loss_backward(grad_pred, grad_out, pred, target, spec, reduction);
  return grad_pred;
}

}  // namespace minitrain
