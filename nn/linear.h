#pragma once
// y = x W^T + b with W [out, in] and b [out], as torch.nn.Linear. Forward is one GEMM and a bias
// add; backward is two GEMMs (dx = dy W, dW += dy^T x) and a column sum (db += sum_rows(dy)).
// The three GEMMs run through a GEMM backend chosen by name (kernels/gemm/gemm_registry.h): "auto",
// the device's default, unless set_gemm_backend picks another ("cublaslt" fuses the bias add).

#include <string>

#include "core/generator.h"
#include "nn/module.h"

namespace minitrain {

class Linear final : public Module {
 public:
  /// PyTorch's default init: W ~ kaiming_uniform(a=sqrt(5)) (= U(+-1/sqrt(in))), b ~
  /// U(+-1/sqrt(in)).
  Linear(int64_t in_features, int64_t out_features, Generator& gen, bool bias = true,
         Device device = Device::cpu(), DType dtype = DType::Float32);

  Tensor forward(const Tensor& x) override;  ///< x [batch, in]; ShapeError names both shapes
  Tensor backward(const Tensor& grad_output) override;
  NamedParameters named_parameters(const std::string& prefix = "") override;
  void to(Device device) override;  ///< also drops the cached input
  std::string repr() const override;

  int64_t in_features() const noexcept { return in_; }
  int64_t out_features() const noexcept { return out_; }
  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }  ///< value undefined when built without bias

  /// The GEMM backend of forward and backward by registry name, or "auto" (the default): the
  /// default backend of the device the layer is on when it runs. ValueError listing the
  /// registered names for an unknown one; a backend for another device type is refused by the
  /// first forward, naming both.
  void set_gemm_backend(std::string name);
  const std::string& gemm_backend() const noexcept { return gemm_backend_; }

 private:
  int64_t in_, out_;
  Parameter weight_, bias_;
  Tensor input_;         // cached by forward in training mode (a handle: no copy)
  Tensor bias_scratch_;  // [out]: sum_rows(dy) before it is added into the bias gradient
  std::string gemm_backend_ = "auto";
};

}  // namespace minitrain
