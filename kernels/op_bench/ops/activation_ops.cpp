// Activations (kernels/activation.h): forward reads x and writes y, backward reads grad_y and x
// and writes grad_x; memory-bound. The reference is the CPU twin (activation_forward_cpu, ...).
// In builds with the vendor libraries, cuDNN's activation forward/backward is the baseline
// variant (ReLU and Tanh: cuDNN has no GELU mode); its backward also reads y.

#include "kernels/activation.h"
#include "kernels/op_bench/op_registry.h"
#if MINITRAIN_WITH_CUDA_LIBS
#include "kernels/cudnn_activation.h"
#endif

namespace minitrain::opbench {
namespace {

constexpr double kF = 4.0;

OpFamily forward_op(Activation a) {
  OpFamily f;
  f.name = std::string(activation_name(a)) + "_forward";
  f.what = std::string("y = ") + activation_name(a) + "(x): one read, one write";
  f.make = [](int64_t n, Device d) {
    return OpTensors{{uniform({n}, d, 1, -3.0f, 3.0f)}, {Tensor::empty({n}, DType::Float32, d)}};
  };
  f.reference = [a](OpTensors& t) {
    activation_forward_cpu<float>(a, t.out[0].data<float>(), t.in[0].data<float>(),
                                  t.in[0].numel());
  };
  f.bytes = [](int64_t n) { return 2 * kF * double(n); };
  f.tolerance = a == Activation::ReLU ? 0.0 : 1e-6;  // a GPU's erf/tanh differ in the last bits
  f.variants.push_back({"minitrain",
                        "grid-stride map, 16-byte packs when aligned",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [a](OpTensors& t) { activation_forward(t.out[0], t.in[0], a); }});
#if MINITRAIN_WITH_CUDA_LIBS
  if (a == Activation::ReLU || a == Activation::Tanh)
    f.variants.push_back({"cudnn",
                          "cudnnActivationForward (the vendor baseline)",
                          {DeviceType::CUDA},
                          [a](OpTensors& t) { cudnn_activation_forward(t.out[0], t.in[0], a); }});
#endif
  return f;
}

OpFamily backward_op(Activation a) {
  OpFamily f;
  f.name = std::string(activation_name(a)) + "_backward";
  f.what = std::string("grad_x = grad_y * ") + activation_name(a) +
           "'(x): two reads, one write (in[2] is y, read by cuDNN only)";
  f.make = [a](int64_t n, Device d) {
    Tensor x = uniform_cpu({n}, 1, -3.0f, 3.0f);
    Tensor y = Tensor::empty({n}, DType::Float32, Device::cpu());
    activation_forward_cpu<float>(a, y.data<float>(), x.data<float>(), n);
    return OpTensors{{uniform({n}, d, 2), x.to(d), y.to(d)},
                     {Tensor::empty({n}, DType::Float32, d)}};
  };
  f.reference = [a](OpTensors& t) {
    activation_backward_cpu<float>(a, t.out[0].data<float>(), t.in[0].data<float>(),
                                   t.in[1].data<float>(), t.in[0].numel());
  };
  f.bytes = [](int64_t n) { return 3 * kF * double(n); };
  f.tolerance = a == Activation::ReLU ? 0.0 : 1e-6;
  f.variants.push_back({"minitrain",
                        "grid-stride map, 16-byte packs when aligned",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [a](OpTensors& t) { activation_backward(t.out[0], t.in[0], t.in[1], a); }});
#if MINITRAIN_WITH_CUDA_LIBS
  if (a == Activation::ReLU || a == Activation::Tanh)
    f.variants.push_back(
        {"cudnn",
         "cudnnActivationBackward (the vendor baseline; reads y, dy and x)",
         {DeviceType::CUDA},
         [a](OpTensors& t) { cudnn_activation_backward(t.out[0], t.in[0], t.in[2], t.in[1], a); },
         [](int64_t n) { return 4 * kF * double(n); }});
#endif
  return f;
}

}  // namespace
}  // namespace minitrain::opbench

MINITRAIN_REGISTER_OP(relu_forward, minitrain::opbench::forward_op(minitrain::Activation::ReLU))
MINITRAIN_REGISTER_OP(relu_backward, minitrain::opbench::backward_op(minitrain::Activation::ReLU))
MINITRAIN_REGISTER_OP(gelu_forward, minitrain::opbench::forward_op(minitrain::Activation::GELU))
MINITRAIN_REGISTER_OP(gelu_backward, minitrain::opbench::backward_op(minitrain::Activation::GELU))
MINITRAIN_REGISTER_OP(tanh_forward, minitrain::opbench::forward_op(minitrain::Activation::Tanh))
MINITRAIN_REGISTER_OP(tanh_backward, minitrain::opbench::backward_op(minitrain::Activation::Tanh))
