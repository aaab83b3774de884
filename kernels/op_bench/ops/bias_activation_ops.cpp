// Bias + activation, a Linear layer's epilogue (kernels/bias_activation.h), on x [n / c, c]
// (kernels/op_bench/op_registry.h's matrix_shape: c = 1024 for multiples of 1024). Forward (GELU,
// without keeping the pre-activation): read x, write y; fused against bias_add then the
// activation, counted with the fused bytes so that the unfused GB/s shows what fusing saves.
// Backward (ReLU): read grad_y and pre, write grad_pre and the [c] bias gradient. The reference
// is the CPU twin.

#include "kernels/activation.h"
#include "kernels/bias_activation.h"
#include "kernels/bias_add.h"
#include "kernels/op_bench/op_registry.h"

namespace minitrain::opbench {
namespace {

constexpr double kF = 4.0;

OpFamily bias_gelu_op() {
  OpFamily f;
  f.name = "bias_gelu";
  f.what = "y = gelu(x + bias), x [n/c, c]: one read, one write";
  f.make = [](int64_t n, Device d) {
    const Shape s = matrix_shape(n);
    return OpTensors{{uniform(s, d, 1, -3.0f, 3.0f), uniform({s[1]}, d, 2)},
                     {Tensor::empty(s, DType::Float32, d)}};
  };
  f.reference = [](OpTensors& t) {
    bias_activation_forward_cpu<float>(Activation::GELU, t.out[0].data<float>(), nullptr,
                                       t.in[0].data<float>(), t.in[1].data<float>(),
                                       t.in[0].shape()[0], t.in[0].shape()[1]);
  };
  f.bytes = [](int64_t n) { return 2 * kF * double(n); };
  f.tolerance = 1e-6;  // a GPU's erf differs in the last bits
  f.variants.push_back({"fused",
                        "bias-broadcast kernel with GELU as its epilogue, 16-byte packs",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) {
                          Tensor none;
                          bias_activation_forward(t.out[0], none, t.in[0], t.in[1],
                                                  Activation::GELU);
                        }});
  f.variants.push_back({"unfused",
                        "bias_add, then activation_forward in place: 4 passes, not 2",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) {
                          bias_add(t.out[0], t.in[0], t.in[1]);
                          activation_forward(t.out[0], t.out[0], Activation::GELU);
                        }});
  return f;
}

OpFamily bias_relu_backward_op() {
  OpFamily f;
  f.name = "bias_relu_backward";
  f.what = "grad_pre = grad_y * relu'(pre), grad_bias = column sums: two reads, one write";
  f.make = [](int64_t n, Device d) {
    const Shape s = matrix_shape(n);
    return OpTensors{
        {uniform(s, d, 1), uniform(s, d, 2)},
        {Tensor::empty(s, DType::Float32, d), Tensor::empty({s[1]}, DType::Float32, d)}};
  };
  f.reference = [](OpTensors& t) {
    bias_activation_backward_cpu<float>(
        Activation::ReLU, t.out[0].data<float>(), t.out[1].data<float>(), t.in[0].data<float>(),
        t.in[1].data<float>(), t.in[0].shape()[0], t.in[0].shape()[1]);
  };
  f.bytes = [](int64_t n) { return 3 * kF * double(n); };
  f.tolerance = 1e-6;  // the bias gradient: summation order
  f.variants.push_back({"fused",
                        "column-sum kernel that stores relu'(pre) * grad_y on the way",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) {
                          bias_activation_backward(t.out[0], t.out[1], t.in[0], t.in[1],
                                                   Activation::ReLU);
                        }});
  return f;
}

}  // namespace
}  // namespace minitrain::opbench

MINITRAIN_REGISTER_OP(bias_gelu, minitrain::opbench::bias_gelu_op())
MINITRAIN_REGISTER_OP(bias_relu_backward, minitrain::opbench::bias_relu_backward_op())
