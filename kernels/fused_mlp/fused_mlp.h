#pragma once
// The fully fused small MLP (issue 35): a stack of Linear layers, each optionally followed by an
// activation, with every width <= 128, run as ONE kernel launch forward and TWO backward, instead
// of a GEMM, a bias pass and an activation pass per layer each way. Small MLPs are bound by
// launches, not by the GPU: at width 64 a layer's GEMM is a few microseconds of work behind a
// few microseconds of launch. Same bits as the layers run one by one with the GEMM backend
// "naive" on a GPU and "reference" on the CPU (the order of every sum is theirs:
// kernels/fused_mlp/fused_mlp_math.h); docs/fused_mlp.md.

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/activation.h"
#include "kernels/fused_mlp/fused_mlp_math.h"

struct CUstream_st;

namespace minitrain {

/// One Linear layer of the stack and the activation after it (if any).
struct FusedMlpLayer {
  Tensor weight;  ///< [out, in], float32
  Tensor bias;    ///< [out], or undefined for a Linear without bias
  bool has_activation = false;
  Activation activation = Activation::ReLU;  ///< read only when has_activation
};

/// Where a layer's parameter gradients go: each is added into (live gradient) or stored over
/// (a gradient zero_grad released: `overwrite`), as Linear's backward does.
struct FusedMlpGrads {
  Tensor weight;  ///< [out, in]
  bool overwrite_weight = false;
  Tensor bias;  ///< [out], undefined for a layer without bias
  bool overwrite_bias = false;
};

/// What fused_mlp_forward keeps for fused_mlp_backward.
struct FusedMlpSaved {
  Tensor x;
  std::vector<Tensor> z;  ///< per layer: x W^T + b
  std::vector<Tensor> h;  ///< per layer: act(z), or z itself for a layer without activation
};

/// Empty when the fused kernels can run `layers` on `x`; otherwise one sentence saying why not
/// and what they take (float32, at most 8 Linear layers, every width <= 128, one device).
std::string fused_mlp_refusal(const std::vector<FusedMlpLayer>& layers, const Tensor& x);

/// The whole forward in one launch (on a GPU): returns the last layer's output (its h) and fills
/// `saved`. ValueError with fused_mlp_refusal's sentence where the layers do not fit.
Tensor fused_mlp_forward(const std::vector<FusedMlpLayer>& layers, const Tensor& x,
                         FusedMlpSaved& saved);

/// The whole backward from dL/d(output) in two launches (on a GPU): the input gradients of every
/// layer, tile of batch rows by tile, then every weight and bias gradient, each a sum over the
/// batch in a fixed order (no atomics). Returns dL/dx when `input_grad`, else undefined.
Tensor fused_mlp_backward(const std::vector<FusedMlpLayer>& layers, const FusedMlpSaved& saved,
                          const Tensor& grad_output, const std::vector<FusedMlpGrads>& grads,
                          bool input_grad);

// ---- implementations (float32) ----

void fused_mlp_forward_cpu(const FusedMlpArgs& a);
void fused_mlp_backward_cpu(const FusedMlpArgs& a);
void fused_mlp_forward_cuda(const FusedMlpArgs& a, CUstream_st* stream);
void fused_mlp_backward_cuda(const FusedMlpArgs& a, CUstream_st* stream);

}  // namespace minitrain
