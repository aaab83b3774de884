// cuDNN activation baseline (see kernels/cudnn_activation.h). CUDA-only source. A cuDNN handle
// costs milliseconds to create and must not be used by two threads at once, so each (host thread,
// device) keeps one, bound to the thread's current stream before every call. The tensors are
// described as N = 1, C = 1, H = 1, W = numel (cuDNN's 4-D descriptor takes int extents).

#include "kernels/cudnn_activation.h"

#include <algorithm>
#include <climits>
#include <map>
#include <memory>

#include "core/cuda_check.h"
#include "core/stream.h"
#include "kernels/check.h"

namespace minitrain {

namespace {

struct HandleDeleter {
  void operator()(cudnnContext* h) const { cudnnDestroy(h); }
};

cudnnHandle_t cudnn_handle(Device device) {
  thread_local std::map<int, std::unique_ptr<cudnnContext, HandleDeleter>> handles;
  auto& h = handles[device.index()];
  if (!h) {
    DeviceGuard guard(device);
    cudnnHandle_t raw = nullptr;
    CHECK_CUDNN(cudnnCreate(&raw));
    h.reset(raw);
  }
  CHECK_CUDNN(cudnnSetStream(h.get(), current_stream(device).native_handle()));
  return h.get();
}

// RAII for the two descriptors one call needs.
struct Descriptors {
  cudnnTensorDescriptor_t tensor = nullptr;
  cudnnActivationDescriptor_t activation = nullptr;
  Descriptors(const Tensor& t, Activation a) {
    MT_CHECK_AS(ValueError, cudnn_has_activation(a), "cudnn activation: cuDNN has no '",
                activation_name(a),
                "' mode in its activation API (only relu, tanh, sigmoid); use minitrain's "
                "activation_forward/backward for it");
    MT_CHECK_AS(DeviceError, t.device().is_cuda(), "cudnn activation: tensors are on ", t.device(),
                "; cuDNN runs on a GPU (move them with .to(cuda))");
    MT_CHECK_AS(ShapeError, t.numel() <= INT_MAX, "cudnn activation: ", t.numel(),
                " elements exceed cuDNN's int extent; split the tensor");
    CHECK_CUDNN(cudnnCreateTensorDescriptor(&tensor));
    CHECK_CUDNN(cudnnCreateActivationDescriptor(&activation));
    const cudnnDataType_t type = t.dtype() == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    CHECK_CUDNN(cudnnSetTensor4dDescriptor(tensor, CUDNN_TENSOR_NCHW, type, 1, 1, 1,
                                           static_cast<int>(std::max<int64_t>(t.numel(), 1))));
    const cudnnActivationMode_t mode = a == Activation::ReLU   ? CUDNN_ACTIVATION_RELU
                                       : a == Activation::Tanh ? CUDNN_ACTIVATION_TANH
                                                               : CUDNN_ACTIVATION_SIGMOID;
    // NaN propagation as torch's relu; coef (the clip / ELU alpha) is unused by these modes.
    CHECK_CUDNN(cudnnSetActivationDescriptor(activation, mode, CUDNN_PROPAGATE_NAN, 0.0));
  }
  ~Descriptors() {
    if (activation != nullptr) cudnnDestroyActivationDescriptor(activation);
    if (tensor != nullptr) cudnnDestroyTensorDescriptor(tensor);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// cuDNN's alpha/beta scaling factors: double for double tensors, float otherwise.
struct Scaling {
  float f[2] = {1.f, 0.f};
  double d[2] = {1.0, 0.0};
  const void* alpha(DType t) const { return t == DType::Float64 ? (const void*)&d[0] : &f[0]; }
  const void* beta(DType t) const { return t == DType::Float64 ? (const void*)&d[1] : &f[1]; }
};

}  // namespace

void cudnn_activation_forward(Tensor& y, const Tensor& x, Activation a) {
  check_compatible("cudnn_activation_forward", {{"y", y}, {"x", x}});
  check_same_shape("cudnn_activation_forward", {{"y", y}, {"x", x}});
  Descriptors desc(x, a);
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device());
  const Scaling s;
  CHECK_CUDNN(cudnnActivationForward(cudnn_handle(x.device()), desc.activation, s.alpha(x.dtype()),
                                     desc.tensor, x.raw_data(), s.beta(x.dtype()), desc.tensor,
                                     y.raw_data()));
}

void cudnn_activation_backward(Tensor& grad_x, const Tensor& grad_y, const Tensor& y,
                               const Tensor& x, Activation a) {
  const char* op = "cudnn_activation_backward";
  check_compatible(op, {{"grad_x", grad_x}, {"grad_y", grad_y}, {"y", y}, {"x", x}});
  check_same_shape(op, {{"grad_x", grad_x}, {"grad_y", grad_y}, {"y", y}, {"x", x}});
  Descriptors desc(x, a);
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device());
  const Scaling s;
  CHECK_CUDNN(cudnnActivationBackward(cudnn_handle(x.device()), desc.activation, s.alpha(x.dtype()),
                                      desc.tensor, y.raw_data(), desc.tensor, grad_y.raw_data(),
                                      desc.tensor, x.raw_data(), s.beta(x.dtype()), desc.tensor,
                                      grad_x.raw_data()));
}

}  // namespace minitrain
