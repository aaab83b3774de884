// MSE loss: entry points and CPU loops. Memory-bound. The mean/sum reduction accumulates in
// double (a float32 running sum of 1<<20 squares would lose ~3 digits) over fixed 16K-element
// chunks, so the result does not depend on the thread count; chunks are combined in order.

#include "kernels/loss/mse_loss.h"

#include <algorithm>
#include <vector>

#include "core/buffer_slot.h"
#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

// ---- CPU reference ----

namespace {
// Elements per partial sum. Fixed, not derived from the thread count, for determinism.
constexpr int64_t kReduceChunk = 1 << 14;

// With kGrad, also grad[i] = norm * (pred[i] - target[i]) * 1 (mse_loss_backward's expression
// with grad_out = 1), each element read before its gradient is stored (grad may be pred).
template <bool kGrad, typename T>
double squared_error_sum_impl(const T* pred, const T* target, int64_t begin, int64_t end, T* grad,
                              T norm) {
  // Four independent accumulators break the add dependency chain (a fixed order all the same).
  double acc[4] = {0, 0, 0, 0};
  int64_t i = begin;
  for (; i + 4 <= end; i += 4)
    for (int k = 0; k < 4; ++k) {
      const T p = pred[i + k], t = target[i + k];
      const double d = double(p) - double(t);
      acc[k] += d * d;
      if constexpr (kGrad) grad[i + k] = norm * (p - t) * T(1);
    }
  for (; i < end; ++i) {
    const T p = pred[i], t = target[i];
    const double d = double(p) - double(t);
    acc[0] += d * d;
    if constexpr (kGrad) grad[i] = norm * (p - t) * T(1);
  }
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// Chunks of kReduceChunk, partials combined in chunk order: the one summation order of the CPU
// loss, fused or not.
template <bool kGrad, typename T>
double chunked_squared_error_sum(const T* pred, const T* target, int64_t n, T* grad, T norm) {
  const int64_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(chunks, std::max<int64_t>(1, kElementwiseGrain / kReduceChunk),
               [&](int64_t begin, int64_t end) {
                 for (int64_t c = begin; c < end; ++c)
                   partial[size_t(c)] = squared_error_sum_impl<kGrad, T>(
                       pred, target, c * kReduceChunk, std::min(n, (c + 1) * kReduceChunk), grad,
                       norm);
               });
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}
}  // namespace

template <typename T>
void mse_loss_reduce_cpu(T* out, const T* pred, const T* target, int64_t n, double divisor) {
  const double sum = chunked_squared_error_sum<false, T>(pred, target, n, nullptr, T(0));
  out[0] = static_cast<T>(sum / divisor);
}

template <typename T>
void mse_loss_forward_backward_cpu(T* out, T* grad_pred, const T* pred, const T* target, int64_t n,
                                   double divisor, T norm, bool per_element) {
  if (!per_element) {
    const double sum = chunked_squared_error_sum<true, T>(pred, target, n, grad_pred, norm);
    out[0] = static_cast<T>(sum / divisor);
    return;
  }
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T p = pred[i], t = target[i];
      const T d = p - t;
      out[i] = d * d;
      grad_pred[i] = norm * (p - t) * T(1);
    }
  });
}

template <typename T>
void mse_loss_elementwise_cpu(T* out, const T* pred, const T* target, int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T d = pred[i] - target[i];
      out[i] = d * d;
    }
  });
}

template <typename T>
void mse_loss_backward_cpu(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                           int64_t n, T norm, bool per_element) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if (per_element) {
      for (int64_t i = begin; i < end; ++i)
        grad_pred[i] = norm * (pred[i] - target[i]) * grad_out[i];
    } else {
      const T g = grad_out[0];
      for (int64_t i = begin; i < end; ++i) grad_pred[i] = norm * (pred[i] - target[i]) * g;
    }
  });
}

#define MT_INSTANTIATE_MSE_CPU(T)                                                                \
  template void mse_loss_reduce_cpu<T>(T*, const T*, const T*, int64_t, double);                 \
  template void mse_loss_elementwise_cpu<T>(T*, const T*, const T*, int64_t);                    \
  template void mse_loss_backward_cpu<T>(T*, const T*, const T*, const T*, int64_t, T, bool);    \
  template void mse_loss_forward_backward_cpu<T>(T*, T*, const T*, const T*, int64_t, double, T, \
                                                 bool);
MT_INSTANTIATE_MSE_CPU(float)
MT_INSTANTIATE_MSE_CPU(double)
#undef MT_INSTANTIATE_MSE_CPU

// ---- entry points ----

namespace {

// The reduction's scratch on a GPU (kMseReduceBlocks doubles): from the caller's slot, or (null)
// new per call, freed on return while the kernel may still run: safe, as the caching allocator
// hands the block only to later work on this same stream (Note [streams and the caching
// allocator]); a slot hands it out again only on this stream too.
Tensor reduce_scratch(BufferSlot* workspace, Device device) {
  const Shape shape{kMseReduceBlocks};
  return workspace != nullptr ? workspace->get(shape, DType::Float64, device)
                              : Tensor::empty(shape, DType::Float64, device);
}

void forward_into(Tensor& out, const Tensor& pred, const Tensor& target, Reduction reduction,
                  BufferSlot* workspace_slot) {
  check_compatible("mse_loss_forward", {{"out", out}, {"pred", pred}, {"target", target}});
  check_same_shape("mse_loss_forward", {{"pred", pred}, {"target", target}});
  if (reduction == Reduction::None)
    check_same_shape("mse_loss_forward", {{"out", out}, {"pred", pred}});
  else
    MT_CHECK_AS(ShapeError, out.ndim() == 0, "mse_loss_forward: with reduction '",
                reduction_name(reduction), "' out must be 0-d (shape []) but has shape ",
                out.shape());
  const int64_t n = pred.numel();
  const double divisor = reduction_divisor(reduction, pred.shape());
  dispatch_op(
      "mse_loss_forward", pred.device(), pred.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        if (reduction == Reduction::None)
          mse_loss_elementwise_cpu<T>(out.data<T>(), pred.data<T>(), target.data<T>(), n);
        else
          mse_loss_reduce_cpu<T>(out.data<T>(), pred.data<T>(), target.data<T>(), n, divisor);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        if (reduction == Reduction::None) {
          mse_loss_elementwise_cuda<T>(out.data<T>(), pred.data<T>(), target.data<T>(), n, stream);
          return;
        }
        Tensor workspace = reduce_scratch(workspace_slot, pred.device());
        mse_loss_reduce_cuda<T>(out.data<T>(), pred.data<T>(), target.data<T>(), n, divisor,
                                workspace.data<double>(), stream);
      });
}

}  // namespace

