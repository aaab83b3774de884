// Module: the parameter walk shared by every layer (zero_grad, to, counting), and the gradient
// buffers' life (Note [released gradients] in nn/parameter.h).

#include "nn/module.h"

#include "kernels/fill.h"

namespace minitrain {

namespace {

bool matches_value(const Parameter& p, const Tensor& g) {
  return g.defined() && g.device() == p.value.device() && g.dtype() == p.value.dtype() &&
         g.shape() == p.value.shape();
}

}  // namespace

Tensor& grad_to_write(Parameter& p, bool& overwrite) {
  overwrite = false;
  if (matches_value(p, p.grad)) return p.grad;
  overwrite = true;
  p.grad = matches_value(p, p.released)
               ? std::move(p.released)
               : Tensor::empty(p.value.shape(), p.value.dtype(), p.value.device());
  p.released = Tensor();
  return p.grad;
}

Tensor& ensure_grad(Parameter& p) {
  bool overwrite = false;
  Tensor& g = grad_to_write(p, overwrite);
  if (overwrite) zero_(g);
  return g;
}

void release_grad(Parameter& p) {
  if (!p.grad.defined()) return;
  p.released = std::move(p.grad);
  p.grad = Tensor();
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
    p->released = Tensor();
  }
}

void Module::zero_grad(bool set_to_none) {
  std::vector<Tensor> grads;
  for (auto& [name, p] : named_parameters()) {
    if (set_to_none) {
      release_grad(*p);
      continue;
    }
    bool overwrite = false;  // every gradient is zeroed below, a reused buffer too
    grads.push_back(grad_to_write(*p, overwrite));
  }
  zero_all(grads);  // one parallel region for all of them
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (auto& [name, p] : named_parameters()) n += p->value.numel();
  return n;
}

}  // namespace minitrain
