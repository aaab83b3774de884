// Linear: forward is one GEMM into a fresh output and an in-place bias add; backward is one GEMM
// for dx (skipped when no input gradient is needed), one accumulating GEMM for dW (beta = 1) and
// a column sum added into db. The input is cached by handle, never copied. Every GEMM goes
// through the layer's named backend; "auto" resolves to gemm()'s own path (OpenBLAS on the CPU,
// cuBLAS on a GPU), so a default layer computes exactly what it did before backends existed.

#include "nn/linear.h"

#include <algorithm>
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

// Note [the weight casts]: under mixed precision a forward multiplies by round16(W) and
// round16(b), which took one round_to_precision launch each per layer: 2 launches per layer and
// step for a few microseconds of host time each, where the work is a few thousand elements. They
// are now one multi-tensor launch (round_to_precision_multi, kernels/cast.h) for every layer of
// a device: Sequential's forward holds a RoundedWeights over its Linear layers for the pass, which
// rounds them all at its start into each layer's weight16_/bias16_ and marks them current; each
// layer's forward takes its copies and marks them used, and a forward that finds none current (a
// layer run alone, or a second forward within the pass) rounds its own, W and b in one launch. The
// bits are round_to_precision's (the same per-element rounding, round_to<T>). A copy is as
// current as the weights at the pass's start, and nothing in a Sequential's forward changes a
// weight: so the same bits as rounding each layer as its forward comes. RoundedWeights' end
// forgets the copies a pass did not use (an exception, a layer it skipped), so no later forward
// takes a copy older than its weights. The copies are kept across steps and rewritten in place
// (no allocation after the first step; one kernel of fixed arguments: a CUDA graph captures it
// with the forward). Rounding after the optimizer's update instead would save nothing more (still
// one launch a step) and would need every writer of a weight (an update, load_state_dict, to(),
// a user's own edit) to say so; at the pass's start no writer has to.
//
// The gradients come back the same way (Note [the gradient casts], below).

bool Linear::computes_mixed() const noexcept {
  return precision_ != DType::Float32 && weight_.value.dtype() == DType::Float32;
}

void Linear::round_weights(const std::vector<Linear*>& layers) {
  struct Group {
    Device device;
    DType precision;
    std::vector<RoundedCast> items;
  };
  std::vector<Group> groups;
  std::vector<Linear*> rounded;
  for (Linear* layer : layers) {
    if (!layer->computes_mixed()) continue;
    const Tensor& w = layer->weight_.value;
    const Tensor& b = layer->bias_.value;
    auto fits = [](const Tensor& copy, const Tensor& of) {
      return copy.defined() && copy.device() == of.device() && copy.shape() == of.shape();
    };
    const DType copy_dtype = layer->weight_copy_dtype();
    if (!fits(layer->weight16_, w) || layer->weight16_.dtype() != copy_dtype)
      layer->weight16_ = Tensor::empty(w.shape(), copy_dtype, w.device());
    if (b.defined() && !fits(layer->bias16_, b))
      layer->bias16_ = Tensor::empty(b.shape(), DType::Float32, b.device());
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      return x.device == w.device() && x.precision == layer->precision_;
    });
    if (g == groups.end())
      g = groups.insert(groups.end(), Group{w.device(), layer->precision_, {}});
    g->items.push_back({&layer->weight16_, &w,
                        copy_dtype == DType::Float32 ? RoundedInto::Store : RoundedInto::Narrow});
    if (b.defined()) g->items.push_back({&layer->bias16_, &b, RoundedInto::Store});
    rounded.push_back(layer);
  }
  for (const Group& g : groups) round_to_precision_multi(g.items, g.precision);
  for (Linear* layer : rounded) layer->weights16_current_ = true;
}

Linear::RoundedWeights::RoundedWeights(std::vector<Linear*> layers) : layers_(std::move(layers)) {
  round_weights(layers_);
}

Linear::RoundedWeights::~RoundedWeights() {
  for (Linear* layer : layers_) layer->weights16_current_ = false;
}

Tensor Linear::cast_into(BufferSlot& slot, const Tensor& in, DType to) {
  Tensor out = slot.get(in.shape(), to, in.device());
  cast(out, in);
  return out;
}

void Linear::Buffers::clear() noexcept {
  for (BufferSlot* slot :
       {&out, &act_out, &grad_pre, &grad_in, &x16, &x32, &acc, &y16, &dy16, &dy32, &dx16, &w32})
    slot->clear();
}

