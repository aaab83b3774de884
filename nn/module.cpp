// Module: the parameter walk shared by every layer (zero_grad, to, counting).

#include "nn/module.h"

#include "kernels/fill.h"

namespace minitrain {

Tensor& ensure_grad(Parameter& p) {
  if (!p.grad.defined() || p.grad.device() != p.value.device() ||
      p.grad.dtype() != p.value.dtype() || p.grad.shape() != p.value.shape())
    p.grad = Tensor::zeros(p.value.shape(), p.value.dtype(), p.value.device());
  return p.grad;
}

NamedParameters Module::named_parameters(const std::string& /*prefix*/) { return {}; }

void Module::set_precision(DType precision) {
  MT_CHECK_AS(DTypeError, precision == DType::Float32 || is_half(precision), repr(),
              ": the training precision must be float32, bfloat16 or float16, not ", precision);
  precision_ = precision;
}

void Module::to(Device device) {
  for (auto& [name, p] : named_parameters()) {
    p->value = p->value.to(device);
    if (p->grad.defined()) p->grad = p->grad.to(device);
  }
}

void Module::zero_grad() {
  std::vector<Tensor> grads;
  for (auto& [name, p] : named_parameters()) {
    const bool fresh = !p->grad.defined();
    Tensor& g = ensure_grad(*p);
    if (!fresh)
      grads.push_back(g);  // a fresh buffer is zeros already (ensure_grad may have replaced it too)
  }
  zero_all(grads);  // one parallel region for all of them
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (auto& [name, p] : named_parameters()) n += p->value.numel();
  return n;
}

}  // namespace minitrain
