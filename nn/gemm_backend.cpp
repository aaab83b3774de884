// set_gemm_backend over a model: a walk down Sequential children to every Linear. The name is
// checked once up front, so an unknown name leaves the model untouched instead of half-changed.

#include "nn/gemm_backend.h"

#include "kernels/gemm/gemm_registry.h"
#include "nn/linear.h"
#include "nn/sequential.h"

namespace minitrain {

namespace {

int apply(Module& m, const std::string& name) {
  if (auto* linear = dynamic_cast<Linear*>(&m)) {
    linear->set_gemm_backend(name);
    return 1;
  }
  int count = 0;
  if (auto* seq = dynamic_cast<Sequential*>(&m))
    for (std::size_t i = 0; i < seq->size(); ++i) count += apply((*seq)[i], name);
  return count;
}

}  // namespace

int set_gemm_backend(Module& model, const std::string& name) {
  if (name != "auto") (void)gemm_backend(name);  // ValueError listing the names
  return apply(model, name);
}

}  // namespace minitrain