// Note [16-bit GEMM operands] (issue 35): the forward multiplies its 16-bit input by the rounded
// weights and adds the rounded bias in the GEMM itself, where the backend has a mixed GEMM
// (gemm_mixed_with, kernels/gemm/gemm_registry.h): the input is read as it is, the bias added in
// the GEMM's epilogue and y rounded once at the store. That was a widening cast of the input, the
// float32 GEMM, a bias add and a narrowing cast: four launches, now one. The backward's
// dW = dy^T x reads both 16-bit operands, dx = dy W16 rounds at its store, and db sums the 16-bit
// dy (sum_rows widens as it reads): six launches, now three.
//
// The rounded weights are a 16-bit tensor where the backend's mixed GEMM takes C, A and B all of
// the precision (with the bias, for the forward: weight_copy_dtype), and float32 holding 16-bit
// values where not. cuBLAS and cuBLASLt take A and B of one 16-bit type only (their type tables),
// so they need the 16-bit copy to multiply the forward and dx in 16 bits: cuBLASLt gets it, and
// "cublas" (a real GPU's default) for a layer without a bias, since cublasGemmEx has no bias
// epilogue (a layer with one keeps the float32 copy and the cast path there; its dW is a 16-bit
// GEMM either way). The built-in mixed GEMMs
// (warptile on a GPU, reference on the CPU) take any combination and run the float32 kernel's own
// sums on widened operands, exact for 16-bit values, so the bits are the cast path's with either
// copy. A backend without a mixed GEMM (openblas, the other ladder rungs) keeps the float32 copy
// and the cast path for all three.

DType Linear::weight_copy_dtype() const {
  const Device device = weight_.value.device();
  return gemm_takes_mixed(gemm_backend_, device, precision_, precision_, precision_,
                          bias_.value.defined())
             ? precision_
             : DType::Float32;
}

Tensor Linear::weight16_widened() {
  if (weight16_.dtype() == DType::Float32) return weight16_;
  // A copy made 16-bit for a backend set since (set_gemm_backend between forward and backward).
  return cast_into(buffers_.w32, weight16_, DType::Float32);
}

Tensor Linear::forward_mixed(const Tensor& x) {
  const Tensor x16 = x.dtype() == precision_ ? x : cast_into(buffers_.x16, x, precision_);
  if (!weights16_current_) round_weights({this});  // Note [the weight casts]
  weights16_current_ = false;
  input_ = training_ ? x16 : Tensor();
  const Tensor bias16 = bias_.value.defined() ? bias16_ : Tensor();
  if (gemm_takes_mixed(gemm_backend_, x.device(), precision_, precision_, weight16_.dtype(),
                       bias16.defined())) {  // Note [16-bit GEMM operands]
    Tensor y16 = buffers_.y16.get(Shape{x.size(0), out_}, precision_, x.device());
    gemm_mixed_with(gemm_backend_, y16, x16, /*trans_a=*/false, weight16_, /*trans_b=*/true, 1.0,
                    0.0, bias16);
    return y16;
  }
  Tensor acc = buffers_.acc.get(Shape{x.size(0), out_}, DType::Float32, x.device());
  // One rounding of the float32 sum x W^T + b, as torch's 16-bit addmm (bias folded in by beta).
  linear_forward_with(gemm_backend_, acc, cast_into(buffers_.x32, x16, DType::Float32),
                      weight16_widened(), bias16);
  return cast_into(buffers_.y16, acc, precision_);
}

// Note [the gradient casts]: a mixed-precision layer's dW = dy^T x and db = sum_rows(dy) are
// float32 products that torch rounds to 16 bits (its 16-bit GEMM's output) before its autograd adds
// them into the float32 gradients of the master weights. That was a zero_ of each released
// gradient, a round_to_precision and an axpy each: 6 launches a layer. The rounding and the add
// (or the store into a released gradient as 0 + r: the bits of zero_ then axpy) of all of them are
// one round_to_precision_multi launch: a layer run alone launches it for its two gradients, and
// in a Sequential's backward a RoundedGradients holds every layer's until the backward's end,
// one launch for the model. The products wait in weight_grad_ and bias_scratch_, kept across
// steps; nothing else writes them or the gradients before the flush, so the bits are those of
// each layer adding its own at once. A Sequential with a backward hook (DDP, whose hook reads a
// layer's gradients as soon as its backward returns) casts layer by layer instead.

void Linear::add_rounded_gradients(const std::vector<RoundedGradients::Pending>& pending) {
  struct Group {
    Device device;
    DType precision;
    std::vector<RoundedCast> items;
  };
  std::vector<Group> groups;
  for (const RoundedGradients::Pending& g : pending) {
    const Device device = g.param->grad.device();
    auto at = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      return x.device == device && x.precision == g.precision;
    });
    if (at == groups.end()) at = groups.insert(groups.end(), Group{device, g.precision, {}});
    at->items.push_back(
        {&g.param->grad, g.product, g.overwrite ? RoundedInto::AddToZero : RoundedInto::Add});
  }
  for (const Group& g : groups) round_to_precision_multi(g.items, g.precision);
}

Linear::RoundedGradients::RoundedGradients(std::vector<Linear*> layers)
    : layers_(std::move(layers)) {
  for (Linear* layer : layers_) layer->gradients_to_ = this;
}

