// The fully fused small MLP: entry points and the CPU twin. The twin computes every value in the
// CUDA kernels' order (kernels/fused_mlp/fused_mlp_math.h): forward row by row through all the
// layers, backward row by row back through them, then each parameter gradient as one sum over
// the batch. Threads split rows (forward, input gradients) or gradient elements, never a sum.

#include "kernels/fused_mlp/fused_mlp.h"

#include <algorithm>
#include <sstream>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

// ---- CPU twin ----

namespace {

// One row's pass through layer l: out[o] = sum_k in[k] w[o, k] (k in order) + b[o].
void layer_row_forward(const FusedMlpArgs& a, int l, const float* in, int64_t r) {
  const int64_t n_in = a.width[l], n_out = a.width[l + 1];
  for (int64_t o = 0; o < n_out; ++o) {
    const float* w = a.w[l] + o * n_in;
    float acc = 0.f;
    for (int64_t k = 0; k < n_in; ++k) acc += in[k] * w[k];
    const float z = a.b[l] != nullptr ? acc + a.b[l][o] : acc;
    a.z[l][r * n_out + o] = z;
    if (a.h[l] != a.z[l]) a.h[l][r * n_out + o] = fused_mlp_act_forward(a.act[l], z);
  }
}

}  // namespace

void fused_mlp_forward_cpu(const FusedMlpArgs& a) {
  parallel_for(a.batch, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int l = 0; l < a.layers; ++l) {
        const float* in = l == 0 ? a.x + r * a.width[0] : a.h[l - 1] + r * a.width[l];
        layer_row_forward(a, l, in, r);
      }
  });
}

void fused_mlp_backward_cpu(const FusedMlpArgs& a) {
  const int last = a.layers - 1;
  const int64_t n_last = a.width[a.layers];
  // Step 1 (the first kernel): each row's dL/dz, from the last layer back to the first.
  parallel_for(a.batch, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t o = 0; o < n_last; ++o) {
        const int64_t i = r * n_last + o;
        a.dz[last][i] = fused_mlp_act_backward(a.act[last], a.grad_out[i], a.z[last][i]);
      }
      for (int l = last; l >= (a.grad_x != nullptr ? 0 : 1); --l) {
        const int64_t n_in = a.width[l], n_out = a.width[l + 1];
        const float* dz = a.dz[l] + r * n_out;
        for (int64_t k = 0; k < n_in; ++k) {
          float acc = 0.f;  // dh[k] = sum_o dz[o] w[o, k], o in order (the naive rung's dx)
          for (int64_t o = 0; o < n_out; ++o) acc += dz[o] * a.w[l][o * n_in + k];
          const int64_t i = r * n_in + k;
          if (l == 0)
            a.grad_x[i] = acc;
          else
            a.dz[l - 1][i] = fused_mlp_act_backward(a.act[l - 1], acc, a.z[l - 1][i]);
        }
      }
    }
  });
  // Step 2 (the second kernel): every weight and bias gradient element, one sum each.
  parallel_for(a.grad_begin[a.layers], 64, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) fused_mlp_param_grad(a, e);
  });
}

// ---- entry points ----

namespace {

std::string dims(const Tensor& t) {
  std::ostringstream os;
  os << t.shape();
  return os.str();
}

}  // namespace

std::string fused_mlp_refusal(const std::vector<FusedMlpLayer>& layers, const Tensor& x) {
  std::ostringstream why;
  const int n = static_cast<int>(layers.size());
  if (n == 0) return "the model has no Linear layer";
  if (n > kFusedMlpMaxLayers) {
    why << "the model has " << n << " Linear layers; the fused MLP takes at most "
        << kFusedMlpMaxLayers;
    return why.str();
  }
  if (!x.defined() || x.ndim() != 2) return "the input is not a 2-D [batch, features] tensor";
  if (x.dtype() != DType::Float32) {
    why << "the input is " << x.dtype() << "; the fused MLP computes in float32 only";
    return why.str();
  }
  int64_t in = x.size(1);
  for (int l = 0; l < n; ++l) {
    const Tensor& w = layers[static_cast<std::size_t>(l)].weight;
    const Tensor& b = layers[static_cast<std::size_t>(l)].bias;
    if (w.dtype() != DType::Float32 || (b.defined() && b.dtype() != DType::Float32)) {
      why << "Linear " << l << "'s parameters are " << w.dtype()
          << "; the fused MLP computes in float32 only";
      return why.str();
    }
    if (w.device() != x.device() || (b.defined() && b.device() != x.device())) {
      why << "Linear " << l << " is on " << w.device() << " but the input on " << x.device();
      return why.str();
    }
    if (w.ndim() != 2 || w.size(1) != in || (b.defined() && b.numel() != w.size(0))) {
      why << "Linear " << l << "'s weight is " << dims(w) << " but its input has " << in
          << " features";
      return why.str();
    }
    if (in > kFusedMlpMaxWidth || w.size(0) > kFusedMlpMaxWidth) {
      why << "Linear " << l << " is " << in << " -> " << w.size(0)
          << " wide; the fused MLP takes widths up to " << kFusedMlpMaxWidth
          << " (one thread per neuron in one block)";
      return why.str();
    }
    in = w.size(0);
  }
  return "";
}