void mse_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target, Reduction reduction) {
  forward_into(out, pred, target, reduction, nullptr);
}

void mse_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target, Reduction reduction,
                      BufferSlot& workspace) {
  forward_into(out, pred, target, reduction, &workspace);
}

void mse_loss_backward(Tensor& grad_pred, const Tensor& grad_out, const Tensor& pred,
                       const Tensor& target, Reduction reduction) {
  check_compatible(
      "mse_loss_backward",
      {{"grad_pred", grad_pred}, {"grad_out", grad_out}, {"pred", pred}, {"target", target}});
  check_same_shape("mse_loss_backward",
                   {{"grad_pred", grad_pred}, {"pred", pred}, {"target", target}});
  const bool per_element = reduction == Reduction::None;
  if (per_element)
    check_same_shape("mse_loss_backward", {{"grad_out", grad_out}, {"pred", pred}});
  else
    MT_CHECK_AS(ShapeError, grad_out.ndim() == 0, "mse_loss_backward: with reduction '",
                reduction_name(reduction), "' grad_out must be 0-d (shape []) but has shape ",
                grad_out.shape());
  const int64_t n = pred.numel();
  const double norm = 2.0 / reduction_divisor(reduction, pred.shape());
  dispatch_op(
      "mse_loss_backward", pred.device(), pred.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        mse_loss_backward_cpu<T>(grad_pred.data<T>(), grad_out.data<T>(), pred.data<T>(),
                                 target.data<T>(), n, static_cast<T>(norm), per_element);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        mse_loss_backward_cuda<T>(grad_pred.data<T>(), grad_out.data<T>(), pred.data<T>(),
                                  target.data<T>(), n, static_cast<T>(norm), per_element, stream);
      });
}

namespace {

// `workspace` null: a new scratch per call.
void forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred, const Tensor& target,
                      Reduction reduction, BufferSlot* workspace_slot) {
  const char* op = "mse_loss_forward_backward";
  check_compatible(op,
                   {{"out", out}, {"grad_pred", grad_pred}, {"pred", pred}, {"target", target}});
  check_same_shape(op, {{"grad_pred", grad_pred}, {"pred", pred}, {"target", target}});
  const bool per_element = reduction == Reduction::None;
  if (per_element)
    check_same_shape(op, {{"out", out}, {"pred", pred}});
  else
    MT_CHECK_AS(ShapeError, out.ndim() == 0, op, ": with reduction '", reduction_name(reduction),
                "' out must be 0-d (shape []) but has shape ", out.shape());
  const int64_t n = pred.numel();
  // The divisor of mse_loss_forward and the norm of mse_loss_backward, computed the same way.
  const double divisor = reduction_divisor(reduction, pred.shape());
  const double norm = 2.0 / reduction_divisor(reduction, pred.shape());
  dispatch_op(
      "mse_loss_forward_backward", pred.device(), pred.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        mse_loss_forward_backward_cpu<T>(out.data<T>(), grad_pred.data<T>(), pred.data<T>(),
                                         target.data<T>(), n, divisor, static_cast<T>(norm),
                                         per_element);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        Tensor workspace;
        if (!per_element) workspace = reduce_scratch(workspace_slot, pred.device());
        mse_loss_forward_backward_cuda<T>(out.data<T>(), grad_pred.data<T>(), pred.data<T>(),
                                          target.data<T>(), n, divisor, static_cast<T>(norm),
                                          per_element,
                                          per_element ? nullptr : workspace.data<double>(), stream);
      });
}

}  // namespace

void mse_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                               const Tensor& target, Reduction reduction) {
  forward_backward(out, grad_pred, pred, target, reduction, nullptr);
}

void mse_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                               const Tensor& target, Reduction reduction, BufferSlot& workspace) {
  forward_backward(out, grad_pred, pred, target, reduction, &workspace);
}

Tensor mse_loss_forward(const Tensor& pred, const Tensor& target, Reduction reduction) {
  check_compatible("mse_loss_forward", {{"pred", pred}, {"target", target}});
  Tensor out = Tensor::empty(reduction == Reduction::None ? pred.shape() : Shape{}, pred.dtype(),
                             pred.device());
  mse_loss_forward(out, pred, target, reduction);
  return out;
}

Tensor mse_loss_backward(const Tensor& grad_out, const Tensor& pred, const Tensor& target,
                         Reduction reduction) {
  check_compatible("mse_loss_backward", {{"pred", pred}, {"target", target}});
  Tensor grad_pred = Tensor::empty(pred.shape(), pred.dtype(), pred.device());
  mse_loss_backward(grad_pred, grad_out, pred, target, reduction);
  return grad_pred;
}

}  // namespace minitrain
