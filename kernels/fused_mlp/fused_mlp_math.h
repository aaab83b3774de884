#pragma once
// What the fully fused MLP's CPU twin (fused_mlp.cpp) and CUDA kernels (fused_mlp.cu) share: the
// launch's argument block and the per-element math, written once so both devices compute every
// value in the same order. Every sum follows the unfused path it replaces term for term: a
// Linear's dot products as the GEMM ladder's naive rung (one float accumulator, k in order, on
// the CPU the "reference" backend), its bias gradient as sum_rows' GPU column sum (16 row slices
// in double, folded in slice order: kernels/column_reduce.cuh), so the bits are the same.

#include <cstdint>

#include "core/host_device.h"
#include "kernels/activation.h"

namespace minitrain {

/// The fused kernels' limits: every width (input, hidden, output) at most kFusedMlpMaxWidth, so a
/// thread per neuron fits one block; at most kFusedMlpMaxLayers Linear layers.
inline constexpr int kFusedMlpMaxWidth = 128;
inline constexpr int kFusedMlpMaxLayers = 8;
/// The row slices of the bias gradient's column sums: kRowSlices of kernels/column_reduce.cuh
/// (fused_mlp.cu checks that they agree).
inline constexpr int kFusedMlpBiasSlices = 16;
/// No activation after a Linear (FusedMlpArgs::act).
inline constexpr int kFusedMlpNoActivation = -1;

/// One fused forward or backward: plain pointers and sizes, passed by value to the kernels.
/// Layer l maps width[l] inputs to width[l + 1] outputs; its input is x (l = 0) or h[l - 1].
struct FusedMlpArgs {
  int layers = 0;
  int64_t batch = 0;
  int width[kFusedMlpMaxLayers + 1] = {};
  int act[kFusedMlpMaxLayers] = {};  ///< static_cast<int>(Activation) or kFusedMlpNoActivation
  const float* w[kFusedMlpMaxLayers] = {};  ///< [out, in], torch's layout
  const float* b[kFusedMlpMaxLayers] = {};  ///< [out] or null (a Linear without bias)
  const float* x = nullptr;                 ///< [batch, width[0]]
  float* z[kFusedMlpMaxLayers] = {};        ///< [batch, out]: x W^T + b, kept for backward
  float* h[kFusedMlpMaxLayers] = {};        ///< [batch, out]: act(z); z itself without activation
  // ---- backward only ----
  const float* grad_out = nullptr;      ///< [batch, width[layers]]: dL/d(the last h)
  float* dz[kFusedMlpMaxLayers] = {};   ///< [batch, out]: dL/dz, what the weight gradients sum
  float* grad_x = nullptr;              ///< [batch, width[0]] or null (no input gradient)
  float* dw[kFusedMlpMaxLayers] = {};   ///< [out, in]
  float* db[kFusedMlpMaxLayers] = {};   ///< [out] or null
  bool add_w[kFusedMlpMaxLayers] = {};  ///< add into dw (a live gradient) or store (released)
  bool add_b[kFusedMlpMaxLayers] = {};
  /// Parameter-gradient elements of the layers before l (out * in, + out with a bias): the
  /// gradient kernel's flat index -> (layer, element).
  int64_t grad_begin[kFusedMlpMaxLayers + 1] = {};
};

/// act(z) for the runtime activation code of FusedMlpArgs::act (the same math as
/// kernels/activation_math.h's types: bias_activation_forward's epilogue).
MT_HOST_DEVICE float fused_mlp_act_forward(int act, float z) {
  switch (static_cast<Activation>(act)) {
    case Activation::ReLU:
      return ReluMath::forward(z);
    case Activation::GELU:
      return GeluMath::forward(z);
    case Activation::GELUTanh:
      return GeluTanhMath::forward(z);
    case Activation::Tanh:
      return TanhMath::forward(z);
    case Activation::Sigmoid:
      return SigmoidMath::forward(z);
  }
  return z;  // kFusedMlpNoActivation
}

/// g * act'(z), from the pre-activation z (bias_activation_backward's per-element math).
MT_HOST_DEVICE float fused_mlp_act_backward(int act, float g, float z) {
  switch (static_cast<Activation>(act)) {
    case Activation::ReLU:
      return ReluMath::backward(g, z);
    case Activation::GELU:
      return GeluMath::backward(g, z);
    case Activation::GELUTanh:
      return GeluTanhMath::backward(g, z);
    case Activation::Tanh:
      return TanhMath::backward(g, z);
    case Activation::Sigmoid:
      return SigmoidMath::backward(g, z);
  }
  return g;
}

/// One parameter-gradient element of the flat index e (0 <= e < a.grad_begin[a.layers]): a weight
/// gradient is a float sum over the batch in row order (the naive rung's dW = dz^T h), a bias
/// gradient sum_rows' sliced double sum. Stored, or added to a live gradient as the GEMM's beta =
/// 1 and Linear's axpy add it. static: every file its own copy, so that in the emulated build the
/// kernel runs the one compiled with the kernel file's memory-access hooks (counters, race and
/// bounds checks), not whichever inline copy the linker keeps.
static MT_HOST_DEVICE void fused_mlp_param_grad(const FusedMlpArgs& a, int64_t e) {
  int l = 0;
  while (e >= a.grad_begin[l + 1]) ++l;
  e -= a.grad_begin[l];
  const int64_t in = a.width[l], out = a.width[l + 1];
  const float* dz = a.dz[l];
  if (e < out * in) {
    const int64_t o = e / in, i = e % in;
    const float* hin = l == 0 ? a.x : a.h[l - 1];
    float acc = 0.f;
    for (int64_t r = 0; r < a.batch; ++r) acc += dz[r * out + o] * hin[r * in + i];
    a.dw[l][e] = a.add_w[l] ? acc + a.dw[l][e] : acc;
    return;
  }
  const int64_t o = e - out * in;
  double sum = 0.0;
  for (int s = 0; s < kFusedMlpBiasSlices; ++s) {
    double slice = 0.0;
    for (int64_t r = s; r < a.batch; r += kFusedMlpBiasSlices)
      slice += static_cast<double>(dz[r * out + o]);
    sum += slice;
  }
  const float db = static_cast<float>(sum);
  a.db[l][o] = a.add_b[l] ? a.db[l][o] + db : db;
}

}  // namespace minitrain