namespace {

FusedMlpArgs forward_args(const std::vector<FusedMlpLayer>& layers, const FusedMlpSaved& s) {
  FusedMlpArgs a;
  a.layers = static_cast<int>(layers.size());
  a.batch = s.x.size(0);
  a.x = s.x.data<float>();
  a.width[0] = static_cast<int>(s.x.size(1));
  for (int l = 0; l < a.layers; ++l) {
    const FusedMlpLayer& layer = layers[static_cast<std::size_t>(l)];
    a.width[l + 1] = static_cast<int>(layer.weight.size(0));
    a.act[l] = layer.has_activation ? static_cast<int>(layer.activation) : kFusedMlpNoActivation;
    a.w[l] = layer.weight.data<float>();
    a.b[l] = layer.bias.defined() ? layer.bias.data<float>() : nullptr;
    a.z[l] = const_cast<float*>(s.z[static_cast<std::size_t>(l)].data<float>());
    a.h[l] = const_cast<float*>(s.h[static_cast<std::size_t>(l)].data<float>());
  }
  return a;
}

}  // namespace

Tensor fused_mlp_forward(const std::vector<FusedMlpLayer>& layers, const Tensor& x,
                         FusedMlpSaved& saved) {
  const std::string why = fused_mlp_refusal(layers, x);
  MT_CHECK_AS(ValueError, why.empty(), "fused_mlp_forward: ", why);
  saved.x = x;
  saved.z.clear();
  saved.h.clear();
  for (const FusedMlpLayer& layer : layers) {
    Tensor z = Tensor::empty(Shape{x.size(0), layer.weight.size(0)}, DType::Float32, x.device());
    saved.h.push_back(layer.has_activation ? Tensor::empty(z.shape(), z.dtype(), z.device()) : z);
    saved.z.push_back(z);
  }
  if (x.size(0) > 0) {
    const FusedMlpArgs a = forward_args(layers, saved);
    on_device(
        "fused_mlp_forward", x.device(), [&] { fused_mlp_forward_cpu(a); },
        [&](auto stream) { fused_mlp_forward_cuda(a, stream); });
  }
  return saved.h.back();
}

Tensor fused_mlp_backward(const std::vector<FusedMlpLayer>& layers, const FusedMlpSaved& saved,
                          const Tensor& grad_output, const std::vector<FusedMlpGrads>& grads,
                          bool input_grad) {
  const char* op = "fused_mlp_backward";
  MT_CHECK(saved.z.size() == layers.size() && saved.x.defined(), op, ": no fused forward of these ",
           layers.size(), " layers to differentiate");
  MT_CHECK(grads.size() == layers.size(), op, ": ", grads.size(), " gradient slots for ",
           layers.size(), " layers");
  const Tensor& out = saved.h.back();
  check_compatible(op, {{"grad_output", grad_output}, {"output", out}});
  check_same_shape(op, {{"grad_output", grad_output}, {"output", out}});
  FusedMlpArgs a = forward_args(layers, saved);
  std::vector<Tensor> dz;
  int64_t elements = 0;
  for (int l = 0; l < a.layers; ++l) {
    const FusedMlpGrads& g = grads[static_cast<std::size_t>(l)];
    const Tensor& w = layers[static_cast<std::size_t>(l)].weight;
    check_compatible(op, {{"weight gradient", g.weight}, {"weight", w}});
    check_same_shape(op, {{"weight gradient", g.weight}, {"weight", w}});
    MT_CHECK_AS(ShapeError, g.bias.defined() == layers[static_cast<std::size_t>(l)].bias.defined(),
                op, ": Linear ", l, "'s bias gradient and bias are not both defined");
    dz.push_back(
        Tensor::empty(saved.z[static_cast<std::size_t>(l)].shape(), DType::Float32, out.device()));
    a.dz[l] = dz.back().data<float>();
    a.dw[l] = const_cast<float*>(g.weight.data<float>());
    a.add_w[l] = !g.overwrite_weight;
    a.db[l] = g.bias.defined() ? const_cast<float*>(g.bias.data<float>()) : nullptr;
    a.add_b[l] = !g.overwrite_bias;
    a.grad_begin[l] = elements;
    elements += w.numel() + (g.bias.defined() ? w.size(0) : 0);
  }
  a.grad_begin[a.layers] = elements;
  a.grad_out = grad_output.data<float>();
  Tensor grad_x;
  if (input_grad) {
    grad_x = Tensor::empty(saved.x.shape(), DType::Float32, saved.x.device());
    a.grad_x = grad_x.data<float>();
  }
  on_device(
      op, out.device(), [&] { fused_mlp_backward_cpu(a); },
      [&](auto stream) { fused_mlp_backward_cuda(a, stream); });
  return grad_x;
}

}  // namespace minitrain
