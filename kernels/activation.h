#pragma once
// Activation functions, forward and backward: relu, gelu (erf form), gelu_tanh, tanh, sigmoid.
// Memory-bound: one read and one write per element (backward: two reads), with the scalar math
// in kernels/activation_math.h shared by the CPU loops and the CUDA kernels. float32, float64,
// and the 16-bit storage types of mixed precision (bfloat16, float16: computed in float32 and
// rounded once; tanh and sigmoid backward from the 16-bit output, as torch's autocast runs do).

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/activation_math.h"

struct CUstream_st;

namespace minitrain {

// Note [one table per list of choices]: kActivations is the only list of activations. Parsing,
// names, the valid names in error messages, --help text and torch repr all read it, so adding an
// activation is a row here, a case in dispatch_activation below, and its math in activation_math.h.
enum class Activation { ReLU, GELU, GELUTanh, Tanh, Sigmoid };

struct ActivationInfo {
  Activation kind;
  const char* name;        ///< the command-line and metadata name: "gelu_tanh"
  const char* torch_repr;  ///< the torch.nn module as torch prints it: "GELU(approximate='tanh')"
};

/// In the order --help and error messages list them.
inline constexpr ActivationInfo kActivations[] = {
    {Activation::ReLU, "relu", "ReLU()"},
    {Activation::GELU, "gelu", "GELU(approximate='none')"},
    {Activation::GELUTanh, "gelu_tanh", "GELU(approximate='tanh')"},
    {Activation::Tanh, "tanh", "Tanh()"},
    {Activation::Sigmoid, "sigmoid", "Sigmoid()"},
};

/// "relu" | "gelu" | "gelu_tanh" | "tanh" | "sigmoid"; throws ValueError listing them otherwise.
Activation parse_activation(const std::string& name);
/// The name parse_activation accepts: "relu", "gelu", ...
const char* activation_name(Activation a);
/// The torch.nn module it is, as torch prints it: "ReLU()", "GELU(approximate='none')", ...
const char* activation_torch_repr(Activation a);
/// Every name, in table order: for help text and "choose one of" messages.
std::vector<std::string> activation_names();

/// y = f(x); y may be x (in place).
void activation_forward(Tensor& y, const Tensor& x, Activation a);
/// grad_x = grad_y * f'(x), with x the forward INPUT; grad_x may be grad_y (in place).
void activation_backward(Tensor& grad_x, const Tensor& grad_y, const Tensor& x, Activation a);
/// The same into new tensors.
Tensor activation_forward(const Tensor& x, Activation a);
Tensor activation_backward(const Tensor& grad_y, const Tensor& x, Activation a);

/// Calls f(M{}) with M the activation's math type (ReluMath, GeluMath, ...), so one templated
/// loop or kernel serves every activation.
template <typename F>
decltype(auto) dispatch_activation(Activation a, F&& f) {
  switch (a) {
    case Activation::ReLU:
      return f(ReluMath{});
    case Activation::GELU:
      return f(GeluMath{});
    case Activation::GELUTanh:
      return f(GeluTanhMath{});
    case Activation::Tanh:
      return f(TanhMath{});
    case Activation::Sigmoid:
      return f(SigmoidMath{});
  }
  MT_THROW(ValueError, "unknown activation ", static_cast<int>(a));
}

// ---- implementations (float and double are instantiated) ----

/// The CPU loops' per-element work over [begin, end) on the calling thread, for the math type M
/// of dispatch_activation: activation_forward_cpu and activation_backward_cpu run these on their
/// chunks, and a Linear's fused GEMM epilogue (kernels/linear_layer.cpp) on its tiles' rows,
/// so that both give the same bits.
template <typename M, typename T>
inline void activation_forward_range_cpu(T* y, const T* x, int64_t begin, int64_t end) {
  const ActivationOf<M> f;
  for (int64_t i = begin; i < end; ++i) y[i] = f(x[i]);
}
template <typename M, typename T>
inline void activation_backward_range_cpu(T* grad_x, const T* grad_y, const T* x, int64_t begin,
                                          int64_t end) {
  const ActivationGradOf<M> f;
  for (int64_t i = begin; i < end; ++i) grad_x[i] = f(grad_y[i], x[i]);
}

template <typename T>
void activation_forward_cpu(Activation a, T* y, const T* x, int64_t n);
template <typename T>
void activation_backward_cpu(Activation a, T* grad_x, const T* grad_y, const T* x, int64_t n);
template <typename T>
void activation_forward_cuda(Activation a, T* y, const T* x, int64_t n, CUstream_st* stream);
template <typename T>
void activation_backward_cuda(Activation a, T* grad_x, const T* grad_y, const T* x, int64_t n,
                              CUstream_st* stream);

}  // namespace minitrain