void Linear::RoundedGradients::flush() {
  add_rounded_gradients(pending_);
  pending_.clear();
}

Linear::RoundedGradients::~RoundedGradients() {
  for (Linear* layer : layers_) layer->gradients_to_ = nullptr;
  // Not flushed (an exception): a gradient to be stored into its released buffer holds nothing
  // yet, so it is released again (one to be added to misses this backward's share).
  for (const Pending& g : pending_)
    if (g.overwrite) release_grad(*g.param);
}

Tensor Linear::backward_mixed(const Tensor& grad_output) {
  const DType p = input_.dtype();
  // The products wait in weight_grad_ and bias_scratch_: a second backward of this layer within
  // one RoundedGradients (not Sequential's) adds the first's before overwriting them.
  if (gradients_to_ != nullptr &&
      std::any_of(gradients_to_->pending_.begin(), gradients_to_->pending_.end(),
                  [&](const RoundedGradients::Pending& g) { return g.param == &weight_; }))
    gradients_to_->flush();
  // A float32 gradient (a caller outside the trainer) is first rounded, as torch's cast would.
  const Tensor dy16 =
      grad_output.dtype() == p ? grad_output : cast_into(buffers_.dy16, grad_output, p);
  const Device device = input_.device();
  Tensor dy32;  // dy widened, made once if a cast path needs it (Note [16-bit GEMM operands])
  auto widened_dy = [&]() -> const Tensor& {
    if (!dy32.defined()) dy32 = cast_into(buffers_.dy32, dy16, DType::Float32);
    return dy32;
  };
  {
    // dW: the 16-bit product (rounded at the cast).
    const Tensor& w = weight_.value;
    if (!weight_grad_.defined() || weight_grad_.device() != w.device() ||
        weight_grad_.shape() != w.shape())
      weight_grad_ = Tensor::empty(w.shape(), DType::Float32, w.device());
    if (gemm_takes_mixed(gemm_backend_, device, DType::Float32, p, p, false)) {
      gemm_mixed_with(gemm_backend_, weight_grad_, dy16, /*trans_a=*/true, input_,
                      /*trans_b=*/false);
    } else {
      const Tensor x = cast_into(buffers_.x32, input_, DType::Float32);
      gemm_with(gemm_backend_, weight_grad_, widened_dy(), /*trans_a=*/true, x,
                /*trans_b=*/false);
    }
  }
  std::vector<RoundedGradients::Pending> grads;
  bool overwrite = false;
  grad_to_write(weight_, overwrite);
  grads.push_back({&weight_, &weight_grad_, overwrite, p});
  if (bias_.value.defined()) {
    Tensor& db = grad_to_write(bias_, overwrite);
    if (!bias_scratch_.defined() || bias_scratch_.device() != db.device() ||
        bias_scratch_.dtype() != db.dtype())
      bias_scratch_ = Tensor::empty(Shape{out_}, db.dtype(), db.device());
    sum_rows(bias_scratch_, dy16);  // a 16-bit dy is read widened: the bits of summing dy32
    grads.push_back({&bias_, &bias_scratch_, overwrite, p});
  }
  if (gradients_to_ != nullptr)  // Note [the gradient casts]: at the backward's end
    gradients_to_->pending_.insert(gradients_to_->pending_.end(), grads.begin(), grads.end());
  else
    add_rounded_gradients(grads);
  if (!needs_input_grad_) return Tensor();
  if (gemm_takes_mixed(gemm_backend_, device, p, p, weight16_.dtype(), false)) {
    Tensor dx16 = buffers_.dx16.get(input_.shape(), p, device);
    gemm_mixed_with(gemm_backend_, dx16, dy16, /*trans_a=*/false, weight16_, /*trans_b=*/false);
    return dx16;
  }
  Tensor dx = buffers_.grad_in.get(input_.shape(), DType::Float32, device);
  gemm_with(gemm_backend_, dx, widened_dy(), /*trans_a=*/false, weight16_widened(),
            /*trans_b=*/false);
  return cast_into(buffers_.dx16, dx, p);
}

void Linear::set_gemm_backend(std::string name) {
  if (name != "auto") (void)minitrain::gemm_backend(name);  // ValueError listing the names
  check_gemm_precision(name, precision_);
  gemm_backend_ = std::move(name);
  weights16_current_ = false;  // the next forward rounds into the copy this backend multiplies
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
  weights16_current_ = false;  // the next forward rounds at the new precision (a pending
                               // backward still multiplies by its forward's copy)
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
  weight_grad_ = Tensor();
  weight16_ = Tensor();
  bias16_ = Tensor();
  weights16_current_ = false;
  buffers_.clear();
}

std::string Linear::repr() const {
  std::ostringstream os;
  os << "Linear(in_features=" << in_ << ", out_features=" << out_
     << ", bias=" << (bias_.value.defined() ? "True" : "False") << ")";
  return os.str();
}

}  // namespace minitrain
