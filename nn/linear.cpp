// Linear: forward is one GEMM into a fresh output and an in-place bias add; backward is one GEMM
// for dx (skipped when no input gradient is needed), one accumulating GEMM for dW (beta = 1) and
// a column sum added into db. The input is cached by handle, never copied. Every GEMM goes
// through the layer's named backend; "auto" resolves to gemm()'s own path (OpenBLAS on the CPU,
// cuBLAS on a GPU), so a default layer computes exactly what it did before backends existed.

#include "nn/linear.h"

#include <sstream>
#include <utility>

#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/gemm/gemm_registry.h"
#include "kernels/linear_layer.h"
#include "kernels/random.h"
#include "kernels/reduce.h"

namespace minitrain {

Linear::Linear(int64_t in_features, int64_t out_features, Generator& gen, bool bias, Device device,
               DType dtype)
    : in_(in_features), out_(out_features) {
  MT_CHECK_AS(ValueError, in_features >= 0 && out_features >= 0,
              "linear: in_features and out_features must be non-negative, got in_features=",
              in_features, ", out_features=", out_features);
  // torch.nn.Linear.reset_parameters: the weight first, then the bias, from one generator.
  weight_.value = Tensor::empty(Shape{out_, in_}, dtype, device);
  kaiming_uniform_(weight_.value, gen);
  if (bias) {
    bias_.value = Tensor::empty(Shape{out_}, dtype, device);
    linear_bias_uniform_(bias_.value, in_, gen);
  }
}

void Linear::check_input(const Tensor& x) const {
  const Tensor& w = weight_.value;
  MT_CHECK(x.defined(), "linear: input is an undefined tensor");
  MT_CHECK_AS(ShapeError, x.ndim() == 2, "linear: input must be 2-D [batch, ", in_, "], got ",
              x.shape(), " (weight ", w.shape(), ")");
  MT_CHECK_AS(ShapeError, x.size(1) == in_, "linear: input has ", x.size(1),
              " features but weight expects ", in_, " (input ", x.shape(), ", weight ", w.shape(),
              ")");
  MT_CHECK_AS(DeviceError, x.device() == w.device(), "linear: input is on ", x.device(),
              " but the layer's weight is on ", w.device(),
              "; move the input or the model (to()) to one device");
}

Tensor Linear::forward(const Tensor& x) {
  const Tensor& w = weight_.value;
  check_input(x);
  if (precision_ != DType::Float32 && w.dtype() == DType::Float32) {
    MT_CHECK_AS(DTypeError, x.dtype() == DType::Float32 || x.dtype() == precision_,
                "linear: input is ", x.dtype(), " but the layer computes in ", precision_,
                " (float32 or ", precision_, " inputs)");
    return forward_mixed(x);
  }
  MT_CHECK_AS(DTypeError, x.dtype() == w.dtype(), "linear: input is ", x.dtype(),
              " but the layer's weight is ", w.dtype(), "; cast the input or build the layer with ",
              x.dtype());

  Tensor y = buffers_.out.get(Shape{x.size(0), out_}, w.dtype(), w.device());
  linear_forward_with(gemm_backend_, y, x, w, bias_.value);  // x W^T, then + b (fused for cublaslt)
  input_ = training_ ? x : Tensor();  // eval mode keeps nothing (and forgets an older input)
  return y;
}

bool Linear::fuses_activation(const Tensor& x) const {
  return precision_ == DType::Float32 && x.defined() && x.dtype() == weight_.value.dtype() &&
         x.device() == weight_.value.device() && is_cpu_openblas_gemm(gemm_backend_, x);
}

bool Linear::fuses_activation_forward(const Tensor& x) const {
  return fuses_activation(x) ||
         (precision_ == DType::Float32 && x.defined() && x.dtype() == weight_.value.dtype() &&
          x.device() == weight_.value.device() && is_gpu_bias_activation_fusable(gemm_backend_, x));
}

bool Linear::fuses_activation_grad(const Tensor& pre) const {
  return bias_.value.defined() && input_.defined() && !fuses_activation(input_) &&
         fuses_activation_forward(input_) && pre.defined() && pre.device() == input_.device() &&
         pre.dtype() == input_.dtype();
}

Tensor Linear::forward_activation(const Tensor& x, Activation act, Tensor& pre) {
  const Tensor& w = weight_.value;
  check_input(x);
  MT_CHECK_AS(DTypeError, fuses_activation_forward(x), "linear: forward_activation needs a ",
              "layer that computes in its input's dtype on the CPU's OpenBLAS path or on a GPU ",
              "(fuses_activation_forward); input ", x.dtype(), " on ", x.device(), ", backend ",
              gemm_backend_);
  Tensor y = buffers_.out.get(Shape{x.size(0), out_}, w.dtype(), w.device());
  // Note [ReLU in place]: ReLU's backward reads its input only through x <= 0, and relu(x) <= 0
  // exactly where x <= 0 (NaN and -0 included), so the output can stand in for the input: one
  // buffer instead of two, and no cold output buffer to fill on every tile.
  Tensor out = act == Activation::ReLU ? y : buffers_.act_out.get(y.shape(), y.dtype(), y.device());
  linear_activation_forward_with(gemm_backend_, out, y, x, w, bias_.value, act);
  input_ = training_ ? x : Tensor();
  pre = y;
  return out;
}

const Tensor& Linear::checked_grad(const Tensor& dy) const {
  MT_CHECK(input_.defined(),
           "linear: backward called without a preceding training-mode "
           "forward (call train() before forward; eval mode keeps nothing for backward)");
  const Tensor& x = input_;
  MT_CHECK(dy.defined(), "linear: grad_output is an undefined tensor");
  MT_CHECK_AS(ShapeError, dy.ndim() == 2 && dy.size(0) == x.size(0) && dy.size(1) == out_,
              "linear: grad_output is ", dy.shape(), " but the forward output was [", x.size(0),
              ", ", out_, "]");
  return x;
}

void Linear::accumulate_parameter_grads(const Tensor& dy) {
  const Tensor& x = input_;
  // dW += dy^T x: [out, batch] x [batch, in], accumulated by the GEMM itself, or stored with beta
  // 0 into a gradient zero_grad released (Note [released gradients] in nn/parameter.h).
  bool overwrite_w = false;
  Tensor& dw = grad_to_write(weight_, overwrite_w);
  const double beta = overwrite_w ? 0.0 : 1.0;
  if (bias_.value.defined()) {
    // db += sum_rows(dy): the column sum is deterministic (double accumulation), stored into a
    // released gradient or else added with one axpy. On the CPU the sums run in dW's parallel
    // region (linear_weight_grad_with).
    bool overwrite_b = false;
    Tensor& db = grad_to_write(bias_, overwrite_b);
    if (overwrite_b) {
      linear_weight_grad_with(gemm_backend_, dw, beta, db, dy, x);
      return;
    }
    if (!bias_scratch_.defined() || bias_scratch_.device() != db.device() ||
        bias_scratch_.dtype() != db.dtype())
      bias_scratch_ = Tensor::empty(Shape{out_}, db.dtype(), db.device());
    linear_weight_grad_with(gemm_backend_, dw, beta, bias_scratch_, dy, x);
    axpy(db, 1.0, bias_scratch_);
  } else {
    gemm_with(gemm_backend_, dw, dy, /*trans_a=*/true, x, /*trans_b=*/false, 1.0, beta);
  }
}

Tensor Linear::backward(const Tensor& grad_output) {
  const Tensor& x = checked_grad(grad_output);
  const Tensor& dy = grad_output;
  if (is_half(x.dtype())) return backward_mixed(dy);
  accumulate_parameter_grads(dy);
  if (!needs_input_grad_) return Tensor();
  // dx = dy W: [batch, out] x [out, in].
  Tensor dx = buffers_.grad_in.get(x.shape(), x.dtype(), x.device());
  gemm_with(gemm_backend_, dx, dy, /*trans_a=*/false, weight_.value, /*trans_b=*/false);
  return dx;
}

Tensor Linear::backward_activation(const Tensor& grad_output, Activation act, const Tensor& pre) {
  const Tensor& x = checked_grad(grad_output);
  MT_CHECK_AS(DTypeError, fuses_activation(x), "linear: backward_activation needs a layer that ",
              "computes in its input's dtype on the CPU's OpenBLAS path (fuses_activation)");
  accumulate_parameter_grads(grad_output);
  if (!needs_input_grad_) return Tensor();
  // dL/d(pre) = (dy W) * act'(pre), the activation's backward on each tile of dy W.
  Tensor grad_pre = buffers_.grad_in.get(x.shape(), x.dtype(), x.device());
  linear_input_grad_activation_with(gemm_backend_, grad_pre, grad_output, weight_.value, pre, act);
  return grad_pre;
}

Tensor Linear::backward_through_activation(const Tensor& grad_activation_output, Activation act,
                                           const Tensor& pre) {
  MT_CHECK_AS(DTypeError, fuses_activation_grad(pre), "linear: backward_through_activation ",
              "needs a GPU layer with a bias whose input and the activation's kept input are on ",
              "its device in its dtype (fuses_activation_grad)");
  MT_CHECK(grad_activation_output.defined(), "linear: grad_output is an undefined tensor");
  MT_CHECK_AS(ShapeError, grad_activation_output.shape() == pre.shape(),
              "linear: the activation's grad_output is ", grad_activation_output.shape(),
              " but its input was ", pre.shape());
  // dL/d(pre), the gradient of this layer's output: the activation's backward, stored while
  // its column sums (the bias gradient) are taken in the same pass.
  Tensor dy = buffers_.grad_pre.get(pre.shape(), pre.dtype(), pre.device());
  const Tensor& x = checked_grad(dy);
  bool overwrite_w = false;
  Tensor& dw = grad_to_write(weight_, overwrite_w);
  const double beta = overwrite_w ? 0.0 : 1.0;
  bool overwrite_b = false;
  Tensor& db = grad_to_write(bias_, overwrite_b);
  if (overwrite_b) {
    linear_bias_activation_grad_with(gemm_backend_, dw, beta, db, dy, grad_activation_output, pre,
                                     x, act);
  } else {
    if (!bias_scratch_.defined() || bias_scratch_.device() != db.device() ||
        bias_scratch_.dtype() != db.dtype())
      bias_scratch_ = Tensor::empty(Shape{out_}, db.dtype(), db.device());
    linear_bias_activation_grad_with(gemm_backend_, dw, beta, bias_scratch_, dy,
                                     grad_activation_output, pre, x, act);
    axpy(db, 1.0, bias_scratch_);
  }
  if (!needs_input_grad_) return Tensor();
  Tensor dx = buffers_.grad_in.get(x.shape(), x.dtype(), x.device());
  gemm_with(gemm_backend_, dx, dy, /*trans_a=*/false, weight_.value, /*trans_b=*/false);
  return dx;
}

Tensor Linear::cast_into(BufferSlot& slot, const Tensor& in, DType to) {
  Tensor out = slot.get(in.shape(), to, in.device());
  cast(out, in);
  return out;
}

void Linear::Buffers::clear() noexcept {
  for (BufferSlot* slot : {&out, &act_out, &grad_pre, &grad_in, &x16, &x32, &acc, &y16, &dy16,
                           &dy32, &dw, &dx16, &w16, &b16})
    slot->clear();
}

Tensor Linear::rounded(const Tensor& t, BufferSlot& slot) const {
  Tensor r = slot.get(t.shape(), DType::Float32, t.device());
  round_to_precision(r, t, precision_);
  return r;
}

Tensor Linear::forward_mixed(const Tensor& x) {
  const Tensor x16 = x.dtype() == precision_ ? x : cast_into(buffers_.x16, x, precision_);
  Tensor acc = buffers_.acc.get(Shape{x.size(0), out_}, DType::Float32, x.device());
  // One rounding of the float32 sum x W^T + b, as torch's 16-bit addmm (bias folded in by beta).
  const Tensor w16 = rounded(weight_.value, buffers_.w16);
  linear_forward_with(gemm_backend_, acc, cast_into(buffers_.x32, x16, DType::Float32), w16,
                      bias_.value.defined() ? rounded(bias_.value, buffers_.b16) : Tensor());
  input_ = training_ ? x16 : Tensor();
  weight16_ = training_ && needs_input_grad_ ? w16 : Tensor();
  return cast_into(buffers_.y16, acc, precision_);
}

Tensor Linear::backward_mixed(const Tensor& grad_output) {
  const DType p = input_.dtype();
  // A float32 gradient (a caller outside the trainer) is first rounded, as torch's cast would.
  const Tensor dy =
      cast_into(buffers_.dy32,
                grad_output.dtype() == p ? grad_output : cast_into(buffers_.dy16, grad_output, p),
                DType::Float32);
  {
    // dW: the 16-bit product (rounded), added into the float32 gradient. The widened input and
    // the product are freed before dx's buffers exist: the peak holds one layer's temporaries.
    const Tensor x = cast_into(buffers_.x32, input_, DType::Float32);
    Tensor dw = buffers_.dw.get(weight_.value.shape(), DType::Float32, x.device());
    gemm_with(gemm_backend_, dw, dy, /*trans_a=*/true, x, /*trans_b=*/false);
    round_to_precision(dw, dw, p);
    axpy(ensure_grad(weight_), 1.0, dw);
  }
  if (bias_.value.defined()) {
    Tensor& db = ensure_grad(bias_);
    if (!bias_scratch_.defined() || bias_scratch_.device() != db.device() ||
        bias_scratch_.dtype() != db.dtype())
      bias_scratch_ = Tensor::empty(Shape{out_}, db.dtype(), db.device());
    sum_rows(bias_scratch_, dy);
    round_to_precision(bias_scratch_, bias_scratch_, p);
    axpy(db, 1.0, bias_scratch_);
  }
  if (!needs_input_grad_) return Tensor();
  Tensor dx = buffers_.grad_in.get(input_.shape(), DType::Float32, input_.device());
  // The forward's W16; rounded anew only if the input gradient was switched on after the forward.
  const Tensor w16 = weight16_.defined() ? weight16_ : rounded(weight_.value, buffers_.w16);
  gemm_with(gemm_backend_, dx, dy, /*trans_a=*/false, w16, /*trans_b=*/false);
  return cast_into(buffers_.dx16, dx, p);
}

void Linear::set_gemm_backend(std::string name) {
  if (name != "auto") (void)minitrain::gemm_backend(name);  // ValueError listing the names
  check_gemm_precision(name, precision_);
  gemm_backend_ = std::move(name);
}

void Linear::set_precision(DType precision) {
  const DType before = precision_;
  Module::set_precision(precision);  // DTypeError for float64 first
  try {
    check_gemm_precision(gemm_backend_, precision);
  } catch (...) {
    precision_ = before;  // a refused precision changes nothing
    throw;
  }
  weight16_ = Tensor();  // a copy at the old precision is no use to the next backward
}

NamedParameters Linear::named_parameters(const std::string& prefix) {
  NamedParameters out{{prefix + "weight", &weight_}};
  if (bias_.value.defined()) out.emplace_back(prefix + "bias", &bias_);
  return out;
}

void Linear::to(Device device) {
  Module::to(device);
  input_ = Tensor();
  bias_scratch_ = Tensor();
  weight16_ = Tensor();
  buffers_.clear();
}

std::string Linear::repr() const {
  std::ostringstream os;
  os << "Linear(in_features=" << in_ << ", out_features=" << out_
     << ", bias=" << (bias_.value.defined() ? "True" : "False") << ")";
  return os.str();
}

}  // namespace minitrain
